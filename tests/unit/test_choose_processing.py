"""Who preprocesses: :func:`mmctl.client.negotiate.choose_processing`, one place for every command."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from mmctl.choices import MediaRef, Processing
from mmctl.client.negotiate import choose_processing
from mmctl.errors import CheckFailed, InputError, UnknownFamily, UsageError
from mmctl.models.registry import for_config


def facts(processor: str = "vllm", schemes: str = "http,https,data") -> Any:
    return SimpleNamespace(
        server=SimpleNamespace(mm_processor=processor, mm_media_ref_schemes=schemes)
    )


def unknown() -> UnknownFamily:
    with pytest.raises(UnknownFamily) as err:
        for_config({"model_type": "some_new_vlm", "architectures": ["SomeNewVlm"]})
    return err.value


def test_auto_keeps_a_known_family_client_side():
    choice = choose_processing(facts(), Processing.AUTO, MediaRef.DATA, None, "llava")
    assert not choice.worker and choice.note is None
    assert choice.decision.reason == "auto: mmctl preprocesses llava"


def test_auto_hands_an_unknown_model_to_a_worker_that_processes():
    choice = choose_processing(facts(), Processing.AUTO, MediaRef.DATA, unknown(), "some_new_vlm")
    assert choice.worker
    assert choice.note is not None and "model_type 'some_new_vlm'" in choice.note
    assert "data: URLs" in choice.note and "vllm" in choice.note


@pytest.mark.parametrize(
    ("worker", "why"),
    [
        (facts(processor=""), "mm_processor is empty"),
        (facts(schemes="http,https"), "accepts http, https URL schemes, not data:"),
    ],
)
def test_auto_names_both_facts_when_neither_side_can(worker, why):
    with pytest.raises(InputError) as err:
        choose_processing(worker, Processing.AUTO, MediaRef.DATA, unknown(), "some_new_vlm")
    assert type(err.value) is InputError and err.value.exit_code == 3
    assert "which no mmctl model family handles, and the worker" in err.value.message
    assert why in err.value.message and "\n" not in err.value.message


def test_client_forced_on_an_unknown_model_is_the_family_refusal():
    why = unknown()
    with pytest.raises(UnknownFamily) as err:
        choose_processing(facts(), Processing.CLIENT, MediaRef.DATA, why, "some_new_vlm")
    assert err.value is why and "--processing worker" in (why.hint or "")


def test_worker_forced_needs_the_workers_processor_whatever_the_family():
    choice = choose_processing(facts(), Processing.WORKER, MediaRef.DATA, None, "llava")
    assert choice.worker and choice.note is None
    with pytest.raises(CheckFailed, match="mm_processor is empty"):
        choose_processing(facts(processor=""), Processing.WORKER, MediaRef.DATA, None, "llava")
    with pytest.raises(CheckFailed, match="not file:"):
        choose_processing(facts(), Processing.WORKER, MediaRef.FILE, unknown(), "x")


def test_a_kind_the_family_leaves_to_the_worker_sends_the_request_whole():
    """Nemotron's images (``Family.worker_kinds``): ``auto`` hands the request to the
    worker with the reason, ``--processing client`` is refused with it, and a worker that
    does not process media cannot take it."""
    from mmctl.models.nemotron_h_omni import IMAGES_BY_WORKER

    args = (MediaRef.DATA, None, "nemotron-omni", False, IMAGES_BY_WORKER)
    choice = choose_processing(facts(), Processing.AUTO, *args)
    assert choice.worker and IMAGES_BY_WORKER in choice.decision.reason
    assert choice.note is not None and choice.note.startswith("nemotron-omni: the worker")
    with pytest.raises(UsageError, match=r"--processing client: vLLM 0\.33's Nemotron"):
        choose_processing(facts(), Processing.CLIENT, *args)
    with pytest.raises(CheckFailed, match="cannot take these media"):
        choose_processing(facts(processor=""), Processing.AUTO, *args)
    # Video alone: mmctl preprocesses it.
    alone = choose_processing(facts(), Processing.AUTO, MediaRef.DATA, None, "nemotron-omni")
    assert not alone.worker
