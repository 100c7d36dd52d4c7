"""The retry loops of tinker_lite on tenacity, with their one wait strategy; the only module that
imports tenacity (docs/architecture.rst, "Waiting on the service")."""

from __future__ import annotations

import copy
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import tenacity

from tinker_lite._errors import APIConnectionError, APIStatusError
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import ClientClosedError
from tinker_lite._transport.retry import (
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
    "ShortenedWait",
    "Tries",
    "after_first",
    "answer_headers",
    "at_attempt",
    "attempt_error",
    "call_of",
    "download_backoff",
    "http_backoff",
    "http_loop",
    "operation_backoff",
    "operation_loop",
    "poll_backoff",
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


class ShortenedWait(tenacity.wait.wait_base):
    """``wait * (1 - fraction * rand())``: a jitter that only shortens (tenacity's lengthen)."""

    def __init__(
        self,
        wait: tenacity.wait.wait_base,
        fraction: float,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.wait = wait
        self.fraction = fraction
        self.rand = rand

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        return self.wait(retry_state) * (1.0 - self.fraction * self.rand())


def http_backoff(
    policy: RetryPolicy, rand: Callable[[], float] = random.random
) -> tenacity.wait.wait_base:
    """Layer A: ``min(0.5 * 2**n, 10)`` s less up to 25 % (docs/protocol.rst §6.2)."""
    exponential = tenacity.wait_exponential(policy.initial_delay, policy.max_delay)
    return ShortenedWait(exponential, policy.jitter, rand)


def operation_backoff(policy: RetryPolicy) -> tenacity.wait.wait_base:
    """Layer B: ``min(2**n, 30)`` s (docs/protocol.rst §6.3)."""
    return tenacity.wait_exponential(1.0, policy.operation_max_delay)


def poll_backoff(
    policy: RetryPolicy, rand: Callable[[], float] = random.random
) -> tenacity.wait.wait_base:
    """Polls after 5xx, 429 and connection errors: ``min(2**n, 30)`` s less up to 25 %
    (docs/protocol.rst §5.2)."""
    exponential = tenacity.wait_exponential(1.0, policy.poll_max_delay)
    return ShortenedWait(exponential, policy.jitter, rand)


def download_backoff(policy: RetryPolicy) -> tenacity.wait.wait_base:
    """Downloads: ``min(2**n, 30)`` s."""
    return tenacity.wait_exponential(1.0, policy.download_max_delay)


def at_attempt(state: tenacity.RetryCallState, attempt_number: int) -> tenacity.RetryCallState:
    """``state`` as after attempt ``attempt_number``: for a loop that counts its own failures
    (a poll's in a row, a download's without progress) rather than its attempts."""
    counted = copy.copy(state)
    counted.attempt_number = attempt_number
    return counted


class ServiceWait(tenacity.wait.wait_base):
    """What the service asks, else ``fallback(state)``; at most ``at_most(state)``, and as long as
    a shared ``window`` says (docs/architecture.rst, "Waiting on the service")."""

    def __init__(
        self,
        policy: RetryPolicy,
        fallback: Callable[[tenacity.RetryCallState], float],
        *,
        wall_clock: Callable[[], float] = time.time,
        at_most: Callable[[tenacity.RetryCallState], float] | None = None,
        window: SharedWindow | None = None,
    ) -> None:
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
    retry_on: Callable[[BaseException], bool] | tenacity.retry_base,
    retry_result: Callable[[object], bool] | None = None,
    sleep: Callable[[float], object],
    before: Callable[[tenacity.RetryCallState], None] | None = None,
    before_sleep: Callable[[tenacity.RetryCallState], None] | None = None,
) -> Retrier:
    """A tenacity loop retrying the errors ``retry_on`` accepts and the results ``retry_result``
    asks again; when ``stop`` ends it, its last error is raised as it was (or its last result
    returned). Built once, it is given what belongs to a request as the first argument; its
    first call is made before tenacity is entered, so ``before`` sees the first attempt made."""
    retry = (
        retry_on
        if isinstance(retry_on, tenacity.retry_base)
        else tenacity.retry_if_exception(retry_on)
    )
    if retry_result is not None:
        retry = retry | tenacity.retry_if_result(retry_result)
    retrying = tenacity.Retrying(
        wait=wait,
        stop=stop,  # tenacity takes a predicate of the call state as it is
        retry=retry,
        sleep=_as_tenacity_sleep(sleep),
        before=before or tenacity.before_nothing,
        before_sleep=before_sleep,
        retry_error_callback=_last_outcome,  # raises the last error as it was
    )

    def first_try_outside(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        try:
            result = fn(*args, **kwargs)
        except Exception as e:
            return retrying(after_first(e, fn), *args, **kwargs)
        if retry_result is None or not retry_result(result):
            return result
        return retrying(_returning_first(result, fn), *args, **kwargs)

    return first_try_outside


class Retrier(Protocol):
    """A configured retry loop: ``retrier(fn, *args)`` calls ``fn(*args)`` until it is done."""

    def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


def after_first(error: BaseException, fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` whose first call raises ``error``: a try already made, handed to a loop as its first
    attempt."""
    pending = [error]

    def again(*args: Any, **kwargs: Any) -> T:
        if pending:
            raise pending.pop()
        return fn(*args, **kwargs)

    return again


def _returning_first(result: T, fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` whose first call returns ``result``: a try already made, as in :func:`after_first`."""
    pending = [result]

    def again(*args: Any, **kwargs: Any) -> T:
        return pending.pop() if pending else fn(*args, **kwargs)

    return again


def call_of(state: tenacity.RetryCallState) -> Any:
    """What belongs to the call a loop is running: its first argument."""
    return state.args[0]


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


@dataclass(frozen=True)
class Tries:
    """One logical request as its retry loops see it (``state.args[0]``): Layer A waits end
    before ``deadline``, Layer B retries what ``retryable`` accepts until ``operation_deadline``."""

    what: str
    deadline: float | None = None
    operation_deadline: float | None = None
    retryable: Callable[[BaseException], bool] = is_retryable_error
    notice: RetryNotice = field(default_factory=RetryNotice)


class _RetryIfCallAccepts(tenacity.retry_base):
    """Retries an error the call's ``retryable`` accepts (``Tries``)."""

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        error = attempt_error(retry_state)
        return isinstance(error, Exception) and call_of(retry_state).retryable(error)


# Layer A retries a retryable answer or a connection error, never a closed client's.
_TRANSIENT = tenacity.retry_if_exception_type(
    (RetryableStatus, APIConnectionError)
) & tenacity.retry_if_not_exception_type(ClientClosedError)


def http_loop(
    policy: RetryPolicy,
    *,
    closing: threading.Event,
    sleep: Callable[[float], object],
    rand: Callable[[], float] = random.random,
    wall_clock: Callable[[], float] = time.time,
    clock: Callable[[], float] = time.monotonic,
) -> Retrier:
    """Layer A (docs/protocol.rst §6.2): ``loop(attempt, tries, *args)`` retries ``attempt`` up
    to ``policy.max_retries`` times within ``tries.deadline``, never once ``closing`` is set."""
    exponential = tenacity.wait_exponential(policy.initial_delay, policy.max_delay)
    closed_or_spent = tenacity.stop_when_event_set(closing) | tenacity.stop_after_attempt(
        policy.max_retries + 1
    )

    def stop(state: tenacity.RetryCallState) -> bool:
        """Besides closing and the attempts: a 409 is final after a few tries (docs/protocol.rst
        §6.2), and no wait ends at or past the call's ``deadline`` (``Tries``)."""
        error = attempt_error(state)
        deadline = call_of(state).deadline
        return (
            closed_or_spent(state)
            or (
                isinstance(error, RetryableStatus)
                and error.response.status == 409
                and state.attempt_number > policy.conflict_retries
            )
            or (deadline is not None and clock() + state.upcoming_sleep >= deadline)
        )

    def until(state: tenacity.RetryCallState) -> float:
        tries: Tries = call_of(state)
        if tries.deadline is not None:
            until_s = tries.deadline - clock()
        else:  # the longest back-off left, without jitter or Retry-After
            left = range(state.attempt_number + 1, policy.max_retries + 1)
            until_s = state.upcoming_sleep + sum(exponential(at_attempt(state, n)) for n in left)
        if tries.operation_deadline is not None:
            until_s = max(until_s, tries.operation_deadline - clock())
        return until_s

    return retry_loop(
        wait=ServiceWait(policy, http_backoff(policy, rand), wall_clock=wall_clock),
        stop=stop,
        retry_on=_TRANSIENT,
        sleep=sleep,
        before_sleep=_announcing(until, wall_clock),
    )


def _announcing(
    until: Callable[[tenacity.RetryCallState], float], wall_clock: Callable[[], float]
) -> Callable[[tenacity.RetryCallState], None]:
    """A ``before_sleep`` that logs the retry of the call (``Tries``), for ``until(state)`` s
    more at most (:func:`~tinker_lite._transport.retry.announce_retry`)."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        tries: Tries = call_of(state)
        error = attempt_error(state)
        status = error.response.status if isinstance(error, RetryableStatus) else None
        announce_retry(
            tries.what,
            f"HTTP {status}" if status is not None else describe_error(error),
            delay=state.upcoming_sleep,
            until_s=until(state),
            wall_now=wall_clock(),
            invisible=is_invisible_failure(error, status),
            notice=tries.notice,
        )

    return before_sleep


def operation_loop(
    policy: RetryPolicy,
    *,
    closing: threading.Event,
    sleep: Callable[[float], object],
    wall_clock: Callable[[], float] = time.time,
    clock: Callable[[], float] = time.monotonic,
) -> Retrier:
    """Layer B (docs/protocol.rst §6.3): ``loop(operation, tries, *args)`` re-sends the request
    while ``tries`` allows, never once ``closing`` is set."""

    def left(state: tenacity.RetryCallState) -> float:
        deadline: float = call_of(state).operation_deadline
        return deadline - clock()

    return retry_loop(
        wait=ServiceWait(policy, operation_backoff(policy), wall_clock=wall_clock, at_most=left),
        stop=lambda state: closing.is_set() or left(state) <= 0,
        retry_on=_RetryIfCallAccepts(),
        sleep=sleep,
        before_sleep=_announcing(left, wall_clock),
    )
