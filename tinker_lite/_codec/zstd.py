"""Optional zstd bodies (docs/protocol.rst §3.5: ``Content-Encoding: zstd`` when the service
sets ``proto_compress_fwdbwd``), read and written by both sides; ``zstandard`` is optional."""

from __future__ import annotations

import importlib
from typing import Any

from tinker_lite._errors import WireFormatError

__all__ = ["compress", "decompress", "zstd_available"]


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
