"""The retrieve_futures loop paces a service that answers at once with nothing.

A service that does not hold the long poll must not be polled in a loop: fast empty answers are
paced like fast ``try_again`` answers (0.1 s doubling to 1 s), a held poll is followed at once,
and a completion resets the pacing. The transport, the clock and the loop's pauses are fakes, so
nothing here waits.
"""

from __future__ import annotations

import json
import threading
from typing import Any, cast

from tinker_lite._futures.batch_poller import BatchPoller
from tinker_lite._futures.future import APIFuture
from tinker_lite._futures.poller import Poller
from tinker_lite._transport.answers import HttpResponse


class ScriptedService:
    """Answers each retrieve_futures from a script; each answer advances the fake clock."""

    def __init__(self, answers: list[tuple[list[str], float]], clock: list[float]) -> None:
        self.answers = answers  # (completed request ids, seconds the service held the poll)
        self.clock = clock
        self.sent = 0

    def send(self, *args: Any, **kwargs: Any) -> HttpResponse:
        completed, held = self.answers[min(self.sent, len(self.answers) - 1)]
        self.sent += 1
        self.clock[0] += held
        body = {
            "completions": [
                {"state": "finished", "request_id": rid, "response_payload_uncompressed_size": 1}
                for rid in completed
            ],
            "cursor": self.sent,
        }
        return HttpResponse(200, {"Content-Type": "application/json"}, json.dumps(body).encode())


class RecordedPauses(threading.Event):
    """The loop's closing event: records each pause and returns at once."""

    def __init__(self) -> None:
        super().__init__()
        self.pauses: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None:
            self.pauses.append(round(timeout, 3))
        return self.is_set()


def run(answers: list[tuple[list[str], float]]) -> tuple[list[float], int]:
    """Wait for one sample (req-1) through the loop; return its pauses and the polls sent."""
    clock = [0.0]
    transport = ScriptedService(answers, clock)
    poller = BatchPoller(
        transport.send, cast(Poller, None), clock=lambda: clock[0], rand=lambda: 0.5
    )
    pauses = RecordedPauses()
    poller._closing = pauses
    future: APIFuture[str] = APIFuture(request_type="Sample")
    future._request_id = "req-1"
    poller.wait("sess", 0, future, lambda: future.set_result("fetched"))
    assert future.result(timeout=10) == "fetched"
    poller.close()
    return pauses.pauses, transport.sent


def test_fast_empty_answers_are_paced_doubling_to_a_second() -> None:
    empty_at_once: tuple[list[str], float] = ([], 0.001)
    pauses, sent = run([empty_at_once] * 6 + [(["req-1"], 0.001)])
    assert sent == 7
    assert pauses == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_a_held_long_poll_is_followed_at_once() -> None:
    held: tuple[list[str], float] = ([], 30.0)
    pauses, sent = run([held, held, (["req-1"], 0.5)])
    assert sent == 3
    assert pauses == []


def test_an_answer_that_was_held_resets_the_pacing() -> None:
    fast: tuple[list[str], float] = ([], 0.001)
    pauses, _ = run([fast, fast, ([], 5.0), fast, (["req-1"], 0.001)])
    assert pauses == [0.1, 0.2, 0.1]
