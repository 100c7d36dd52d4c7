"""Audio chunks for the tests: TensorContainer bytes built by hand.

A TensorContainer starts with a header: an optional constant-tensor marker byte (254), the dtype
byte (0-7), then the number of dimensions and each dimension as unsigned varints; the payload
follows. ``DmelChunk.length`` is dimension 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinker_lite import types

__all__ = ["dmel_chunk", "tensor_container"]


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tensor_container(
    shape: Sequence[int], *, dtype: int = 1, constant: bool = False, payload: bytes = b"\0" * 4
) -> bytes:
    """TensorContainer bytes of ``shape`` (a constant tensor's with ``constant``)."""
    header = bytes([254]) if constant else b""
    header += bytes([dtype]) + _varint(len(shape)) + b"".join(_varint(dim) for dim in shape)
    return header + payload


def dmel_chunk(positions: int, mels: int = 80) -> types.DmelChunk:
    """An audio chunk of ``positions`` model positions."""
    return types.DmelChunk(dmel=tensor_container((positions, mels)))
