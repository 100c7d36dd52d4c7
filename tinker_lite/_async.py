"""Awaitable futures and the official ``*_async`` methods, as thin adapters over sync futures.

Code written for the official SDK may ``await`` what a call returns, or call the ``*_async``
twin of a method. tinker_lite runs no event loop and starts no thread for that: awaiting wraps
the same :class:`concurrent.futures.Future` with :func:`asyncio.wrap_future`, so the result is
delivered to the caller's loop by the thread that resolves the future anyway. ``asyncio`` is
imported only inside these coroutines, i.e. only by a program that awaits one.

* :class:`AwaitableFuture`: ``await f``, ``f.result_async(timeout)``, ``f.coroutine()`` and
  ``f.future()`` for a future that is itself a ``concurrent.futures.Future`` (``APIFuture``,
  and the futures of clients that ``create_lora_training_client()`` and friends return).
* :func:`with_async_twins`: a class decorator adding the official ``*_async`` twins listed in
  :data:`OFFICIAL_ASYNC_TWINS` for every sync method the class has. Like the official ones they
  warn with :class:`FutureWarning` (the official SDK deprecates them in favour of awaiting the
  sync call's future). A twin never holds the caller's loop while it waits: it awaits the
  future its sync method returns at once, and the few sync methods that wait for an answer
  (:data:`BLOCKING`) run on the client's small REST executor, whose future it awaits.
"""

from __future__ import annotations

import concurrent.futures
import functools
import warnings
from collections.abc import Callable, Generator, Mapping
from typing import Any, Generic, Literal, TypeVar

__all__ = [
    "BLOCKING",
    "OFFICIAL_ASYNC_TWINS",
    "AwaitableFuture",
    "with_async_twins",
]

T = TypeVar("T")
K = TypeVar("K", bound=type)

TwinShape = Literal["result", "future"]
"""``result``: the twin returns the call's result. ``future``: it returns the call's future
(the official training-client twins do this: ``fut = await tc.forward_async(...)``)."""


class AwaitableFuture(Generic[T]):
    """Awaiting for a future that is a :class:`concurrent.futures.Future` (a mixin)."""

    __slots__ = ()

    def future(self) -> concurrent.futures.Future[T]:
        """The :class:`concurrent.futures.Future` of this operation: this future itself."""
        if not isinstance(self, concurrent.futures.Future):
            raise TypeError(f"{type(self).__name__} is not a concurrent.futures.Future")
        return self

    async def result_async(self, timeout: float | None = None) -> T:
        """Await the result, up to ``timeout`` seconds (``None``: until resolved).

        Like ``result(timeout)``, an expired timeout raises the same timeout error and leaves
        the request running: the future can be awaited again.
        """
        import asyncio

        future = self.future()
        waiter = asyncio.wrap_future(future)
        if timeout is None:
            return await waiter
        try:
            # shield: an expired wait must not cancel the request (result() does not either).
            return await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except asyncio.TimeoutError:
            # Nobody awaits the abandoned waiter: retrieve its outcome so none is reported lost.
            waiter.add_done_callback(_retrieve)
            return future.result(timeout=0)

    async def coroutine(self) -> T:
        """This future as a coroutine, for APIs that need one (``asyncio.create_task``)."""
        return await self.result_async()

    def __await__(self) -> Generator[Any, None, T]:
        return self.result_async().__await__()


def _retrieve(waiter: Any) -> None:
    if not waiter.cancelled():
        waiter.exception()


def _twins(shape: TwinShape, *names: str) -> dict[str, TwinShape]:
    return dict.fromkeys(names, shape)


# The official SDK 0.38's ``*_async`` methods, by class (without the suffix), and what they return.
# Type checkers see them as declared in _async_types (a test keeps the two in step).
OFFICIAL_ASYNC_TWINS: Mapping[str, Mapping[str, TwinShape]] = {
    "ServiceClient": _twins(
        "result",
        "create_lora_training_client",
        "create_sampling_client",
        "create_training_client_from_state",
        "create_training_client_from_state_with_optimizer",
        "get_server_capabilities",
    ),
    "TrainingClient": {
        **_twins(
            "result", "create_sampling_client", "get_info", "save_weights_and_get_sampling_client"
        ),
        **_twins(
            "future",
            "forward",
            "forward_backward",
            "forward_backward_custom",
            "load_state",
            "load_state_with_optimizer",
            "optim_step",
            "save_state",
            "save_weights_external",
            "save_weights_for_sampler",
        ),
    },
    "SamplingClient": _twins("result", "compute_logprobs", "get_base_model", "sample"),
    "RestClient": _twins(
        "result",
        "assign_session_project",
        "copy_weights",
        "delete_checkpoint",
        "delete_checkpoint_from_tinker_path",
        "export_session_trace",
        "get_audit_log",
        "get_billing_usage",
        "get_current_checkpoint_storage_usage",
        "get_external_weights_urls",
        "get_sampler",
        "get_session",
        "get_training_run",
        "get_training_run_by_tinker_path",
        "list_checkpoints",
        "list_sessions",
        "list_training_runs",
        "list_user_checkpoints",
        "publish_checkpoint_from_tinker_path",
        "set_checkpoint_ttl_from_tinker_path",
        "unpublish_checkpoint_from_tinker_path",
    ),
    "AdminClient": _twins(
        "result", "get_audit_log", "get_billing_usage", "get_current_checkpoint_storage_usage"
    ),
}


# The sync methods whose twins may have to wait for an answer (a plain HTTP call, or a forward
# pass whose result the call needs), each with the name of the client's predicate that tells
# whether this call would (``None``: it always does). Such a call runs on the client's REST
# threads, and the twin awaits it there.
BLOCKING: Mapping[str, Mapping[str, str | None]] = {
    "ServiceClient": {"get_server_capabilities": None},
    "TrainingClient": {"get_info": "_info_unread"},
    "SamplingClient": {
        "get_base_model": "_base_model_unread",
        "sample": "_unjoined",
        "compute_logprobs": "_unjoined",
    },
}


def with_async_twins(cls: K) -> K:
    """Add the official ``*_async`` twin of every sync method ``cls`` has (see the table).

    A twin takes the sync method's parameters. Methods the class does not have get no twin, and
    a twin the class defines itself is kept.
    """
    for name, shape in OFFICIAL_ASYNC_TWINS.get(cls.__name__, {}).items():
        sync = getattr(cls, name, None)
        if sync is None or f"{name}_async" in cls.__dict__:
            continue
        blocking = BLOCKING.get(cls.__name__, {})
        twin = _make_twin(
            cls.__name__,
            name,
            shape,
            sync,
            may_block=name in blocking,
            blocks_now=blocking.get(name),
        )
        setattr(cls, f"{name}_async", twin)
    return cls


def _make_twin(
    owner: str,
    name: str,
    shape: TwinShape,
    sync: Callable[..., Any],
    *,
    may_block: bool,
    blocks_now: str | None,
) -> Callable[..., Any]:
    if shape == "future":
        advice = f"call {name}(...): it returns an APIFuture at once, which can be awaited"
    else:
        advice = f"await {name}(...) (or call it, for a method that returns a value)"
    message = f"{owner}.{name}_async() is deprecated as in the official SDK; {advice}."
    # A twin of a deprecated method warns once, with its own message (as officially).
    undeprecated = sync.__wrapped__ if hasattr(sync, "__deprecated__") else None  # type: ignore[attr-defined]

    async def twin(self: Any, *args: Any, **kwargs: Any) -> Any:
        warnings.warn(message, FutureWarning, stacklevel=2)
        method = getattr(self, name) if undeprecated is None else undeprecated.__get__(self)
        if may_block and (blocks_now is None or getattr(self, blocks_now)()):
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
        if shape == "result" and isinstance(value, concurrent.futures.Future):
            import asyncio

            return await asyncio.wrap_future(value)
        return value

    functools.update_wrapper(twin, sync)  # the sync method's signature, via __wrapped__
    twin.__name__ = f"{name}_async"
    twin.__qualname__ = f"{owner}.{name}_async"
    twin.__doc__ = f"Async twin of :meth:`{name}` (deprecated, as in the official SDK): " + (
        "returns its future." if shape == "future" else "returns its result."
    )
    twin.__deprecated__ = message  # type: ignore[attr-defined]
    return twin
