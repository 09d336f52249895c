"""mmctl's requests parse with the published ``smg-grpc-proto`` 0.4.28 stubs."""

from __future__ import annotations

from smg_grpc_proto.generated import common_pb2, vllm_engine_pb2

from mmctl.request.compose import compose


def test_built_request_parses_with_smg_grpc_proto(red_blue, picture, builtin_model):
    composed = compose([picture, red_blue], "Compare.", builtin_model)
    ours = composed.plan.to_proto()
    theirs = vllm_engine_pb2.GenerateRequest()
    theirs.ParseFromString(ours.SerializeToString())
    assert theirs.request_id == ours.request_id
    assert list(theirs.tokenized.input_ids) == composed.layout.id_list()
    assert theirs.mm_inputs.modality == common_pb2.IMAGE
    assert theirs.extra_mm_inputs[0].modality == common_pb2.VIDEO
    video = theirs.extra_mm_inputs[0]
    assert video.pixel_values.dtype == "float32"
    assert video.mm_placeholders[0].offset == composed.layout.spans[1].offset
    assert dict(video.flat_keys) == {"pixel_values": "patches_per_video"}
    assert theirs.sampling_params.max_tokens == 128
    # Every field is known to them: their re-serialization is byte-identical.
    assert theirs.SerializeToString(deterministic=True) == ours.SerializeToString(
        deterministic=True
    )
