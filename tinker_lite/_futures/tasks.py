"""What the poller polls: one request's polling state, and the poll it asks to be sent."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import attrs

from tinker_lite._futures.future import APIFuture
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import Timeout
from tinker_lite._transport.loops import (
    RetryCallState,
    ServiceWait,
    at_attempt,
    attempt_error,
    call_of,
    poll_backoff,
)
from tinker_lite._transport.retry import RetryNotice, RetryPolicy, StallWatch

__all__ = ["IDLE_TIMEOUT", "Poll", "PollTask", "join_all", "pace", "poll_wait"]

logger = logging.getLogger("tinker_lite.futures")

IDLE_TIMEOUT = 30.0
"""Seconds a polling thread with nothing to poll waits for work before it ends."""


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


def pace(call: Any, policy: RetryPolicy, answered_in: float) -> None:
    """Set ``call.pause``, the wait before its next poll: paced after fast answers (§5.2)."""
    call.fast_answers = call.fast_answers + 1 if answered_in < policy.pace_below_s else 0
    call.pause = policy.pace_delay(answered_in, call.fast_answers)


def poll_wait(
    policy: RetryPolicy, rand: Callable[[], float] = random.random, **options: Any
) -> ServiceWait:
    """The wait before a call's next poll (a task or session with ``failures``, ``pause`` and
    ``stall``): the back-off after a failure, else its pause, within its stall timeout."""
    backoff = poll_backoff(policy, rand)

    def fallback(state: RetryCallState) -> float:
        call = call_of(state)
        if attempt_error(state) is not None:
            return backoff(at_attempt(state, call.failures))
        return float(call.pause)

    return ServiceWait(
        policy, fallback, at_most=lambda state: call_of(state).stall.remaining(), **options
    )


def join_all(threads: list[threading.Thread], timeout: float, *, warn: bool = True) -> None:
    """Join ``threads`` (not the calling one) within ``timeout`` seconds in all."""
    deadline = time.monotonic() + timeout
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
            if warn and thread.is_alive():
                logger.warning("Polling thread %s did not stop within %.0fs", thread.name, timeout)
