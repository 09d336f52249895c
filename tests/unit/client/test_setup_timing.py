"""The set-up's timing rows name what took the time (issue 44).

Gemma 4, Llama 4, InternVL and GLM read special ids their config does not
carry from the tokenizer, so it loads while the model files are read; its
seconds were booked as "model files" (0.4-13.8 s) and "tokenizer load" showed
0.1 ms. A clock that moves only while a tokenizer loads says where they go.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mmctl.checkpoint.source import resolve
from mmctl.client.channel import Target
from mmctl.client.session import Session
from mmctl.prompt.tokenizer import Tokenizer
from mmctl.timing import Timeline

FAMILIES = Path(__file__).resolve().parents[2] / "fixtures" / "families"
LOAD_S = 10.0


@pytest.fixture
def clock(monkeypatch):
    """``time.perf_counter`` that advances by LOAD_S per tokenizer load, else not at all."""
    now = [1000.0]
    real_load = Tokenizer.load.__func__

    def load(cls, source):
        now[0] += LOAD_S
        return real_load(cls, source)

    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(Tokenizer, "load", classmethod(load))
    return now


@pytest.mark.parametrize("folder", ["gemma4", "llama4", "internvl", "glm4v", "qwen3_5"])
def test_the_tokenizer_load_is_its_own_row(clock, folder):
    timeline = Timeline()
    facts = SimpleNamespace(model=SimpleNamespace(served_model_name="m"))
    session = Session.open(
        Target("127.0.0.1:1"), None, facts, source=resolve(FAMILIES / folder), timeline=timeline
    )
    rows = timeline.rows()
    assert rows["model_files_s"] == 0.0, rows
    assert rows["tokenizer_s"] == LOAD_S, rows
    assert rows["total_s"] == LOAD_S
    assert session.model.tokenizer is not None  # loaded once, in the set-up


def test_rebook_keeps_the_sum():
    timeline = Timeline()
    timeline.phases = {"a": 2.0}
    timeline.rebook(5.0, "a", "b")  # never more than the phase held
    assert timeline.phases == {"a": 0.0, "b": 2.0}
