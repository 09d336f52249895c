"""mmctl's preprocessing against Hugging Face's, from golden fixtures.

Fixtures come from scripts/make_hf_fixtures.py (HF + torch, never run here),
made from the committed files in tests/fixtures/media/; this test runs mmctl
(without torch) on the same files and never encodes anything: encoders write
different bytes on different CPUs, decoders do not. Targets: identical grid,
indices and timestamps, and identical pixels — every entry, raw uint8 and
normalized float32 alike (mmctl applies torchvision's own int16 resize
weights, ``preprocessing/resize.py``). Large tensors are compared through
every row's sum and 4,096 sampled entries, both exactly.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.models.qwen_vl import qwen2_vl, qwen3_vl
from mmctl.models.qwen_vl.pipeline import preprocess

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
import hf_cases  # noqa: E402

MODULES = {"qwen3-vl": qwen3_vl, "qwen2.5-vl": qwen2_vl}


def _load(name: str) -> dict:
    with np.load(FIXTURES / "hf" / name) as data:
        return {k: data[k] for k in data.files}


def _compare(prefix: str, ours: np.ndarray, fx: dict) -> None:
    """Bit-identical to HF's tensor (whole, or every row sum and the sampled entries)."""
    assert list(ours.shape) == fx[f"{prefix}_shape"].tolist()
    if f"{prefix}_full" in fx:
        ours_flat, theirs_flat = ours.reshape(-1), fx[f"{prefix}_full"].reshape(-1)
    else:
        positions = fx[f"{prefix}_sample_pos"]
        ours_flat, theirs_flat = ours.reshape(-1)[positions], fx[f"{prefix}_sample_val"]
        row_sums = ours.astype(np.float64).sum(axis=1)
        assert np.array_equal(row_sums, fx[f"{prefix}_row_sums"]), f"{prefix}: row sums differ"
    diff = np.abs(ours_flat.astype(np.float64) - theirs_flat.astype(np.float64))
    assert diff.max() == 0, f"{prefix}: {np.count_nonzero(diff)} entries differ, max {diff.max()}"


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


def _with_budget(settings, key, value):
    """The published settings, with the budget a golden used instead (``None``: none)."""
    return settings if value is None else replace(settings, **{key: value})


@pytest.mark.parametrize("case", hf_cases.VIDEO_CASES, ids=lambda c: c.name)
def test_video_matches_hf(case):
    fx = _load(f"video-qwen3-vl-{case.name}.npz")
    path = _committed(case, fx)
    spec = qwen3_vl.VARIANT
    params = _with_budget(
        qwen3_vl.FAMILY.settings(),
        "video_max_pixels",
        case.budget("qwen3-vl", {"longest_edge": None})["longest_edge"],
    )
    if "error" in fx:
        with pytest.raises(InputError, match="at least 2 frames"):
            preprocess(path, spec, params)
        return
    norm = preprocess(path, spec, params, PixelFormat.FLOAT32)
    assert norm.source.total_frames == int(fx["total_frames"])
    assert norm.frame_indices.tolist() == fx["indices"].tolist()
    if "hf_loader_indices" in fx:
        assert norm.frame_indices.tolist() == fx["hf_loader_indices"].tolist()
    assert [norm.grid_thw] == [tuple(g) for g in fx["grid_thw"].tolist()]
    assert list(norm.patch_times) == fx["timestamps"].tolist()
    _compare("norm", norm.pixel_values, fx)
    raw = preprocess(path, spec, params, PixelFormat.UINT8)
    _compare("raw", raw.pixel_values, fx)


@pytest.fixture(scope="module")
def qwen25_model():
    from mmctl.models.model import load_model

    # The built-in tokenizer (the Qwen2.5-VL one is the same vocabulary), the
    # family's published settings: what HF resolves for a published folder.
    return load_model(family="qwen2.5-vl")


@pytest.mark.parametrize("case", hf_cases.VIDEO_CASES, ids=lambda c: c.name)
def test_qwen25_video_matches_hf(case, qwen25_model):
    """``Qwen2_5_VLProcessor`` goldens: pixels, grid, indices, second_per_grid_ts
    and the whole prompt's input_ids."""
    from mmctl.models.settings import VisionOverrides
    from mmctl.request.compose import compose

    fx = _load(f"video-qwen2.5-vl-{case.name}.npz")
    path = _committed(case, fx)
    model = qwen25_model.with_vision(VisionOverrides(max_pixels=int(fx["max_pixels"])))
    spec, params = qwen2_vl.VARIANT, model.params
    if "error" in fx:  # one frame: HF divides by zero sampling it, mmctl says why
        with pytest.raises(InputError, match="cannot sample 0 frames"):
            preprocess(path, spec, params)
        return
    norm = preprocess(path, spec, params, PixelFormat.FLOAT32)
    assert norm.source.total_frames == int(fx["total_frames"])
    assert norm.frame_indices.tolist() == fx["indices"].tolist()
    assert [norm.grid_thw] == [tuple(g) for g in fx["grid_thw"].tolist()]
    # float32 on the wire, as vLLM's field config declares it
    assert norm.video_tensors["second_per_grid_ts"].tolist() == (
        fx["second_per_grid_ts"].astype(np.float32).tolist()
    )
    _compare("norm", norm.pixel_values, fx)
    raw = preprocess(path, spec, params, PixelFormat.UINT8)
    _compare("raw", raw.pixel_values, fx)
    composed = compose([path], "Describe the clip.", model, pixel_format=PixelFormat.UINT8)
    assert composed.layout.ids.tolist() == fx["input_ids"].tolist()


@pytest.mark.parametrize("family", ["qwen3-vl", "qwen2.5-vl"])
@pytest.mark.parametrize("case", hf_cases.IMAGE_CASES, ids=lambda c: c.name)
def test_image_matches_hf(case, family):
    fx = _load(f"image-{family}-{case.name}.npz")
    path = _committed(case, fx)
    module = MODULES[family]
    spec = module.VARIANT
    params = _with_budget(
        module.FAMILY.settings(),
        "image_max_pixels",
        case.budget(family, {"longest_edge": None})["longest_edge"],
    )
    norm = preprocess(path, spec, params, PixelFormat.FLOAT32)
    assert [norm.grid_thw] == [tuple(g) for g in fx["grid_thw"].tolist()]
    _compare("norm", norm.pixel_values, fx)
    raw = preprocess(path, spec, params, PixelFormat.UINT8)
    _compare("raw", raw.pixel_values, fx)


def test_fixtures_record_the_reference_versions():
    import json

    versions = json.loads((FIXTURES / "hf" / "versions.json").read_text())["versions"]
    major_minor = tuple(int(p) for p in versions["transformers"].split(".")[:2])
    assert major_minor >= (5, 24)
    assert "torch" in versions and "torchvision" in versions
