"""``ModelInputChunk`` (official module ``tinker.types.model_input_chunk``)."""

from __future__ import annotations

from .encoded_text_chunk import EncodedTextChunk
from .image_asset_pointer_chunk import ImageAssetPointerChunk
from .image_chunk import ImageChunk

ModelInputChunk = EncodedTextChunk | ImageChunk | ImageAssetPointerChunk


_CHUNK_TYPES = (EncodedTextChunk, ImageChunk, ImageAssetPointerChunk)
