"""What the poller polls: one request's polling state, and the poll it asks to be sent.

:class:`Poll` is what the requestor puts on the wire for one ``retrieve_future``;
:class:`PollTask` is the state of one pending request between its polls (touched by one
polling thread at a time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


class PollTask:
    """The polling state of one pending request (touched by one thread at a time)."""

    __slots__ = (
        "accept",
        "created_at",
        "decode",
        "failures",
        "fast_answers",
        "future",
        "idle",
        "iteration",
        "metadata_only",
        "notice",
        "on_queue_state",
        "parked",
        "pause",
        "registered_at",
        "request_id",
        "request_type",
        "resubmit",
        "resubmits",
        "sdk_method",
        "stall",
    )

    def __init__(
        self,
        future: APIFuture[Any],
        request_id: str,
        request_type: str,
        decode: Callable[[HttpResponse], Any],
        *,
        accept: str,
        sdk_method: str | None,
        resubmit: Callable[[], str] | None,
        on_queue_state: Callable[[str, str | None], None],
        created_at: float,
        now: float,
        stall: StallWatch,
        metadata_only: bool = True,
    ) -> None:
        self.future = future
        self.request_id = request_id
        self.request_type = request_type
        self.decode = decode
        self.accept = accept
        self.sdk_method = sdk_method
        self.resubmit = resubmit
        self.on_queue_state = on_queue_state
        self.created_at = created_at
        self.registered_at = now
        self.stall = stall
        self.iteration = 0
        # docs/protocol.rst §5.4: the first poll offers a metadata-only answer; after one, polls
        # do not.
        self.metadata_only = metadata_only
        self.failures = 0
        self.fast_answers = 0  # try_again/408 answers in a row that came in under a second
        self.pause = 0.0  # the wait before the next poll after an answer asking to poll again
        self.resubmits = 0
        self.parked = False  # nobody waits: a hot poll stops (see the threading contract)
        self.idle = False  # parked and held by no queue and no thread
        self.notice = RetryNotice()  # the first invisible failure is logged at WARNING

    def describe(self) -> str:
        return f"request {self.request_id} ({self.request_type})"
