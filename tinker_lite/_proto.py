"""Protobuf bodies of forward/forward_backward and of their and sampling's results.

The service's ``tinker_public`` schema (WIRE.md §13.7) is written and read here by hand, so no
protobuf runtime is needed. Numeric arrays travel as little-endian bytes inside ``bytes`` fields;
they are copied in and out with numpy in one piece, never element by element, so a
500,000-number request encodes in a few milliseconds.

Client side: :func:`encode_forward_backward_request`, :func:`decode_forward_backward_output`,
:func:`decode_sample_response`. Server side (the local server):
:func:`decode_forward_backward_request`, :func:`encode_forward_backward_output`,
:func:`encode_sample_response`. Every decoder raises
:class:`~tinker_lite._errors.WireFormatError` for malformed bytes and skips fields it does not
know (a newer service may add some).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from tinker_lite import types
from tinker_lite._errors import InvalidInputError, WireFormatError

__all__ = [
    "CONTENT_TYPE",
    "ProtoForwardBackwardRequest",
    "compress",
    "decode_forward_backward_output",
    "decode_forward_backward_request",
    "decode_sample_response",
    "decompress",
    "encode_forward_backward_output",
    "encode_forward_backward_request",
    "encode_sample_response",
    "zstd_available",
]

CONTENT_TYPE: Final = "application/x-protobuf"

# ---------------------------------------------------------------------------------------------
# Wire primitives (proto3 encoding: varints, tags, length-delimited fields, fixed64)
# ---------------------------------------------------------------------------------------------

WT_VARINT: Final = 0
WT_I64: Final = 1
WT_LEN: Final = 2
WT_SGROUP: Final = 3
WT_EGROUP: Final = 4
WT_I32: Final = 5

_U64: Final = (1 << 64) - 1
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_MAX_FIELD: Final = (1 << 29) - 1

_F32: Final = np.dtype("<f4")
_I64: Final = np.dtype("<i8")
_I32: Final = np.dtype("<i4")
_U16: Final = np.dtype("<u2")

_DOUBLE: Final = struct.Struct("<d")
_SMALL_VARINTS: Final = tuple(bytes((i,)) for i in range(128))

# enum DType (WIRE.md §13.7)
DTYPE_UNSPECIFIED: Final = 0
DTYPE_FLOAT32: Final = 1
DTYPE_INT64: Final = 2
DTYPE_INT32: Final = 3
DTYPE_BFLOAT16: Final = 4
_DTYPE_NAMES: Final = {
    DTYPE_UNSPECIFIED: "DTYPE_UNSPECIFIED",
    DTYPE_FLOAT32: "DTYPE_FLOAT32",
    DTYPE_INT64: "DTYPE_INT64",
    DTYPE_INT32: "DTYPE_INT32",
    DTYPE_BFLOAT16: "DTYPE_BFLOAT16",
}
# enum StopReason (WIRE.md §13.7)
STOP_REASON_STOP: Final = 0
STOP_REASON_LENGTH: Final = 1

# WIRE.md §13.6: top-k cells padded with (token 0, logprob -99999.0) are empty.
TOPK_MASK_TOKEN: Final = 0
TOPK_MASK_LOGPROB: Final = -99999.0

# An ArrayRecord without fields still stands for num_datums (empty) outputs; bound it likewise.
_MAX_EMPTY_RECORD_DATUMS: Final = 1 << 16


def encode_varint(value: int) -> bytes:
    """Return ``value`` as a base-128 varint; negative values as 64-bit two's complement."""
    if 0 <= value < 128:
        return _SMALL_VARINTS[value]
    if 0 < value < 16384:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0:
        value &= _U64
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
            return result & _U64, pos
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
    """Yield ``(field, wire_type, a, b)`` for each field of the message in ``buf[start:end]``.

    For a varint ``a`` is the value (mod 2**64) and ``b`` is 0; for every other wire type
    ``buf[a:b]`` is the payload (a length-delimited field's bytes, or the 8 / 4 fixed bytes).
    Groups (deprecated, never in this schema) are skipped whole.
    """
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        field = key >> 3
        wire_type = key & 7
        if field == 0 or field > _MAX_FIELD:
            raise WireFormatError(f"protobuf: invalid field number {field}")
        if wire_type == WT_VARINT:
            value, pos = read_varint(buf, pos, end)
            yield field, WT_VARINT, value, 0
        elif wire_type == WT_LEN:
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


def expect_wire_type(wire_type: int, expected: int, where: str) -> None:
    """Raise WireFormatError unless a known field arrived with its schema's wire type."""
    if wire_type != expected:
        raise WireFormatError(f"protobuf: {where} has wire type {wire_type}, expected {expected}")


def read_string(buf: bytes, a: int, b: int, where: str) -> str:
    """Decode a proto3 ``string`` payload (UTF-8, validated)."""
    try:
        return buf[a:b].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireFormatError(f"protobuf: {where} is not valid UTF-8") from exc


def read_double(buf: bytes, a: int) -> float:
    """Decode a ``double`` (fixed64, little-endian) payload."""
    value: float = _DOUBLE.unpack_from(buf, a)[0]
    return value


def read_int64s(buf: bytes, wire_type: int, a: int, b: int, *, into: list[int], where: str) -> None:
    """Append a ``repeated int64`` occurrence, packed or not (parsers must accept both)."""
    if wire_type == WT_VARINT:
        into.append(as_int64(a))
        return
    expect_wire_type(wire_type, WT_LEN, where)
    pos = a
    while pos < b:
        value, pos = read_varint(buf, pos, b)
        into.append(as_int64(value))


def read_array(buf: bytes, a: int, b: int, dtype: np.dtype[Any], where: str) -> npt.NDArray[Any]:
    """Return ``buf[a:b]`` as a read-only little-endian array view (no copy)."""
    size = b - a
    if size % dtype.itemsize:
        raise WireFormatError(
            f"protobuf: {where} has {size} bytes, not a multiple of {dtype.itemsize}"
        )
    return np.frombuffer(buf, dtype=dtype, count=size // dtype.itemsize, offset=a)


def _as_bytes(body: bytes | bytearray | memoryview) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    raise WireFormatError(f"protobuf: body must be bytes, got {type(body).__name__}")


class Writer:
    """An append-only list of byte pieces with their total size, joined once at the end.

    Large arrays are appended as memoryviews (no copy), and a nested message's pieces are moved
    into its parent behind a length prefix, so every byte is copied exactly once, by
    :meth:`getvalue`.
    """

    __slots__ = ("parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0

    def raw(self, data: bytes | memoryview) -> None:
        """Append bytes as they are."""
        self.parts.append(data)
        self.size += len(data)

    def varint_field(self, key: bytes, value: int) -> None:
        """Append a varint field (int32/int64/uint32/uint64/bool/enum)."""
        piece = key + encode_varint(value)
        self.parts.append(piece)
        self.size += len(piece)

    def double_field(self, key: bytes, value: float) -> None:
        """Append a ``double`` field."""
        piece = key + _DOUBLE.pack(value)
        self.parts.append(piece)
        self.size += len(piece)

    def bytes_field(self, key: bytes, data: bytes | memoryview) -> None:
        """Append a length-delimited field holding ``data`` (bytes, or a byte memoryview)."""
        head = key + encode_varint(len(data))
        self.parts.append(head)
        self.parts.append(data)
        self.size += len(head) + len(data)

    def string_field(self, key: bytes, text: str) -> None:
        """Append a ``string`` field."""
        self.bytes_field(key, text.encode("utf-8"))

    def array_field(self, key: bytes, array: npt.NDArray[Any]) -> None:
        """Append a ``bytes`` field holding a contiguous little-endian array, without a copy."""
        self.bytes_field(key, array.reshape(-1).view(np.uint8).data)

    def packed_varints_field(self, key: bytes, values: Sequence[int]) -> None:
        """Append a packed ``repeated`` varint field (proto3's default for repeated scalars)."""
        payload = b"".join(encode_varint(value) for value in values)
        self.bytes_field(key, payload)

    def message_field(self, key: bytes, message: Writer) -> None:
        """Append a nested message field; ``message`` must not be used afterwards."""
        head = key + encode_varint(message.size)
        self.parts.append(head)
        self.parts.extend(message.parts)
        self.size += len(head) + message.size

    def extend(self, other: Writer) -> None:
        """Append the fields held by ``other`` (no length prefix); ``other`` is used up."""
        self.parts.extend(other.parts)
        self.size += other.size

    def getvalue(self) -> bytes:
        """Return the encoded bytes."""
        return b"".join(self.parts)


# Field keys of the messages this module writes (WIRE.md §13.7 field numbers).
_K1_VARINT: Final = field_key(1, WT_VARINT)
_K1_I64: Final = field_key(1, WT_I64)
_K1_LEN: Final = field_key(1, WT_LEN)
_K2_VARINT: Final = field_key(2, WT_VARINT)
_K2_I64: Final = field_key(2, WT_I64)
_K2_LEN: Final = field_key(2, WT_LEN)
_K3_VARINT: Final = field_key(3, WT_VARINT)
_K3_LEN: Final = field_key(3, WT_LEN)
_K4_VARINT: Final = field_key(4, WT_VARINT)
_K4_LEN: Final = field_key(4, WT_LEN)
_K5_LEN: Final = field_key(5, WT_LEN)
_K6_VARINT: Final = field_key(6, WT_VARINT)
_K7_LEN: Final = field_key(7, WT_LEN)
_BOOL_TRUE: Final = b"\x01"


# ---------------------------------------------------------------------------------------------
# ForwardBackwardRequest (client encodes, server decodes)
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class ProtoForwardBackwardRequest:
    """A decoded ``tinker_public.ForwardBackwardRequest`` (forward when ``forward_only``).

    ``loss_fn_config`` merges both config maps (``loss_fn_config_v2`` wins); None when the
    request had neither.
    """

    model_id: str
    seq_id: int
    data: list[types.Datum]
    loss_fn: str
    loss_fn_config: dict[str, float | str] | None
    forward_only: bool


def encode_forward_backward_request(
    *,
    model_id: str,
    seq_id: int,
    data: Sequence[types.Datum],
    loss_fn: str,
    loss_fn_config: Mapping[str, float | str] | None,
    forward_only: bool,
) -> bytes:
    """Return the protobuf body of a forward (``forward_only``) or forward_backward request.

    Map entries (``loss_fn_inputs``, both config maps) are written in insertion order. An
    ImageChunk is sent as ``{data, format, expected_tokens}``: the schema has no place for the
    0.4.1 fields ``height``, ``width`` and ``tokens``. Raises InvalidInputError for what
    protobuf cannot carry: an ImageAssetPointerChunk, a token or ``seq_id`` outside int32, a
    config value that is neither a number nor a string.
    """
    out = Writer()
    if model_id:
        out.string_field(_K1_LEN, model_id)
    if seq_id:
        if not _INT32_MIN <= seq_id <= _INT32_MAX:
            raise InvalidInputError("seq_id", f"{seq_id} does not fit in int32")
        out.varint_field(_K2_VARINT, seq_id)
    for index, datum in enumerate(data):
        out.message_field(_K3_LEN, _encode_datum(datum, index))
    if loss_fn:
        out.string_field(_K4_LEN, loss_fn)
    config_v2 = Writer()
    if loss_fn_config:
        # WIRE.md §13.7: numbers go to loss_fn_config (double) and loss_fn_config_v2 (number);
        # strings only to loss_fn_config_v2 (text). Entries in insertion order.
        for name, given in loss_fn_config.items():
            value: object = given
            if not isinstance(name, str):
                raise InvalidInputError("loss_fn_config", f"keys must be strings, got {name!r}")
            entry_value = Writer()
            if isinstance(value, str):
                entry_value.string_field(_K2_LEN, value)
            elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
                value, bool
            ):
                number = float(value)
                entry = Writer()
                entry.string_field(_K1_LEN, name)
                entry.double_field(_K2_I64, number)
                out.message_field(_K5_LEN, entry)
                entry_value.double_field(_K1_I64, number)
            else:
                raise InvalidInputError(
                    f"loss_fn_config[{name!r}]",
                    f"must be a number or a string, got {type(value).__name__}",
                )
            entry = Writer()
            entry.string_field(_K1_LEN, name)
            entry.message_field(_K2_LEN, entry_value)
            config_v2.message_field(_K7_LEN, entry)
    if forward_only:
        out.raw(_K6_VARINT + _BOOL_TRUE)
    out.extend(config_v2)
    return out.getvalue()


def _encode_datum(datum: types.Datum, index: int) -> Writer:
    # The hot path of a large request: each text chunk and each tensor becomes one header piece
    # (all its nested keys and length prefixes) plus its array, sizes computed up front.
    out = Writer()
    parts = out.parts
    size = 0
    for position, chunk in enumerate(datum.model_input.chunks):
        if isinstance(chunk, types.EncodedTextChunk):
            ids = chunk._current_ids()
            packed: bytes | memoryview
            if ids is not None and ids.dtype == _I32:
                packed = ids.data.cast("B")  # checked when the chunk was made: no copy
            else:
                tokens = chunk.tokens
                packed = _pack_tokens(tokens, index, position) if tokens else b""
            count = len(packed)
            head = _text_chunk_head(count)
            parts.append(head)
            parts.append(packed)
            size += len(head) + count
        elif isinstance(chunk, types.ImageChunk):
            where = f"data[{index}].model_input.chunks[{position}]"
            chunk_message = Writer()
            chunk_message.message_field(_K2_LEN, _encode_image(chunk, where))
            head = _K1_LEN + encode_varint(chunk_message.size)
            parts.append(head)
            parts.extend(chunk_message.parts)
            size += len(head) + chunk_message.size
        elif isinstance(chunk, types.ImageAssetPointerChunk):
            raise InvalidInputError(
                f"data[{index}].model_input.chunks[{position}]",
                "an ImageAssetPointerChunk cannot be sent as protobuf",
                "pass the image bytes in an ImageChunk, or use wire='json'",
            )
        else:
            raise InvalidInputError(
                f"data[{index}].model_input.chunks[{position}]",
                f"unsupported chunk type {type(chunk).__name__}",
            )
    for name, tensor in datum.loss_fn_inputs.items():
        view, code = _tensor_bytes(tensor, index, name)
        count = len(view)
        shape = tensor.shape
        head, tail = _tensor_entry_frame(name, count, code, tuple(shape) if shape else ())
        parts.append(head)
        parts.append(view)
        parts.append(tail)
        size += len(head) + count + len(tail)
    out.size = size
    return out


# Requests repeat the same few sizes and keys, so the bytes around each array are remembered.


@functools.lru_cache(maxsize=1024)
def _text_chunk_head(count: int) -> bytes:
    """Return the bytes before ``count`` bytes of int32 token ids in a Datum."""
    # Datum.model_input -> Chunk.encoded_text -> EncodedTextChunk.tokens
    text_head = _K1_LEN + encode_varint(count) if count else b""
    text_size = len(text_head) + count
    chunk_head = _K1_LEN + encode_varint(text_size)
    chunk_size = len(chunk_head) + text_size
    return _K1_LEN + encode_varint(chunk_size) + chunk_head + text_head


@functools.lru_cache(maxsize=1024)
def _tensor_entry_frame(
    name: str, count: int, code: int, shape: tuple[int, ...]
) -> tuple[bytes, bytes]:
    """Return the bytes before and after a tensor's ``count`` data bytes in a Datum."""
    # Datum.loss_fn_inputs entry {key, value: Tensor {dense, dtype, shape}}
    dense_head = _K1_LEN + encode_varint(count)
    tail = _K3_VARINT + _SMALL_VARINTS[code]
    if shape:
        packed_shape = b"".join([encode_varint(dim) for dim in shape])
        tail += _K4_LEN + encode_varint(len(packed_shape)) + packed_shape
    tensor_size = len(dense_head) + count + len(tail)
    name_bytes = name.encode("utf-8")
    key_and_value_head = (
        _K1_LEN + encode_varint(len(name_bytes)) + name_bytes + _K2_LEN + encode_varint(tensor_size)
    )
    entry_size = len(key_and_value_head) + tensor_size
    return _K2_LEN + encode_varint(entry_size) + key_and_value_head + dense_head, tail


def _tensor_bytes(tensor: types.TensorData, index: int, name: str) -> tuple[memoryview, int]:
    # WIRE.md §13.7: float tensors as float32 LE (DTYPE_FLOAT32), int tensors as int64 LE.
    dtype: np.dtype[Any]
    if tensor.dtype == "float32":
        dtype, code = _F32, DTYPE_FLOAT32
    elif tensor.dtype == "int64":
        dtype, code = _I64, DTYPE_INT64
    else:
        raise InvalidInputError(
            f"data[{index}].loss_fn_inputs[{name!r}].dtype",
            f"must be int64 or float32, got {tensor.dtype!r}",
        )
    array = tensor.data
    if array.dtype == dtype and array.ndim == 1 and array.flags.c_contiguous:
        return array.data.cast("B"), code  # the usual case: no copy, no conversion
    return np.ascontiguousarray(array, dtype=dtype).reshape(-1).view(np.uint8).data, code


def _pack_tokens(tokens: Sequence[int], index: int, position: int) -> bytes:
    # WIRE.md §13.7: token ids are int32 little-endian.
    try:
        return struct.pack(f"<{len(tokens)}i", *tokens)
    except struct.error:
        bad = next(
            (t for t in tokens if not isinstance(t, int) or not _INT32_MIN <= t <= _INT32_MAX),
            None,
        )
        raise InvalidInputError(
            f"data[{index}].model_input.chunks[{position}].tokens",
            f"token {bad!r} does not fit in int32",
            "token ids are int32 vocabulary indices",
        ) from None


def _encode_image(chunk: types.ImageChunk, where: str) -> Writer:
    # WIRE.md §13.7 / golden-0.38: an image chunk is image {data, format, expected_tokens}.
    image = Writer()
    if chunk.data:
        image.bytes_field(_K1_LEN, chunk.data)
    if chunk.format:
        image.string_field(_K2_LEN, chunk.format)
    if chunk.expected_tokens is not None:
        if not _INT32_MIN <= chunk.expected_tokens <= _INT32_MAX:
            raise InvalidInputError(f"{where}.expected_tokens", "does not fit in int32")
        image.varint_field(_K3_VARINT, chunk.expected_tokens)
    return image


def decode_forward_backward_request(
    body: bytes | bytearray | memoryview,
) -> ProtoForwardBackwardRequest:
    """Decode a ``ForwardBackwardRequest`` body (sparse CSR tensors become dense)."""
    buf = _as_bytes(body)
    model_id = ""
    seq_id = 0
    loss_fn = ""
    forward_only = False
    datum_ranges: list[tuple[int, int]] = []
    config_v1: dict[str, float] = {}
    config_v2: dict[str, float | str] = {}
    for field, wire_type, a, b in iter_fields(buf, 0, len(buf)):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardRequest.model_id")
            model_id = read_string(buf, a, b, "ForwardBackwardRequest.model_id")
        elif field == 2:
            expect_wire_type(wire_type, WT_VARINT, "ForwardBackwardRequest.seq_id")
            seq_id = as_int32(a)
        elif field == 3:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardRequest.data")
            datum_ranges.append((a, b))
        elif field == 4:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardRequest.loss_fn")
            loss_fn = read_string(buf, a, b, "ForwardBackwardRequest.loss_fn")
        elif field == 5:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardRequest.loss_fn_config")
            name, number = _read_double_entry(buf, a, b, "ForwardBackwardRequest.loss_fn_config")
            config_v1[name] = number
        elif field == 6:
            expect_wire_type(wire_type, WT_VARINT, "ForwardBackwardRequest.forward_only")
            forward_only = a != 0
        elif field == 7:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardRequest.loss_fn_config_v2")
            name, value = _read_config_v2_entry(buf, a, b)
            config_v2[name] = value
    data = [_decode_datum(buf, a, b, index) for index, (a, b) in enumerate(datum_ranges)]
    config: dict[str, float | str] | None = None
    if config_v1 or config_v2:
        config = dict(config_v1)
        config.update(config_v2)
    return ProtoForwardBackwardRequest(
        model_id=model_id,
        seq_id=seq_id,
        data=data,
        loss_fn=loss_fn,
        loss_fn_config=config,
        forward_only=forward_only,
    )


def _read_entry(
    buf: bytes, start: int, end: int, where: str, value_type: int
) -> tuple[str, tuple[int, int] | None]:
    """Read a map entry ``{string key = 1; value = 2}``: its key and its value's payload range.

    The range is None when the entry has no value (proto3: the value's default).
    """
    name = ""
    value: tuple[int, int] | None = None
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, f"{where} key")
            name = read_string(buf, a, b, f"{where} key")
        elif field == 2:
            expect_wire_type(wire_type, value_type, f"{where}[{name!r}]")
            value = (a, b)
    return name, value


def _read_double_entry(buf: bytes, start: int, end: int, where: str) -> tuple[str, float]:
    name, value = _read_entry(buf, start, end, where, WT_I64)
    return name, 0.0 if value is None else read_double(buf, value[0])


def _read_config_v2_entry(buf: bytes, start: int, end: int) -> tuple[str, float | str]:
    where = "ForwardBackwardRequest.loss_fn_config_v2"
    name, entry_value = _read_entry(buf, start, end, where, WT_LEN)
    value: float | str = 0.0
    if entry_value is not None:
        # LossConfigValue { oneof value { double number = 1; string text = 2; } }
        for inner, inner_type, c, d in iter_fields(buf, *entry_value):
            if inner == 1:
                expect_wire_type(inner_type, WT_I64, f"{where}[{name!r}].number")
                value = read_double(buf, c)
            elif inner == 2:
                expect_wire_type(inner_type, WT_LEN, f"{where}[{name!r}].text")
                value = read_string(buf, c, d, f"{where}[{name!r}].text")
    return name, value


def _decode_datum(buf: bytes, start: int, end: int, index: int) -> types.Datum:
    where = f"data[{index}]"
    chunks: list[types.ModelInputChunk] = []
    inputs: dict[str, types.TensorData] = {}
    try:
        for field, wire_type, a, b in iter_fields(buf, start, end):
            if field == 1:
                expect_wire_type(wire_type, WT_LEN, f"{where}.model_input")
                chunks.append(_decode_chunk(buf, a, b, f"{where}.model_input[{len(chunks)}]"))
            elif field == 2:
                expect_wire_type(wire_type, WT_LEN, f"{where}.loss_fn_inputs")
                name, tensor = _decode_tensor_entry(buf, a, b, f"{where}.loss_fn_inputs")
                inputs[name] = tensor
        return types.Datum(model_input=types.ModelInput(chunks=chunks), loss_fn_inputs=inputs)
    except InvalidInputError as exc:
        raise WireFormatError(f"protobuf: {where}: {exc}") from exc


def _decode_chunk(buf: bytes, start: int, end: int, where: str) -> types.ModelInputChunk:
    kind = 0
    a_sel = b_sel = 0
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field in (1, 2, 3):
            expect_wire_type(wire_type, WT_LEN, where)
            kind, a_sel, b_sel = field, a, b
    if kind == 1:
        token_range = (b_sel, b_sel)
        for field, wire_type, a, b in iter_fields(buf, a_sel, b_sel):
            if field == 1:
                expect_wire_type(wire_type, WT_LEN, f"{where}.encoded_text.tokens")
                token_range = (a, b)
        ids = read_array(buf, *token_range, _I32, f"{where}.encoded_text.tokens")
        return types.EncodedTextChunk(tokens=ids)
    if kind == 2:
        data = b""
        image_format = ""
        expected: int | None = None
        for field, wire_type, a, b in iter_fields(buf, a_sel, b_sel):
            if field == 1:
                expect_wire_type(wire_type, WT_LEN, f"{where}.image.data")
                data = buf[a:b]
            elif field == 2:
                expect_wire_type(wire_type, WT_LEN, f"{where}.image.format")
                image_format = read_string(buf, a, b, f"{where}.image.format")
            elif field == 3:
                expect_wire_type(wire_type, WT_VARINT, f"{where}.image.expected_tokens")
                expected = as_int32(a)
        return types.ImageChunk(
            data=data,
            format=image_format,  # type: ignore[arg-type]  # validated by ImageChunk
            expected_tokens=expected,
        )
    if kind == 3:
        raise WireFormatError(f"protobuf: {where}: dmel (audio) chunks are not supported")
    raise WireFormatError(f"protobuf: {where}: chunk has no content")


def _decode_tensor_entry(
    buf: bytes, start: int, end: int, where: str
) -> tuple[str, types.TensorData]:
    name, tensor_range = _read_entry(buf, start, end, where, WT_LEN)
    return name, _decode_tensor(buf, *(tensor_range or (end, end)), f"{where}[{name!r}]")


def _decode_tensor(buf: bytes, start: int, end: int, where: str) -> types.TensorData:
    dense: tuple[int, int] | None = None
    sparse: tuple[int, int] | None = None
    code = DTYPE_UNSPECIFIED
    shape: list[int] = []
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, f"{where}.dense")
            dense, sparse = (a, b), None
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, f"{where}.sparse_csr")
            sparse, dense = (a, b), None
        elif field == 3:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.dtype")
            code = as_int32(a)
        elif field == 4:
            read_int64s(buf, wire_type, a, b, into=shape, where=f"{where}.shape")
    wire_dtype, dtype_name = _tensor_dtype(code, where)
    if any(dim < 0 for dim in shape):
        raise WireFormatError(f"protobuf: {where}.shape {shape} has a negative dimension")
    if sparse is not None:
        values = _sparse_to_dense(buf, sparse, wire_dtype, shape, where)
    else:
        values = read_array(buf, *(dense or (end, end)), wire_dtype, f"{where}.dense")
        if shape and math.prod(shape) != values.size:
            raise WireFormatError(
                f"protobuf: {where}.shape {shape} does not match its {values.size} values"
            )
    return types.TensorData._trusted(_owned(_widen(values, code)), dtype_name, shape or None)


def _tensor_dtype(code: int, where: str) -> tuple[np.dtype[Any], types.TensorDtype]:
    # WIRE.md §13.6: int32 is reported as int64 and bfloat16 widened to float32.
    if code == DTYPE_FLOAT32:
        return _F32, "float32"
    if code == DTYPE_INT64:
        return _I64, "int64"
    if code == DTYPE_INT32:
        return _I32, "int64"
    if code == DTYPE_BFLOAT16:
        return _U16, "float32"
    raise WireFormatError(f"protobuf: {where}.dtype {_DTYPE_NAMES.get(code, code)} is not usable")


def _widen(values: npt.NDArray[Any], code: int) -> npt.NDArray[Any]:
    if code == DTYPE_BFLOAT16:
        # A bfloat16 is the upper half of a float32.
        return (values.astype(np.uint32) << 16).view(np.float32)
    if code == DTYPE_INT32:
        return values.astype(np.int64)
    return values


def _sparse_to_dense(
    buf: bytes, rng: tuple[int, int], wire_dtype: np.dtype[Any], shape: list[int], where: str
) -> npt.NDArray[Any]:
    values_range = crow_range = col_range = (rng[1], rng[1])
    for field, wire_type, a, b in iter_fields(buf, *rng):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, f"{where}.sparse_csr.values")
            values_range = (a, b)
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, f"{where}.sparse_csr.crow_indices")
            crow_range = (a, b)
        elif field == 3:
            expect_wire_type(wire_type, WT_LEN, f"{where}.sparse_csr.col_indices")
            col_range = (a, b)
    values = read_array(buf, *values_range, wire_dtype, f"{where}.sparse_csr.values")
    crow = read_array(buf, *crow_range, _I64, f"{where}.sparse_csr.crow_indices")
    col = read_array(buf, *col_range, _I64, f"{where}.sparse_csr.col_indices")
    try:
        return types._csr_to_dense(values, crow, col, shape)
    except ValueError as exc:
        raise WireFormatError(f"protobuf: {where}: {exc}") from None


# ---------------------------------------------------------------------------------------------
# ForwardBackwardOutput (server encodes, client decodes)
# ---------------------------------------------------------------------------------------------


def encode_forward_backward_output(out: types.ForwardBackwardOutput) -> bytes:
    """Return the protobuf body of a forward/forward_backward result.

    Consecutive datums whose outputs have the same keys, dtypes and trailing shapes share one
    ``ArrayRecord`` (datum data concatenated, int64 byte offsets).
    """
    message = Writer()
    if out.loss_fn_output_type:
        message.string_field(_K1_LEN, out.loss_fn_output_type)
    group: list[dict[str, types.TensorData]] = []
    signature: tuple[tuple[str, str, tuple[int, ...]], ...] | None = None
    for outputs in out.loss_fn_outputs:
        current = tuple(
            (name, tensor.dtype, _trailing_shape(tensor)) for name, tensor in outputs.items()
        )
        if group and current != signature:
            message.message_field(_K2_LEN, _encode_array_record(group, signature or ()))
            group = []
        group.append(outputs)
        signature = current
    if group:
        message.message_field(_K2_LEN, _encode_array_record(group, signature or ()))
    for name, value in out.metrics.items():
        entry = Writer()
        entry.string_field(_K1_LEN, name)
        entry.double_field(_K2_I64, float(value))
        message.message_field(_K3_LEN, entry)
    return message.getvalue()


def _trailing_shape(tensor: types.TensorData) -> tuple[int, ...]:
    shape = tensor.shape
    return tuple(shape[1:]) if shape else ()


def _encode_array_record(
    group: list[dict[str, types.TensorData]],
    signature: tuple[tuple[str, str, tuple[int, ...]], ...],
) -> Writer:
    record = Writer()
    for name, dtype_name, trailing in signature:
        dtype: np.dtype[Any] = _F32 if dtype_name == "float32" else _I64
        code = DTYPE_FLOAT32 if dtype_name == "float32" else DTYPE_INT64
        arrays = [np.ascontiguousarray(outputs[name].data, dtype=dtype) for outputs in group]
        offsets = np.zeros(len(arrays) + 1, dtype=_I64)
        np.cumsum([array.nbytes for array in arrays], out=offsets[1:])
        batched = Writer()
        data = np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)
        if data.size:
            batched.array_field(_K1_LEN, data)
        batched.array_field(_K2_LEN, offsets)
        batched.varint_field(_K3_VARINT, code)
        if trailing:
            batched.packed_varints_field(_K4_LEN, trailing)
        entry = Writer()
        entry.string_field(_K1_LEN, name)
        entry.message_field(_K2_LEN, batched)
        record.message_field(_K2_LEN, entry)
    record.varint_field(_K3_VARINT, len(group))
    return record


def decode_forward_backward_output(
    body: bytes | bytearray | memoryview,
) -> types.ForwardBackwardOutput:
    """Decode a ``ForwardBackwardOutput`` body into per-datum TensorData and metrics."""
    buf = _as_bytes(body)
    output_type = ""
    outputs: list[dict[str, types.TensorData]] = []
    metrics: dict[str, float] = {}
    for field, wire_type, a, b in iter_fields(buf, 0, len(buf)):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardOutput.loss_fn_output_type")
            output_type = read_string(buf, a, b, "ForwardBackwardOutput.loss_fn_output_type")
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardOutput.loss_fn_outputs")
            outputs.extend(_decode_array_record(buf, a, b, len(outputs)))
        elif field == 3:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardOutput.metrics")
            name, number = _read_double_entry(buf, a, b, "ForwardBackwardOutput.metrics")
            metrics[name] = number
    # WIRE.md §13.6: the output type is reduced to the part after the last ':'.
    return types.ForwardBackwardOutput(
        loss_fn_output_type=output_type.rsplit(":", 1)[-1],
        loss_fn_outputs=outputs,
        metrics=metrics,
    )


def _decode_array_record(
    buf: bytes, start: int, end: int, first_index: int
) -> list[dict[str, types.TensorData]]:
    where = "ForwardBackwardOutput.loss_fn_outputs"
    num_datums = 0
    columns: dict[str, list[types.TensorData]] = {}
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field == 2:
            expect_wire_type(wire_type, WT_LEN, f"{where}.fields")
            name, tensor_range = _read_entry(buf, a, b, f"{where}.fields", WT_LEN)
            columns[name] = _decode_batched_tensor(
                buf, *(tensor_range or (b, b)), f"{where}.fields[{name!r}]"
            )
        elif field == 3:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.num_datums")
            num_datums = as_int64(a)
        elif field == 1:
            expect_wire_type(wire_type, WT_LEN, f"{where}.type_tag")
    sizes = {len(column) for column in columns.values()}
    if len(sizes) > 1 or (sizes and num_datums and sizes != {num_datums}):
        raise WireFormatError(
            f"protobuf: {where}: fields hold {sorted(sizes)} datums, num_datums is {num_datums}"
        )
    count = sizes.pop() if sizes else num_datums
    if count < 0 or (not columns and count > _MAX_EMPTY_RECORD_DATUMS):
        raise WireFormatError(f"protobuf: {where}.num_datums {num_datums} is invalid")
    return [{name: column[i] for name, column in columns.items()} for i in range(count)]


def _decode_batched_tensor(buf: bytes, start: int, end: int, where: str) -> list[types.TensorData]:
    data_range = offsets_range = (end, end)
    code = DTYPE_UNSPECIFIED
    trailing: list[int] = []
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, f"{where}.data")
            data_range = (a, b)
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, f"{where}.offsets")
            offsets_range = (a, b)
        elif field == 3:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.dtype")
            code = as_int32(a)
        elif field == 4:
            read_int64s(buf, wire_type, a, b, into=trailing, where=f"{where}.trailing_shape")
    wire_dtype, dtype_name = _tensor_dtype(code, where)
    itemsize = wire_dtype.itemsize
    values = read_array(buf, *data_range, wire_dtype, f"{where}.data")
    offsets = read_array(buf, *offsets_range, _I64, f"{where}.offsets")
    if any(dim < 0 for dim in trailing):
        raise WireFormatError(f"protobuf: {where}.trailing_shape {trailing} is negative")
    per_row = math.prod(trailing)
    if offsets.size == 0:
        if values.size:
            raise WireFormatError(f"protobuf: {where} has data but no offsets")
        return []
    # WIRE.md §13.6: offsets are int64 byte offsets into data, one per datum plus the end.
    nbytes = data_range[1] - data_range[0]
    if (
        int(offsets[0]) < 0
        or int(offsets[-1]) > nbytes
        or bool(np.any(np.diff(offsets) < 0))
        or bool(np.any(offsets % itemsize))
    ):
        raise WireFormatError(f"protobuf: {where}.offsets are out of range or not aligned")
    # One copy for all datums, aligned and independent of the body they were read from.
    widened = _owned(_widen(values, code))
    bounds = (offsets // itemsize).tolist()
    result: list[types.TensorData] = []
    trusted = types.TensorData._trusted
    for i in range(len(bounds) - 1):
        segment = widened[bounds[i] : bounds[i + 1]]
        size = segment.size
        if per_row:
            if size % per_row:
                raise WireFormatError(
                    f"protobuf: {where}: datum {i} has {size} values, "
                    f"not a multiple of trailing shape {trailing}"
                )
            shape = [size // per_row, *trailing]
        elif size:
            raise WireFormatError(f"protobuf: {where}: values with an empty trailing shape")
        else:
            shape = [0, *trailing]
        result.append(trusted(segment, dtype_name, shape))
    return result


def _owned(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Return ``values`` as a read-only array of its own (not a view into a body), native order."""
    native = np.dtype(np.float32) if values.dtype.kind == "f" else np.dtype(np.int64)
    if values.base is not None or values.dtype != native:
        values = np.array(values, dtype=native)
    values.flags.writeable = False
    return values


# ---------------------------------------------------------------------------------------------
# SampleResponse (server encodes, client decodes)
# ---------------------------------------------------------------------------------------------


def encode_sample_response(resp: types.SampleResponse) -> bytes:
    """Return the protobuf body of a sample result."""
    message = Writer()
    for index, sequence in enumerate(resp.sequences):
        where = f"sequences[{index}]"
        seq = Writer()
        reason = str(sequence.stop_reason)
        if reason == types.StopReason.LENGTH.value:
            seq.varint_field(_K1_VARINT, STOP_REASON_LENGTH)
        elif reason != types.StopReason.STOP.value:
            raise WireFormatError(f"protobuf: {where}.stop_reason {reason!r} has no enum value")
        if sequence.tokens:
            seq.bytes_field(_K2_LEN, _pack_int32s(sequence.tokens, f"{where}.tokens"))
        if sequence.logprobs is not None:
            seq.array_field(_K3_LEN, np.asarray(sequence.logprobs, dtype=_F32))
        message.message_field(_K1_LEN, seq)
    if resp.prompt_logprobs is not None:
        # WIRE.md §13.6: a missing prompt logprob travels as NaN.
        values = [math.nan if value is None else value for value in resp.prompt_logprobs]
        message.array_field(_K2_LEN, np.asarray(values, dtype=_F32))
    if resp.topk_prompt_logprobs is not None:
        message.message_field(_K3_LEN, _encode_topk(resp.topk_prompt_logprobs))
    return message.getvalue()


def _pack_int32s(values: Sequence[int], where: str) -> bytes:
    try:
        return struct.pack(f"<{len(values)}i", *values)
    except struct.error as exc:
        raise WireFormatError(f"protobuf: {where} holds a value outside int32") from exc


def _encode_topk(rows: Sequence[Sequence[tuple[int, float]] | None]) -> Writer:
    k = max((len(row) for row in rows if row), default=0)
    length = len(rows)
    token_ids = np.full((length, k), TOPK_MASK_TOKEN, dtype=_I32)
    logprobs = np.full((length, k), TOPK_MASK_LOGPROB, dtype=_F32)
    for i, row in enumerate(rows):
        try:
            for j, (token, logprob) in enumerate(row or ()):
                token_ids[i, j] = token
                logprobs[i, j] = logprob
        except (OverflowError, TypeError, ValueError) as exc:
            raise WireFormatError(
                f"protobuf: topk_prompt_logprobs[{i}] needs (int32 token, float) pairs: {exc}"
            ) from exc
    topk = Writer()
    if token_ids.size:
        topk.array_field(_K1_LEN, token_ids)
        topk.array_field(_K2_LEN, logprobs)
    if k:
        topk.varint_field(_K3_VARINT, k)
    if length:
        topk.varint_field(_K4_VARINT, length)
    return topk


def decode_sample_response(body: bytes | bytearray | memoryview) -> types.SampleResponse:
    """Decode a ``SampleResponse`` body (NaN prompt logprobs and top-k padding become None)."""
    buf = _as_bytes(body)
    sequences: list[types.SampledSequence] = []
    prompt_logprobs: list[float | None] | None = None
    topk: list[list[tuple[int, float]] | None] | None = None
    for field, wire_type, a, b in iter_fields(buf, 0, len(buf)):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, "SampleResponse.sequences")
            sequences.append(_decode_sampled_sequence(buf, a, b, len(sequences)))
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, "SampleResponse.prompt_logprobs")
            values = read_array(buf, a, b, _F32, "SampleResponse.prompt_logprobs").tolist()
            prompt_logprobs = [None if math.isnan(value) else value for value in values]
        elif field == 3:
            expect_wire_type(wire_type, WT_LEN, "SampleResponse.topk_prompt_logprobs")
            topk = _decode_topk(buf, a, b, "SampleResponse.topk_prompt_logprobs")
        elif field == 4:
            expect_wire_type(wire_type, WT_VARINT, "SampleResponse.prompt_cache_hit_tokens")
    return types.SampleResponse(
        sequences=sequences, prompt_logprobs=prompt_logprobs, topk_prompt_logprobs=topk
    )


def _decode_sampled_sequence(buf: bytes, start: int, end: int, index: int) -> types.SampledSequence:
    where = f"SampleResponse.sequences[{index}]"
    reason = STOP_REASON_STOP
    tokens: list[int] = []
    logprobs: list[float] | None = None
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field == 1:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.stop_reason")
            reason = as_int32(a)
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, f"{where}.tokens")
            tokens = read_array(buf, a, b, _I32, f"{where}.tokens").tolist()
        elif field == 3:
            expect_wire_type(wire_type, WT_LEN, f"{where}.logprobs")
            logprobs = read_array(buf, a, b, _F32, f"{where}.logprobs").tolist()
        elif field == 4:
            expect_wire_type(wire_type, WT_LEN, f"{where}.topk_sampled_logprobs")
    if reason == STOP_REASON_STOP:
        stop_reason = types.StopReason.STOP
    elif reason == STOP_REASON_LENGTH:
        stop_reason = types.StopReason.LENGTH
    else:
        # A reason newer than this release: kept (StopReason tolerates unknown values).
        stop_reason = types.StopReason(f"stop_reason_{reason}")
    return types.SampledSequence(stop_reason=stop_reason, tokens=tokens, logprobs=logprobs)


def _decode_topk(
    buf: bytes, start: int, end: int, where: str
) -> list[list[tuple[int, float]] | None]:
    ids_range = logprobs_range = (end, end)
    k = length = 0
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, f"{where}.token_ids")
            ids_range = (a, b)
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, f"{where}.logprobs")
            logprobs_range = (a, b)
        elif field == 3:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.k")
            k = as_uint32(a)
        elif field == 4:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.length")
            length = as_uint32(a)
    token_ids = read_array(buf, *ids_range, _I32, f"{where}.token_ids")
    logprobs = read_array(buf, *logprobs_range, _F32, f"{where}.logprobs")
    if token_ids.size != k * length or logprobs.size != k * length:
        raise WireFormatError(
            f"protobuf: {where}: {token_ids.size} token ids and {logprobs.size} logprobs "
            f"for length {length} x k {k}"
        )
    if k == 0:
        return [None] * length
    id_rows = token_ids.reshape(length, k).tolist()
    lp_rows = logprobs.reshape(length, k).tolist()
    rows: list[list[tuple[int, float]] | None] = []
    for id_row, lp_row in zip(id_rows, lp_rows, strict=True):
        cells = [
            (token, logprob)
            for token, logprob in zip(id_row, lp_row, strict=True)
            if token != TOPK_MASK_TOKEN or logprob != TOPK_MASK_LOGPROB
        ]
        rows.append(cells or None)
    return rows


# ---------------------------------------------------------------------------------------------
# Optional zstd (WIRE.md §13.3: Content-Encoding: zstd with proto_compress_fwdbwd)
# ---------------------------------------------------------------------------------------------


def _zstd() -> Any | None:
    try:
        return importlib.import_module("zstandard")
    except ImportError:
        return None


def zstd_available() -> bool:
    """Return whether zstd bodies can be written and read (the ``zstandard`` package imports)."""
    return _zstd() is not None


def compress(body: bytes, level: int = 3) -> bytes:
    """Return ``body`` as one zstd frame (for ``Content-Encoding: zstd``)."""
    module = _zstd()
    if module is None:
        raise WireFormatError(
            "zstd compression needs the 'zstandard' package (pip install zstandard)"
        )
    result: bytes = module.ZstdCompressor(level=level).compress(body)
    return result


def decompress(body: bytes) -> bytes:
    """Return the bytes of a zstd-compressed body."""
    module = _zstd()
    if module is None:
        raise WireFormatError(
            "a zstd body needs the 'zstandard' package to be read (pip install zstandard)"
        )
    try:
        result: bytes = module.ZstdDecompressor().decompressobj().decompress(body)
    except module.ZstdError as exc:
        raise WireFormatError(f"zstd: {exc}") from exc
    return result
