"""``ImageChunk`` (official module ``tinker.types.image_chunk``)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import ImageFormat, _check_image_counts, _check_image_format, _image_bytes, _set


def _image_bytes_converter(value: bytes | bytearray | memoryview | str) -> bytes:
    return _image_bytes("ImageChunk.data", value)


@attrs.frozen
class ImageChunk:
    """An image given inline (bytes, or base64 text which is decoded).

    ``expected_tokens`` is the number of model positions the image takes; the 0.4.1 fields
    ``height``, ``width`` and ``tokens`` are accepted too. Each is sent only when set (the
    current service rejects ``height``/``width``/``tokens``; prefer ``expected_tokens``).
    """

    data: bytes = attrs.field(converter=_image_bytes_converter, repr=False)
    format: ImageFormat
    expected_tokens: int | None = None
    height: int | None = None
    width: int | None = None
    tokens: int | None = None
    type: Literal["image"] = attrs.field(default="image", init=False)

    def __attrs_post_init__(self) -> None:
        _set(self, "format", _check_image_format("ImageChunk.format", self.format))
        _check_image_counts(self, "ImageChunk")

    @property
    def length(self) -> int:
        """Model positions the image takes (expected_tokens, else tokens, else 0 = unknown)."""
        return self.expected_tokens or self.tokens or 0
