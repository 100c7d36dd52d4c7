"""Futures of clients: what ``create_lora_training_client()`` and the other creation methods
return (docs/api.rst, :class:`~tinker_lite.BackcompatTrainingClientFuture`).
"""

from __future__ import annotations

import concurrent.futures
import functools
import inspect
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tinker_lite._futures.future import APIFuture
from tinker_lite._repr import tolerant_repr

__all__ = ["ATTRIBUTE_WARNING", "METHOD_WARNING", "ClientFuture", "forwarding_to"]

C = TypeVar("C")
K = TypeVar("K", bound=type)

# The official SDK 0.38's texts (tinker/lib/public_interfaces/backcompat_*.py), FutureWarning.
METHOD_WARNING = (
    "Using the future as the {client} is deprecated; call .result() on it, or await it, to get "
    "the {client} first"
)
ATTRIBUTE_WARNING = (
    "Reading `.{name}` from the future returned by a client-creation method is deprecated and "
    "will stop working in a future tinker SDK version. Call .result() on the future, or await "
    "it, to get the client first."
)


class ClientFuture(APIFuture[C]):
    """The future of a client, usable (deprecated) as the client: see the module docstring."""

    __slots__ = ()

    def __init__(self, future: concurrent.futures.Future[C]) -> None:
        """The future of the client that ``future`` completes with."""
        super().__init__(request_type=getattr(future, "request_type", None))
        self.forward_from(future)

    @tolerant_repr
    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self._state_text(outcome=True)}>"

    if not TYPE_CHECKING:  # a __getattr__ would hide every misspelt attribute from mypy

        def __getattr__(self, name: str) -> Any:
            # Called only for names neither the future nor the client's class has: the
            # attributes the client sets on itself (``model_id``, ``sampling_session_id``).
            if name.startswith("_"):
                raise AttributeError(
                    f"'{type(self).__name__}' object has no attribute {name!r}",
                    name=name,
                    obj=self,
                )
            warnings.warn(ATTRIBUTE_WARNING.format(name=name), FutureWarning, stacklevel=2)
            return getattr(self.result(), name)


def forwarding_to(client: type) -> Callable[[K], K]:
    """Give the decorated future class a warning forwarder for every public method of ``client``.

    Static and class methods need no client and are inherited as they are; the future's own
    members (``result``, ``done``, ...) stay the future's.
    """
    message = METHOD_WARNING.format(client=client.__name__)

    def decorate(cls: K) -> K:
        # A client that pickles itself (SamplingClient) pickles from its future too.
        own_reduce = ["__reduce__"] if "__reduce__" in vars(client) else []
        public = [n for n in dir(client) if not n.startswith("_") and not hasattr(ClientFuture, n)]
        for name in [*public, *own_reduce]:
            member = inspect.getattr_static(client, name)
            if isinstance(member, (staticmethod, classmethod)) or not callable(member):
                continue
            setattr(cls, name, _forwarder(name, member, message))
        return cls

    return decorate


def _forwarder(name: str, member: Callable[..., Any], message: str) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(member):

        async def forward_async(self: ClientFuture[Any], *args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, FutureWarning, stacklevel=2)
            client = await self
            return await getattr(client, name)(*args, **kwargs)

        forward: Callable[..., Any] = forward_async
    else:

        def forward_sync(self: ClientFuture[Any], *args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, FutureWarning, stacklevel=2)
            return getattr(self.result(), name)(*args, **kwargs)

        forward = forward_sync
    functools.update_wrapper(forward, member)  # the client method's name, doc and signature
    forward.__deprecated__ = message  # type: ignore[attr-defined]
    return forward
