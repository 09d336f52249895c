"""Compare protobuf schemas field by field, as the wire sees them.

Works on ``FileDescriptorProto`` messages, which is what both a local
descriptor (``CopyToProto``) and a worker's reflection service give, so the
same comparison checks mmctl against the published ``smg-grpc-proto`` package
and tells which fields an older worker lacks.

A schema is flattened to ``{key: description}`` where the key names one
element (``message vllm.grpc.engine.MultimodalInputs field 10``) and the
description holds every wire-relevant property of it: name, type, label,
referenced type, oneof membership, proto3 ``optional``, map-entry flag, enum
numbers, method types and streaming flags. Comments, ordering and file layout
are not part of the wire and are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from google.protobuf.descriptor_pb2 import (
        DescriptorProto,
        EnumDescriptorProto,
        FileDescriptorProto,
    )
    from google.protobuf.descriptor_pool import DescriptorPool
from dataclasses import dataclass


@dataclass(frozen=True)
class SchemaDifference:
    key: str
    ours: str | None
    theirs: str | None

    def __str__(self) -> str:
        return f"{self.key}: ours={self.ours or '<missing>'} theirs={self.theirs or '<missing>'}"


def flatten(files: Iterable[FileDescriptorProto]) -> dict[str, str]:
    """``{element: description}`` for every message, field, enum and method."""
    out: dict[str, str] = {}
    for fdp in files:
        package = fdp.package
        prefix = f"{package}." if package else ""
        for message in fdp.message_type:
            _flatten_message(message, prefix, out)
        for enum in fdp.enum_type:
            _flatten_enum(enum, prefix, out)
        for service in fdp.service:
            name = prefix + service.name
            out[f"service {name}"] = "service"
            for method in service.method:
                out[f"service {name} method {method.name}"] = (
                    f"in={method.input_type.lstrip('.')} out={method.output_type.lstrip('.')} "
                    f"client_streaming={method.client_streaming} "
                    f"server_streaming={method.server_streaming}"
                )
    return out


def _flatten_message(message: DescriptorProto, prefix: str, out: dict[str, str]) -> None:
    name = prefix + message.name
    out[f"message {name}"] = f"map_entry={message.options.map_entry}"
    oneofs = [o.name for o in message.oneof_decl]
    for field in message.field:
        oneof = ""
        if field.HasField("oneof_index") and not field.proto3_optional:
            oneof = oneofs[field.oneof_index]
        out[f"message {name} field {field.number}"] = (
            f"name={field.name} type={field.type} label={field.label} "
            f"type_name={field.type_name.lstrip('.')} oneof={oneof} "
            f"proto3_optional={field.proto3_optional}"
        )
    ranges = sorted((r.start, r.end) for r in message.reserved_range)
    if ranges or message.reserved_name:
        out[f"message {name} reserved"] = f"{ranges} {sorted(message.reserved_name)}"
    for nested in message.nested_type:
        _flatten_message(nested, name + ".", out)
    for enum in message.enum_type:
        _flatten_enum(enum, name + ".", out)


def _flatten_enum(enum: EnumDescriptorProto, prefix: str, out: dict[str, str]) -> None:
    name = prefix + enum.name
    out[f"enum {name}"] = "enum"
    for value in enum.value:
        out[f"enum {name} value {value.number}"] = f"name={value.name}"


def compare(ours: dict[str, str], theirs: dict[str, str]) -> list[SchemaDifference]:
    """Every element that is missing on one side or described differently."""
    return [
        SchemaDifference(key, ours.get(key), theirs.get(key))
        for key in sorted(ours.keys() | theirs.keys())
        if ours.get(key) != theirs.get(key)
    ]


def file_protos(pool: DescriptorPool, names: Iterable[str]) -> list[FileDescriptorProto]:
    """``FileDescriptorProto`` copies of the named files in ``pool``."""
    from google.protobuf import descriptor_pb2

    protos = []
    for name in names:
        fdp = descriptor_pb2.FileDescriptorProto()
        pool.FindFileByName(name).CopyToProto(fdp)
        protos.append(fdp)
    return protos
