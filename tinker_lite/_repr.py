"""``repr`` that works on a half-built object (a constructor raised) instead of raising."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

__all__ = ["tolerant_repr"]

T = TypeVar("T")


def tolerant_repr(method: Callable[[T], str]) -> Callable[[T], str]:
    """Wrap a ``__repr__``: an attribute not set yet gives ``<Name (incomplete)>``."""

    @functools.wraps(method)
    def __repr__(self: T) -> str:
        try:
            return method(self)
        except AttributeError:
            return f"<{type(self).__qualname__} (incomplete)>"

    return __repr__
