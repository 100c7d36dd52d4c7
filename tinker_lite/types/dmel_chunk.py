"""``DmelChunk`` (official module ``tinker.types.dmel_chunk``)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import _image_bytes

__all__ = ["DmelChunk"]


def _dmel_bytes(value: bytes | bytearray | memoryview | str) -> bytes:
    return _image_bytes("DmelChunk.dmel", value)


@attrs.frozen(kw_only=True)
class DmelChunk:
    """An audio chunk as encoded mel features (``dmel`` bytes).

    Not a ``ModelInputChunk`` of tinker_lite yet: it cannot be sent in a model input.
    """

    dmel: bytes = attrs.field(converter=_dmel_bytes, repr=False)
    type: Literal["dmel"] = "dmel"
