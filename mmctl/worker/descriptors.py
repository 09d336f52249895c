"""The descriptors the stub worker's reflection serves: today's, or an older worker's.

``--legacy-proto`` makes the stub look like a worker built before the
``modality`` field and the 0.4.28 capability fields: reflection then serves
descriptors without them, which is exactly what ``mmctl send`` inspects to
refuse sending video to such a worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf import descriptor_pb2, descriptor_pool

from mmctl.wire import proto

if TYPE_CHECKING:
    from google.protobuf.descriptor_pool import DescriptorPool

# message -> field numbers an older worker's proto lacks
LEGACY_MISSING = {
    "MultimodalInputs": {10, 11},  # modality, encoder_input_key
    "GenerateRequest": {10, 11},  # media_refs, extra_mm_inputs
    "GetServerInfoResponse": {14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25},
}
#: GetServerInfoResponse fields a legacy stub leaves empty (its clients see "unknown").
LEGACY_EMPTY_SERVER_INFO = (
    "model_dtype",
    "mm_processor",
    "mm_media_ref_schemes",
    "mm_processor_source",
    "mm_device_do_normalize",
    "max_num_seqs",
    "mm_item_limits",
    "multimodal_encoder_dtype",
    "engine_reasoning_parser",
    "constrained_decoding_start",
    "mm_encoder_budget",
)


def _file_proto(pool: DescriptorPool, name: str) -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto()
    pool.FindFileByName(name).CopyToProto(fdp)
    return fdp


def reflection_pool(legacy: bool) -> descriptor_pool.DescriptorPool:
    """A pool holding the worker protos (trimmed when ``legacy``) plus health."""
    from grpc_health.v1 import health_pb2

    ours = proto.descriptor_pool()
    pool = descriptor_pool.DescriptorPool()
    for name in proto.PROTO_FILES:
        fdp = _file_proto(ours, name)
        if legacy and fdp.package == "vllm.grpc.engine":
            for message in fdp.message_type:
                drop = LEGACY_MISSING.get(message.name)
                if drop:
                    _drop_fields(message, drop)
        pool.Add(fdp)
    health = descriptor_pb2.FileDescriptorProto()
    health_pb2.DESCRIPTOR.CopyToProto(health)
    pool.Add(health)
    return pool


def _drop_fields(message: descriptor_pb2.DescriptorProto, numbers: set[int]) -> None:
    """Remove fields, and any oneof (proto3 ``optional`` ones too) left empty."""
    keep: list[descriptor_pb2.FieldDescriptorProto] = []
    for f in message.field:
        if f.number not in numbers:
            copy = descriptor_pb2.FieldDescriptorProto()
            copy.CopyFrom(f)
            keep.append(copy)
    used = sorted({f.oneof_index for f in keep if f.HasField("oneof_index")})
    remap = {old: new for new, old in enumerate(used)}
    oneofs = [message.oneof_decl[i] for i in used]
    oneof_copies = []
    for o in oneofs:
        c = descriptor_pb2.OneofDescriptorProto()
        c.CopyFrom(o)
        oneof_copies.append(c)
    for f in keep:
        if f.HasField("oneof_index"):
            f.oneof_index = remap[f.oneof_index]
    del message.field[:]
    message.field.extend(keep)
    del message.oneof_decl[:]
    message.oneof_decl.extend(oneof_copies)
