"""GLM-4.1V / GLM-4.6V / GLM-5-Next goldens: transformers' processors driven as vLLM 0.33 drives them.

Imported by scripts/make_family_fixtures.py (reference environment: torch,
transformers 5.20.2, PyAV). What vLLM does, read in
``vllm/model_executor/models/glm4_1v.py`` and ``vllm/multimodal/video.py``
(scripts/families/glm4v.md has the whole account):

- The video loader is picked by the folder's ``video_processor_type``:
  ``Glm4vVideoProcessor`` -> ``DynamicVideoBackend`` ("opencv_dynamic", 2 fps,
  up to 300 s, else 600 frames spread over the clip); ``Glm46VVideoProcessor`` ->
  ``GLM46VVideoBackend`` (3/1/0.5 fps by clip length, x temporal patch 2, at
  most 640 frames, an even count). It decodes the chosen frames once each and
  hands the processor ``do_sample_frames = (every frame was decoded)``.
- GLM-4.1V (``Glm4vProcessor``): each video through the processor on its own,
  images in one call. GLM-4.6V (``Glm46VProcessor``): one call with everything.
- The prompt: each ``<|image|>`` becomes grid.prod()/4 of itself; each
  ``<|begin_of_video|><|video|><|end_of_video|>`` becomes ``<|begin_of_video|>``,
  per temporal patch ``<|begin_of_image|>`` + h*w/4 x ``<|image|>`` +
  ``<|end_of_image|>`` + the timestamp's tokens, then ``<|end_of_video|>``; the
  timestamp is ``int(frame / fps)`` of every second kept frame, written ``"{}"``
  (4.1V) or ``"{:.1f} seconds"`` (4.6V) and tokenized alone.

Decoding here is PyAV's (display rotation applied); fps and frame count are the
stream's, which scripts/families/vllm_check.py compares with OpenCV's.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: model folder -> (loader, timestamp format); vLLM keys both on the processor class.
VARIANTS = {"glm4v": ("glm41v", "{}"), "glm46v": ("glm46v", "{:.1f} seconds")}
VIDEO_HOLDER = "<|begin_of_video|><|video|><|end_of_video|>"


def decode_all(path: Path) -> tuple[list[np.ndarray], float]:
    """Every frame (rgb24, display rotation applied) and the stream's frame rate."""
    import av

    frames = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        rate = stream.guessed_rate or stream.average_rate
        for frame in container.decode(video=0):
            rgb = frame.to_ndarray(format="rgb24")
            quarter = round(int(frame.rotation or 0) / 90) % 4
            frames.append(np.ascontiguousarray(np.rot90(rgb, quarter)) if quarter else rgb)
    return frames, float(rate)


def loader_indices(variant: str, total: int, fps: float, duration: float) -> list[int]:
    """The frames vLLM's registered GLM loader asks the decoder for (before de-duplication)."""
    last = total - 1
    if variant == "glm41v":  # DynamicVideoBackend: fps=2, max_duration=300
        target, max_duration = 2, 300
        if duration <= max_duration:
            n = math.floor(duration * target)
            return sorted({min(last, math.ceil(i * fps / target)) for i in range(n)})
        samples = int(max_duration * target)
        if samples >= total:
            return list(range(total))
        seconds = np.linspace(0, duration, samples, endpoint=True)
        return sorted({min(last, math.ceil(t * fps)) for t in seconds})
    # GLM46VVideoBackend (temporal_patch_size 2: the loader's default)
    tps = 2
    effective = min(duration, 2400)
    target_fps = 3.0 if effective <= 30 else 1.0 if effective <= 300 else 0.5
    extract = min(int(effective * target_fps * tps), 640)
    per_frame = 1 / fps
    max_second = int(duration)
    if total < extract:
        chosen = np.linspace(0, total - 1, extract, dtype=int).tolist()
    else:
        chosen, current = [], 0.0
        step = 1 / (tps * target_fps)
        for index in range(total):
            if index * per_frame >= current:
                current += step
                chosen.append(index)
                if current >= max_second:
                    break
    if len(chosen) < extract:
        start, end = (chosen[0], chosen[-1]) if chosen else (0, max(total - 1, 0))
        chosen = np.linspace(start, end, extract, dtype=int).tolist()
    elif len(chosen) > extract:
        chosen = np.linspace(0, total - 1, extract, dtype=int).tolist()
    return _even(_unique(chosen))


def _unique(indices: list[int]) -> list[int]:
    seen: set[int] = set()
    return [i for i in indices if not (i in seen or seen.add(i))]


def _even(indices: list[int]) -> list[int]:
    return indices + indices[-1:] if len(indices) % 2 else indices


def load_video(path: Path, variant: str) -> dict:
    """What vLLM's loader returns: the decoded frames (each asked-for index once,
    ascending) and its metadata dict."""
    frames, fps = decode_all(path)
    total = len(frames)
    duration = total / fps
    asked = loader_indices(variant, total, fps, duration)
    valid = sorted(set(asked))
    return {
        "frames": np.stack([frames[i] for i in valid]),
        "asked": asked,
        "metadata": {
            "total_num_frames": total,
            "fps": fps,
            "duration": duration,
            "video_backend": "opencv_dynamic" if variant == "glm41v" else "opencv",
            "frames_indices": valid,
            "do_sample_frames": len(valid) == total,
        },
    }


def seconds(variant: str, metadata: dict, processor) -> list[int]:
    """vLLM's ``_get_video_second_idx_glm4v`` / ``_glm46v``: whole seconds of every
    second frame the processor keeps (timestamps of the temporal patches)."""
    fps = metadata["fps"]
    total = metadata["total_num_frames"]
    if not metadata["do_sample_frames"]:
        indices = list(metadata["frames_indices"])
    elif variant == "glm41v":
        vp = processor.video_processor
        duration = metadata["duration"]
        last = total - 1
        if duration <= vp.max_duration:
            n = math.floor(duration * vp.fps)
            indices = [min(last, math.ceil(i * fps / vp.fps)) for i in range(n)]
        else:
            samples = int(vp.max_duration * vp.fps)
            if samples >= total:
                indices = list(range(total))
            else:
                target = np.linspace(0, duration, samples, endpoint=True)
                indices = [min(last, math.ceil(t * fps)) for t in target]
    else:
        indices = loader_indices("glm46v", total, fps, metadata["duration"])
    return [int(i / fps) for i in _even(_unique(indices))][::2]


def video_ids(variant: str, config: dict, grid, stamps: list[int], tokenizer) -> list[int]:
    """``Glm4vProcessingInfo._construct_video_placeholder``."""
    fmt = VARIANTS_FMT[variant]
    _, h, w = (int(x) for x in grid)
    per_frame = h * w // 4
    out = [config["video_start_token_id"]]
    for second in stamps:
        out.append(config["image_start_token_id"])
        out += [config["image_token_id"]] * per_frame
        out.append(config["image_end_token_id"])
        out += tokenizer.encode(fmt.format(second), add_special_tokens=False)
    out.append(config["video_end_token_id"])
    return out


VARIANTS_FMT = {"glm41v": "{}", "glm46v": "{:.1f} seconds"}


def expand(template_ids: list[int], config: dict, image_grids, video_items) -> list[int]:
    """vLLM's prompt updates on the tokenized prompt, items in order."""
    image_id = config["image_token_id"]
    holder = [
        config["video_start_token_id"],
        config["video_token_id"],
        config["video_end_token_id"],
    ]
    grids, videos = list(image_grids), list(video_items)
    out: list[int] = []
    i = 0
    while i < len(template_ids):
        if template_ids[i] == image_id and grids:
            t, h, w = (int(x) for x in grids.pop(0))
            out += [image_id] * (t * h * w // 4)
            i += 1
        elif template_ids[i : i + 3] == holder and videos:
            out += videos.pop(0)
            i += 3
        else:
            out.append(template_ids[i])
            i += 1
    return out


@dataclass(frozen=True)
class VideoRules:
    """What differs between the GLM processings' videos: vLLM's loader, its
    timestamps, its placeholder (GLM-5-Next brings its own: ``GLM5_NEXT`` below)."""

    #: path -> vLLM's loader result (``frames``, ``asked``, ``metadata``)
    load: Callable[[Path], dict]
    #: (loader metadata, frames handed to HF, processor) -> each temporal patch's second
    seconds: Callable[[dict, int, Any], list[int]]
    #: (config, grid, seconds, tokenizer) -> the video's prompt ids
    ids: Callable[[dict, Any, list[int], Any], list[int]]


def rules(family: str) -> VideoRules:
    """GLM-4.1V's or GLM-4.6V's."""
    variant, _ = VARIANTS[family]
    return VideoRules(
        load=lambda path: load_video(path, variant),
        seconds=lambda metadata, _frames, processor: seconds(variant, metadata, processor),
        ids=lambda config, grid, stamps, tok: video_ids(variant, config, grid, stamps, tok),
    )


def golden(
    family: str,
    processor,
    config: dict,
    media: list,
    prompt: str,
    record,
    video: VideoRules | None = None,
) -> dict:
    """One golden. ``media``: [("image", PIL image, name, sha) | ("video", path, name, sha)].
    ``record(prefix, array, out)`` writes a tensor as make_family_fixtures does;
    ``video``: the family's rules (GLM-4.1V's or 4.6V's by ``family`` when none)."""
    import torch
    from transformers.video_utils import VideoMetadata

    video_rules = video or rules(family)
    images, videos, content, out = [], [], [], {}
    for kind, item, _name, _sha in media:
        if kind == "image":
            images.append(item)
            content.append({"type": "image"})
        else:
            videos.append(video_rules.load(item))
            content.append({"type": "video"})
    content.append({"type": "text", "text": prompt})
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    kwargs: dict = {"text": [text], "add_special_tokens": False, "return_tensors": "pt"}
    if images:
        kwargs["images"] = images
    if videos:
        # vLLM passes one video per call; one per request is all GLM allows.
        assert len(videos) == 1, "vLLM's GLM processor takes at most one video per prompt"
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
    video_expansions = []
    for n, video in enumerate(videos):
        grid = result["video_grid_thw"][n]
        stamps = video_rules.seconds(video["metadata"], len(video["frames"]), processor)
        video_expansions.append(video_rules.ids(config, grid, stamps, tokenizer))
        hf_meta = result["video_metadata"][n]
        kept = [int(i) for i in hf_meta.frames_indices]
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
    vllm_ids = expand(plain, config, image_grids, video_expansions)
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


# ---- GLM-5-Next (glm5_next, GLM-5.3-Flash): GLM's golden with its own VideoRules ----
#
# What vLLM does, read in ``vllm/models/glm5next/common/multimodal.py``,
# ``vllm/model_executor/models/glm4_1v.py`` and ``vllm/multimodal/video.py``
# (scripts/families/glm5_next.md has the account):
#
# - The video loader is ``Glm5NextVideoBackend`` (registered for
#   ``Glm5NextVideoProcessor``): 2 frames per second of clip, found by a greedy walk
#   at 4 per second and re-spread with ``linspace`` (a clip with fewer frames than
#   that: ``floor(i * total / n)``), at most 2048, each decoded once; it hands the
#   processor ``do_sample_frames = (every frame was decoded)``.
# - ``Glm5NextProcessor`` is not a ``Glm4vProcessor``: one call with every item and
#   the loader's metadata (``_get_direct_path_inputs``). ``get_hf_processor`` first
#   caps the video processor's ``max_image_tokens`` at 30000.
# - The prompt is vLLM's (``_hf_processor_applies_updates`` is false): each
#   ``<|image|>`` becomes grid.prod()/4 of itself; the video triple becomes
#   ``<|begin_of_video|>``, per temporal patch ``<|begin_of_image|>`` + h*w/4 x
#   ``<|image|>`` + ``<|end_of_image|>`` + ``"{:.1f} seconds"`` of the whole second
#   of the patch's first frame (``_get_video_second_idx_glm46v``, GLM-5-Next's),
#   tokenized alone, then ``<|end_of_video|>``.
#
# Ported independently of mmctl (the goldens are what mmctl is checked against);
# scripts/families/vllm_check.py runs vLLM's own code on them.


#: ``Glm5NextProcessingInfo.get_hf_processor``'s cap on the video budget.
MAX_VIDEO_TOKENS = 30000
GLM5_NEXT_TIMESTAMP = "{:.1f} seconds"


def glm5_next_loader(total: int, fps: float, duration: float) -> list[int]:
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


def glm5_next_video(path: Path) -> dict:
    """What vLLM's loader returns: the decoded frames (``read_frames`` reads
    ``sorted(set(indices))``) and its metadata dict."""
    frames, fps = decode_all(path)
    total = len(frames)
    asked = glm5_next_loader(total, fps, total / fps)
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


def glm5_next_seconds(metadata: dict, num_frames: int, processor) -> list[int]:
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


def glm5_next_ids(config: dict, grid, stamps: list[int], tokenizer) -> list[int]:
    """``Glm4vProcessingInfo._construct_video_placeholder`` (GLM-5-Next's timestamps)."""
    _, h, w = (int(x) for x in grid)
    out = [config["video_start_token_id"]]
    for second in stamps:
        out.append(config["image_start_token_id"])
        out += [config["image_token_id"]] * (h * w // 4)
        out.append(config["image_end_token_id"])
        out += tokenizer.encode(GLM5_NEXT_TIMESTAMP.format(second), add_special_tokens=False)
    out.append(config["video_end_token_id"])
    return out


GLM5_NEXT = VideoRules(load=glm5_next_video, seconds=glm5_next_seconds, ids=glm5_next_ids)


def cap_video_budget(processor) -> None:
    """``Glm5NextProcessingInfo.get_hf_processor``: the video processor's
    ``max_image_tokens`` capped at ``MAX_VIDEO_TOKENS``."""
    vp = processor.video_processor
    vp.max_image_tokens = min(vp.max_image_tokens, MAX_VIDEO_TOKENS)


#: Each GLM folder's video rules (what ``golden`` takes as ``video``).
RULES = {"glm4v": rules("glm4v"), "glm46v": rules("glm46v"), "glm5_next": GLM5_NEXT}
