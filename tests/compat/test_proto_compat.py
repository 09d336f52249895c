"""mmctl's protos against the published `smg-grpc-proto` 0.4.28 package.

Two checks: every wire-relevant property of every element of both files is
the same (mmctl.wire.schema), and a request built by mmctl survives a trip
through the upstream classes byte for byte.
"""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2

from mmctl.wire import proto, schema

smg_common = pytest.importorskip("smg_grpc_proto.generated.common_pb2")
smg_engine = pytest.importorskip("smg_grpc_proto.generated.vllm_engine_pb2")


def _ours() -> list[descriptor_pb2.FileDescriptorProto]:
    return schema.file_protos(proto.descriptor_pool(), proto.PROTO_FILES)


def _theirs() -> list[descriptor_pb2.FileDescriptorProto]:
    out = []
    for module in (smg_common, smg_engine):
        fdp = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(fdp)
        out.append(fdp)
    return out


def test_upstream_is_the_version_we_mirror():
    from importlib.metadata import version

    assert version("smg-grpc-proto") == "0.4.28"


def test_same_packages_and_file_names():
    assert [(f.name, f.package) for f in _ours()] == [(f.name, f.package) for f in _theirs()]


def test_every_element_is_wire_identical():
    ours, theirs = schema.flatten(_ours()), schema.flatten(_theirs())
    differences = schema.compare(ours, theirs)
    assert not differences, "\n".join(map(str, differences))
    # The walk really covered the files: messages, map entries, oneofs,
    # enums and the service's methods.
    assert "message vllm.grpc.engine.MultimodalInputs field 10" in ours
    assert "message vllm.grpc.engine.MultimodalInputs.FlatKeysEntry" in ours
    assert "oneof=payload" in ours["message vllm.grpc.engine.TensorData field 4"]
    assert "enum smg.grpc.common.Modality value 3" in ours
    assert "server_streaming=True" in ours["service vllm.grpc.engine.VllmEngine method Generate"]
    assert len(ours) > 300


@pytest.mark.parametrize(
    ("message", "field", "mutate"),
    [
        ("MultimodalInputs", "modality", lambda f: setattr(f, "number", 12)),
        ("TensorData", "dtype", lambda f: setattr(f, "type", f.TYPE_BYTES)),
        ("GenerateRequest", "extra_mm_inputs", lambda f: setattr(f, "label", f.LABEL_OPTIONAL)),
        ("TensorData", "shm", lambda f: f.ClearField("oneof_index")),
    ],
)
def test_comparison_catches_a_changed_field(message, field, mutate):
    files = _ours()
    engine = files[1]
    target = next(m for m in engine.message_type if m.name == message)
    mutate(next(f for f in target.field if f.name == field))
    differences = schema.compare(schema.flatten(files), schema.flatten(_theirs()))
    assert any(f"vllm.grpc.engine.{message} field" in d.key for d in differences)


def test_comparison_catches_a_changed_enum_value_and_stream_flag():
    files = _ours()
    next(e for e in files[0].enum_type if e.name == "Modality").value[3].number = 4
    next(m for m in files[1].service[0].method if m.name == "Generate").server_streaming = False
    keys = {d.key for d in schema.compare(schema.flatten(files), schema.flatten(_theirs()))}
    assert "enum smg.grpc.common.Modality value 3" in keys
    assert "service vllm.grpc.engine.VllmEngine method Generate" in keys


def _video_request():
    pb, common = proto.engine_pb2, proto.common_pb2
    request = pb.GenerateRequest(
        request_id="mmctl-compat-1",
        tokenized=pb.TokenizedInput(original_text="<video> colours?", input_ids=[1, 151652, 2, 3]),
        sampling_params=pb.SamplingParams(temperature=0.0, max_tokens=16, stop=["\n"], seed=7),
        stream=True,
    )
    mm = request.mm_inputs
    mm.pixel_values.CopyFrom(
        pb.TensorData(shape=[8, 1536], dtype="bfloat16", inline=b"\x01\x02" * 8 * 1536)
    )
    mm.model_specific_tensors["video_grid_thw"].CopyFrom(
        pb.TensorData(
            shape=[1, 3],
            dtype="int64",
            shm=common.ShmHandle(name="mmctl-42-0", offset=0, nbytes=24, owner_id="mmctl:42"),
        )
    )
    mm.im_token_id = 151656
    mm.mm_placeholders.add(offset=1, length=3)
    mm.mm_hashes.append("ab" * 32)
    mm.batched_keys.append("video_grid_thw")
    mm.flat_keys["pixel_values"] = "video_grid_thw"
    mm.keep_on_cpu_keys.append("video_grid_thw")
    mm.modality = common.VIDEO
    extra = request.extra_mm_inputs.add(modality=common.IMAGE, im_token_id=151655)
    extra.mm_placeholders.add(offset=9, length=4)
    return request


def test_video_request_round_trips_through_upstream():
    ours = _video_request()
    wire = ours.SerializeToString(deterministic=True)

    theirs = smg_engine.GenerateRequest.FromString(wire)
    mm = theirs.mm_inputs
    assert mm.modality == smg_common.VIDEO == 3
    assert list(mm.pixel_values.shape) == [8, 1536]
    assert mm.pixel_values.dtype == "bfloat16"
    assert mm.pixel_values.WhichOneof("payload") == "inline"
    assert mm.pixel_values.inline == b"\x01\x02" * 8 * 1536
    grid = mm.model_specific_tensors["video_grid_thw"]
    assert grid.WhichOneof("payload") == "shm"
    assert (grid.shm.name, grid.shm.offset, grid.shm.nbytes, grid.shm.owner_id) == (
        "mmctl-42-0",
        0,
        24,
        "mmctl:42",
    )
    assert mm.HasField("im_token_id") and mm.im_token_id == 151656
    assert [(p.offset, p.length) for p in mm.mm_placeholders] == [(1, 3)]
    assert list(mm.mm_hashes) == ["ab" * 32]
    assert list(mm.batched_keys) == ["video_grid_thw"]
    assert dict(mm.flat_keys) == {"pixel_values": "video_grid_thw"}
    assert list(mm.keep_on_cpu_keys) == ["video_grid_thw"]
    assert not mm.HasField("encoder_input_key")
    assert theirs.extra_mm_inputs[0].modality == smg_common.IMAGE
    assert theirs.tokenized.input_ids == [1, 151652, 2, 3]
    assert theirs.sampling_params.max_tokens == 16 and theirs.sampling_params.seed == 7
    assert theirs.stream is True

    # And back: byte-identical both ways, so neither side dropped a field.
    back = wire_back = theirs.SerializeToString(deterministic=True)
    assert wire_back == wire
    assert type(ours).FromString(back) == ours


def test_server_info_capability_fields_round_trip():
    theirs = smg_engine.GetServerInfoResponse(
        server_type="vllm-grpc",
        shm_namespace_id="boot:42",
        model_dtype="torch.bfloat16",
        multimodal_encoder_dtype="bfloat16",
        mm_device_do_normalize=True,
        mm_item_limits="image=8,video=2",
        mm_encoder_budget=16384,
        max_num_seqs=64,
        mm_processor="inprocess",
        mm_media_ref_schemes="http,https,data",
    )
    wire = theirs.SerializeToString(deterministic=True)
    ours = proto.engine_pb2.GetServerInfoResponse.FromString(wire)
    assert ours.mm_device_do_normalize is True
    assert ours.mm_item_limits == "image=8,video=2"
    assert ours.mm_encoder_budget == 16384
    assert ours.SerializeToString(deterministic=True) == wire
