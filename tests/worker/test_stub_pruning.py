"""A stub started like ``vllm serve --video-pruning-rate R``: it takes mmctl's
requests laid out for R and refuses a layout for another rate, naming the flag."""

from __future__ import annotations

import pytest

import mmctl
from mmctl.choices import PruningMethod
from mmctl.values.pruning import VideoPruning


@pytest.fixture
def pruning_stub(make_stub, builtin_model):
    return make_stub(builtin_model.with_pruning(VideoPruning(0.5)), device_normalize=True)


def _send(stub, media, rate: float, method=PruningMethod.EVS, **options):
    with mmctl.Client(stub.running.address, video_pruning=VideoPruning(rate, method)) as client:
        return client.send(media, "Which colours?", transport="inline", **options)


def test_a_request_laid_out_for_the_workers_rate_is_answered(pruning_stub, red_blue, no_leaks):
    assert _send(pruning_stub, red_blue, 0.5).answer == "red, blue"


@pytest.mark.parametrize(
    ("rate", "says"),
    [
        (0.0, "laid out for a worker that does not prune video; this one prunes at rate 0.5"),
        (0.25, "laid out for another --video-pruning-rate; this worker's is 0.5"),
    ],
)
def test_a_layout_for_another_rate_is_refused(pruning_stub, red_blue, rate, says):
    with pytest.raises(mmctl.WorkerRejected, match="mrope walk failed") as err:
        _send(pruning_stub, red_blue, rate)
    assert says in err.value.message
    laid = "pruning video at rate 0.25 (evs)" if rate else "a worker that does not prune video"
    assert laid in (err.value.hint or "") and "--video-pruning-rate" in (err.value.hint or "")


def test_a_pruned_layout_is_refused_by_a_worker_that_does_not_prune(stub, red_blue):
    with pytest.raises(mmctl.WorkerRejected) as err:
        _send(stub, red_blue, 0.5, pixel_dtype="float32")
    assert "this one does not: --video-pruning-rate 0" in err.value.message


def test_a_pruned_video_with_im_token_id_is_refused(pruning_stub, red_blue, builtin_model):
    """The servicer would then mark only the pads, while the model embeds the
    whole span (its times and markers too): vLLM fails on the count."""
    import grpc

    from mmctl.request.compose import compose

    pruned = builtin_model.with_pruning(VideoPruning(0.5))
    req = compose([red_blue], "?", pruned, pixel_format=mmctl.PixelFormat.UINT8).plan.to_proto()
    req.mm_inputs.im_token_id = builtin_model.token_ids.video_token_id
    with pytest.raises(grpc.RpcError) as err:
        pruning_stub.generate(req)
    assert "im_token_id is set" in err.value.details()
    assert "leave im_token_id unset" in err.value.details()
    del req.mm_inputs.model_specific_tensors["timestamps"]
    req.mm_inputs.ClearField("im_token_id")
    with pytest.raises(grpc.RpcError) as err:
        pruning_stub.generate(req)
    assert "carries no timestamps" in err.value.details()
