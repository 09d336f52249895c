"""scripts/engine-check's torch-free parts: the comparison, the negative control,
the engine flags and the family table (the engine itself runs in CI's engine step)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "scripts" / "engine"


def _load(name: str) -> Any:
    # By path, under a name of its own: a plain "check" or "worker" would be
    # whatever module of that name the test session imported first.
    spec = importlib.util.spec_from_file_location(f"mmctl_engine_{name}", ENGINE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def engine_check() -> Iterator[Any]:
    sys.path.insert(0, str(ENGINE))  # check.py imports its siblings
    try:
        yield _load("check")
    finally:
        sys.path.remove(str(ENGINE))


def _outcome(check: Any, **changes: Any) -> Any:
    doc = {
        "output_ids": [5, 6, 7],
        "output_logprobs": [-0.5, -0.25, -1.0],
        "output_top": [[[5, -0.5], [9, -1.5]], [[6, -0.25], [1, -2.0]], [[7, -1.0], [2, -1.1]]],
        "prompt_ids": [10, 11, 12],
        "prompt_logprobs": [None, -3.0, -4.0],
        "prompt_top": [[], [[11, -3.0]], [[3, -2.0], [12, -4.0]]],
    }
    doc.update(changes)
    return check.Outcome.from_doc(doc)


def test_identical_outcomes_have_no_difference(engine_check: Any) -> None:
    assert engine_check.first_difference(_outcome(engine_check), _outcome(engine_check)) is None


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"prompt_ids": [10, 11]}, "prompt length 3 vs 2"),
        ({"prompt_ids": [10, 99, 12]}, "prompt token 1: 11 vs 99"),
        ({"prompt_logprobs": [None, -3.0, -4.0000005]}, "prompt logprob at position 2"),
        ({"prompt_top": [[], [[11, -3.0]], [[12, -4.0], [3, -2.0]]]}, "prompt top-5 at position 2"),
        ({"output_ids": [5, 8, 7]}, "output token 1: [6] vs [8]"),
        ({"output_logprobs": [-0.5, -0.25, -1.5]}, "output logprob 2"),
        (
            {"output_top": [[[5, -0.5], [9, -1.5]], [[6, -0.25], [1, -2.5]], [[7, -1.0]]]},
            "output top-5 at step 1",
        ),
    ],
)
def test_the_first_difference_is_named(
    engine_check: Any, changes: dict[str, Any], where: str
) -> None:
    found = engine_check.first_difference(_outcome(engine_check), _outcome(engine_check, **changes))
    assert found is not None and found.startswith(where), found


def test_missing_logprobs_never_count_as_identical(engine_check: Any) -> None:
    empty = {"output_top": [], "output_logprobs": []}
    found = engine_check.first_difference(
        _outcome(engine_check, **empty), _outcome(engine_check, **empty)
    )
    assert found is not None
    assert engine_check.first_difference(
        _outcome(engine_check, prompt_ids=[], prompt_logprobs=[], prompt_top=[]),
        _outcome(engine_check, prompt_ids=[], prompt_logprobs=[], prompt_top=[]),
    )


def test_the_reversed_control_reverses_temporal_patches(engine_check: Any) -> None:
    from mmctl.wire import proto

    engine, common = proto.engine_pb2, proto.common_pb2
    t, rows_per_t, width = 3, 4, 6  # float32 rows of 6 values
    pixels = np.arange(t * rows_per_t * width, dtype=np.float32).reshape(t * rows_per_t, width)
    req = engine.GenerateRequest(
        mm_inputs=engine.MultimodalInputs(
            modality=common.VIDEO,
            pixel_values=engine.TensorData(
                shape=list(pixels.shape), dtype="float32", inline=pixels.tobytes()
            ),
            model_specific_tensors={
                "video_grid_thw": engine.TensorData(
                    shape=[1, 3],
                    dtype="int64",
                    inline=np.array([[t, 2, 2]], dtype=np.int64).tobytes(),
                )
            },
        )
    )
    engine_check._reverse_video(req)
    got = np.frombuffer(req.mm_inputs.pixel_values.inline, dtype=np.float32).reshape(pixels.shape)
    want = pixels.reshape(t, rows_per_t, width)[::-1].reshape(pixels.shape)
    assert np.array_equal(got, want)
    assert not np.array_equal(got, pixels)


def test_fresh_hashes_change_every_item_and_every_time(engine_check: Any) -> None:
    from mmctl.wire import proto

    engine = proto.engine_pb2
    req = engine.GenerateRequest(
        mm_inputs=engine.MultimodalInputs(mm_hashes=["a" * 64]),
        extra_mm_inputs=[engine.MultimodalInputs(mm_hashes=["b" * 64, "c" * 64])],
    )
    engine_check._fresh_hashes(req)
    first = [*req.mm_inputs.mm_hashes, *req.extra_mm_inputs[0].mm_hashes]
    engine_check._fresh_hashes(req)
    second = [*req.mm_inputs.mm_hashes, *req.extra_mm_inputs[0].mm_hashes]
    assert len(set(first + second)) == 6
    assert all(len(h) == 64 for h in first + second)


def test_engine_flags(engine_check: Any) -> None:
    worker = _load("vllm_worker")
    settings = worker.engine_settings(Path("/m"), "bfloat16", False)
    args = worker.engine_args(settings)
    assert args[:4] == ["--model", "/m", "--dtype", "bfloat16"]
    assert "--enforce-eager" in args and "--no-mm-device-do-normalize" in args
    assert "--no-enable-prefix-caching" in args
    limits = args[args.index("--limit-mm-per-prompt") + 1]
    assert limits.startswith('{"image": {"count": 2')
    on = worker.engine_args(worker.engine_settings(Path("/m"), "float32", True))
    assert "--mm-device-do-normalize" in on


def test_the_family_table_covers_the_issue(engine_check: Any) -> None:
    from mmctl.media.probe import MediaKind, check_media
    from mmctl.models import registry

    families = _load("families").FAMILIES
    assert set(families) >= {"qwen3-vl", "qwen2.5-vl"}
    identical = 0
    for family in families.values():
        registry.by_name(family.name)  # a family mmctl knows
        assert family.config["architectures"] == [family.hf_class]
        assert family.config["text_config"].get("head_dim", 32) >= 32  # vLLM CPU attention
        kinds = set()
        for case in family.cases:
            for path in case.media:
                kinds.add(check_media(ROOT / path))
            if not case.reverse:
                identical += len(case.transports) * len(family.workers)
                assert set(case.transports) == {"inline", "shm"}
        assert kinds == {MediaKind.IMAGE, MediaKind.VIDEO}
        assert any(c.reverse for c in family.cases), "each family needs a negative control"
        assert {w.device_normalize for w in family.workers} == {True, False}
        assert set(family.offline_cases) <= {c.name for c in family.cases}
    assert any(f.offline_cases for f in families.values())
    dtypes = {w.model_dtype for f in families.values() for w in f.workers}
    assert dtypes == {"float32", "bfloat16"}
    assert identical >= 8
