"""mmctl's preprocessing against Hugging Face's, from golden fixtures.

Fixtures come from scripts/make_hf_fixtures.py (HF + torch, never run here),
made from the committed files in tests/fixtures/media/; this test runs mmctl
(without torch) on the same files and never encodes anything: encoders write
different bytes on different CPUs, decoders do not. Targets: identical grid, indices and timestamps; pixels within one uint8
level everywhere (≤ 0.0079 normalized for Qwen3-VL, ≤ 1 raw) and identical
in ≥ 99% of entries.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.models import qwen2_vl, qwen3_vl
from mmctl.preprocessing.pipeline import preprocess

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
import hf_cases  # noqa: E402

# Where an axis grows, mmctl reproduces torchvision's int16 fixed-point
# arithmetic (resize_rgb_exact) and is bit-identical; shrinking uses Pillow
# (int32 weights), within one level. No case needs more than one level.
LEVELS_ALLOWED: dict[str, int] = {}

ONE_LEVEL = {"qwen3-vl": 1 / 127.5 + 1e-6, "qwen2.5-vl": 1 / (255 * 0.26130258) + 1e-6}
SPECS = {"qwen3-vl": qwen3_vl.SPEC, "qwen2.5-vl": qwen2_vl.SPEC}


def _load(name: str) -> dict:
    with np.load(FIXTURES / "hf" / name) as data:
        return {k: data[k] for k in data.files}


def _compare(prefix: str, ours: np.ndarray, fx: dict, tolerance: float, levels: int = 1) -> None:
    tolerance *= levels
    assert list(ours.shape) == fx[f"{prefix}_shape"].tolist()
    if f"{prefix}_full" in fx:
        theirs = fx[f"{prefix}_full"]
        ours_flat, theirs_flat = ours.reshape(-1), theirs.reshape(-1)
    else:
        positions = fx[f"{prefix}_sample_pos"]
        ours_flat, theirs_flat = ours.reshape(-1)[positions], fx[f"{prefix}_sample_val"]
        row_diff = np.abs(ours.astype(np.float64).sum(axis=1) - fx[f"{prefix}_row_sums"])
        assert row_diff.max() <= tolerance * ours.shape[1]
    diff = np.abs(ours_flat.astype(np.float64) - theirs_flat.astype(np.float64))
    assert diff.max() <= tolerance, f"{prefix}: max diff {diff.max()}"
    identical = float(np.mean(diff == 0))
    assert identical >= 0.99, f"{prefix}: only {identical:.4f} identical"


def _committed(case, fx: dict) -> Path:
    """The case's committed file, the very one its golden was made from."""
    path = hf_cases.media_path(case)
    assert hf_cases.sha256_of(path) == str(fx["media_sha256"]), (
        f"{path.name} is not the file its golden was made from; rerun scripts/make_hf_fixtures.py"
    )
    return path


def test_committed_media_match_sha256sums():
    sums = hf_cases.recorded_sums()
    files = {p.name for p in hf_cases.MEDIA.iterdir() if p.name != hf_cases.SUMS.name}
    assert files == set(sums), "media/ and media/SHA256SUMS list different files"
    for name, digest in sums.items():
        assert hf_cases.sha256_of(hf_cases.MEDIA / name) == digest, name


@pytest.mark.parametrize("case", hf_cases.VIDEO_CASES, ids=lambda c: c.name)
def test_video_matches_hf(case):
    fx = _load(f"video-qwen3-vl-{case.name}.npz")
    path = _committed(case, fx)
    spec = qwen3_vl.SPEC
    if "error" in fx:
        with pytest.raises(InputError, match="at least 2 frames"):
            preprocess(path, spec, spec.params)
        return
    norm = preprocess(path, spec, spec.params, PixelFormat.FLOAT32)
    assert norm.source.total_frames == int(fx["total_frames"])
    assert norm.frame_indices.tolist() == fx["indices"].tolist()
    if "hf_loader_indices" in fx:
        assert norm.frame_indices.tolist() == fx["hf_loader_indices"].tolist()
    assert [norm.grid_thw] == [tuple(g) for g in fx["grid_thw"].tolist()]
    assert list(norm.patch_times) == fx["timestamps"].tolist()
    levels = LEVELS_ALLOWED.get(f"video:qwen3-vl:{case.name}", 1)
    _compare("norm", norm.pixel_values, fx, ONE_LEVEL["qwen3-vl"], levels)
    raw = preprocess(path, spec, spec.params, PixelFormat.UINT8)
    _compare("raw", raw.pixel_values, fx, 1.0, levels)


@pytest.mark.parametrize("family", ["qwen3-vl", "qwen2.5-vl"])
@pytest.mark.parametrize("case", hf_cases.IMAGE_CASES, ids=lambda c: c.name)
def test_image_matches_hf(case, family):
    fx = _load(f"image-{family}-{case.name}.npz")
    path = _committed(case, fx)
    spec = SPECS[family]
    norm = preprocess(path, spec, spec.params, PixelFormat.FLOAT32)
    assert [norm.grid_thw] == [tuple(g) for g in fx["grid_thw"].tolist()]
    levels = LEVELS_ALLOWED.get(f"image:{family}:{case.name}", 1)
    _compare("norm", norm.pixel_values, fx, ONE_LEVEL[family], levels)
    raw = preprocess(path, spec, spec.params, PixelFormat.UINT8)
    _compare("raw", raw.pixel_values, fx, 1.0, levels)


def test_fixtures_record_the_reference_versions():
    import json

    versions = json.loads((FIXTURES / "hf" / "versions.json").read_text())["versions"]
    major_minor = tuple(int(p) for p in versions["transformers"].split(".")[:2])
    assert major_minor >= (5, 24)
    assert "torch" in versions and "torchvision" in versions
