"""What the poller polls: one request's polling state, and the poll it asks to be sent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import attrs

from tinker_lite._futures.future import APIFuture
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import Timeout
from tinker_lite._transport.retry import RetryNotice, StallWatch

__all__ = ["Poll", "PollTask"]


@dataclass(frozen=True)
class Poll:
    """One ``retrieve_future`` the poller asks for: what the requestor puts on the wire."""

    request_id: str
    request_type: str
    iteration: int
    accept: str
    metadata_only: bool
    timeout: Timeout
    sdk_method: str | None
    roundtrip_s: float | None


@attrs.define(eq=False)
class PollTask:
    """The polling state of one pending request (touched by one thread at a time)."""

    future: APIFuture[Any]
    request_id: str
    request_type: str
    decode: Callable[[HttpResponse], Any]
    accept: str
    sdk_method: str | None
    resubmit: Callable[[], str] | None
    on_queue_state: Callable[[str, str | None], None]
    created_at: float
    registered_at: float
    stall: StallWatch
    metadata_only: bool = True  # docs/protocol.rst §5.4: only until one such answer came
    iteration: int = 0
    failures: int = 0
    fast_answers: int = 0  # try_again/408 answers in a row that came in under a second
    pause: float = 0.0  # the wait before the next poll after an answer asking to poll again
    resubmits: int = 0
    parked: bool = False  # nobody waits: a hot poll stops (see the threading contract)
    idle: bool = False  # parked and held by no queue and no thread
    notice: RetryNotice = attrs.Factory(RetryNotice)  # the first invisible failure: a WARNING

    def describe(self) -> str:
        return f"request {self.request_id} ({self.request_type})"
