"""The stub worker serving the LLaVA families, Llama 4, Gemma 4, InternVL, MiniMax-M3-VL
and Inkling: what mmctl sends is accepted and read back right (the colours answer
comes from the pixels), and what vLLM's model for the family would refuse is
refused with one sentence. The patch families, Nemotron and the CLI runs have
files of their own beside this one (test_family_stub_*.py: they run in parallel).

The stub proves the plumbing; tests/compat/test_family_requests.py proves the
tensors against the goldens and scripts/engine-check against a real engine.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import mmctl
from mmctl.media.probe import MediaKind
from mmctl.models.model import load_model
from mmctl.request import tensors
from mmctl.wire import proto
from tests.conftest import Stub, _stub
from tests.worker.family_stubs import FAMILIES, built, client_for, refused

MODEL_TYPES = (
    "llava",
    "llava_next",
    "llama4",
    "llava_onevision",
    "gemma4",
    "internvl",
    "minimax_m3_vl",
    "inkling",
)


@pytest.fixture(scope="module", params=MODEL_TYPES)
def served(request) -> Iterator[tuple[str, Stub]]:
    model = load_model(model_dir=FAMILIES / request.param)
    running = _stub(model)
    try:
        yield request.param, running
    finally:
        running.close()


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_two_images_come_back_as_their_colours(served, images, transport):
    model_type, stub = served
    with client_for(stub, model_type) as client:
        result = client.send(list(images), "Which colours?", transport=transport)
    assert result.answer == "red; blue"
    check = next(c for c in result.checks if c.name == "placeholder_spans")
    assert check.ran and check.ok


def test_the_float_types_all_read_back(served, images):
    model_type, stub = served
    with client_for(stub, model_type) as client:
        for dtype in ("float32", "bfloat16", "float16"):
            result = client.send([images[0]], "Colour?", pixel_dtype=dtype, skip_checks=True)
            assert result.answer == "red", dtype


def test_uint8_is_refused_before_sending(served, images):
    model_type, stub = served
    with client_for(stub, model_type) as client, pytest.raises(mmctl.MmctlError, match="uint8"):
        client.send([images[0]], "Colour?", pixel_dtype="uint8")


def test_a_pixel_tensor_of_the_wrong_shape_is_refused(served, images):
    model_type, stub = served
    req = built(stub, model_type, [images[0]])
    td = req.mm_inputs.pixel_values
    pixels = tensors.from_bytes(td.inline, td.shape, td.dtype)
    # a crop, not the model's tile size (Inkling's patches are channels last)
    cut = np.ascontiguousarray(pixels[:, :, :30] if model_type == "inkling" else pixels[..., :300])
    req.mm_inputs.pixel_values.CopyFrom(tensors.inline(cut, td.dtype))
    # vLLM's MiniMax-M3 model has no TensorSchema (its tower's patch rows are Qwen2-VL's):
    # the stub refuses as for those rows.
    want = {"minimax_m3_vl": "3*2*14*14 = 1176 features"}.get(model_type, "input schema")
    assert want in refused(stub, req)


def test_a_span_that_is_not_the_expansion_is_refused(served, images):
    model_type, stub = served
    req = built(stub, model_type, [images[0]])
    span = req.mm_inputs.mm_placeholders[0]
    ids = list(req.tokenized.input_ids)
    ids[span.offset + span.length // 2] = ids[0]  # one embedding position overwritten
    req.tokenized.input_ids[:] = ids
    assert "placeholder spans failed: item 1" in refused(stub, req)


def test_an_unknown_modality_is_refused_by_mmctl_reading_a_request(served, images, tmp_path):
    from mmctl.errors import InputError
    from mmctl.request.view import layout_of

    model_type, stub = served
    req = built(stub, model_type, [images[0]])
    req.mm_inputs.modality = proto.common_pb2.AUDIO
    with pytest.raises(InputError, match="modality AUDIO, which mmctl does not handle"):
        layout_of(req, load_model(model_dir=FAMILIES / model_type))


def test_video_is_refused_where_the_family_reads_images_only(served, red_blue):
    model_type, stub = served
    if MediaKind.VIDEO in load_model(model_dir=FAMILIES / model_type).spec.modalities:
        pytest.skip(f"{model_type} reads video (test_video_comes_back_as_its_colours)")
    with (
        client_for(stub, model_type) as client,
        pytest.raises(mmctl.MmctlError, match="read image"),
    ):
        client.send([red_blue], "Colours?")


def test_video_comes_back_as_its_colours(served, red_blue):
    model_type, stub = served
    if MediaKind.VIDEO not in load_model(model_dir=FAMILIES / model_type).spec.modalities:
        pytest.skip(f"{model_type} reads images only")
    with client_for(stub, model_type) as client:
        assert client.send([red_blue], "Colours?").answer == "red, blue"


def test_llama4_needs_im_token_id(images):
    model = load_model(model_dir=FAMILIES / "llama4")
    running = _stub(model)
    try:
        req = built(running, "llama4", [images[1]])
        assert req.mm_inputs.im_token_id == 200092  # <|patch|>
        req.mm_inputs.ClearField("im_token_id")
        assert "would receive embeddings" in refused(running, req)
    finally:
        running.close()


#: What ``vllm serve FOLDER`` (``--dtype auto``, a GPU with bfloat16) serves each fixture in:
#: its config.json's top-level ``torch_dtype``.
SERVED_DTYPE = {"llava": "float16", "llava_next": "float16", "llama4": "bfloat16",
                "llava_onevision": "float16", "gemma4": "bfloat16", "internvl": "bfloat16",
                # No dtype in its config.json: float32, which such a GPU serves in bfloat16.
                "minimax_m3_vl": "bfloat16",
                "inkling": "bfloat16"}  # fmt: skip


def test_the_stub_reports_the_folders_dtype_and_send_picks_it(served, images):
    model_type, stub = served
    with client_for(stub, model_type) as client:
        server = client.facts().server
        result = client.send([images[0]], "Colour?")
    assert (server.model_dtype, server.multimodal_encoder_dtype) == (SERVED_DTYPE[model_type],) * 2
    assert result.decisions["pixel_dtype"].value == SERVED_DTYPE[model_type]
    assert result.answer == "red"
