"""Gemma 4 as vLLM 0.33 drives transformers' processor (reference environment: torch).

Shared by scripts/make_family_fixtures.py (the goldens) and
scripts/families/check_unseen.py --family gemma4. Each function names the vLLM code it
mirrors (``vllm/model_executor/models/gemma4_mm.py`` unless said otherwise):

- images: one call of the HF processor for all the images of a request
  (``Gemma4MultiModalProcessor._apply_hf_processor_main``, text
  ``"\\t<|image|>"`` per image, the folder's image settings), HF's
  ``image_position_ids`` renamed ``pixel_position_ids``;
- video: one call per video of the same processor on the video's frames as PIL
  images, ``max_soft_tokens=70`` and no image overrides; a timestamp per frame
  ``frames_indices[i] / fps``;
- prompt ids: each ``<|image|>`` / ``<|video|>`` of the tokenized prompt replaced
  as ``_get_prompt_updates`` does (``Gemma4ProcessingInfo.get_image_repl`` /
  ``get_video_repl``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: gemma4_mm.py ``_VIDEO_MAX_SOFT_TOKENS``: a video frame's budget, whatever the configs say.
VIDEO_SOFT_TOKENS = 70
#: gemma4_mm.py: ``metadata.get("fps") or 24``.
FALLBACK_FPS = 24.0


def soft_tokens(config: dict, height: int, width: int, max_soft_tokens: int | None = None) -> int:
    """``Gemma4ProcessingInfo._compute_num_soft_tokens`` (vLLM's count, clamped)."""
    vision = config["vision_config"]
    patch, pool = vision["patch_size"], vision["pooling_kernel_size"]
    if max_soft_tokens is None:
        max_soft_tokens = vision["default_output_length"]
    unit = patch * pool
    max_patches = max_soft_tokens * pool**2
    num_patches_orig = (height / patch) * (width / patch)
    scale = math.sqrt(max_patches / num_patches_orig)
    target_h = max(unit, math.floor(height * scale / unit) * unit)
    target_w = max(unit, math.floor(width * scale / unit) * unit)
    num_patches = (target_h // patch) * (target_w // patch)
    return min(num_patches // (pool**2), max_soft_tokens)


def image_features(processor: Any, images: Sequence[Any]) -> dict[str, Any]:
    """The processor called on all images at once, as vLLM calls it."""
    out = processor(
        text="".join("\t" + processor.image_token for _ in images),
        images=list(images),
        return_tensors="pt",
    )
    return {
        "pixel_values": out["pixel_values"],
        "pixel_position_ids": out["image_position_ids"],
        "num_soft_tokens_per_image": _counts(processor, out["image_position_ids"]),
    }


def video_features(processor: Any, frames: np.ndarray) -> dict[str, Any]:
    """One video's frames through the image processor at the video budget."""
    from PIL import Image

    pil = [Image.fromarray(frame) for frame in frames]
    out = processor(
        text="".join("\t" + processor.image_token for _ in pil),
        images=pil,
        max_soft_tokens=VIDEO_SOFT_TOKENS,
        images_kwargs={},
        return_tensors="pt",
    )
    return {
        "pixel_values_videos": out["pixel_values"],
        "pixel_position_ids_videos": out["image_position_ids"],
        "num_soft_tokens_per_frame": _counts(processor, out["image_position_ids"]),
    }


def _counts(processor: Any, positions: Any) -> list[int]:
    """HF's own count per item (the processor drops ``num_soft_tokens_per_image``):
    its real patches (positions not -1) over the pooling area, unclamped."""
    pool = processor.image_processor.pooling_kernel_size
    real = (positions[..., 0] >= 0).sum(dim=-1)
    return [int(n) // pool**2 for n in real]


def timestamps(indices: Sequence[int], fps: float) -> list[float]:
    """Seconds of each sampled frame: its source index over the source rate."""
    rate = fps or FALLBACK_FPS
    return [int(i) / rate for i in indices]


def timestamp_text(seconds: float) -> str:
    """``mm:ss``, truncated (``get_video_repl``)."""
    return f"{int(seconds // 60):02d}:{int(seconds % 60):02d}"


def image_replacement(config: dict, height: int, width: int) -> list[int]:
    """``get_image_repl``: boi, one image token per soft token, eoi."""
    count = soft_tokens(config, height, width)
    return [config["boi_token_id"], *[config["image_token_id"]] * count, config["eoi_token_id"]]


def video_replacement(
    tokenizer: Any, config: dict, seconds: Sequence[float], per_frame: Sequence[int]
) -> list[int]:
    """``get_video_repl``: per frame its timestamp (``"mm:ss "``, later ones
    ``" mm:ss "``, each tokenized alone), boi, the video tokens, eoi."""
    out: list[int] = []
    for i, (ts, count) in enumerate(zip(seconds, per_frame, strict=True)):
        stamp = timestamp_text(ts)
        prefix = f" {stamp} " if i > 0 else f"{stamp} "
        out += tokenizer.encode(prefix, add_special_tokens=False)
        out += [config["boi_token_id"], *[config["video_token_id"]] * count]
        out.append(config["eoi_token_id"])
    return out


def expand(template_ids: Sequence[int], config: dict, replacements: dict[str, list]) -> list[int]:
    """Each placeholder id of the prompt, in order, by its item's replacement."""
    queues = {
        config["image_token_id"]: list(replacements.get("image", [])),
        config["video_token_id"]: list(replacements.get("video", [])),
    }
    out: list[int] = []
    for token in template_ids:
        queue = queues.get(int(token))
        out += queue.pop(0) if queue else [int(token)]
    return out
