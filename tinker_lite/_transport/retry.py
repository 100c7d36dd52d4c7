"""The one retry and deadline policy of tinker_lite, and the one tenacity wait strategy.

:class:`RetryPolicy` is a frozen value whose pure methods decide every wait of the client: HTTP
retries (Layer A), operation retries of submits (Layer B), poll back-off and ``try_again`` pacing
(:mod:`tinker_lite._futures.poller`), the sampling 429 window
(:mod:`tinker_lite._session.sample_gate`) and download retries
(:mod:`tinker_lite._transport.download`). Every loop that waits on the service runs in tenacity,
and every wait is :class:`ServiceWait`'s: the service's ``retry-after-ms`` / ``retry-after``
(seconds or an HTTP date) when 0 < delay <= 60 s, else the loop's back-off from the policy.
:class:`StallWatch` measures the one deadline of a request's life (WIRE.md §P.7): the time since
the service last answered anything useful, from the submit through its retries, back-off sleeps
and polls.

Layer A (:func:`http_loop`, WIRE.md §5.1 as fixed by §P.4) retries one HTTP call on
408/409/429/5xx answers and connection errors, obeys ``x-should-retry`` and otherwise sleeps
``min(0.5 * 2**n, 10) * (1 - 0.25 * random())``; at most 10 retries. Every attempt carries the
same ``X-Idempotency-Key`` and body.

Layer B (:func:`operation_loop`, WIRE.md §5.2) wraps a whole Layer-A call for submits:
while the error is retryable and less than 5 minutes have passed it sleeps ``min(2**n, 30)`` s and
calls again with the *same* request (same body, same ``seq_id``); each call gets a new
idempotency key.

The first retry the caller cannot see (connection refused, DNS failure, 5xx) of a logical
request is logged at WARNING, naming what is retried and until when (WIRE.md §P.7); later ones at
DEBUG. The decisions are pure functions; sleeping, randomness and clocks are injected so tests
run instantly. The loops are built once by their owner (the requestor, the pollers) and run
each request with its :class:`Tries` (or task) as first argument. This is the only module that
imports tenacity; no tenacity exception leaves it.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

import tenacity

from tinker_lite._errors import APIConnectionError, APIStatusError, InvalidInputError
from tinker_lite._transport.http import ClientClosedError, HttpResponse, Timeout, redact

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "MIN_ATTEMPT_TIMEOUT",
    "NO_RETRIES",
    "Backoff",
    "Retrier",
    "RetryCallState",
    "RetryNotice",
    "RetryPolicy",
    "RetryableStatus",
    "ServiceWait",
    "SharedWindow",
    "StallWatch",
    "StopWhen",
    "Tries",
    "announce_retry",
    "answer_headers",
    "attempt_error",
    "call_of",
    "cut_timeout",
    "describe_error",
    "exponential_backoff",
    "http_loop",
    "is_invisible_failure",
    "is_retryable_error",
    "is_retryable_status",
    "operation_delay",
    "operation_loop",
    "parse_retry_after",
    "release",
    "retry_loop",
]

logger = logging.getLogger("tinker_lite.retry")

T = TypeVar("T")

# WIRE.md §5.1 / §5.2: statuses retried besides every 5xx.
RETRYABLE_STATUSES: frozenset[int] = frozenset({408, 409, 429})


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, item in headers.items():
        if key.lower() == lowered:
            return item
    return None


def is_retryable_status(status: int) -> bool:
    """Whether an error status is retried when the service gives no ``x-should-retry``."""
    return status in RETRYABLE_STATUSES or status >= 500


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float) -> float | None:
    """Seconds the service asks to wait, or ``None`` when it does not say (WIRE.md §5.1).

    First match wins: ``retry-after-ms`` (float milliseconds), ``retry-after`` as float seconds,
    ``retry-after`` as an HTTP date (IMF-fixdate, e.g. ``Wed, 21 Oct 2015 07:28:00 GMT``)
    converted to ``date - now`` with ``now`` in epoch seconds. The result may be <= 0 (a date in
    the past); callers decide whether to honour it.
    """
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return value
    raw = _header(headers, "retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        parsed = email.utils.parsedate_tz(raw.strip())
        if parsed is None:
            return None
        try:
            return float(email.utils.mktime_tz(parsed)) - now
        except (OverflowError, ValueError):
            return None
    return value if math.isfinite(value) else None


def exponential_backoff(
    retries_taken: int, *, initial: float, cap: float, jitter: float = 0.0, rand: float = 0.0
) -> float:
    """``min(initial * 2**n, cap)`` less up to ``jitter`` of it (``rand`` in [0, 1)).

    The one back-off formula of the client: HTTP retries, operation retries, polls, try_again
    pacing and downloads differ only in their arguments.
    """
    base = min(initial * 2.0 ** min(max(retries_taken, 0), 1000), cap)
    return max(0.0, base * (1.0 - jitter * rand))


@dataclass(frozen=True)
class Backoff:
    """One loop's back-off: ``min(initial * 2**n, cap)`` less up to ``jitter`` of it."""

    initial: float
    cap: float
    jitter: float = 0.0

    def delay(self, retries_taken: int, rand: float = 0.0) -> float:
        """The wait before retry number ``retries_taken`` (0-based); ``rand`` in [0, 1)."""
        return exponential_backoff(
            retries_taken, initial=self.initial, cap=self.cap, jitter=self.jitter, rand=rand
        )


@dataclass(frozen=True)
class RetryPolicy:
    """The frozen retry and deadline policy (WIRE.md §P.4-P.8); every decision is a pure method.

    Layer A (HTTP, §P.4): ``max_retries`` retries of 408/409/429/5xx and connection errors,
    ``min(initial_delay * 2**n, max_delay)`` with ``jitter``, or the service's ``Retry-After``
    when ``0 < delay <= max_retry_after``. Layer B (submits, §5.2): ``min(2**n,
    operation_max_delay)`` for up to ``operation_budget_s``. Polls (§P.6): ``min(2**n,
    poll_max_delay)`` with jitter after 5xx, 429 and connection errors; a ``try_again`` answered
    in under ``pace_below_s`` is paced ``pace_initial`` doubling to ``pace_max``. Sampling 429s
    (§P.8): ``Retry-After`` when honoured, else ``throttle_default``. Downloads: ``min(2**n,
    download_max_delay)``. A session's trace export is asked again every
    ``trace_export_interval`` while it is being built.

    ``budget_s`` (default: none) bounds one logical request in time: no retry is started whose
    back-off would end after ``budget_s`` seconds from the first attempt, and each attempt's
    connect/read timeouts are cut to what is left of it. A session holder also caps its
    operation-level retries (Layer B) with it, so a caller such as ``tinker-lite --timeout``
    gets its answer or its error within about that time.
    """

    max_retries: int = 10
    initial_delay: float = 0.5
    max_delay: float = 10.0
    jitter: float = 0.25
    max_retry_after: float = 60.0
    retry_statuses: frozenset[int] = field(default=RETRYABLE_STATUSES)
    budget_s: float | None = None
    operation_budget_s: float = 300.0
    operation_max_delay: float = 30.0
    poll_max_delay: float = 30.0
    pace_below_s: float = 1.0
    pace_initial: float = 0.1
    pace_max: float = 1.0
    throttle_default: float = 1.0
    download_max_delay: float = 30.0
    trace_export_interval: float = 5.0

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise InvalidInputError(
                "max_retries", f"must be an int, got {self.max_retries!r}", "e.g. 3"
            )
        if self.max_retries < 0:
            raise InvalidInputError("max_retries", f"must be >= 0, got {self.max_retries}")
        budget = self.budget_s
        if budget is not None and (
            isinstance(budget, bool)
            or not isinstance(budget, (int, float))
            or not math.isfinite(budget)
            or budget <= 0
        ):
            raise InvalidInputError(
                "budget_s", f"must be a positive number of seconds, got {budget!r}"
            )

    @property
    def http_backoff(self) -> Backoff:
        """Layer A: ``min(0.5 * 2**n, 10)`` s with 25 % jitter (WIRE.md §5.1)."""
        return Backoff(self.initial_delay, self.max_delay, self.jitter)

    @property
    def operation_backoff(self) -> Backoff:
        """Layer B: ``min(2**n, 30)`` s (WIRE.md §5.2)."""
        return Backoff(1.0, self.operation_max_delay)

    @property
    def poll_backoff(self) -> Backoff:
        """Polls after 5xx, 429 and connection errors: ``min(2**n, 30)`` s with jitter (§P.6)."""
        return Backoff(1.0, self.poll_max_delay, self.jitter)

    @property
    def pace_backoff(self) -> Backoff:
        """Polls answered ``try_again`` in under a second: 0.1 s doubling to 1 s (§P.6)."""
        return Backoff(self.pace_initial, self.pace_max)

    @property
    def throttle_backoff(self) -> Backoff:
        """The sampling 429 window without ``Retry-After``: 1 s (§P.8)."""
        return Backoff(self.throttle_default, self.throttle_default)

    @property
    def download_backoff(self) -> Backoff:
        """Downloads: ``min(2**n, 30)`` s."""
        return Backoff(1.0, self.download_max_delay)

    @property
    def trace_export_backoff(self) -> Backoff:
        """A session's trace export, while the service builds it: every 5 s."""
        return Backoff(self.trace_export_interval, self.trace_export_interval)

    def within(self, remaining_s: float) -> RetryPolicy:
        """This policy with its budget cut to ``remaining_s`` seconds (at least a moment)."""
        budget = max(remaining_s, MIN_ATTEMPT_TIMEOUT)
        if self.budget_s is not None:
            budget = min(budget, self.budget_s)
        return replace(self, budget_s=budget)

    def attempt_timeout(self, timeout: Timeout, elapsed_s: float) -> Timeout:
        """``timeout`` cut to what is left of the budget after ``elapsed_s`` seconds."""
        if self.budget_s is None:
            return timeout
        return cut_timeout(timeout, self.budget_s - elapsed_s)

    def should_retry(self, status: int, headers: Mapping[str, str] | None = None) -> bool:
        """Whether an error answer is retried (``x-should-retry`` first, then the status)."""
        # WIRE.md §5.1: the header is checked first, exact lower-case comparison.
        flag = _header(headers, "x-should-retry")
        if flag == "true":
            return True
        if flag == "false":
            return False
        return status in self.retry_statuses or status >= 500

    def honoured_retry_after(
        self, headers: Mapping[str, str] | None, *, now: float
    ) -> float | None:
        """The wait the service asks for, when it is honoured; ``None`` otherwise.

        ``now`` is the wall clock in epoch seconds (for an HTTP-date ``Retry-After``).
        """
        # WIRE.md §5.1: retry-after is honoured only when 0 < delay <= 60 s.
        asked = parse_retry_after(headers, now=now)
        if asked is not None and 0 < asked <= self.max_retry_after:
            return asked
        return None

    def delay(
        self,
        retries_taken: int,
        headers: Mapping[str, str] | None = None,
        *,
        rand: float,
        now: float,
    ) -> float:
        """Layer A: seconds to sleep before HTTP retry number ``retries_taken`` (0-based).

        ``rand`` is a uniform draw in [0, 1) and ``now`` the wall clock in epoch seconds.
        """
        asked = self.honoured_retry_after(headers, now=now)
        return self.http_backoff.delay(retries_taken, rand) if asked is None else asked

    def max_total_delay(self, retries_taken: int = 0) -> float:
        """Layer A: the longest back-off left after ``retries_taken`` retries (no Retry-After)."""
        backoff = self.http_backoff
        return sum(backoff.delay(n) for n in range(retries_taken, self.max_retries))

    def operation_delay(self, retries_taken: int, *, remaining: float) -> float:
        """Layer B: the sleep before operation retry ``retries_taken`` (0-based), within budget."""
        return max(0.0, min(self.operation_backoff.delay(retries_taken), remaining))

    def poll_delay(
        self,
        failures: int,
        headers: Mapping[str, str] | None = None,
        *,
        rand: float,
        now: float,
    ) -> float:
        """Polls: the back-off after ``failures`` failed polls in a row (WIRE.md §P.6)."""
        asked = self.honoured_retry_after(headers, now=now)
        return self.poll_backoff.delay(failures - 1, rand) if asked is None else asked

    def pace_delay(self, answered_in: float, fast_answers: int) -> float:
        """Polls: the pause before the next poll after a ``try_again`` or 408.

        ``answered_in`` is how long the service held the poll; ``fast_answers`` how many answers
        in a row (this one included) came in under ``pace_below_s``. A held poll (long-poll) is
        followed at once; fast answers are paced so that no future polls in a hot loop.
        """
        if answered_in >= self.pace_below_s or fast_answers < 1:
            return 0.0
        return self.pace_backoff.delay(fast_answers - 1)

    def throttle_delay(self, headers: Mapping[str, str] | None, *, now: float) -> float:
        """Sampling 429: the length of the shared back-off window (WIRE.md §P.8)."""
        asked = self.honoured_retry_after(headers, now=now)
        return self.throttle_backoff.delay(0) if asked is None else asked

    def download_delay(
        self, failures: int, headers: Mapping[str, str] | None = None, *, now: float
    ) -> float:
        """Downloads: the wait after the ``failures``-th failure in a row (1-based)."""
        asked = self.honoured_retry_after(headers, now=now)
        return self.download_backoff.delay(failures - 1) if asked is None else asked

    @staticmethod
    def time_left(silent_for: float, stall_timeout: float) -> float:
        """Seconds left before a request silent for ``silent_for`` s stalls (may be <= 0)."""
        return stall_timeout - silent_for


# The shortest timeout an attempt made at the end of a retry budget still gets.
MIN_ATTEMPT_TIMEOUT = 0.1

DEFAULT_RETRY_POLICY = RetryPolicy()
NO_RETRIES = RetryPolicy(max_retries=0)


def cut_timeout(timeout: Timeout, left: float) -> Timeout:
    """``timeout`` with its connect and read parts cut to ``left`` seconds (at least a moment)."""
    left = max(left, MIN_ATTEMPT_TIMEOUT)
    if timeout.connect <= left and timeout.read <= left:
        return timeout
    return Timeout(connect=min(timeout.connect, left), read=min(timeout.read, left))


class StallWatch:
    """The deadline of one request's life: no useful answer for ``stall_timeout`` s (§P.7).

    Started when the request is submitted; :meth:`answered` restarts it whenever the service
    answers something useful (accepted the submit, a result, ``try_again``, 408, 410). Time
    spent parked (nobody waiting, nothing sent) does not count. ``sleep`` is how waits within
    this life sleep (it may return true when interrupted, as ``Event.wait`` does). Used by one
    thread at a time.
    """

    __slots__ = ("_clock", "_parked_at", "last_answer", "sleep", "stall_timeout")

    def __init__(
        self,
        stall_timeout: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.stall_timeout = stall_timeout
        self._clock = clock
        self.sleep = sleep
        self.last_answer = clock()
        self._parked_at: float | None = None

    def answered(self) -> None:
        """The service answered something useful now."""
        self.last_answer = self._clock()

    def silent_for(self) -> float:
        """Seconds since the last useful answer (or the start)."""
        return self._clock() - self.last_answer

    def remaining(self) -> float:
        """Seconds left before the request stalls (<= 0: it has)."""
        return RetryPolicy.time_left(self.silent_for(), self.stall_timeout)

    def expired(self) -> bool:
        """Whether the stall timeout has passed."""
        return self.remaining() <= 0

    def park(self) -> None:
        """Stop counting (nothing is being asked of the service)."""
        if self._parked_at is None:
            self._parked_at = self._clock()

    def unpark(self) -> None:
        """Count again, leaving out the time spent parked."""
        if self._parked_at is not None:
            self.last_answer += self._clock() - self._parked_at
            self._parked_at = None


# ---------------------------------------------------------------------------------------------
# Telling the caller about retries it cannot see (WIRE.md §P.7)


def is_invisible_failure(error: BaseException | None, status: int | None = None) -> bool:
    """Whether a failure is one the caller cannot see: connection errors and 5xx answers."""
    if status is not None:
        return status >= 500
    if isinstance(error, ClientClosedError):
        return False
    if isinstance(error, APIStatusError):
        return error.status_code >= 500
    return isinstance(error, APIConnectionError)


class RetryNotice:
    """Whether the first retry of one logical request was announced already."""

    __slots__ = ("warned",)

    def __init__(self) -> None:
        self.warned = False


def _wall_time(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def announce_retry(
    what: str,
    problem: str,
    *,
    delay: float,
    until_s: float | None,
    wall_now: float,
    invisible: bool,
    notice: RetryNotice,
) -> None:
    """Log one retry: the first invisible one of a request at WARNING, every other at DEBUG.

    ``what`` names the request, ``problem`` the failure, ``until_s`` how many more seconds it
    may be retried (``None``: no time bound), ``wall_now`` the wall clock (epoch seconds) and
    ``notice`` the request's own (one per logical request, shared by its retry layers).
    """
    first = invisible and not notice.warned
    if first:
        notice.warned = True
    level = logging.WARNING if first else logging.DEBUG
    if not logger.isEnabledFor(level):
        return
    if until_s is None:
        until = "with no time bound"
    else:
        until = f"for up to {until_s:.0f} s more, until {_wall_time(wall_now + until_s)}"
    logger.log(
        level,
        "%s failed (%s); retrying in %.1f s, %s.",
        what,
        redact(problem).rstrip("."),
        delay,
        until,
    )


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
    """A back-off window shared by several loops (the sampling 429 window, WIRE.md §P.8)."""

    def hold(self, seconds: float) -> None:
        """Nobody sends for ``seconds`` from now (the window is opened or extended)."""

    def backoff_remaining(self) -> float:
        """Seconds left in the window (0 when it is closed)."""


class ServiceWait(tenacity.wait.wait_base):
    """The one wait of tinker_lite's retry loops: what the service asks, else the back-off.

    ``retry-after-ms``, else ``retry-after`` in seconds, else ``retry-after`` as an HTTP date,
    honoured when 0 < delay <= 60 s (WIRE.md §P.4, the policy's ``max_retry_after``); otherwise
    ``fallback(state)``, a back-off of the policy (by default ``backoff`` at the attempt's number,
    jittered with ``rand``). With a shared ``window``, the wait opens (or extends) it and lasts
    until it closes, so every loop sharing it waits too. ``at_most(state)`` (e.g. what is left
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


class StopWhen(tenacity.stop.stop_base):
    """Stop a retry loop when ``predicate(state)`` says so (it sees the upcoming sleep)."""

    def __init__(self, predicate: Callable[[tenacity.RetryCallState], bool]) -> None:
        self._predicate = predicate

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self._predicate(retry_state)


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
    the loop itself, so a loop built per call lives until the garbage collector frees it
    (:func:`release` frees one at once).
    """
    retry: tenacity.retry_base = tenacity.retry_if_exception(retry_on)
    if retry_result is not None:
        retry = retry | tenacity.retry_if_result(retry_result)
    return tenacity.Retrying(
        wait=wait,
        stop=StopWhen(stop),
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


def release(retrier: Retrier) -> None:
    """Forget a finished loop's last steps, so a loop built for one call is freed at once."""
    if isinstance(retrier, tenacity.Retrying):
        retrier.iter_state.reset()


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


def is_retryable_error(exc: BaseException) -> bool:
    """Whether Layer B retries an error (WIRE.md §5.2): connection errors, 408/409/429/5xx."""
    if isinstance(exc, ClientClosedError):
        return False
    if isinstance(exc, APIStatusError):
        return is_retryable_status(exc.status_code)
    return isinstance(exc, APIConnectionError)


def operation_delay(retries_taken: int, *, remaining: float) -> float:
    """Layer-B sleep of the default policy (see :meth:`RetryPolicy.operation_delay`)."""
    return DEFAULT_RETRY_POLICY.operation_delay(retries_taken, remaining=remaining)


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
    """Layer A (WIRE.md §5.1, §P.4), built once: ``loop(attempt, tries)`` calls ``attempt(tries)``.

    Retries retryable answers (:class:`RetryableStatus`) and connection errors up to
    ``tries.policy.max_retries`` times, waiting :class:`ServiceWait`'s ``Retry-After`` or
    ``min(0.5 * 2**n, 10)`` with jitter; a policy with a ``budget_s`` stops before a back-off
    would overrun it. Once ``closing`` is set nothing more is retried (WIRE.md §P.7: a closing
    client schedules no retry and logs none). The last failure is raised as it was.
    """

    def stop(state: tenacity.RetryCallState) -> bool:
        tries: Tries = call_of(state)
        if closing.is_set() or state.attempt_number > tries.policy.max_retries:
            return True
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
    """Layer B (WIRE.md §5.2), built once: ``loop(operation, tries)`` calls ``operation(tries)``.

    While the error is one ``tries.retryable`` accepts and ``tries.operation_budget_s`` has not
    passed, waits ``min(2**n, 30)`` s (or what the service asks) and calls again: the caller
    re-sends the *same* request (WIRE.md §P.4: a training request keeps its ``seq_id``).
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


def describe_error(error: BaseException | None) -> str:
    """A short description of a failure for a retry log line."""
    if isinstance(error, APIStatusError):
        return f"HTTP {error.status_code}"
    if isinstance(error, APIConnectionError):
        text = str(error)
        return text if len(text) <= 300 else text[:297] + "..."
    if error is None:
        return "an error"
    return type(error).__name__
