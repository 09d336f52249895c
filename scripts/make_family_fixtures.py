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
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "fixtures"), str(ROOT / "scripts")]

import hf_cases  # noqa: E402
from families import gemma4_reference, glm_golden  # noqa: E402

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

# (golden name, media names); an "v:" prefix is a video.
CASES = {
    "llava": [(f"image-{n}", (n,)) for n in IMAGES] + [("two_images", ("rgb_odd", "large"))],
    "llava_next": [(f"image-{n}", (n,)) for n in IMAGES] + [("two_images", ("rgb_odd", "large"))],
    "llama4": [(f"image-{n}", (n,)) for n in IMAGES] + [("two_images", ("rgb_odd", "large"))],
    "llava_onevision": [(f"image-{n}", (n,)) for n in IMAGES]
    + [("two_images", ("rgb_odd", "large")), *CLIP_CASES, ("image_then_video", ("rgba", "v:film"))],
    "gemma4": [(f"image-{n}", (n,)) for n in IMAGES]
    + [
        ("two_images", ("rgb_odd", "large")),
        *CLIP_CASES,
        ("video-shrink", ("v:shrink",)),
        ("image_then_video", ("rgba", "v:film")),
        ("video_then_image", ("v:ntsc", "gray")),
    ],
}
# GLM (scripts/families/glm_golden.py): vLLM takes at most one video per prompt, and
# refuses clips under 1 s (min_frames.mp4: its loaders keep one frame; vllm_check.py shows it).
GLM_CASES = (
    [(f"image-{n}", (n,)) for n in IMAGES]
    + [("two_images", ("rgb_odd", "large"))]
    + [
        (f"video-{n}", (f"v:{n}",))
        for n in (
            "tiny",
            "ties",
            "portrait",
            "odd_count",
            "max_frames",
            "rotated",
            "vfr",
            "webm",
            "gif",
            "mov",
            "ntsc",
            "film",
        )
    ]
    + [("image_then_video", ("rgba", "v:film"))]
)
CASES["glm4v"] = GLM_CASES
CASES["glm46v"] = GLM_CASES


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


def load_video(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """Every decoded frame (PyAV rgb24, display rotation applied), then vLLM's default
    VideoBackend choice: min(32, n) frames, all of them when n <= 32, else
    linspace(0, n-1, 32) truncated."""
    import av

    frames = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            rgb = frame.to_ndarray(format="rgb24")
            # vLLM's OpenCV decoder honours the display matrix (ran: rotated.mp4 comes
            # out 96x64); PyAV leaves it to the caller.
            quarter = round(int(frame.rotation or 0) / 90) % 4
            frames.append(np.ascontiguousarray(np.rot90(rgb, quarter)) if quarter else rgb)
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


def family_golden(family: str, processor, media: tuple[str, ...]) -> dict:
    folder = FAMILIES / family
    config = json.loads((folder / "config.json").read_text())
    if family in glm_golden.VARIANTS:
        items = []
        for name in media:
            case = VIDEOS[name[2:]] if name.startswith("v:") else IMAGES[name]
            path = hf_cases.media_path(case)
            item = ("video", path) if name.startswith("v:") else ("image", load_image(path))
            items.append((*item, path.name, hf_cases.sha256_of(path)))
        return glm_golden.golden(family, processor, config, items, PROMPT, tensor_record)
    images, videos, content, items, sums, names = [], [], [], [], [], []
    out: dict = {}
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
        names.append(path.name)
        sums.append(hf_cases.sha256_of(path))
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


def gemma4_golden(family: str, processor, media: tuple[str, ...]) -> dict:
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


def _check_media() -> None:
    sums = hf_cases.recorded_sums()
    for case in hf_cases.all_media():
        path = hf_cases.media_path(case)
        if sums.get(path.name) != hf_cases.sha256_of(path):
            sys.exit(f"{path} does not match media/SHA256SUMS")


def main() -> int:
    import av
    import PIL
    import tokenizers
    import torch
    import torchvision
    import transformers
    from transformers import AutoProcessor

    _check_media()
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
    for family, cases in CASES.items():
        processor = AutoProcessor.from_pretrained(str(FAMILIES / family))
        classes[family] = {
            "processor": type(processor).__name__,
            "image_processor": type(processor.image_processor).__name__,
            "video_processor": type(getattr(processor, "video_processor", None)).__name__,
            "tokenizer": type(processor.tokenizer).__name__,
        }
        for name, media in cases:
            golden = gemma4_golden if family == "gemma4" else family_golden
            record = golden(family, processor, media)
            file = f"{family}-{name}.npz"
            np.savez_compressed(OUT / file, **record)
            written.append(file)
            if not bool(record["vllm_equals_hf"]):
                mismatches.append(file)
            shapes = {k[:-6]: record[k].tolist() for k in record if k.endswith("_shape")}
            print(f"{file}: {len(record['input_ids'])} ids {shapes}", flush=True)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
