"""mmctl's sound token counts against transformers' own extractors and length rules,
called as vLLM 0.33 calls them (tests/fixtures/sound_tokens.json, written by
scripts/make_sound_fixtures.py in the reference environment)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmctl.models import sound

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GOLDEN = json.loads((FIXTURES / "sound_tokens.json").read_text())
GEMMA4_PROCESSOR = json.loads(
    (FIXTURES / "families" / "gemma4" / "processor_config.json").read_text()
)
CASES = [
    (version, model_type, case)
    for version, doc in GOLDEN["transformers"].items()
    for model_type, cases in doc["cases"].items()
    for case in cases
    if "error" not in case
]


def test_every_model_type_and_a_30_s_boundary_is_covered():
    types = {model_type for _, model_type, _ in CASES}
    assert types == set(sound.RULES)
    assert {480_000, 480_001} <= {case["samples"] for _, _, case in CASES}


@pytest.mark.parametrize(
    ("version", "model_type", "case"),
    CASES,
    ids=[f"{v}-{t}-{c['samples']}" for v, t, c in CASES],
)
def test_tokens_as_transformers_counts_them(version, model_type, case):
    processor = GEMMA4_PROCESSOR if model_type == "gemma4" else None
    laid = sound.sound_tokens(model_type, case["samples"], 16000, processor)
    assert laid is not None
    assert (laid.tokens, laid.run) == (case["tokens"], case["run"])
    if "frames" in case and model_type != "gemma4":
        truncate = model_type != "qwen3_omni_moe"
        assert sound.whisper_frames(case["samples"], truncate) == case["frames"]


def test_resampling_counts_as_torchaudio_does():
    # torchaudio's Resample (vLLM's default method): ceil(n * new / orig)
    assert sound.resampled(44100, 44100, 16000) == 16000
    assert sound.resampled(44101, 44100, 16000) == 16001
    assert sound.resampled(1, 48000, 16000) == 1
    assert sound.resampled(16000, 16000, 16000) == 16000


def test_a_model_type_mmctl_does_not_know_is_the_workers():
    assert sound.sound_tokens("phi4mm", 16000, 16000) is None
