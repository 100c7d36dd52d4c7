"""``repr`` that works on any object, built or half-built.

A constructor that raised halfway leaves an object without some attributes; a traceback with
locals, a debugger or a log line may still ``repr`` it. Such a repr says so instead of raising
``AttributeError`` (the default ``object.__repr__`` never raises either).
"""

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
