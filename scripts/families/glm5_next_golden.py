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

import hashlib
import math
from pathlib import Path

import numpy as np
from families.glm_golden import decode_all, expand

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


def golden(processor, config: dict, media: list, prompt: str, record) -> dict:
    """One golden. ``media``: [("image", PIL image, name, sha) | ("video", path, name, sha)].
    ``record(prefix, array, out)`` writes a tensor as make_family_fixtures does."""
    import torch
    from transformers.video_utils import VideoMetadata

    vp = processor.video_processor
    vp.max_image_tokens = min(vp.max_image_tokens, MAX_VIDEO_TOKENS)
    images, videos, content, out = [], [], [], {}
    for kind, item, _name, _sha in media:
        if kind == "image":
            images.append(item)
            content.append({"type": "image"})
        else:
            videos.append(load_video(item))
            content.append({"type": "video"})
    content.append({"type": "text", "text": prompt})
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    kwargs: dict = {"text": [text], "add_special_tokens": False, "return_tensors": "pt"}
    if images:
        kwargs["images"] = images
    if videos:
        assert len(videos) == 1, "vLLM's GLM processing takes at most one video per prompt"
        video = videos[0]
        meta = {k: v for k, v in video["metadata"].items() if k != "do_sample_frames"}
        kwargs["videos"] = [video["frames"]]
        kwargs["video_metadata"] = [VideoMetadata(**meta)]
        kwargs["do_sample_frames"] = video["metadata"]["do_sample_frames"]
        kwargs["return_metadata"] = True
    result = processor(**kwargs)
    tokenizer = processor.tokenizer
    plain = tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = [int(i) for i in result["input_ids"][0]]
    expansions = []
    for n, video in enumerate(videos):
        grid = result["video_grid_thw"][n]
        stamps = seconds(video["metadata"], len(video["frames"]), processor)
        expansions.append(video_ids(config, grid, stamps, tokenizer))
        kept = [int(i) for i in result["video_metadata"][n].frames_indices]
        out[f"video{n}_loader_indices"] = np.asarray(video["asked"], dtype=np.int64)
        out[f"video{n}_indices"] = np.asarray(kept, dtype=np.int64)
        out[f"video{n}_total_frames"] = np.int64(video["metadata"]["total_num_frames"])
        out[f"video{n}_fps"] = np.float64(video["metadata"]["fps"])
        out[f"video{n}_do_sample_frames"] = np.bool_(video["metadata"]["do_sample_frames"])
        out[f"video{n}_seconds"] = np.asarray(stamps, dtype=np.int64)
        out[f"video{n}_frames_sha256"] = np.asarray(
            hashlib.sha256(np.ascontiguousarray(video["frames"]).tobytes()).hexdigest()
        )
    image_grids = result["image_grid_thw"].tolist() if images else []
    vllm_ids = expand(plain, config, image_grids, expansions)
    out.update(
        text=np.asarray(text),
        prompt=np.asarray(prompt),
        media=np.asarray([m[2] for m in media]),
        media_sha256=np.asarray([m[3] for m in media]),
        template_ids=np.asarray(plain, dtype=np.int64),
        input_ids=np.asarray(ids, dtype=np.int64),
        vllm_input_ids=np.asarray(vllm_ids, dtype=np.int64),
        vllm_equals_hf=np.bool_(vllm_ids == ids),
    )
    if images:
        out["image_sizes_hw"] = np.asarray([[i.size[1], i.size[0]] for i in images], np.int64)
    for key, value in result.items():
        if key in ("input_ids", "attention_mask", "mm_token_type_ids", "video_metadata"):
            continue
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            out[f"{key}_source_dtype"] = np.asarray(str(value.dtype))
            record(key, value.to(torch.float32).numpy(), out)
        else:
            record(key, np.asarray(value), out)
    return out
