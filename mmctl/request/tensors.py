"""numpy arrays ↔ ``TensorData`` (ARCHITECTURE §3–4): little-endian, C order, named dtypes.

bfloat16 has no numpy dtype; mmctl holds it as uint16 bit patterns and names
it ``bfloat16`` on the wire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mmctl.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mmctl.wire.proto import engine_pb2

#: Wire dtype name → numpy dtype holding its bytes (what a 0.4.28 worker accepts).
WIRE_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype("<f4"),
    "bfloat16": np.dtype("<u2"),
    "float16": np.dtype("<f2"),
    "uint8": np.dtype("u1"),
    "int64": np.dtype("<i8"),
    "uint32": np.dtype("<u4"),
}
#: What workers from before the half-width/uint8 change accept.
LEGACY_DTYPES = frozenset({"float32", "int64", "uint32"})

_NAMES = {np.dtype("<f4"): "float32", np.dtype("<f2"): "float16", np.dtype("u1"): "uint8",
          np.dtype("<i8"): "int64", np.dtype("<u4"): "uint32"}  # fmt: skip


def wire_name(array: np.ndarray, dtype_name: str | None = None) -> str:
    if dtype_name is not None:
        if dtype_name not in WIRE_DTYPES:
            raise InputError(f"unsupported tensor dtype {dtype_name!r}")
        return dtype_name
    name = _NAMES.get(
        array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    )
    if name is None:
        raise InputError(f"no wire dtype for numpy {array.dtype}")
    return name


def wire_array(array: np.ndarray, dtype_name: str) -> np.ndarray:
    """``array`` as the little-endian C-contiguous buffer the wire carries (no copy when it is)."""
    return np.ascontiguousarray(array, dtype=WIRE_DTYPES[dtype_name])


def inline(array: np.ndarray, dtype_name: str | None = None) -> engine_pb2.TensorData:
    """A ``TensorData`` carrying the bytes inline."""
    from mmctl.wire import proto

    name = wire_name(array, dtype_name)
    data = wire_array(array, name)
    return proto.engine_pb2.TensorData(shape=list(data.shape), dtype=name, inline=data.tobytes())


def expected_nbytes(shape: Sequence[int], dtype_name: str) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count * WIRE_DTYPES[dtype_name].itemsize


def from_bytes(payload: bytes | memoryview, shape: Sequence[int], dtype_name: str) -> np.ndarray:
    """Read a tensor back, with the worker's checks (known dtype, exact byte length)."""
    if dtype_name not in WIRE_DTYPES:
        raise InputError(f"unsupported tensor dtype {dtype_name!r}")
    want = expected_nbytes(shape, dtype_name)
    if len(payload) != want:
        raise InputError(
            f"TensorData byte length mismatch for dtype={dtype_name!r}, shape={list(shape)}: "
            f"expected {want}, got {len(payload)}"
        )
    return np.frombuffer(payload, dtype=WIRE_DTYPES[dtype_name]).reshape([int(d) for d in shape])
