"""``DmelChunk`` (official module ``tinker.types.dmel_chunk``)."""

from __future__ import annotations

from typing import Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _binary

__all__ = ["DmelChunk"]

# A TensorContainer starts with a header: an optional marker byte for a constant tensor, the
# dtype byte, then the number of dimensions and each dimension as unsigned LEB128 varints.
_CONSTANT_MARKER = 0xFE
_DTYPE_BYTES = range(8)
_MAX_VARINT_BYTES = 10

_HINT = (
    "pass the serialized TensorContainer of the audio's DMel tokens, whose first dimension is "
    "the number of model positions"
)


def _dmel_bytes(value: bytes | bytearray | memoryview | str) -> bytes:
    return _binary("DmelChunk.dmel", value, "TensorContainer")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``data[at:]`` and the offset after it."""
    value = 0
    for count, byte in enumerate(data[at : at + _MAX_VARINT_BYTES], start=1):
        value |= (byte & 0x7F) << (7 * (count - 1))
        if byte < 0x80:
            return value, at + count
    if len(data) - at >= _MAX_VARINT_BYTES:
        raise ValueError("the TensorContainer header has a varint longer than 10 bytes")
    raise ValueError("the TensorContainer header is truncated")


def _tensor_container_shape(data: bytes) -> tuple[int, ...]:
    """The shape written in a TensorContainer's header; the payload is not read.

    Raises ValueError saying what is wrong when ``data`` does not start with a header.
    """
    if not data:
        raise ValueError("is empty, so it has no TensorContainer header")
    at = 1 if data[0] == _CONSTANT_MARKER else 0
    if at >= len(data):
        raise ValueError("the TensorContainer header is truncated")
    if data[at] not in _DTYPE_BYTES:
        raise ValueError(f"the TensorContainer header's dtype byte {data[at]} is not one of 0-7")
    ndim, at = _varint(data, at + 1)
    shape = []
    for _ in range(ndim):
        dim, at = _varint(data, at)
        shape.append(dim)
    return tuple(shape)


@attrs.frozen(kw_only=True)
class DmelChunk:
    """An audio chunk: ``dmel`` holds the serialized TensorContainer of its DMel tokens
    (bytes, or base64 text which is decoded).

    ``length``, the model positions it takes, is the first dimension of the tensor, read from
    the header when asked: any bytes make a chunk, and a malformed header raises
    :class:`~tinker_lite.InvalidInputError` (a ValueError) from ``length``, and when the chunk
    is sent.
    """

    dmel: bytes = attrs.field(converter=_dmel_bytes, repr=False)
    type: Literal["dmel"] = "dmel"

    @property
    def length(self) -> int:
        """Model positions: dimension 0 of the TensorContainer's shape."""
        return self._checked_length("DmelChunk.dmel")

    def _checked_length(self, field: str) -> int:
        """``length``, or InvalidInputError naming ``field`` for a malformed header."""
        try:
            shape = _tensor_container_shape(self.dmel)
        except ValueError as e:
            raise InvalidInputError(field, str(e), _HINT) from None
        if not shape:
            raise InvalidInputError(field, "holds a tensor of no dimension (a scalar)", _HINT)
        return shape[0]
