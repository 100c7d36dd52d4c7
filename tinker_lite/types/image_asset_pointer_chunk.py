"""``ImageAssetPointerChunk`` (official module ``tinker.types.image_asset_pointer_chunk``)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import ImageFormat, _check_image_counts, _check_image_format, _check_str, _set


@attrs.frozen
class ImageAssetPointerChunk:
    """An image stored elsewhere, referenced by ``location`` (path or URL)."""

    location: str
    format: ImageFormat
    expected_tokens: int | None = None
    height: int | None = None
    width: int | None = None
    tokens: int | None = None
    type: Literal["image_asset_pointer"] = attrs.field(default="image_asset_pointer", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("ImageAssetPointerChunk.location", self.location)
        _set(self, "format", _check_image_format("ImageAssetPointerChunk.format", self.format))
        _check_image_counts(self, "ImageAssetPointerChunk")

    @property
    def length(self) -> int:
        """Model positions the image takes (expected_tokens, else tokens, else 0 = unknown)."""
        return self.expected_tokens or self.tokens or 0
