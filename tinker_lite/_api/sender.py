"""The requestor as its subjects (training, sampling, trace exports) see it: a protocol, so that
they and the requestor import one way only."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import threading

    from tinker_lite._session.holder import SessionHolder
    from tinker_lite._session.sample_gate import SampleGate
    from tinker_lite._transport.answers import HttpResponse
    from tinker_lite._transport.retry import RetryPolicy, StallWatch

__all__ = ["Sender"]


class Sender(Protocol):
    """The requestor as its subjects see it: its one send, clocks, policy and session."""

    policy: RetryPolicy
    closing: threading.Event
    sleep: Callable[[float], object]
    wall_clock: Callable[[], float]
    sample_gate: SampleGate

    @property
    def base_url(self) -> str: ...

    def session_holder(self) -> SessionHolder: ...

    def stall_watch(self) -> StallWatch: ...

    @property
    def call(self) -> Callable[..., HttpResponse]:
        """``Requestor.call``: one request with the connection's retries."""
