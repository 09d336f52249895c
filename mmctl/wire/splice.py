"""A large inline pixel tensor on the wire, without copying it (ARCHITECTURE §3).

Protobuf's encoding merges repeated occurrences of a singular message field,
so ``GenerateRequest`` bytes may end with a second ``mm_inputs`` that holds
only ``pixel_values.inline``: every parser reads the same message as if the
tensor sat in the first. Both ends use that here:

* the client appends the tensor's own buffer after the serialized message
  (:func:`pixels_prefix`): one copy where ``to_proto`` + ``SerializeToString``
  make two;
* the stub worker takes the payload out as a view of the received bytes
  (:func:`take_pixels`) and parses only the rest, where parsing the whole
  message and reading ``inline`` would copy the tensor twice more.

Both are wire-level facts of one field path,
``GenerateRequest.mm_inputs.pixel_values.inline``, kept in this one module.
"""

from __future__ import annotations

from collections.abc import Iterator

#: Payloads below this travel and parse the ordinary way (a splice saves nothing worth it).
MIN_BYTES = 64 * 1024

_LEN = 2  # wire type: length-delimited


def _numbers() -> tuple[int, int, int]:
    from mmctl.wire import proto

    engine = proto.engine_pb2
    return (
        engine.GenerateRequest.DESCRIPTOR.fields_by_name["mm_inputs"].number,
        engine.MultimodalInputs.DESCRIPTOR.fields_by_name["pixel_values"].number,
        engine.TensorData.DESCRIPTOR.fields_by_name["inline"].number,
    )


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int) -> bytes:
    return varint(number << 3 | _LEN)


def pixels_prefix(nbytes: int) -> bytes:
    """The bytes before an ``nbytes`` payload in ``mm_inputs { pixel_values { inline } }``."""
    mm, pixels, inline = _numbers()
    head = _key(inline) + varint(nbytes)
    tensor_len = len(head) + nbytes
    field = _key(pixels) + varint(tensor_len)
    return _key(mm) + varint(len(field) + tensor_len) + field + head


class _Malformed(Exception):
    pass


def _read_varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Malformed
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buf: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(number, wire type, field start, value start, value end) of each field."""
    pos = start
    while pos < end:
        first = pos
        key, pos = _read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _read_varint(buf, pos, end)
            yield number, wire, first, pos, pos
            continue
        if wire == _LEN:
            length, pos = _read_varint(buf, pos, end)
            value_start, pos = pos, pos + length
        elif wire in (1, 5):
            value_start, pos = pos, pos + (8 if wire == 1 else 4)
        else:  # groups: not in these messages
            raise _Malformed
        if pos > end:
            raise _Malformed
        yield number, wire, first, value_start, pos


def take_pixels(data: bytes) -> tuple[bytes, memoryview | None]:
    """``data`` without its one large ``mm_inputs.pixel_values.inline`` payload,
    and that payload as a view of ``data``; ``(data, None)`` when there is no
    such single payload (or the bytes do not walk: the parser then says why)."""
    if len(data) < MIN_BYTES:
        return data, None
    buf = memoryview(data)
    mm_no, pixels_no, inline_no = _numbers()
    try:
        found = [
            (outer, middle, inner)
            for outer in _fields(buf, 0, len(buf))
            if outer[0] == mm_no and outer[1] == _LEN
            for middle in _fields(buf, outer[3], outer[4])
            if middle[0] == pixels_no and middle[1] == _LEN
            for inner in _fields(buf, middle[3], middle[4])
            if inner[0] == inline_no and inner[1] == _LEN
        ]
    except _Malformed:
        return data, None
    if len(found) != 1 or found[0][2][4] - found[0][2][3] < MIN_BYTES:
        return data, None
    outer, middle, inner = found[0]
    tensor = bytes(buf[middle[3] : inner[2]]) + bytes(buf[inner[4] : middle[4]])
    field = _key(pixels_no) + varint(len(tensor)) + tensor
    batch = bytes(buf[outer[3] : middle[2]]) + field + bytes(buf[middle[4] : outer[4]])
    rest = b"".join(
        [
            buf[: outer[2]],
            _key(mm_no) + varint(len(batch)) + batch,
            buf[outer[4] :],
        ]
    )
    return rest, buf[inner[3] : inner[4]]
