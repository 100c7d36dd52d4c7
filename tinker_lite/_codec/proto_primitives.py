"""proto3 wire primitives: wire types, varints, field keys and the field scanner, under
:mod:`tinker_lite._codec.protowire`'s reader and writer (docs/protocol.rst §4.3)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final

from tinker_lite._errors import WireFormatError

__all__ = [
    "DOUBLE",
    "INT32_MAX",
    "INT32_MIN",
    "MAX_FIELD",
    "SMALL_VARINTS",
    "U64",
    "WT_EGROUP",
    "WT_I32",
    "WT_I64",
    "WT_LEN",
    "WT_SGROUP",
    "WT_VARINT",
    "as_int32",
    "as_int64",
    "as_uint32",
    "encode_varint",
    "field_key",
    "iter_fields",
    "read_varint",
]

WT_VARINT: Final = 0
WT_I64: Final = 1
WT_LEN: Final = 2
WT_SGROUP: Final = 3
WT_EGROUP: Final = 4
WT_I32: Final = 5

U64: Final = (1 << 64) - 1
INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
MAX_FIELD: Final = (1 << 29) - 1

DOUBLE: Final = struct.Struct("<d")
SMALL_VARINTS: Final = tuple(bytes((i,)) for i in range(128))


def encode_varint(value: int) -> bytes:
    """Return ``value`` as a base-128 varint; negative values as 64-bit two's complement."""
    if 0 <= value < 128:
        return SMALL_VARINTS[value]
    if 0 < value < 16384:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0:
        value &= U64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_key(field: int, wire_type: int) -> bytes:
    """Return the encoded key (tag) of a field: ``field << 3 | wire_type`` as a varint."""
    return encode_varint((field << 3) | wire_type)


def read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Read a varint at ``pos``; return ``(value mod 2**64, next position)``."""
    if pos >= end:
        raise WireFormatError("protobuf: truncated varint")
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise WireFormatError("protobuf: truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & U64, pos
        shift += 7
        if shift >= 70:
            raise WireFormatError("protobuf: varint longer than 10 bytes")


def as_int64(value: int) -> int:
    """Interpret a decoded varint as a signed int64."""
    return value - (1 << 64) if value >= 1 << 63 else value


def as_int32(value: int) -> int:
    """Interpret a decoded varint as a signed int32 (the low 32 bits, like protobuf)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def as_uint32(value: int) -> int:
    """Interpret a decoded varint as a uint32 (the low 32 bits, like protobuf)."""
    return value & 0xFFFFFFFF


def iter_fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield ``(field, wire_type, a, b)`` per field of ``buf[start:end]``: a varint's value and 0,
    else the payload's bounds ``buf[a:b]``; groups (never in this schema) are skipped whole."""
    pos = start
    while pos < end:
        # One-byte varints (keys of fields 1-15, small values and lengths) are read inline.
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = read_varint(buf, pos, end)
        field = key >> 3
        wire_type = key & 7
        if field == 0 or field > MAX_FIELD:
            raise WireFormatError(f"protobuf: invalid field number {field}")
        if wire_type == WT_VARINT:
            if pos < end and buf[pos] < 0x80:
                value = buf[pos]
                pos += 1
            else:
                value, pos = read_varint(buf, pos, end)
            yield field, WT_VARINT, value, 0
        elif wire_type == WT_LEN:
            if pos < end and buf[pos] < 0x80:
                size = buf[pos]
                pos += 1
            else:
                size, pos = read_varint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise WireFormatError(
                    f"protobuf: field {field} is {size} bytes long but only {end - pos} remain"
                )
            yield field, WT_LEN, pos, stop
            pos = stop
        elif wire_type == WT_I64:
            if pos + 8 > end:
                raise WireFormatError(f"protobuf: truncated fixed64 field {field}")
            yield field, WT_I64, pos, pos + 8
            pos += 8
        elif wire_type == WT_I32:
            if pos + 4 > end:
                raise WireFormatError(f"protobuf: truncated fixed32 field {field}")
            yield field, WT_I32, pos, pos + 4
            pos += 4
        elif wire_type == WT_SGROUP:
            group_start = pos
            pos = _skip_group(buf, pos, end, field)
            yield field, WT_SGROUP, group_start, pos
        else:
            raise WireFormatError(f"protobuf: invalid wire type {wire_type} (field {field})")


def _skip_group(buf: bytes, pos: int, end: int, field: int) -> int:
    depth = [field]
    while depth:
        if pos >= end:
            raise WireFormatError(f"protobuf: unterminated group {field}")
        key, pos = read_varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if wire_type == WT_VARINT:
            _, pos = read_varint(buf, pos, end)
        elif wire_type == WT_LEN:
            size, pos = read_varint(buf, pos, end)
            pos += size
        elif wire_type == WT_I64:
            pos += 8
        elif wire_type == WT_I32:
            pos += 4
        elif wire_type == WT_SGROUP:
            depth.append(number)
        elif wire_type == WT_EGROUP:
            if depth.pop() != number:
                raise WireFormatError(f"protobuf: mismatched end of group {number}")
        else:
            raise WireFormatError(f"protobuf: invalid wire type {wire_type} (field {number})")
        if pos > end:
            raise WireFormatError(f"protobuf: truncated group {field}")
    return pos
