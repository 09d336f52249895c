"""The stub accepts what the real worker accepts (smg-grpc-servicer 0.14.1's
``_build_preprocessed_mm_inputs`` in front of vLLM), not only mmctl's own
naming: each case below is a request some other client sends, or may send,
that the servicer and the model take. The refusals at the end are the ones
the servicer or vLLM would fail on too. ``--record`` keeps what arrived."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import grpc
import numpy as np
import pytest

import mmctl
from mmctl.choices import PixelFormat
from mmctl.media import synth
from mmctl.request import tensors
from mmctl.request.compose import compose
from mmctl.request.view import read_request
from mmctl.transport.shm import ShmArena
from mmctl.wire import proto

from .conftest import shm_placer


def _answer(stub, req, model) -> str:
    tokens, _ = stub.generate(req)
    return model.tokenizer.decode(tokens, skip_special_tokens=True)


def _rename_sizes(req, new: str, batched: bool = True) -> None:
    """The flat sizes tensor under another name (the servicer splits by
    whichever tensor ``flat_keys`` names)."""
    mm = req.mm_inputs
    td = mm.model_specific_tensors.pop("patches_per_video")
    mm.model_specific_tensors[new].CopyFrom(td)
    mm.flat_keys["pixel_values"] = new
    kept = [k for k in mm.batched_keys if k != "patches_per_video"]
    del mm.batched_keys[:]
    mm.batched_keys.extend(kept + ([new] if batched else []))


def _gateway_lists(req) -> None:
    """What the smg gateway 1.13.0 sends: both grids kept on the CPU, and a
    per-video tensor the model does not read."""
    mm = req.mm_inputs
    mm.keep_on_cpu_keys.append("image_grid_thw")
    mm.model_specific_tensors["video_second_per_grid"].CopyFrom(
        tensors.inline(np.ones(1, np.float32), "float32")
    )
    mm.batched_keys.append("video_second_per_grid")


def _no_cpu_keys(req) -> None:
    del req.mm_inputs.keep_on_cpu_keys[:]  # a device copy more; vLLM reads the grid either way


def _names_without_tensors(req) -> None:
    req.mm_inputs.batched_keys.append("second_per_grid_ts")
    req.mm_inputs.flat_keys["pixel_values_images"] = "patches_per_image"


def _renamed_key_in_flat_keys(req) -> None:
    # The servicer renames both sides of flat_keys before looking tensors up.
    mm = req.mm_inputs
    mm.flat_keys["pixel_values_videos"] = mm.flat_keys.pop("pixel_values")


def _explicit_encoder_key(req) -> None:
    req.mm_inputs.encoder_input_key = "pixel_values"


def _tensorless_extra_batch(req) -> None:
    # Hashes alone (a PD decode side's identity): not media for this worker.
    req.extra_mm_inputs.add(mm_hashes=["f" * 64], modality=proto.common_pb2.IMAGE)


ACCEPTED_VIDEO = [
    ("gateway-key-lists", _gateway_lists),
    ("sizes-named-otherwise", lambda req: _rename_sizes(req, "video_rows")),
    ("sizes-not-batched", lambda req: _rename_sizes(req, "rows", batched=False)),
    ("no-keep-on-cpu", _no_cpu_keys),
    ("key-lists-name-absent-tensors", _names_without_tensors),
    ("flat-keys-name-the-renamed-pixels", _renamed_key_in_flat_keys),
    ("explicit-encoder-input-key", _explicit_encoder_key),
    ("tensorless-extra-batch", _tensorless_extra_batch),
]


@pytest.mark.parametrize("name,mutate", ACCEPTED_VIDEO, ids=[c[0] for c in ACCEPTED_VIDEO])
def test_video_requests_the_servicer_takes_are_accepted(
    stub, video_request, builtin_model, name, mutate
):
    req, _ = video_request()
    mutate(req)
    assert _answer(stub, req, builtin_model) == "red, blue"


@pytest.fixture(scope="module")
def red_picture(media_dir):
    return synth.write_image(media_dir / "red.png", synth.color_frame((230, 25, 25), 64, 96))


@pytest.fixture
def image_request(red_picture, builtin_model):
    def build(*paths):
        composed = compose(list(paths) or [red_picture], "Which colour?", builtin_model)
        return composed.plan.to_proto()

    return build


def _modality(value):
    def fn(req):
        req.mm_inputs.modality = value

    return fn


def _no_im_token_id(req):
    req.mm_inputs.ClearField("im_token_id")


ACCEPTED_IMAGE = [
    # modality_name(): everything but VIDEO is an image batch.
    ("unspecified", _modality(0)),
    ("audio", _modality(2)),
    ("unknown-value", _modality(7)),
    # No im_token_id: the whole span is embedding positions, right for an image.
    ("no-im-token-id", _no_im_token_id),
]


@pytest.mark.parametrize("name,mutate", ACCEPTED_IMAGE, ids=[c[0] for c in ACCEPTED_IMAGE])
def test_image_requests_the_servicer_takes_are_accepted(
    stub, image_request, builtin_model, name, mutate
):
    req = image_request()
    mutate(req)
    assert _answer(stub, req, builtin_model) == "red"


def test_a_batch_without_tensors_is_text(stub, image_request, builtin_model):
    """The servicer reads it through the tokenized path: no media."""
    req = image_request()
    mm = req.mm_inputs
    mm.ClearField("pixel_values")
    mm.ClearField("model_specific_tensors")
    assert _answer(stub, req, builtin_model) == "no media received"


def test_text_input_is_accepted_and_its_batches_not_read(stub, video_request, builtin_model):
    """The servicer hands ``text`` to the engine as the prompt (no media)."""
    req, _ = video_request()
    req.text = "Which colours?"  # replaces tokenized (one oneof)
    assert _answer(stub, req, builtin_model) == "no media received"
    req.text = ""
    assert "the prompt is empty" in _refused(stub, req)
    req.ClearField("text")
    assert "carries no input" in _refused(stub, req)


def _refused(stub, req) -> str:
    with pytest.raises(grpc.RpcError) as err:
        stub.generate(req)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return str(err.value.details())


def test_an_item_without_a_content_hash_is_refused(stub, video_request):
    req, _ = video_request()
    del req.mm_inputs.mm_hashes[:]
    assert "0 mm_hashes for 1 placeholders" in _refused(stub, req)


def test_more_hashes_than_items_are_accepted(stub, video_request, builtin_model):
    req, _ = video_request()
    req.mm_inputs.mm_hashes.append("0" * 64)  # vLLM reads one per item
    assert _answer(stub, req, builtin_model) == "red, blue"


def test_no_im_token_id_on_video_is_refused(stub, video_request):
    # The span holds timestamps and markers: all of it would receive embeddings.
    req, _ = video_request()
    _no_im_token_id(req)
    assert "im_token_id is unset, so all 80 tokens" in _refused(stub, req)


def test_an_encoder_input_key_the_model_does_not_take_is_refused(stub, video_request):
    req, _ = video_request()
    req.mm_inputs.encoder_input_key = "patches"
    assert "encoder_input_key 'patches'" in _refused(stub, req)


def test_a_pixel_less_batch_is_refused(stub, video_request):
    req, _ = video_request()
    req.mm_inputs.ClearField("pixel_values")
    assert "no pixel_values (a pixel-less leg needs remote KV" in _refused(stub, req)


def test_sizes_that_split_items_wrongly_are_refused(stub, image_request, media_dir):
    small = synth.write_image(media_dir / "small.png", synth.color_frame((25, 40, 230), 32, 32))
    req = image_request(small, media_dir / "red.png")
    sizes = req.mm_inputs.model_specific_tensors["patches_per_image"]
    rows = tensors.from_bytes(sizes.inline, sizes.shape, sizes.dtype)
    assert rows[0] != rows[1]
    sizes.CopyFrom(tensors.inline(rows[::-1].copy(), "int64"))  # right sum, wrong split
    assert f"need t*h*w = {rows.tolist()} rows each" in _refused(stub, req)


def test_sizes_of_another_item_count_are_refused(stub, video_request):
    req, _ = video_request()
    _rename_sizes(req, "rows", batched=False)
    req.mm_inputs.model_specific_tensors["rows"].CopyFrom(
        tensors.inline(np.asarray([96, 96], np.int64), "int64")
    )
    assert "do not split its 192 rows into 1 item(s)" in _refused(stub, req)


# ---- --record ---------------------------------------------------------------


def test_record_writes_accepted_requests_with_shm_tensors_inline(
    make_stub, video_request, tmp_path, no_leaks
):
    recording = make_stub(record_dir=tmp_path)
    req, composed = video_request(PixelFormat.BFLOAT16)
    inline = video_request(PixelFormat.BFLOAT16)[0]
    with ShmArena() as arena:
        req = composed.plan.to_proto(shm_placer(arena))
        req.request_id = "one/of ours"
        recording.generate(req)
    bad, _ = video_request()
    bad.mm_inputs.encoder_input_key = "patches"
    with pytest.raises(grpc.RpcError):
        recording.generate(bad)  # refused: not recorded
    [path] = sorted(tmp_path.iterdir())
    assert path.name == "000001-one_of_ours.pb"
    got = read_request(path)
    assert got.mm_inputs.pixel_values.WhichOneof("payload") == "inline"
    assert got.mm_inputs.pixel_values.inline == inline.mm_inputs.pixel_values.inline
    for key, td in inline.mm_inputs.model_specific_tensors.items():
        assert got.mm_inputs.model_specific_tensors[key].inline == td.inline
    assert list(got.tokenized.input_ids) == list(inline.tokenized.input_ids)


def test_record_from_the_command_line(red_blue, tmp_path, cli, no_leaks):
    folder = tmp_path / "made" / "here"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "stub-worker", "--port", "0", "--json", "--record", folder],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        address = json.loads(proc.stdout.readline())["address"]
        with mmctl.Client(address) as client:
            sent = client.send(red_blue, transport="shm", request_id="cli")
        assert sent.answer == "red, blue"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    [path] = folder.iterdir()
    got = read_request(path)
    assert path.name == "000001-cli.pb"
    assert got.mm_inputs.pixel_values.WhichOneof("payload") == "inline"
    (tmp_path / "file").write_text("")
    r = cli("stub-worker", "--port", "0", "--record", tmp_path / "file" / "sub")
    assert r.code == 2 and r.err.startswith("Error: --record ") and "Not a directory" in r.err


def _refs_request(builtin_model, refs):
    engine = proto.engine_pb2
    text = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hi<|im_end|>\n"
    ids = builtin_model.tokenizer.encode(text)
    return engine.GenerateRequest(
        request_id="refs",
        tokenized=engine.TokenizedInput(original_text=text, input_ids=ids),
        media_refs=engine.MediaRefs(items=refs),
    )


def test_media_refs_name_their_modality_as_the_servicer_requires(stub, builtin_model):
    # parse_media_refs refuses UNSPECIFIED, and a MediaRefs with no items.
    url = "data:image/png;base64,AAAA"
    ref = proto.engine_pb2.MediaRef(modality=proto.common_pb2.MODALITY_UNSPECIFIED, url=url)
    req = _refs_request(builtin_model, [ref])
    assert "media_refs[0]: unsupported modality MODALITY_UNSPECIFIED" in _refused(stub, req)
    req = _refs_request(builtin_model, [])
    req.media_refs.SetInParent()
    assert "media_refs is set but carries no items" in _refused(stub, req)
