"""LLaVA-1.5 / LLaVA-NeXT / LLaVA-OneVision against the committed HF goldens.

Every ``llava-*``, ``llava_next-*`` and ``llava_onevision-*`` golden of
tests/fixtures/families/goldens/ (transformers 5.20.2's torchvision
processors, vLLM's loading): the committed media loaded as mmctl loads them,
run through the family's pure functions, must give the golden's float32
bytes (sha256), its ``image_sizes`` and, per item, the run of placeholder
ids in its ``input_ids``. Videos are decoded with PyAV (display rotation
applied, as vLLM's OpenCV loader does) and sampled with ``sample_indices``;
the sampled frames must be the golden's before their pixels are compared.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mmctl.checkpoint.files import load_model_files
from mmctl.media.image import load_image
from mmctl.media.video import decode_sampled
from mmctl.models import llava, llava_next
from mmctl.models import llava_onevision as onevision

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GOLDENS = FIXTURES / "families" / "goldens"
MEDIA = FIXTURES / "media"
FAMILIES = ("llava", "llava_next", "llava_onevision")
VIDEO_SUFFIXES = {".mp4", ".mkv", ".webm", ".gif", ".mov"}


def _goldens() -> list[Path]:
    found = [p for f in FAMILIES for p in sorted(GOLDENS.glob(f"{f}-*.npz"))]
    return found


def _family(golden: Path) -> str:
    return golden.name.split("-", 1)[0]


def _json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def _vision(family: str) -> Any:
    module: Any = {"llava": llava, "llava_next": llava_next, "llava_onevision": onevision}[family]
    resolved = module.Vision.resolve(load_model_files(FIXTURES / "families" / family), family)
    assert resolved.warnings == (), resolved.warnings  # every key of the published files known
    return resolved.settings


def _sha(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()


def _runs(ids: np.ndarray, token: int) -> list[int]:
    """Lengths of the runs of ``token`` in ``ids``, in order."""
    runs, length = [], 0
    for i in ids.tolist():
        if i == token:
            length += 1
        elif length:
            runs.append(length)
            length = 0
    if length:
        runs.append(length)
    return runs


def _decode(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    frames: dict[int, np.ndarray] = {}

    def sink(position: int, rgb: np.ndarray) -> None:
        frames[position] = rgb

    info, indices = decode_sampled(path, lambda total, fps: onevision.sample_indices(total), sink)
    return np.stack([frames[i] for i in range(len(indices))]), indices, info.total_frames


@pytest.mark.parametrize("golden", _goldens(), ids=lambda p: p.stem)
def test_golden(golden: Path) -> None:
    z = np.load(golden)
    family = _family(golden)
    vision = _vision(family)
    module: Any = {"llava": llava, "llava_next": llava_next, "llava_onevision": onevision}[family]
    names = [str(n) for n in z["media"]]
    images = [load_image(MEDIA / n)[1] for n in names if Path(n).suffix not in VIDEO_SUFFIXES]
    videos = [n for n in names if Path(n).suffix in VIDEO_SUFFIXES]

    if images:
        sizes = np.asarray([i.shape[:2] for i in images], dtype=np.int64)
        assert np.array_equal(sizes, z["image_sizes_hw"])
        batch = module.batch_pixels([module.image_pixels(i, vision) for i in images])
        assert list(batch.shape) == z["pixel_values_shape"].tolist()
        assert batch.dtype == np.float32
        assert _sha(batch) == str(z["pixel_values_sha256"])
        if family != "llava":
            assert np.array_equal(module.image_sizes(images), z["image_sizes_full"])
        counts = [module.image_tokens(i.shape[0], i.shape[1], vision) for i in images]
        assert _runs(z["input_ids"], vision.image_token_index) == counts

    for k, name in enumerate(videos):
        frames, indices, total = _decode(MEDIA / name)
        assert total == int(z[f"video{k}_total_frames"])
        assert np.array_equal(indices, z[f"video{k}_indices"])
        assert _sha(frames) == str(z[f"video{k}_frames_sha256"])
        pixels = onevision.video_pixels(frames, vision)[None]  # one video per HF call
        assert list(pixels.shape) == z["pixel_values_videos_shape"].tolist()
        assert _sha(pixels) == str(z["pixel_values_videos_sha256"])
        counts = [onevision.video_tokens(len(indices), vision)]
        assert _runs(z["input_ids"], vision.video_token_index) == counts


def test_every_family_has_goldens() -> None:
    found = {_family(p) for p in _goldens()}
    assert found == set(FAMILIES)
    assert len(_goldens()) == 10 + 10 + 22


@pytest.mark.parametrize("family", FAMILIES)
def test_published_files_resolve_to_the_defaults(family: str) -> None:
    module: Any = {"llava": llava, "llava_next": llava_next, "llava_onevision": onevision}[family]
    assert _vision(family) == module.Vision()


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_png_with_trns_is_composited_onto_white_as_vllm_does(tmp_path: Path, mode: str) -> None:
    from PIL import Image

    if mode == "RGB":
        pixels = np.zeros((4, 5, 3), dtype=np.uint8)
        pixels[:, :2], pixels[:, 2:], key = (10, 20, 30), (200, 100, 50), (10, 20, 30)
    else:
        pixels = np.zeros((4, 5), dtype=np.uint8)
        pixels[:, :2], pixels[:, 2:], key = 7, 99, 7
    path = tmp_path / "trns.png"
    Image.fromarray(pixels, mode).save(path, transparency=key)
    rgb = load_image(path)[1]
    assert rgb[0, 0].tolist() == [255, 255, 255]  # the transparent colour, on white
    assert rgb[0, 4].tolist() != [255, 255, 255]
