"""The stub worker serving Nemotron-3-Nano-Omni: video client-side, images the worker's
(split from test_family_stub.py so that its parts run in parallel)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from mmctl.request import tensors
from mmctl.wire import proto
from tests.conftest import Stub
from tests.worker.family_stubs import batch_answers, built, client_for, refused, run_mmctl, served


@pytest.fixture(scope="module")
def nemotron() -> Iterator[Stub]:
    yield from served("nemotron_h_omni")


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_nemotron_video_comes_back_as_its_colours(nemotron, red_blue, transport):
    with client_for(nemotron, "nemotron_h_omni") as client:
        result = client.send([red_blue], "Colours?", transport=transport)
    assert result.decisions["processing"].value == "client"
    # One colour per tubelet (two frames each): 32 frames of 2 s red then 2 s blue.
    colours = result.answer.split(", ")
    assert colours[0] == "red" and colours[-1] == "blue" and set(colours) == {"red", "blue"}
    req = built(nemotron, "nemotron_h_omni", [red_blue])
    video = req.mm_inputs
    assert video.encoder_input_key == "pixel_values_flat_video"
    assert not video.HasField("im_token_id")  # the model embeds every position of the span
    assert dict(video.flat_keys) == {
        "pixel_values_flat_video": "video_num_patches",
        "frames_indices": "video_num_patches",
    }


def test_nemotron_a_request_with_an_image_is_the_workers(nemotron, images):
    """The stub's own processing of Nemotron media stands in for vLLM's for images
    (its ``img_context_token_id``); ``<video>`` is no token, so a video reference is
    not modelled there."""
    from mmctl.models.nemotron_h_omni import IMAGES_BY_WORKER

    with client_for(nemotron, "nemotron_h_omni") as client:
        result = client.send([images[0]], "Colours?")
    decision = result.decisions["processing"]
    assert decision.value == "worker" and IMAGES_BY_WORKER in decision.reason


def test_nemotron_a_preprocessed_image_batch_is_refused(nemotron, red_blue):
    req = built(nemotron, "nemotron_h_omni", [red_blue])
    req.mm_inputs.modality = proto.common_pb2.IMAGE
    assert "is a preprocessed image batch" in refused(nemotron, req)


def test_nemotron_what_its_model_would_refuse_is_refused(nemotron, red_blue):
    req = built(nemotron, "nemotron_h_omni", [red_blue])
    marked = type(req)()
    marked.CopyFrom(req)
    marked.mm_inputs.im_token_id = 18  # <image>: only those positions would take embeddings
    assert "leave im_token_id unset" in refused(nemotron, marked)
    unnamed = type(req)()
    unnamed.CopyFrom(req)
    unnamed.mm_inputs.ClearField("encoder_input_key")  # registered as pixel_values_videos
    assert "no pixel_values" in refused(nemotron, unnamed)
    short = type(req)()
    short.CopyFrom(req)
    td = short.mm_inputs.model_specific_tensors["frames_indices"]
    indices = tensors.from_bytes(td.inline, td.shape, td.dtype)
    td.CopyFrom(tensors.inline(indices[:-1].copy(), "int64"))
    assert "frames_indices" in refused(nemotron, short)


def test_nemotron_batch_and_bench(nemotron, tmp_path, images, red_blue):
    """``batch``: a video line preprocessed here, an image line sent to the worker whole
    (the same rule as sound's). ``bench``: a video run preprocessed here, an image run the
    worker's (the stub's own processing has no ``<video>`` token to model the worker's
    video; a real worker has)."""
    lines = [
        {"id": "video", "media": [str(red_blue)], "prompt": "Colour?"},
        {"id": "image", "media": [str(images[0])], "prompt": "Colour?"},
    ]
    target = nemotron.running.address
    _, answers = batch_answers(tmp_path, target, lines)
    video = answers["video"].split(", ")
    assert video[0] == "red" and video[-1] == "blue"
    assert answers["image"]
    for n, line in enumerate(lines):
        one = tmp_path / f"bench-{n}.jsonl"
        one.write_text(json.dumps(line) + "\n")
        bench = run_mmctl("bench", "--dataset", str(one), "--target", target, "--json",
                       "--num-prompts", "2")  # fmt: skip
        assert bench.returncode == 0, bench.stderr
        doc = json.loads(bench.stdout)
        assert doc
