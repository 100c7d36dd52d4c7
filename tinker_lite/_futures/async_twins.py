"""The official ``*_async`` methods, as thin adapters over the sync ones.

docs/architecture.rst, "The threading contract", explains how awaiting works.
"""

from __future__ import annotations

import concurrent.futures
import functools
import warnings
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

__all__ = ["async_future_twin", "async_twin"]

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


Blocks = bool | Callable[[Any], bool]
"""Whether a sync method may wait for an answer: ``True`` always, or a predicate of the client
that tells whether this call would (``False``: it returns at once)."""


@overload
def async_twin(
    sync: Callable[Concatenate[S, P], concurrent.futures.Future[R]], *, blocks: Blocks = False
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]: ...


@overload
def async_twin(
    sync: Callable[Concatenate[S, P], R], *, blocks: Blocks = False
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]: ...


def async_twin(sync: Callable[..., Any], *, blocks: Blocks = False) -> Callable[..., Any]:
    """The official ``*_async`` twin of ``sync`` that gives its result (a future's, awaited)."""
    return _twin(sync, gives_future=False, blocks=blocks)


def async_future_twin(
    sync: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The official ``*_async`` twin of ``sync`` that gives its future, as the training twins do.

    ``fut = await training_client.forward_async(...)``: the future is sent in order, then awaited.
    """
    return _twin(sync, gives_future=True, blocks=False)


def _twin(sync: Callable[..., Any], *, gives_future: bool, blocks: Blocks) -> Callable[..., Any]:
    owner, _, name = sync.__qualname__.rpartition(".")
    if gives_future:
        advice = f"call {name}(...): it returns an APIFuture at once, which can be awaited"
    else:
        advice = f"await {name}(...) (or call it, for a method that returns a value)"
    message = f"{owner}.{name}_async() is deprecated as in the official SDK; {advice}."
    # A twin of a deprecated method warns once, with its own message (as officially).
    undeprecated = sync.__wrapped__ if hasattr(sync, "__deprecated__") else None  # type: ignore[attr-defined]

    async def twin(self: Any, *args: Any, **kwargs: Any) -> Any:
        warnings.warn(message, FutureWarning, stacklevel=2)
        method = getattr(self, name) if undeprecated is None else undeprecated.__get__(self)
        if blocks is True or (blocks is not False and blocks(self)):
            import asyncio

            # The client's REST threads wait instead of the loop (every client has _context).
            context = self._context
            ran = context.run_in(
                context.rest_pool(),
                functools.partial(method, *args, **kwargs),
                request_type=f"{owner}.{name}",
            )
            value = await asyncio.wrap_future(ran)
        else:
            value = method(*args, **kwargs)
        if not gives_future and isinstance(value, concurrent.futures.Future):
            import asyncio

            return await asyncio.wrap_future(value)
        return value

    functools.update_wrapper(twin, sync)  # the sync method's signature, via __wrapped__
    twin.__name__ = f"{name}_async"
    twin.__qualname__ = f"{owner}.{name}_async"
    twin.__doc__ = f"Async twin of :meth:`{name}` (deprecated, as in the official SDK): " + (
        "returns its future." if gives_future else "returns its result."
    )
    twin.__deprecated__ = message  # type: ignore[attr-defined]
    return twin
