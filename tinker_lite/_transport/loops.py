"""The retry loops of tinker_lite, on tenacity, with its one wait strategy.

Every loop that waits on the service runs here: the requestor's HTTP layer (:func:`http_loop`)
and operation layer (:func:`operation_loop`), the pollers' polls, the sampling 429 window, the
trace export and downloads (:func:`retry_loop`). Every wait is :class:`ServiceWait`'s: the
service's ``retry-after-ms``, ``retry-after`` in seconds or as an HTTP date when 0 < delay <=
60 s, else the loop's back-off from the :class:`~tinker_lite._transport.retry.RetryPolicy`. A
loop is built once by its owner and runs each request with what belongs to it as first argument
(:class:`Tries` for the send path). This is the only module that imports tenacity; no tenacity
exception leaves it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import tenacity

from tinker_lite._errors import APIConnectionError, APIStatusError
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import ClientClosedError
from tinker_lite._transport.retry import (
    Backoff,
    RetryNotice,
    RetryPolicy,
    announce_retry,
    describe_error,
    is_invisible_failure,
    is_retryable_error,
)

__all__ = [
    "Retrier",
    "RetryCallState",
    "RetryableStatus",
    "ServiceWait",
    "SharedWindow",
    "Tries",
    "answer_headers",
    "attempt_error",
    "call_of",
    "http_loop",
    "operation_loop",
    "retry_loop",
]

T = TypeVar("T")


RetryCallState = tenacity.RetryCallState
"""What a retry loop's callbacks (wait, stop, before_sleep) are given: attempt number, outcome."""


class RetryableStatus(Exception):
    """Carries a retryable error answer through a retry loop (never leaves tinker_lite)."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__(response.status)
        self.response = response


def answer_headers(state: tenacity.RetryCallState) -> Mapping[str, str] | None:
    """The headers of the answer that ended the last attempt, when there was one."""
    outcome = state.outcome
    if outcome is None:
        return None
    if outcome.failed:
        error = outcome.exception()
        if isinstance(error, RetryableStatus):
            return error.response.headers
        if isinstance(error, APIStatusError):
            return error.headers
        return None
    result = outcome.result()
    return result.headers if isinstance(result, HttpResponse) else None


class SharedWindow(Protocol):
    """A back-off window shared by several loops (the sampling 429 window,
    docs/protocol.rst §6.4)."""

    def hold(self, seconds: float) -> None:
        """Nobody sends for ``seconds`` from now (the window is opened or extended)."""

    def backoff_remaining(self) -> float:
        """Seconds left in the window (0 when it is closed)."""


class ServiceWait(tenacity.wait.wait_base):
    """The one wait of tinker_lite's retry loops: what the service asks, else the back-off.

    ``retry-after-ms``, else ``retry-after`` in seconds, else ``retry-after`` as an HTTP date,
    honoured when 0 < delay <= 60 s (docs/protocol.rst §6.1, the policy's ``max_retry_after``);
    otherwise ``fallback(state)``, a back-off of the policy (by default ``backoff`` at the attempt's
    number, jittered with ``rand``). With a shared ``window``, the wait opens (or extends) it and
    lasts until it closes, so every loop sharing it waits too. ``at_most(state)`` (e.g. what is left
    of a deadline) caps the result. A loop built once serves many calls: what belongs to one
    call is its first argument, ``state.args[0]``, which ``fallback`` and ``at_most`` may read.
    """

    def __init__(
        self,
        policy: RetryPolicy,
        backoff: Backoff | None = None,
        *,
        fallback: Callable[[tenacity.RetryCallState], float] | None = None,
        rand: Callable[[], float] = random.random,
        wall_clock: Callable[[], float] = time.time,
        at_most: Callable[[tenacity.RetryCallState], float] | None = None,
        window: SharedWindow | None = None,
    ) -> None:
        if fallback is None:
            if backoff is None:
                raise ValueError("ServiceWait needs a backoff or a fallback")
            steps = backoff

            def fallback(state: tenacity.RetryCallState) -> float:
                return steps.delay(state.attempt_number - 1, rand())

        self._policy = policy
        self._fallback = fallback
        self._wall_clock = wall_clock
        self._at_most = at_most
        self._window = window

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        headers = answer_headers(retry_state)
        asked = (
            None
            if headers is None
            else self._policy.honoured_retry_after(headers, now=self._wall_clock())
        )
        delay = self._fallback(retry_state) if asked is None else asked
        window = self._window
        if window is not None:
            if delay > 0:
                window.hold(delay)
            delay = window.backoff_remaining()
        if self._at_most is not None:
            delay = min(delay, self._at_most(retry_state))
        return max(0.0, delay)


def retry_loop(
    *,
    wait: ServiceWait,
    stop: Callable[[tenacity.RetryCallState], bool],
    retry_on: Callable[[BaseException], bool],
    retry_result: Callable[[object], bool] | None = None,
    sleep: Callable[[float], object],
    before: Callable[[tenacity.RetryCallState], None] | None = None,
    before_sleep: Callable[[tenacity.RetryCallState], None] | None = None,
) -> Retrier:
    """A tenacity loop: call, wait (:class:`ServiceWait`), call again until done or ``stop``.

    ``retry_on`` chooses the errors retried, ``retry_result`` the results asked again (e.g. a
    poll answered ``try_again``). When ``stop`` ends the loop, its last error is raised as it
    was (never a tenacity error), or its last result is returned. Build a loop once and call it
    for each request, with what belongs to the request as the first argument (the callbacks
    read it as ``state.args[0]``): tenacity keeps the last iteration's steps, which refer to
    the loop itself, so a loop built per call (a download's) lives until the garbage collector
    frees it.
    """
    retry: tenacity.retry_base = tenacity.retry_if_exception(retry_on)
    if retry_result is not None:
        retry = retry | tenacity.retry_if_result(retry_result)
    return tenacity.Retrying(
        wait=wait,
        stop=stop,  # tenacity takes a predicate of the call state as it is
        retry=retry,
        sleep=_as_tenacity_sleep(sleep),
        before=before if before is not None else _nothing,
        before_sleep=before_sleep,
        retry_error_callback=_last_outcome,
        reraise=True,
    )


class Retrier(Protocol):
    """A configured retry loop: ``retrier(fn, *args)`` calls ``fn(*args)`` until it is done."""

    def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


def call_of(state: tenacity.RetryCallState) -> Any:
    """What belongs to the call a loop is running: its first argument."""
    return state.args[0]


def _nothing(state: tenacity.RetryCallState) -> None:
    return None


def _last_outcome(state: tenacity.RetryCallState) -> object:
    outcome = state.outcome
    assert outcome is not None
    return outcome.result()


def _as_tenacity_sleep(sleep: Callable[[float], object]) -> Callable[[float], None]:
    def do_sleep(seconds: float) -> None:
        if seconds > 0:  # a poll asked again at once does not sleep at all
            sleep(seconds)

    return do_sleep


def attempt_error(state: tenacity.RetryCallState) -> BaseException | None:
    """The error that ended the last attempt (None when it returned)."""
    outcome = state.outcome
    return outcome.exception() if outcome is not None and outcome.failed else None


class Tries:
    """One logical request's retry bookkeeping, read by the loops' callbacks (its first argument).

    ``what`` names it in logs. Its HTTP retries (Layer A) are bounded by ``policy`` (count) and
    ``budget_s`` (time from ``started``, the start of the current HTTP loop: the policy's
    ``budget_s``, or what is left of the operation's); with an
    ``operation_budget_s`` its operation retries (Layer B) go on for that long from
    ``operation_started``, for the errors ``retryable`` accepts. ``notice`` says whether its
    first retry the caller cannot see was announced (once for both layers).
    """

    __slots__ = (
        "budget_s",
        "notice",
        "operation_budget_s",
        "operation_started",
        "policy",
        "retryable",
        "started",
        "what",
    )

    def __init__(
        self,
        what: str,
        policy: RetryPolicy,
        *,
        operation_budget_s: float | None = None,
        retryable: Callable[[BaseException], bool] = is_retryable_error,
    ) -> None:
        self.what = what
        self.policy = policy
        self.budget_s = policy.budget_s
        self.operation_budget_s = operation_budget_s
        self.retryable = retryable
        self.started = 0.0
        self.operation_started = 0.0
        self.notice = RetryNotice()


def _transient(exc: BaseException) -> bool:
    """An attempt's failure Layer A retries: a retryable answer or a connection error."""
    if isinstance(exc, ClientClosedError):
        return False
    return isinstance(exc, (RetryableStatus, APIConnectionError))


def http_loop(
    policy: RetryPolicy,
    *,
    closing: threading.Event,
    sleep: Callable[[float], object],
    rand: Callable[[], float] = random.random,
    wall_clock: Callable[[], float] = time.time,
    clock: Callable[[], float] = time.monotonic,
) -> Retrier:
    """Layer A (docs/protocol.rst §6.2, §6.1), built once: ``loop(attempt, tries)`` calls
    ``attempt(tries)``.

    Retries retryable answers (:class:`RetryableStatus`) and connection errors up to
    ``tries.policy.max_retries`` times, waiting :class:`ServiceWait`'s ``Retry-After`` or
    ``min(0.5 * 2**n, 10)`` with jitter; a policy with a ``budget_s`` stops before a back-off
    would overrun it. Once ``closing`` is set nothing more is retried (docs/protocol.rst §6.6: a
    closing client schedules no retry and logs none). The last failure is raised as it was.
    """

    def stop(state: tenacity.RetryCallState) -> bool:
        tries: Tries = call_of(state)
        if closing.is_set() or state.attempt_number > tries.policy.max_retries:
            return True
        error = attempt_error(state)
        if (
            isinstance(error, RetryableStatus)
            and error.response.status == 409
            and state.attempt_number > tries.policy.conflict_retries
        ):
            return True  # a conflict is final after a few tries (docs/protocol.rst §6.2)
        budget = tries.budget_s
        return budget is not None and clock() - tries.started + state.upcoming_sleep >= budget

    def before_sleep(state: tenacity.RetryCallState) -> None:
        tries: Tries = call_of(state)
        error = attempt_error(state)
        status = error.response.status if isinstance(error, RetryableStatus) else None
        delay = state.upcoming_sleep
        budget = tries.budget_s
        if budget is not None:
            until_s: float | None = budget - (clock() - tries.started)
        else:
            until_s = delay + tries.policy.max_total_delay(state.attempt_number)
        if tries.operation_budget_s is not None:
            left = tries.operation_budget_s - (clock() - tries.operation_started)
            until_s = left if until_s is None else max(until_s, left)
        announce_retry(
            tries.what,
            f"HTTP {status}" if status is not None else describe_error(error),
            delay=delay,
            until_s=until_s,
            wall_now=wall_clock(),
            invisible=is_invisible_failure(error, status),
            notice=tries.notice,
        )

    return retry_loop(
        wait=ServiceWait(
            policy,
            fallback=lambda state: call_of(state).policy.http_backoff.delay(
                state.attempt_number - 1, rand()
            ),
            wall_clock=wall_clock,
        ),
        stop=stop,
        retry_on=_transient,
        sleep=sleep,
        before_sleep=before_sleep,
    )


def operation_loop(
    policy: RetryPolicy,
    *,
    closing: threading.Event,
    sleep: Callable[[float], object],
    wall_clock: Callable[[], float] = time.time,
    clock: Callable[[], float] = time.monotonic,
) -> Retrier:
    """Layer B (docs/protocol.rst §6.3), built once: ``loop(operation, tries)`` calls
    ``operation(tries)``.

    While the error is one ``tries.retryable`` accepts and ``tries.operation_budget_s`` has not
    passed, waits ``min(2**n, 30)`` s (or what the service asks) and calls again: the caller
    re-sends the *same* request (docs/protocol.rst §6.1: a training request keeps its ``seq_id``).
    Nothing is retried once ``closing`` is set. The last error is raised as it was.
    """

    def left(tries: Tries) -> float:
        budget = tries.operation_budget_s or 0.0
        return budget - (clock() - tries.operation_started)

    def stop(state: tenacity.RetryCallState) -> bool:
        tries: Tries = call_of(state)
        error = attempt_error(state)
        return closing.is_set() or error is None or not tries.retryable(error) or left(tries) <= 0

    def before_sleep(state: tenacity.RetryCallState) -> None:
        tries: Tries = call_of(state)
        error = attempt_error(state)
        announce_retry(
            tries.what,
            describe_error(error),
            delay=state.upcoming_sleep,
            until_s=left(tries),
            wall_now=wall_clock(),
            invisible=is_invisible_failure(error),
            notice=tries.notice,
        )

    return retry_loop(
        wait=ServiceWait(
            policy,
            policy.operation_backoff,
            wall_clock=wall_clock,
            at_most=lambda state: left(call_of(state)),
        ),
        stop=stop,
        retry_on=lambda error: isinstance(error, Exception),
        sleep=sleep,
        before_sleep=before_sleep,
    )
