"""GLM-5-Next goldens: transformers' ``Glm5NextProcessor`` driven as vLLM 0.33 drives it.

Imported by scripts/make_family_fixtures.py (reference environment: torch,
transformers 5.20.2, PyAV). What vLLM does, read in
``vllm/models/glm5next/common/multimodal.py``, ``vllm/model_executor/models/glm4_1v.py``
and ``vllm/multimodal/video.py`` (scripts/families/glm5_next.md has the account):

- The video loader is ``Glm5NextVideoBackend`` (registered for
  ``Glm5NextVideoProcessor``): 2 frames per second of clip, found by a greedy walk
  at 4 per second and re-spread with ``linspace`` (a clip with fewer frames than
  that: ``floor(i * total / n)``), at most 2048, each decoded once; it hands the
  processor ``do_sample_frames = (every frame was decoded)``.
- ``Glm5NextProcessor`` is not a ``Glm4vProcessor``: one call with every item and
  the loader's metadata (``_get_direct_path_inputs``). ``get_hf_processor`` first
  caps the video processor's ``max_image_tokens`` at 30000.
- The prompt is vLLM's (``_hf_processor_applies_updates`` is false): each
  ``<|image|>`` becomes grid.prod()/4 of itself; the video triple becomes
  ``<|begin_of_video|>``, per temporal patch ``<|begin_of_image|>`` + h*w/4 x
  ``<|image|>`` + ``<|end_of_image|>`` + ``"{:.1f} seconds"`` of the whole second
  of the patch's first frame (``_get_video_second_idx_glm46v``, GLM-5-Next's),
  tokenized alone, then ``<|end_of_video|>``.

This module ports vLLM's loader and timestamps independently of mmctl (the
goldens are what mmctl is checked against); scripts/families/vllm_check.py runs
vLLM's own code on them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from families.glm_golden import VideoRules, decode_all
from families.glm_golden import golden as glm_golden

#: ``Glm5NextProcessingInfo.get_hf_processor``'s cap on the video budget.
MAX_VIDEO_TOKENS = 30000
TIMESTAMP = "{:.1f} seconds"


def loader_indices(total: int, fps: float, duration: float) -> list[int]:
    """``Glm5NextVideoBackend._sample_frame_indices`` with its defaults (fps 2,
    2048 frames, temporal patch 2): the frames it asks the decoder for."""
    target_fps, max_frames, tps = 2.0, 2048, 2
    extract = min(int(duration * target_fps), max_frames)
    if total < extract:
        chosen = [math.floor(i * total / extract) for i in range(extract)]
    else:
        chosen, current, per_frame = [], 0.0, 1 / fps
        for index in range(total):
            if index * per_frame >= current:
                current += 1 / (tps * target_fps)
                chosen.append(index)
                if current >= int(duration):
                    break
    if len(chosen) < extract:
        start, end = (chosen[0], chosen[-1]) if chosen else (0, max(total - 1, 0))
        chosen = np.linspace(start, end, extract, dtype=int).tolist()
    elif len(chosen) > extract:
        chosen = np.linspace(0, total - 1, extract, dtype=int).tolist()
    uniq = list(dict.fromkeys(int(i) for i in chosen))
    return uniq + uniq[-1:] if len(uniq) % 2 else uniq


def load_video(path: Path) -> dict:
    """What vLLM's loader returns: the decoded frames (``read_frames`` reads
    ``sorted(set(indices))``) and its metadata dict."""
    frames, fps = decode_all(path)
    total = len(frames)
    asked = loader_indices(total, fps, total / fps)
    valid = sorted(set(asked))
    return {
        "frames": np.stack([frames[i] for i in valid]),
        "asked": asked,
        "metadata": {
            "total_num_frames": total,
            "fps": fps,
            "duration": total / fps,
            "video_backend": "opencv",
            "frames_indices": valid,
            "do_sample_frames": len(valid) == total,
        },
    }


def seconds(metadata: dict, num_frames: int, processor) -> list[int]:
    """``Glm5NextProcessingInfo._get_video_second_idx_glm46v``."""
    from transformers.video_utils import VideoMetadata

    vp = processor.video_processor
    tps = int(getattr(vp, "temporal_patch_size", 1) or 1)
    fps = float(metadata["fps"])
    if not metadata.get("do_sample_frames", True):
        indices = [int(i) for i in metadata["frames_indices"]]
    else:
        meta = VideoMetadata(
            total_num_frames=int(metadata["total_num_frames"]),
            fps=fps,
            duration=metadata.get("duration"),
        )
        indices = [int(i) for i in vp.sample_frames(meta)]
        num_frames = len(indices)
    grid_t = max((num_frames + (-num_frames % tps)) // tps, 1)
    last = len(indices) - 1
    return [int(indices[min(i * tps, last)] / fps) for i in range(grid_t)]


def video_ids(config: dict, grid, stamps: list[int], tokenizer) -> list[int]:
    """``Glm4vProcessingInfo._construct_video_placeholder`` (GLM-5-Next's timestamps)."""
    _, h, w = (int(x) for x in grid)
    out = [config["video_start_token_id"]]
    for second in stamps:
        out.append(config["image_start_token_id"])
        out += [config["image_token_id"]] * (h * w // 4)
        out.append(config["image_end_token_id"])
        out += tokenizer.encode(TIMESTAMP.format(second), add_special_tokens=False)
    out.append(config["video_end_token_id"])
    return out


RULES = VideoRules(load=load_video, seconds=seconds, ids=video_ids)


def golden(processor, config: dict, media: list, prompt: str, record) -> dict:
    """One golden, GLM's (glm_golden.golden) with GLM-5-Next's video rules, after
    ``get_hf_processor``'s cap on the video budget."""
    vp = processor.video_processor
    vp.max_image_tokens = min(vp.max_image_tokens, MAX_VIDEO_TOKENS)
    return glm_golden("glm5_next", processor, config, media, prompt, record, RULES)
