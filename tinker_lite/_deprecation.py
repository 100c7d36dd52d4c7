"""Deprecated and experimental methods, warned about as the official SDK 0.38 warns.

The official SDK marks a method with ``typing_extensions.deprecated(..., category=FutureWarning)``
(or its ``ExperimentalWarning``, a ``FutureWarning``): every call warns, and the function carries
``__deprecated__`` with the message, as :pep:`702` specifies. :func:`deprecated` does the same
on Python 3.10+ without ``typing_extensions``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["deprecated"]

F = TypeVar("F", bound=Callable[..., Any])


def deprecated(message: str, *, category: type[Warning] = FutureWarning) -> Callable[[F], F]:
    """Make every call of the decorated function warn ``message`` with ``category``."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, category, stacklevel=2)
            return function(*args, **kwargs)

        wrapper.__deprecated__ = message  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
