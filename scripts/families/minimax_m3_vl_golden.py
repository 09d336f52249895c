"""MiniMax-M3-VL goldens: vLLM 0.33's own processor classes, driven as vLLM drives them.

Imported by scripts/make_family_fixtures.py (reference environment: torch,
transformers 5.20.2, PyAV). vLLM runs its vendored copy of the checkpoint's remote
processor (``vllm/transformers_utils/processors/minimax_m3.py``), not transformers';
this module loads that file from an unpacked vLLM 0.33.0 wheel
(``MMCTL_VLLM_SRC``: the folder holding ``vllm/``; ``pip download --no-deps
vllm==0.33.0`` and unzip) — it needs only torch and transformers. What vLLM does
around it, read in ``vllm/models/minimax_m3/common/mm_preprocess.py``
(scripts/families/minimax_m3_vl.md has the account):

- The video loader is ``MiniMaxM3VideoBackend`` (registered for
  ``MiniMaxM3VLVideoProcessor``): ``load_bytes`` with ``fps=1``; its
  ``compute_frames_index_to_sample`` keeps frame 0, then the first frame at least
  ``1/fps - 1e-4`` s after the last kept one; ``num_frames`` (32) and
  ``max_duration`` are not read. Frames are decoded once each.
- ``_get_hf_mm_inputs`` hands the processor each video's frames and a
  ``VideoMetadata`` of the loader's dict without ``do_sample_frames``;
  ``_call_hf_processor`` adds ``do_resize=True``. One call with every item.
- The prompt is vLLM's (``_get_prompt_updates``): ``]<]image[>[`` becomes
  start + grid.prod()/4 x itself + end; ``]<]video[>[`` becomes, per temporal
  patch, ``f"]<]{ts:.1f} seconds[>["`` tokenized alone (``ts`` =
  ``frames_indices[min(i*2, n-1)] / fps``), start, h*w/4 x ``]<]video[>[``, end.

This module ports the loader and the prompt update independently of mmctl (the
goldens are what mmctl is checked against); scripts/families/vllm_check.py runs
vLLM's own code on them where an environment has it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
from families.glm_golden import decode_all
from families.vllm_source import vllm_source

MODULE = "vllm/transformers_utils/processors/minimax_m3.py"
IMAGE_TOKEN, VIDEO_TOKEN = "]<]image[>[", "]<]video[>["
START, END = "]<]start of image[>[", "]<]end of image[>["


def vendored():
    """vLLM 0.33.0's ``processors/minimax_m3.py``, imported on its own."""
    src = vllm_source(MODULE)
    if "vllm_minimax_m3" in sys.modules:
        return sys.modules["vllm_minimax_m3"]
    spec = importlib.util.spec_from_file_location("vllm_minimax_m3", Path(src) / MODULE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["vllm_minimax_m3"] = module
    spec.loader.exec_module(module)
    return module


def processor(folder: Path):
    """``MiniMaxM3VLProcessingInfo.get_hf_processor``: the vendored processor with the
    folder's tokenizer (vLLM passes its own)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    return vendored().MiniMaxVLProcessor.from_pretrained(str(folder), tokenizer=tokenizer)


def loader_indices(total: int, fps: float, target_fps: float = 1.0) -> list[int]:
    """``MiniMaxM3VideoBackend.compute_frames_index_to_sample`` (fps 1)."""
    if total <= 0 or fps <= 0 or target_fps <= 0:
        return [0] if total > 0 else []
    interval, eps = 1.0 / target_fps, 1e-4
    indices: list[int] = []
    prev = -float("inf")
    while True:
        frame = max(math.ceil((prev + interval - eps) * fps), indices[-1] + 1) if indices else 0
        if frame >= total:
            break
        indices.append(frame)
        prev = frame / fps
    return indices or [0]


def load_video(path: Path) -> dict:
    """What vLLM's loader returns: the frames it asked for, decoded once each, and its dict."""
    frames, fps = decode_all(path)
    total = len(frames)
    asked = loader_indices(total, fps)
    return {
        "frames": np.stack([frames[i] for i in asked]),
        "asked": asked,
        "metadata": {
            "total_num_frames": total,
            "fps": fps,
            "duration": total / fps,
            "video_backend": "opencv",
            "frames_indices": asked,
            "do_sample_frames": len(asked) == total,
        },
    }


def video_ids(grid, meta: dict, tokenizer, tps: int, ids: dict) -> tuple[list[int], list[float]]:
    """``get_video_replacement``: the video's ids and each temporal patch's time."""
    t, h, w = (int(x) for x in grid)
    per_frame = h * w // 4
    indices, fps = meta["frames_indices"], meta["fps"]
    out: list[int] = []
    times: list[float] = []
    for frame in range(t):
        ts = indices[min(frame * tps, len(indices) - 1)] / fps
        times.append(ts)
        out += tokenizer.encode(f"]<]{ts:.1f} seconds[>[", add_special_tokens=False)
        out += [ids["start"], *[ids["video"]] * per_frame, ids["end"]]
    return out, times


def golden(proc, media: list, prompt: str, record) -> dict:
    """One golden. ``media``: [("image", PIL image, name, sha) | ("video", path, name, sha)];
    ``record(prefix, array, out)`` writes a tensor as make_family_fixtures does."""
    import torch
    from transformers.video_utils import VideoMetadata

    tokenizer = proc.tokenizer
    vocab = tokenizer.get_vocab()
    ids = {
        "image": vocab[IMAGE_TOKEN],
        "video": vocab[VIDEO_TOKEN],
        "start": vocab[START],
        "end": vocab[END],
    }
    images, videos, content, out = [], [], [], {}
    for kind, item, _name, _sha in media:
        if kind == "image":
            images.append(item)
        else:
            videos.append(load_video(item))
        content.append({"type": kind})
    content.append({"type": "text", "text": prompt})
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    kwargs: dict = {"text": [text], "do_resize": True, "return_tensors": "pt"}
    if images:
        kwargs["images"] = images
    if videos:
        kwargs["videos"] = [v["frames"] for v in videos]
        kwargs["video_metadata"] = [
            VideoMetadata(**{k: v for k, v in video["metadata"].items() if k != "do_sample_frames"})
            for video in videos
        ]
    result = proc(**kwargs)
    plain = tokenizer(text, add_special_tokens=False)["input_ids"]
    hf_ids = [int(i) for i in result["input_ids"][0]]
    tps = int(proc.video_processor.temporal_patch_size)
    image_grids = result["image_grid_thw"].tolist() if images else []
    video_blocks = []
    for n, video in enumerate(videos):
        block, times = video_ids(
            result["video_grid_thw"][n], video["metadata"], tokenizer, tps, ids
        )
        video_blocks.append(block)
        out[f"video{n}_loader_indices"] = np.asarray(video["asked"], dtype=np.int64)
        out[f"video{n}_indices"] = np.asarray(video["metadata"]["frames_indices"], np.int64)
        out[f"video{n}_total_frames"] = np.int64(video["metadata"]["total_num_frames"])
        out[f"video{n}_fps"] = np.float64(video["metadata"]["fps"])
        out[f"video{n}_seconds"] = np.asarray(times, dtype=np.float64)
        out[f"video{n}_frames_sha256"] = np.asarray(
            hashlib.sha256(np.ascontiguousarray(video["frames"]).tobytes()).hexdigest()
        )
    # vLLM's prompt updates on the tokenized prompt, items in order; the spans it reports.
    vllm_ids: list[int] = []
    spans: dict[str, list[list[int]]] = {"image": [], "video": []}
    grids, blocks = list(image_grids), list(video_blocks)
    for token in plain:
        if token == ids["image"] and grids:
            t, h, w = grids.pop(0)
            block = [ids["start"], *[ids["image"]] * (t * h * w // 4), ids["end"]]
            spans["image"].append([len(vllm_ids), len(block)])
            vllm_ids += block
        elif token == ids["video"] and blocks:
            block = blocks.pop(0)
            spans["video"].append([len(vllm_ids), len(block)])
            vllm_ids += block
        else:
            vllm_ids.append(token)
    out.update(
        text=np.asarray(text),
        prompt=np.asarray(prompt),
        media=np.asarray([m[2] for m in media]),
        media_sha256=np.asarray([m[3] for m in media]),
        template_ids=np.asarray(plain, dtype=np.int64),
        input_ids=np.asarray(hf_ids, dtype=np.int64),
        vllm_input_ids=np.asarray(vllm_ids, dtype=np.int64),
        vllm_equals_hf=np.bool_(vllm_ids == hf_ids),
    )
    for kind, found in spans.items():
        if found:  # the ranges vLLM reports, and the token whose positions take embeddings
            out[f"{kind}_placeholders"] = np.asarray(found, dtype=np.int64)
            out[f"{kind}_embed_id"] = np.int64(ids[kind])
    if images:
        out["image_sizes_hw"] = np.asarray([[i.size[1], i.size[0]] for i in images], np.int64)
    for key, value in result.items():
        if key in ("input_ids", "attention_mask", "video_metadata"):
            continue
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            out[f"{key}_source_dtype"] = np.asarray(str(value.dtype))
            record(key, value.to(torch.float32).numpy(), out)
        else:
            record(key, np.asarray(value), out)
    return out


#: (height, width) pairs for the size table: odd, tiny, huge, extreme aspect ratios, ties.
SIZE_CASES = [
    (1, 1), (10, 2000), (10, 2001), (27, 5000), (28, 28), (41, 97), (56, 56), (100, 100),
    (111, 3000), (112, 112), (333, 500), (480, 640), (481, 641), (671, 673), (672, 672),
    (700, 1), (720, 1280), (900, 1400), (1080, 1920), (1081, 1919), (2000, 3000),
    (3583, 3585), (3584, 3584), (4000, 4000), (5000, 27), (10000, 51),
]  # fmt: skip
#: (min_pixels, max_pixels, max_long_side_pixel, max_total_pixels) as the image and video
#: processors call ``smart_resize`` with the published values and with a long side set.
SIZE_RULES = [
    (3136, 451584, None, 12_845_056),  # image, published
    (3136, 602112, None, None),  # video frame, published
    (3136, 451584, 1008, 12_845_056),  # image, max_long_side_pixel 1008
    (3136, 451584, 4000, 12_845_056),  # image, over the area cap once enlarged
    (3136, 602112, 448, None),  # video frame, max_long_side_pixel 448
    (20000, 30000, None, None),  # a folder's own budget
]


def size_table() -> list[list]:
    """The vendored ``smart_resize`` on every case and rule: [h, w, rule, out_h, out_w],
    or the error's class name in place of the size."""
    resize = vendored().smart_resize
    rows: list[list] = []
    for h, w in SIZE_CASES:
        for n, (low, high, side, total) in enumerate(SIZE_RULES):
            try:
                out = list(resize(h, w, 28, low, high, side, 112, total))
            except ValueError as err:
                out = [type(err).__name__, str(err).split(",")[0]]
            rows.append([h, w, n, *out])
    return rows
