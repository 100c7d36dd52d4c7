"""zstd bodies (docs/protocol.rst §3.5), with the optional ``zstandard`` package."""

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


def _required(what: str) -> Any:
    module = _zstd()
    if module is None:
        raise WireFormatError(f"{what} needs the 'zstandard' package (pip install zstandard)")
    return module


def zstd_available() -> bool:
    """Whether the ``zstandard`` package imports."""
    return _zstd() is not None


def compress(body: bytes, level: int = 3) -> bytes:
    """``body`` as one zstd frame."""
    result: bytes = _required("zstd compression").ZstdCompressor(level=level).compress(body)
    return result


def decompress(body: bytes) -> bytes:
    module = _required("reading a zstd body")
    try:
        result: bytes = module.ZstdDecompressor().decompressobj().decompress(body)
    except module.ZstdError as exc:
        raise WireFormatError(f"zstd: {exc}") from exc
    return result
