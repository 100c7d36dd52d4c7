"""Deprecated and experimental methods warn on every call and carry ``__deprecated__``
(:pep:`702`), as the official SDK's ``typing_extensions.deprecated`` does."""

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
