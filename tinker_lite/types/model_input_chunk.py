"""``ModelInputChunk`` (official module ``tinker.types.model_input_chunk``)."""

from __future__ import annotations

from .dmel_chunk import DmelChunk
from .encoded_text_chunk import EncodedTextChunk
from .image_asset_pointer_chunk import ImageAssetPointerChunk
from .image_chunk import ImageChunk

ModelInputChunk = EncodedTextChunk | ImageChunk | ImageAssetPointerChunk | DmelChunk


_CHUNK_TYPES = (EncodedTextChunk, ImageChunk, ImageAssetPointerChunk, DmelChunk)
