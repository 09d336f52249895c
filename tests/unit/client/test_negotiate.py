"""Every branch of the worker negotiation, from fake worker facts (no server)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mmctl.client.negotiate import choose_pixels, processing_schemes, transport
from mmctl.client.placement import ShmPlacer
from mmctl.client.probe import Capabilities, WorkerFacts
from mmctl.errors import CheckFailed
from mmctl.transport.shm import ShmUnavailable

HERE = "boot-1:42"


def facts(**server) -> WorkerFacts:
    fields = dict(
        model_dtype="",
        mm_item_limits="",
        mm_device_do_normalize=False,
        shm_namespace_id="",
        mm_media_ref_schemes="",
    )
    fields.update(server)
    return WorkerFacts(SimpleNamespace(**fields), SimpleNamespace(), Capabilities(False))


MODERN = dict(model_dtype="bfloat16", mm_item_limits="image=8,video=2")


@pytest.mark.parametrize(
    ("worker", "requested", "skip", "value", "reason"),
    [
        (None, None, False, "float32", "no worker facts"),
        (facts(), None, False, "float32", "does not advertise its capabilities"),
        (facts(**MODERN), None, False, "bfloat16", "model dtype bfloat16"),
        (facts(**{**MODERN, "model_dtype": "torch.float16"}), None, False, "float16", "float16"),
        (facts(**{**MODERN, "model_dtype": "float32"}), None, False, "float32", "float32"),
        (
            facts(**{**MODERN, "mm_device_do_normalize": True}),
            None,
            False,
            "uint8",
            "on the device",
        ),
        (facts(**MODERN), "float16", True, "float16", "--pixel-dtype"),  # double rounding, forced
        (facts(), "float32", False, "float32", "--pixel-dtype"),
        (facts(), "bfloat16", True, "bfloat16", "--pixel-dtype"),  # skip-checks lets it through
        (
            facts(**{**MODERN, "mm_device_do_normalize": True}),
            "float32",
            True,
            "float32",
            "--pixel",
        ),
    ],
    ids=[
        "offline",
        "legacy",
        "bf16-model",
        "fp16-model",
        "fp32-model",
        "device-normalize",
        "asked-fp16-skip",
        "legacy-asked-fp32",
        "legacy-asked-bf16-skip",
        "normalize-asked-fp32-skip",
    ],
)
def test_pixel_dtype(worker, requested, skip, value, reason):
    choice = choose_pixels(worker, requested, skip_checks=skip)
    decision = choice.decision
    assert choice.format.value == decision.value == value and reason in decision.reason


@pytest.mark.parametrize(
    ("worker", "requested", "message"),
    [
        (facts(**{**MODERN, "mm_device_do_normalize": True}), "float32", "normalize these floats"),
        (facts(**MODERN), "uint8", "does not normalize on the device"),
        (facts(), "bfloat16", "does not advertise the newer dtypes"),
        (facts(), "float16", "does not advertise the newer dtypes"),
        (facts(**MODERN), "float16", "rounded twice \\(float16, then bfloat16\\)"),
        (facts(**{**MODERN, "model_dtype": "torch.float16"}), "bfloat16", "rounded twice"),
    ],
    ids=[
        "floats-to-normalizer",
        "uint8-to-plain",
        "bf16-to-legacy",
        "fp16-to-legacy",
        "fp16-to-bf16-model",
        "bf16-to-fp16-model",
    ],
)
def test_pixel_dtype_refusals(worker, requested, message):
    with pytest.raises(CheckFailed, match=message):
        choose_pixels(worker, requested)


@pytest.mark.parametrize("requested", ["bfloat16", "float16"])
def test_half_pixels_for_a_float32_model_are_sent_with_a_warning(requested):
    decision = choose_pixels(facts(**{**MODERN, "model_dtype": "float32"}), requested).decision
    assert decision.value == requested
    assert decision.warning and "lose precision" in decision.warning
    assert decision.as_dict()["warning"] == decision.warning


@pytest.mark.parametrize("requested", [None, "bfloat16", "float32"])
def test_no_warning_where_nothing_is_lost(requested):
    decision = choose_pixels(facts(**MODERN), requested).decision
    assert decision.warning is None and "warning" not in decision.as_dict()


@pytest.mark.parametrize(
    ("mode", "worker", "problem", "value", "reason"),
    [
        ("inline", facts(shm_namespace_id=HERE), None, "inline", "--transport inline"),
        ("shm", facts(), "/dev/shm does not exist", "shm", "--transport shm"),
        ("auto", facts(shm_namespace_id=HERE), None, "shm", "shm_namespace_id matches"),
        ("auto", facts(shm_namespace_id="boot-2:7"), None, "inline", "different /dev/shm"),
        ("auto", facts(), None, "inline", "does not report shm_namespace_id"),
        ("auto", facts(shm_namespace_id=HERE), "/dev/shm is not writable", "inline", "writable"),
        ("auto", None, None, "inline", "does not report"),
    ],
    ids=["inline", "shm", "same-host", "other-host", "no-namespace", "unwritable", "no-facts"],
)
def test_transport(mode, worker, problem, value, reason):
    decision = transport(mode, worker, HERE, problem)
    assert decision.value == value and reason in decision.reason


def test_processing_schemes():
    assert processing_schemes(facts(mm_media_ref_schemes="data, file,")) == ["data", "file"]
    assert processing_schemes(facts()) == []


class _FillingArena:
    """An arena whose /dev/shm fills up after ``room`` tensors."""

    def __init__(self, room: int) -> None:
        self.room, self.put_count = room, 0

    def put(self, data):
        if self.put_count >= self.room:
            raise ShmUnavailable("cannot allocate 4096 bytes in /dev/shm: full")
        self.put_count += 1
        return SimpleNamespace(name=f"mmctl-1-{self.put_count}-00", nbytes=data.nbytes)


@pytest.mark.parametrize(("fallback", "expect"), [(True, "partial"), (False, "refused")])
def test_shm_filling_up_mid_request(fallback, expect):
    moved = {"shm": 0, "inline": 0}
    placer = ShmPlacer(_FillingArena(room=1), 1024, None, moved, fallback=fallback)
    tensor = np.zeros((4, 1024), dtype=np.uint8)
    first = placer("pixel_values", tensor, "uint8")
    assert first.WhichOneof("payload") == "shm" and moved["shm"] == tensor.nbytes
    if expect == "refused":  # --transport shm: a full /dev/shm fails the request
        with pytest.raises(ShmUnavailable):
            placer("second", tensor, "uint8")
        return
    second = placer("second", tensor, "uint8")  # auto: the rest travels inline
    assert second is None and placer.problems  # None: inline, as the builder does it
    small = placer("grid", np.zeros(3, dtype=np.int64), "int64")
    assert small is None  # under the threshold: always inline
