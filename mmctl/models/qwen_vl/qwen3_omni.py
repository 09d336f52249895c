"""Qwen3-Omni's thinker (``qwen3_omni_moe``): its images and video, Qwen2.5-VL's parts.

vLLM 0.33 (``qwen3_omni_moe_thinker.py``) runs transformers' ``Qwen3OmniMoeProcessor``:
``Qwen2VLImageProcessor`` / ``Qwen2VLVideoProcessor`` with the checkpoint's
preprocessor_config.json (patch 16, mean/std 0.5), and what differs from Qwen2.5-VL
lives here:

- frames: vLLM's ``Qwen2VLVideoBackend`` (registered for ``Qwen2VLVideoProcessor``)
  samples them with its own constants (2 per second, 4..768, a multiple of the temporal
  patch, ``torch.arange`` steps, the tail clamped), whatever the folder says, and the
  processor takes them all (``do_sample_frames`` off);
- the video budget: ``Qwen3OmniMoeProcessorKwargs._defaults`` passes
  ``size={shortest_edge: 128·32·32, longest_edge: 768·32·32}`` on every call, which
  replaces the folder's own video values (per frame, as Qwen2-VL's class sizes);
- ``second_per_grid_ts``: HF's ``video_second_per_grid`` renamed
  (``_postprocess_hf_mm_data``), Tp / the processor's ``fps`` (1.0 by default: vLLM
  passes none) = 2.0 for every video, whatever its rate (vLLM's processor gives 2.0; ran);
- pixels: the model has no device normalization (no ``supports_mm_device_do_normalize``),
  so a worker takes float32;
- the ids: vLLM's prompt updates take the pads from the tokenizer
  (``vocab[processor.image_token]``); config.json's ``thinker_config`` names the same.

Sound is a third modality of this model; a request with sound is worker-processed as a
whole (:data:`mmctl.request.refs.SOUND_BY_WORKER`). scripts/families/qwen3_omni_moe.md has
the facts with their source lines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.models import kinds
from mmctl.models.qwen_vl.parts import QwenProcessor, qwen_family
from mmctl.models.qwen_vl.qwen2_vl import SECOND_PER_GRID_TS, Qwen2VLVariant, Qwen2VLVision
from mmctl.models.qwen_vl.settings import QwenVision, TokenIds

#: ``Qwen3OmniMoeProcessorKwargs._defaults["videos_kwargs"]["size"]``, per frame.
VIDEO_MIN_PIXELS = 128 * 32 * 32
VIDEO_MAX_PIXELS = 768 * 32 * 32
#: Tp / the processor's ``fps`` default (1.0): every video's ``second_per_grid_ts``.
SECONDS_PER_GRID = 2.0
#: ``vllm/multimodal/video.py`` ``Qwen2VLVideoBackend``: ``load_bytes(fps=2)``, frames 4..768.
LOADER_FPS, LOADER_MIN_FRAMES, LOADER_MAX_FRAMES = 2.0, 4, 768


@dataclass(frozen=True)
class Qwen3OmniVision(Qwen2VLVision):
    #: The sound feature extractor's keys, which share preprocessor_config.json: sound is
    #: worker-processed (mmctl.models.sound has its token arithmetic), never a pixel.
    INERT: ClassVar[frozenset[str]] = Qwen2VLVision.INERT | {
        "chunk_length", "dither", "feature_extractor_type", "feature_size", "hop_length",
        "n_fft", "n_samples", "nb_max_frames", "padding_side", "padding_value",
        "return_attention_mask", "sampling_rate",
    }  # fmt: skip
    #: None: vLLM's loader takes its own constants (it ignores ``num_frames``) and the
    #: processor's call its own video size.
    OVERRIDABLE: ClassVar[tuple[str, ...]] = ()
    #: The checkpoints' preprocessor_config.json (Instruct, Thinking and Captioner alike).
    PUBLISHED: ClassVar[Mapping[str, Any]] = {
        "patch_size": 16,
        "image_mean": kinds.HALF,
        "image_std": kinds.HALF,
        "image_min_pixels": 3136,
        "image_max_pixels": 12845056,
    }

    # Not a file's: the processor's call replaces them (see the module's docstring).
    video_min_pixels: int = VIDEO_MIN_PIXELS
    video_max_pixels: int = VIDEO_MAX_PIXELS
    # Nor these: vLLM's loader samples with its own (``Qwen2VLVideoBackend``).
    fps: float = LOADER_FPS
    min_frames: int = LOADER_MIN_FRAMES
    max_frames: int = LOADER_MAX_FRAMES


@dataclass(frozen=True)
class Qwen3OmniVariant(Qwen2VLVariant):
    name: str = "qwen3-omni"

    def sample_indices(
        self, total_frames: int, source_fps: float, vision: QwenVision
    ) -> np.ndarray:
        """``Qwen2VLVideoBackend.compute_frames_index_to_sample``: Qwen2-VL's fps sampling
        (the settings carry the loader's constants; the base clamps the float32 tail
        to the last frame); a clip of unknown rate is refused, as vLLM refuses it."""
        if source_fps <= 0:
            raise InputError(
                "Qwen3-Omni's video sampling needs a known source frame rate (vLLM's loader "
                "refuses a clip whose container reports none)"
            )
        return super().sample_indices(total_frames, source_fps, vision)

    def second_per_grid_ts(
        self, indices: np.ndarray, total_frames: int, source_fps: float, vision: QwenVision
    ) -> float:
        return SECONDS_PER_GRID


#: Each id's token: vLLM's prompt updates read the pads' ids from the vocabulary.
TOKENS = {
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
    "image_token_id": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
}


def thinker_ids(config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> TokenIds:
    """The four ids from the tokenizer, each checked against ``thinker_config`` where it
    names it (the published ids where neither has it: ``--family`` without files)."""
    thinker = config.get("thinker_config") or {} if config else {}
    published = TokenIds()
    ids: dict[str, int] = {}
    for key, token in TOKENS.items():
        found, held = vocab(token), thinker.get(key)
        if found is not None and held is not None and found != held:
            raise InputError(
                f"config.json's thinker_config.{key} is {held}, but the tokenizer's {token} "
                f"is {found}"
            )
        ids[key] = found if found is not None else held if held is not None else getattr(
            published, key
        )  # fmt: skip
    return TokenIds(**ids)


#: vLLM's field config names it (its ``_postprocess_hf_mm_data`` renames HF's
#: ``video_second_per_grid`` to it); the model reads 2.0 where an item has none, so a
#: request without it is one vLLM serves, with the same positions.
OPTIONAL_SECOND_PER_GRID_TS = replace(
    SECOND_PER_GRID_TS,
    content="[items] seconds per temporal patch: 2.0, the model's own when absent",
    optional=True,
)

VARIANT = Qwen3OmniVariant()
FAMILY = replace(
    qwen_family(
        VARIANT,
        Qwen3OmniVision,
        OPTIONAL_SECOND_PER_GRID_TS,
        aliases=("qwen3_omni_moe", "qwen3-omni-moe"),
        model_types=("qwen3_omni_moe",),
        architectures=("Qwen3OmniMoe",),
        tokens=thinker_ids,
    ),
    # No device normalization in vLLM's Qwen3-Omni model: a worker takes float32.
    processor=QwenProcessor(VARIANT, PixelFormat.FLOAT32, device_normalize=False),
)
