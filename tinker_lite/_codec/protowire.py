"""Protobuf pieces shared by the client's and the local server's codecs: wire types, varints and
the field scanner, the :class:`Writer` and :func:`read_message`, one reader driven by each
message's field table (docs/architecture.rst).
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

from tinker_lite import types
from tinker_lite._errors import InvalidInputError, WireFormatError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

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


# Little-endian numpy dtypes F32, I64, I32 and U16, made on first use (module __getattr__).
_NUMPY_DTYPES: Final = {"F32": "<f4", "I64": "<i8", "I32": "<i4", "U16": "<u2"}
if TYPE_CHECKING:
    F32: np.dtype[Any]
    I64: np.dtype[Any]
    I32: np.dtype[Any]
    U16: np.dtype[Any]

# array.array typecodes of the same little-endian wire types: a stdlib array's bytes are the
# wire's bytes only on a little-endian host (elsewhere they are byte-swapped).
CODE_F32: Final = "f"
CODE_I64: Final = "q"
CODE_I32: Final = "i"
LITTLE_ENDIAN: Final = sys.byteorder == "little"


def _dtype(name: str) -> np.dtype[Any]:
    spec = _NUMPY_DTYPES.get(name)
    if spec is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import numpy as np

    dtype = np.dtype(spec)
    globals()[name] = dtype
    return dtype


if not TYPE_CHECKING:  # hidden from mypy, which then still sees a misspelled attribute
    __getattr__ = _dtype


# enum DType (docs/protocol.rst §3.4)
DTYPE_UNSPECIFIED: Final = 0
DTYPE_FLOAT32: Final = 1
DTYPE_INT64: Final = 2
DTYPE_INT32: Final = 3
DTYPE_BFLOAT16: Final = 4
DTYPE_NAMES: Final = {
    DTYPE_UNSPECIFIED: "DTYPE_UNSPECIFIED",
    DTYPE_FLOAT32: "DTYPE_FLOAT32",
    DTYPE_INT64: "DTYPE_INT64",
    DTYPE_INT32: "DTYPE_INT32",
    DTYPE_BFLOAT16: "DTYPE_BFLOAT16",
}
# enum StopReason (docs/protocol.rst §3.4)
STOP_REASON_STOP: Final = 0
STOP_REASON_LENGTH: Final = 1

# docs/protocol.rst §3.4: top-k cells padded with (token 0, logprob -99999.0) are empty.
TOPK_MASK_TOKEN: Final = 0
TOPK_MASK_LOGPROB: Final = -99999.0


class FieldError(WireFormatError):
    """A field the reader cannot use; each enclosing message adds its place to ``path``."""

    def __init__(self, problem: str, path: str = "") -> None:
        super().__init__(f"protobuf: {path}: {problem}" if path else f"protobuf: {problem}")
        self.problem = problem
        self.path = path

    def within(self, segment: str) -> FieldError:
        if not self.path:
            return FieldError(self.problem, segment)
        joint = "" if self.path.startswith("[") else "."
        return FieldError(self.problem, f"{segment}{joint}{self.path}")


# How the occurrences of a field combine: the last one wins (a oneof member: into the oneof, as
# ``(name, value)``); each is appended; a repeated int64 packed or not; map entries.
ONE: Final = 0
LIST: Final = 1
PACKED: Final = 2
MAP: Final = 3


class Field(NamedTuple):
    """One row of a message table; ``read(buf, a, b)`` decodes one occurrence (as iter_fields')."""

    name: str
    wire_type: int
    read: Callable[[bytes, int, int], Any]
    kind: int = ONE
    oneof: str | None = None


class Message(NamedTuple):
    """A message table (field number -> Field) and what to build from the fields read."""

    name: str
    fields: Mapping[int, Field]
    build: Callable[[dict[str, Any]], Any] = dict

    def read(self, buf: bytes, start: int, end: int) -> Any:
        values = read_message(buf, start, end, self)
        try:
            return self.build(values)
        except InvalidInputError as exc:  # a model's constructor refused what was read
            raise FieldError(str(exc)) from exc


def read_message(buf: bytes, start: int, end: int, message: Message) -> dict[str, Any]:
    """The fields of ``message`` present in ``buf[start:end]``; unknown ones are skipped."""
    values: dict[str, Any] = {}
    table = message.fields
    for number, wire_type, a, b in iter_fields(buf, start, end):
        field = table.get(number)
        if field is None:
            continue
        name, expected, read, kind, oneof = field
        try:
            if wire_type != expected:
                if kind != PACKED or wire_type != WT_VARINT:
                    raise FieldError(f"has wire type {wire_type}, expected {expected}")
                values.setdefault(name, []).append(as_int64(a))  # a repeated int64, unpacked
                continue
            if kind == ONE:
                if oneof is None:
                    values[name] = read(buf, a, b)
                else:
                    values[oneof] = (name, read(buf, a, b))
            elif kind == LIST:
                values.setdefault(name, []).append(read(buf, a, b))
            elif kind == PACKED:
                values.setdefault(name, []).extend(read(buf, a, b))
            else:
                key, value = read(buf, a, b)
                values.setdefault(name, {})[key] = value
        except FieldError as exc:
            index = f"[{len(values.get(name, ()))}]" if kind == LIST else ""
            raise exc.within(name + index) from None
    return values


def decode(body: bytes | bytearray | memoryview, message: Message) -> Any:
    """Read a whole body as ``message``; WireFormatError naming the path of a bad field."""
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise WireFormatError(f"protobuf: body must be bytes, got {type(body).__name__}")
    buf = bytes(body)  # no copy of a bytes object
    try:
        return message.read(buf, 0, len(buf))
    except FieldError as exc:
        raise WireFormatError(str(exc.within(message.name))) from exc.__cause__


class MapEntry(NamedTuple):
    """The decoder of a ``map<string, V>`` entry; a missing value is V's proto3 default."""

    value: Field
    default: Any = None

    def read(self, buf: bytes, start: int, end: int) -> tuple[str, Any]:
        entry = read_message(buf, start, end, _ENTRIES[self.value.wire_type])
        key: str = entry.get("key", "")
        found: tuple[int, int] | None = entry.get("value")
        if found is None:
            if self.value.wire_type != WT_LEN:
                return key, self.default
            found = (end, end)
        try:
            return key, self.value.read(buf, *found)
        except FieldError as exc:
            raise exc.within(f"[{key!r}]") from None


def map_field(name: str, value: Field, default: Any = None) -> Field:
    return Field(name, WT_LEN, MapEntry(value, default).read, MAP)


# Decoders of scalar fields, for the tables: (buf, a, b) -> value.


def read_int32(buf: bytes, a: int, b: int) -> int:
    return as_int32(a)


def read_int64(buf: bytes, a: int, b: int) -> int:
    return as_int64(a)


def read_uint32(buf: bytes, a: int, b: int) -> int:
    return as_uint32(a)


def read_bool(buf: bytes, a: int, b: int) -> bool:
    return a != 0


def read_double(buf: bytes, a: int, b: int = 0) -> float:
    value: float = DOUBLE.unpack_from(buf, a)[0]
    return value


def read_string(buf: bytes, a: int, b: int) -> str:
    try:
        return buf[a:b].decode("utf-8")
    except UnicodeDecodeError:
        raise FieldError("is not valid UTF-8") from None


def read_bytes(buf: bytes, a: int, b: int) -> bytes:
    return buf[a:b]


def read_span(buf: bytes, a: int, b: int) -> tuple[int, int]:
    return a, b


def read_view(buf: bytes, a: int, b: int) -> memoryview:
    return memoryview(buf)[a:b]


def read_packed_int64s(buf: bytes, a: int, b: int) -> list[int]:
    values = []
    pos = a
    while pos < b:
        value, pos = read_varint(buf, pos, b)
        values.append(as_int64(value))
    return values


# The map entries: the key, and where the value is (its decoder runs once the key is known).
_ENTRIES: Final = {
    wire_type: Message(
        "entry", {1: Field("key", WT_LEN, read_string), 2: Field("value", wire_type, read_span)}
    )
    for wire_type in (WT_LEN, WT_I64)
}


def read_array(view: memoryview | bytes, dtype: np.dtype[Any], name: str = "") -> npt.NDArray[Any]:
    import numpy as np

    if len(view) % dtype.itemsize:
        raise FieldError(f"has {len(view)} bytes, not a multiple of {dtype.itemsize}", name)
    return np.frombuffer(view, dtype=dtype)


def read_list(buf: bytes, a: int, b: int, code: Literal["i", "f"]) -> list[Any]:
    view = memoryview(buf)[a:b]
    if len(view) % 4 or not LITTLE_ENDIAN:
        return read_values(view, code).tolist()  # a partial value's error, or a byte swap
    return view.cast(code).tolist()


def read_values(view: memoryview | bytes, code: str, name: str = "") -> array[Any]:
    values = array(code)
    if len(view) % values.itemsize:
        raise FieldError(f"has {len(view)} bytes, not a multiple of {values.itemsize}", name)
    values.frombytes(view)
    if not LITTLE_ENDIAN:  # pragma: no cover - the wire is little-endian
        values.byteswap()
    return values


class Writer:
    """Byte pieces and their total size, joined once by :meth:`getvalue` (arrays without a copy)."""

    __slots__ = ("parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0

    def raw(self, data: bytes | memoryview) -> None:
        self.parts.append(data)
        self.size += len(data)

    def varint_field(self, key: bytes, value: int) -> None:
        self.raw(key + encode_varint(value))

    def double_field(self, key: bytes, value: float) -> None:
        self.raw(key + DOUBLE.pack(value))

    def bytes_field(self, key: bytes, data: bytes | memoryview) -> None:
        self.raw(key + encode_varint(len(data)))
        self.raw(data)

    def string_field(self, key: bytes, text: str) -> None:
        self.bytes_field(key, text.encode("utf-8"))

    def array_field(self, key: bytes, values: npt.NDArray[Any]) -> None:
        self.bytes_field(key, values.reshape(-1).data.cast("B"))

    def packed_varints_field(self, key: bytes, values: Sequence[int]) -> None:
        self.bytes_field(key, b"".join(encode_varint(value) for value in values))

    def message_field(self, key: bytes, message: Writer) -> None:
        """Append a nested message field; ``message`` is used up."""
        self.raw(key + encode_varint(message.size))
        self.extend(message)

    def extend(self, other: Writer) -> None:
        """Append ``other``'s fields (no length prefix); ``other`` is used up."""
        self.parts.extend(other.parts)
        self.size += other.size

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


# Field keys of the messages this module writes (docs/protocol.rst §3.4 field numbers).
K1_VARINT: Final = field_key(1, WT_VARINT)
K1_I64: Final = field_key(1, WT_I64)
K1_LEN: Final = field_key(1, WT_LEN)
K2_VARINT: Final = field_key(2, WT_VARINT)
K2_I64: Final = field_key(2, WT_I64)
K2_LEN: Final = field_key(2, WT_LEN)
K3_VARINT: Final = field_key(3, WT_VARINT)
K3_LEN: Final = field_key(3, WT_LEN)
K4_VARINT: Final = field_key(4, WT_VARINT)
K4_LEN: Final = field_key(4, WT_LEN)
K5_LEN: Final = field_key(5, WT_LEN)
K6_VARINT: Final = field_key(6, WT_VARINT)
K6_LEN: Final = field_key(6, WT_LEN)
K7_LEN: Final = field_key(7, WT_LEN)
BOOL_TRUE: Final = b"\x01"

# Tensor and SparseCsr (docs/protocol.rst §3.4): read by both sides.
SPARSE_CSR: Final = Message(
    "SparseCsr",
    {
        1: Field("values", WT_LEN, read_view),
        2: Field("crow_indices", WT_LEN, read_view),
        3: Field("col_indices", WT_LEN, read_view),
    },
)

# docs/protocol.rst §3.4: per wire dtype, its stdlib typecode (None: numpy only), numpy dtype and
# the dtype it is reported as (int32 as int64, bfloat16 widened to float32).
_WIRE_DTYPES: Final[dict[int, tuple[str | None, str, types.TensorDtype]]] = {
    DTYPE_FLOAT32: (CODE_F32, "F32", "float32"),
    DTYPE_INT64: (CODE_I64, "I64", "int64"),
    DTYPE_INT32: (CODE_I32, "I32", "int64"),
    DTYPE_BFLOAT16: (None, "U16", "float32"),
}


def _tensor(values: dict[str, Any]) -> types.TensorData:
    kind, encoding = values.get("encoding", ("dense", b""))
    code: int = values.get("dtype", DTYPE_UNSPECIFIED)
    shape: list[int] = values.get("shape", [])
    if any(dim < 0 for dim in shape):
        raise FieldError(f"shape {shape} has a negative dimension")
    stdlib_code, _, dtype_name = _WIRE_DTYPES.get(code, (None, "", "float32"))
    if kind == "dense" and stdlib_code is not None:
        stored = read_values(encoding, stdlib_code, "dense")
        if shape and math.prod(shape) != len(stored):
            raise FieldError(f"shape {shape} does not match its {len(stored)} values")
        if code == DTYPE_INT32:
            stored = array(CODE_I64, stored)
        return types.TensorData._trusted(stored, dtype_name, shape or None)
    wire_dtype, dtype_name = tensor_dtype(code)
    if kind == "sparse_csr":
        dense = sparse_to_dense(encoding, wire_dtype, shape)
    else:
        dense = read_array(encoding, wire_dtype, "dense")
        if shape and math.prod(shape) != dense.size:
            raise FieldError(f"shape {shape} does not match its {dense.size} values")
    return types.TensorData._trusted(owned(widen(dense, code)), dtype_name, shape or None)


TENSOR: Final = Message(
    "Tensor",
    {
        1: Field("dense", WT_LEN, read_view, oneof="encoding"),
        2: Field("sparse_csr", WT_LEN, SPARSE_CSR.read, oneof="encoding"),
        3: Field("dtype", WT_VARINT, read_int32),
        4: Field("shape", WT_LEN, read_packed_int64s, PACKED),
    },
    _tensor,
)


def tensor_dtype(code: int) -> tuple[np.dtype[Any], types.TensorDtype]:
    if code not in _WIRE_DTYPES:
        raise FieldError(f"dtype {DTYPE_NAMES.get(code, code)} is not usable")
    _, name, dtype_name = _WIRE_DTYPES[code]
    return _dtype(name), dtype_name


def widen(values: npt.NDArray[Any], code: int) -> npt.NDArray[Any]:
    """bfloat16 bits as float32 (its upper half); int32 is widened by :func:`owned`."""
    import numpy as np

    if code == DTYPE_BFLOAT16:
        return (values.astype(np.uint32) << 16).view(np.float32)
    return values


def sparse_to_dense(
    csr: dict[str, memoryview], wire_dtype: np.dtype[Any], shape: list[int]
) -> npt.NDArray[Any]:
    values = read_array(csr.get("values", b""), wire_dtype, "sparse_csr.values")
    int64 = _dtype("I64")
    crow = read_array(csr.get("crow_indices", b""), int64, "sparse_csr.crow_indices")
    col = read_array(csr.get("col_indices", b""), int64, "sparse_csr.col_indices")
    try:
        return types._csr_to_dense(values, crow, col, shape)
    except ValueError as exc:
        raise FieldError(str(exc)) from None


def owned(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``values`` as a read-only array of its own (not a view into a body), native order."""
    import numpy as np

    native = np.dtype(np.float32) if values.dtype.kind == "f" else np.dtype(np.int64)
    if values.base is not None or values.dtype != native:
        values = np.array(values, dtype=native)
    values.flags.writeable = False
    return values
