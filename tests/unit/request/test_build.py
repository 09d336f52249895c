"""Request assembly: batches per modality, key lists, dtypes, hashes, limits."""

from __future__ import annotations

import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.errors import InputError, UsageError
from mmctl.models.settings import VisionOverrides
from mmctl.request import tensors
from mmctl.request.compose import compose
from mmctl.request.hashing import content_hash, item_hash
from mmctl.request.limits import check_encoder_budget, parse_item_limits
from mmctl.wire import proto


def test_video_request_carries_what_the_servicer_reads(red_blue, builtin_model):
    composed = compose([red_blue], "Which colours?", builtin_model)
    req = composed.plan.to_proto()
    mm = req.mm_inputs
    assert mm.modality == proto.common_pb2.VIDEO
    assert mm.im_token_id == builtin_model.token_ids.video_token_id
    assert not mm.HasField("encoder_input_key")
    assert list(mm.batched_keys) == ["video_grid_thw", "patches_per_video", "timestamps"]
    assert dict(mm.flat_keys) == {"pixel_values": "patches_per_video"}
    assert list(mm.keep_on_cpu_keys) == ["video_grid_thw", "timestamps"]
    grid = tensors.from_bytes(
        mm.model_specific_tensors["video_grid_thw"].inline, [1, 3], "int64"
    ).tolist()
    # One row per video, one time per temporal patch: what vLLM's own processing
    # passes (and what the prompt states)
    stamps = mm.model_specific_tensors["timestamps"]
    times = tensors.from_bytes(stamps.inline, stamps.shape, stamps.dtype).tolist()
    assert times == [list(composed.items[0].pre.patch_times)] and len(times[0]) == grid[0][0]
    sizes = mm.model_specific_tensors["patches_per_video"]
    assert tensors.from_bytes(sizes.inline, sizes.shape, sizes.dtype).tolist() == [
        int(np.prod(grid))
    ]
    assert list(mm.pixel_values.shape) == [int(np.prod(grid)), 1536]
    (span,) = mm.mm_placeholders
    ids = np.asarray(req.tokenized.input_ids)
    pads = ids[span.offset : span.offset + span.length] == mm.im_token_id
    assert pads.sum() == np.prod(grid) // 4
    assert len(mm.mm_hashes) == 1 and len(mm.mm_hashes[0]) == 64


def test_timestamps_stay_home_when_the_videos_differ_in_length(red_blue, tmp_path, builtin_model):
    from mmctl.media import synth

    other = synth.color_clip(tmp_path / "long.mp4", (("red", 6.0),))
    same = compose([red_blue, red_blue], "Compare.", builtin_model).plan.to_proto().mm_inputs
    assert list(same.model_specific_tensors["timestamps"].shape) == [2, 4]
    mixed = compose([red_blue, other], "Compare.", builtin_model).plan.to_proto().mm_inputs
    assert "timestamps" not in mixed.model_specific_tensors
    assert "timestamps" not in mixed.batched_keys and "timestamps" not in mixed.keep_on_cpu_keys


def test_image_and_video_use_one_batch_each_in_prompt_order(red_blue, picture, builtin_model):
    composed = compose([picture, picture, red_blue], "Compare.", builtin_model)
    req = composed.plan.to_proto()
    assert req.mm_inputs.modality == proto.common_pb2.IMAGE
    assert len(req.mm_inputs.mm_placeholders) == 2
    (video,) = req.extra_mm_inputs
    assert video.modality == proto.common_pb2.VIDEO
    keys = set(req.mm_inputs.model_specific_tensors) & set(video.model_specific_tensors)
    assert not keys  # no colliding tensor keys across batches
    offsets = [p.offset for p in req.mm_inputs.mm_placeholders] + [video.mm_placeholders[0].offset]
    assert offsets == sorted(offsets)
    rows = req.mm_inputs.model_specific_tensors["patches_per_image"]
    assert (
        sum(tensors.from_bytes(rows.inline, rows.shape, rows.dtype).tolist())
        == (req.mm_inputs.pixel_values.shape[0])
    )


@pytest.mark.parametrize("fmt", list(PixelFormat))
def test_pixel_dtype_is_named_on_the_wire(red_blue, builtin_model, fmt):
    req = compose([red_blue], "", builtin_model, pixel_format=fmt).plan.to_proto()
    td = req.mm_inputs.pixel_values
    assert td.dtype == fmt.value
    assert len(td.inline) == tensors.expected_nbytes(td.shape, td.dtype)


def test_hash_is_stable_and_covers_sampling(red_blue, builtin_model):
    a = compose([red_blue], "", builtin_model, pixel_format=PixelFormat.UINT8).items[0]
    b = compose([red_blue], "", builtin_model, pixel_format=PixelFormat.UINT8).items[0]
    assert a.content_hash == b.content_hash
    from mmctl.models.model import load_model

    resampled = load_model(overrides=VisionOverrides(fps=1.0))
    c = compose([red_blue], "", resampled, pixel_format=PixelFormat.UINT8).items[0]
    assert c.content_hash != a.content_hash
    assert item_hash(a.pre, red_blue.read_bytes() + b"x") != a.content_hash


def test_hash_covers_the_pixel_type(red_blue, builtin_model):
    """vLLM's encoder cache keys on mm_hashes: the uint8 and the float32
    request of one clip feed the encoder different input, so they must not
    share an entry."""
    hashes = {
        fmt: compose([red_blue], "", builtin_model, pixel_format=fmt)
        .plan.to_proto()
        .mm_inputs.mm_hashes[0]
        for fmt in PixelFormat
    }
    assert len(set(hashes.values())) == len(PixelFormat), hashes


def test_content_hash_of_bytes_and_file_agree(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"abc" * 1000)
    assert content_hash(path, {"k": 1}) == content_hash(path.read_bytes(), {"k": 1})
    assert content_hash(path, {"k": 1}) != content_hash(path, {"k": 2})


def test_item_limits():
    assert parse_item_limits("image=8,video=2") == {"image": 8, "video": 2}
    assert parse_item_limits("") == {}
    with pytest.raises(UsageError):
        parse_item_limits("image:8")


def test_limit_checked_before_preprocessing(red_blue, builtin_model):
    with pytest.raises(InputError, match="2 video item"):
        compose([red_blue, red_blue], "", builtin_model, item_limits={"video": 1})


def test_encoder_budget_names_the_item_and_hints():
    with pytest.raises(InputError, match="video 1 carries 48 feature tokens") as err:
        check_encoder_budget([("video 1", 48)], 40, "the worker")
    assert "--max-pixels" in err.value.hint
    check_encoder_budget([("video 1", 48)], 0, "the worker")  # 0: no budget


def test_tensor_roundtrip_checks_length():
    arr = np.arange(6, dtype=np.int64).reshape(2, 3)
    td = tensors.inline(arr)
    assert td.dtype == "int64"
    assert tensors.from_bytes(td.inline, td.shape, td.dtype).tolist() == arr.tolist()
    with pytest.raises(InputError, match="expected 48, got 40"):
        tensors.from_bytes(td.inline[:40], td.shape, td.dtype)
    with pytest.raises(InputError, match="unsupported tensor dtype 'float64'"):
        tensors.from_bytes(b"", [0], "float64")


@pytest.mark.parametrize("fmt", [PixelFormat.FLOAT32, PixelFormat.UINT8])
def test_encoded_request_is_the_message_with_one_copy(builtin_model, fmt):
    """``encode`` splices a large inline pixel tensor after the message; any
    protobuf parser reads exactly what ``to_proto`` + ``SerializeToString`` gives."""
    from mmctl.bench.synthetic import synthetic_item
    from mmctl.request.compose import compose_items
    from mmctl.wire.splice import MIN_BYTES

    item = synthetic_item(3 * MIN_BYTES, builtin_model.spec, builtin_model.params, fmt)
    plan = compose_items([item], "Which colours?", builtin_model).plan
    encoded = plan.encode()
    assert encoded.spliced == item.pre.pixel_values.nbytes >= MIN_BYTES
    assert not encoded.request.mm_inputs.pixel_values.inline  # the bytes are not copied into it
    parsed = proto.engine_pb2.GenerateRequest.FromString(encoded.data)
    assert parsed == plan.to_proto()
    pixels = parsed.mm_inputs.pixel_values
    assert pixels.inline == item.pre.pixel_values.tobytes() and pixels.dtype == fmt.value


def test_small_requests_are_not_spliced(builtin_model):
    from mmctl.bench.synthetic import synthetic_item
    from mmctl.request.compose import compose_items
    from mmctl.wire.splice import MIN_BYTES

    spec, params = builtin_model.spec, builtin_model.params
    item = synthetic_item(MIN_BYTES // 2, spec, params, PixelFormat.UINT8)
    plan = compose_items([item], "Which colours?", builtin_model).plan
    encoded = plan.encode()
    assert encoded.spliced == 0 and encoded.data == plan.to_proto().SerializeToString()


def test_the_stub_reads_a_large_payload_in_place(builtin_model):
    """``take_pixels`` leaves the payload out of the parse and returns a view of
    it; what remains parses to the message without it."""
    from mmctl.bench.synthetic import synthetic_item
    from mmctl.request.compose import compose_items
    from mmctl.wire.splice import MIN_BYTES, take_pixels

    item = synthetic_item(
        2 * MIN_BYTES, builtin_model.spec, builtin_model.params, PixelFormat.UINT8
    )
    plan = compose_items([item], "Which colours?", builtin_model).plan
    whole = plan.to_proto()
    for data in (plan.encode().data, whole.SerializeToString()):  # spliced, and ordinary
        rest, pixels = take_pixels(data)
        assert pixels is not None and bytes(pixels) == item.pre.pixel_values.tobytes()
        parsed = proto.engine_pb2.GenerateRequest.FromString(rest)
        parsed.mm_inputs.pixel_values.inline = bytes(pixels)
        assert parsed == whole
    small = compose_items(
        [synthetic_item(4096, builtin_model.spec, builtin_model.params, PixelFormat.UINT8)],
        "x",
        builtin_model,
    )
    data = small.plan.encode().data
    assert take_pixels(data) == (data, None)  # small: parsed the ordinary way
    assert take_pixels(b"\xff" * MIN_BYTES) == (
        b"\xff" * MIN_BYTES,
        None,
    )  # not a message: the parser says why
