"""zstd request bodies (docs/protocol.rst §3.5), with the optional ``zstandard`` package."""

from __future__ import annotations

import importlib
from typing import Any

from tinker_lite._errors import WireFormatError

__all__ = ["compress", "zstd_available"]


def _zstd() -> Any | None:
    try:
        return importlib.import_module("zstandard")
    except ImportError:
        return None


def zstd_available() -> bool:
    """Whether the ``zstandard`` package imports."""
    return _zstd() is not None


def compress(body: bytes) -> bytes:
    """``body`` as one zstd frame (level 3)."""
    module = _zstd()
    if module is None:
        raise WireFormatError(
            "zstd compression needs the 'zstandard' package (pip install zstandard)"
        )
    result: bytes = module.ZstdCompressor(level=3).compress(body)
    return result
