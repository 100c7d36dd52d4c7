"""The retry policy of tinker_lite: one HTTP retry layer and one operation-level layer.

Layer A (:func:`send_with_retries`, WIRE.md §5.1 as fixed by §P.4) retries one HTTP call on
408/409/429/5xx answers and connection errors, obeys ``x-should-retry``, honours
``retry-after-ms`` / ``retry-after`` when 0 < delay <= 60 s and otherwise sleeps
``min(0.5 * 2**n, 10) * (1 - 0.25 * random())``; at most 10 retries. Every attempt carries the
same ``X-Idempotency-Key`` and body.

Layer B (:func:`with_operation_retries`, WIRE.md §5.2) wraps a whole Layer-A call for submits:
while the error is retryable and less than 5 minutes have passed it sleeps ``min(2**n, 30)`` s and
calls again with the *same* request (same body, same ``seq_id``); each call gets a new
idempotency key.

The decisions (:meth:`RetryPolicy.should_retry`, :func:`parse_retry_after`,
:meth:`RetryPolicy.delay`) are pure functions. Sleeping, randomness and clocks are injected so
tests run instantly. This is the only module that imports tenacity; no tenacity type or exception
leaves it.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

import tenacity

from tinker_lite._errors import APIConnectionError, APIStatusError, InvalidInputError
from tinker_lite._http import (
    DEFAULT_TIMEOUT,
    JSON,
    ClientClosedError,
    HttpResponse,
    PoolKind,
    Timeout,
    Transport,
    new_idempotency_key,
    raise_for_status,
)

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "NO_RETRIES",
    "RetryPolicy",
    "is_retryable_error",
    "is_retryable_status",
    "operation_delay",
    "parse_retry_after",
    "send_with_retries",
    "with_operation_retries",
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


@dataclass(frozen=True)
class RetryPolicy:
    """The frozen Layer-A retry policy (WIRE.md §P.4); every decision is a pure method.

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
        left = max(self.budget_s - elapsed_s, MIN_ATTEMPT_TIMEOUT)
        if timeout.connect <= left and timeout.read <= left:
            return timeout
        return Timeout(connect=min(timeout.connect, left), read=min(timeout.read, left))

    def should_retry(self, status: int, headers: Mapping[str, str] | None = None) -> bool:
        """Whether an error answer is retried (``x-should-retry`` first, then the status)."""
        # WIRE.md §5.1: the header is checked first, exact lower-case comparison.
        flag = _header(headers, "x-should-retry")
        if flag == "true":
            return True
        if flag == "false":
            return False
        return status in self.retry_statuses or status >= 500

    def delay(
        self,
        retries_taken: int,
        headers: Mapping[str, str] | None = None,
        *,
        rand: float,
        now: float,
    ) -> float:
        """Seconds to sleep before retry number ``retries_taken`` (0-based).

        ``rand`` is a uniform draw in [0, 1) and ``now`` the wall clock in epoch seconds.
        """
        # WIRE.md §5.1: retry-after is honoured only when 0 < delay <= 60 s, without jitter.
        asked = parse_retry_after(headers, now=now)
        if asked is not None and 0 < asked <= self.max_retry_after:
            return asked
        base = min(self.initial_delay * 2.0 ** min(retries_taken, 1000), self.max_delay)
        return max(0.0, base * (1.0 - self.jitter * rand))


# The shortest timeout an attempt made at the end of a retry budget still gets.
MIN_ATTEMPT_TIMEOUT = 0.1

DEFAULT_RETRY_POLICY = RetryPolicy()
NO_RETRIES = RetryPolicy(max_retries=0)


class _RetryableStatus(Exception):
    """Carries a retryable error answer through tenacity (never leaves this module)."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__(response.status)
        self.response = response


def _retryable_attempt_error(exc: BaseException) -> bool:
    if isinstance(exc, ClientClosedError):
        return False
    return isinstance(exc, (_RetryableStatus, APIConnectionError))


def send_with_retries(
    transport: Transport,
    pool: PoolKind,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    content_type: str | None = JSON,
    query: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: Timeout = DEFAULT_TIMEOUT,
    allow_redirects: bool = True,
    accept_status: Collection[int] = (),
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    sleep: Callable[[float], object] = time.sleep,
    rand: Callable[[], float] = random.random,
    wall_clock: Callable[[], float] = time.time,
    request_id: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> HttpResponse:
    """Send one logical request with Layer-A retries; return the 2xx (or accepted) answer.

    Every attempt re-sends the same body with the same ``X-Idempotency-Key`` and an increasing
    ``x-stainless-retry-count``. A final error status raises its
    :class:`~tinker_lite.APIStatusError` subclass (statuses in ``accept_status`` are returned
    instead, e.g. 302 for a redirect read by hand); a final transport failure raises
    :class:`~tinker_lite.APIConnectionError` / :class:`~tinker_lite.APITimeoutError`.
    A policy with a ``budget_s`` stops retrying before a back-off would overrun it and cuts
    each attempt's timeouts to the time left (``clock`` is the monotonic clock it is read on).
    """
    method = method.upper()
    started = clock()
    base_headers = dict(headers or {})
    if method not in ("GET", "HEAD") and not any(
        key.lower() == "x-idempotency-key" for key in base_headers
    ):
        base_headers["X-Idempotency-Key"] = new_idempotency_key()

    def wait(state: tenacity.RetryCallState) -> float:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        answer_headers = error.response.headers if isinstance(error, _RetryableStatus) else None
        return policy.delay(state.attempt_number - 1, answer_headers, rand=rand(), now=wall_clock())

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if not logger.isEnabledFor(logging.DEBUG):
            return
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        reason = (
            f"HTTP {error.response.status}"
            if isinstance(error, _RetryableStatus)
            else type(error).__name__
        )
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        logger.debug(
            "Retrying %s %s in %.2fs after %s (retry %d of %d)",
            method,
            path,
            delay,
            reason,
            state.attempt_number,
            policy.max_retries,
        )

    out_of_budget = _StopBeforeBudget(policy.budget_s, started, clock)
    resp: HttpResponse | None = None
    retrying = tenacity.Retrying(
        stop=tenacity.stop_any(tenacity.stop_after_attempt(policy.max_retries + 1), out_of_budget),
        wait=wait,
        retry=tenacity.retry_if_exception(_retryable_attempt_error),
        sleep=_as_tenacity_sleep(sleep),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                attempt_headers = dict(base_headers)
                attempt_headers["x-stainless-retry-count"] = str(
                    attempt.retry_state.attempt_number - 1
                )
                resp = transport.send(
                    pool,
                    method,
                    path,
                    body=body,
                    content_type=content_type,
                    query=query,
                    headers=attempt_headers,
                    timeout=policy.attempt_timeout(timeout, clock() - started),
                    allow_redirects=allow_redirects,
                )
                if (
                    not (200 <= resp.status < 300)
                    and resp.status not in accept_status
                    and policy.should_retry(resp.status, resp.headers)
                ):
                    raise _RetryableStatus(resp)
    except _RetryableStatus as e:
        raise_for_status(e.response, request_id=request_id, what=f"{method} {path}")
        raise AssertionError("unreachable") from None  # pragma: no cover
    if resp is None:  # pragma: no cover - tenacity always runs one attempt
        raise AssertionError("no attempt was made")
    if resp.status not in accept_status:
        raise_for_status(resp, request_id=request_id, what=f"{method} {path}")
    return resp


class _StopBeforeBudget(tenacity.stop.stop_base):
    """Stop when the next back-off would end after the budget (none: never)."""

    def __init__(self, budget_s: float | None, started: float, clock: Callable[[], float]) -> None:
        self._budget_s = budget_s
        self._started = started
        self._clock = clock

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        if self._budget_s is None:
            return False
        elapsed = self._clock() - self._started
        return elapsed + retry_state.upcoming_sleep >= self._budget_s


def _as_tenacity_sleep(sleep: Callable[[float], object]) -> Callable[[float], None]:
    def do_sleep(seconds: float) -> None:
        sleep(seconds)

    return do_sleep


def is_retryable_error(exc: BaseException) -> bool:
    """Whether Layer B retries an error (WIRE.md §5.2): connection errors, 408/409/429/5xx."""
    if isinstance(exc, ClientClosedError):
        return False
    if isinstance(exc, APIStatusError):
        return is_retryable_status(exc.status_code)
    return isinstance(exc, APIConnectionError)


def operation_delay(retries_taken: int, *, remaining: float) -> float:
    """Layer-B sleep before retry ``retries_taken`` (0-based): ``min(2**n, 30)``, within budget."""
    return max(0.0, min(2.0 ** min(retries_taken, 64), 30.0, remaining))


def with_operation_retries(
    fn: Callable[[], T],
    *,
    budget_s: float = 300.0,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    is_retryable: Callable[[BaseException], bool] = is_retryable_error,
    describe: str = "request",
) -> T:
    """Call ``fn`` until it succeeds, fails for good, or ``budget_s`` seconds have passed.

    ``fn`` must re-send the *same* request (WIRE.md §P.4: a training request keeps its
    ``seq_id``). The last error is raised unchanged.
    """
    started = clock()

    def stop(state: tenacity.RetryCallState) -> bool:
        return clock() - started >= budget_s

    def wait(state: tenacity.RetryCallState) -> float:
        return operation_delay(state.attempt_number - 1, remaining=budget_s - (clock() - started))

    def before_sleep(state: tenacity.RetryCallState) -> None:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        logger.info(
            "Retrying %s in %.1fs after %s (%.0fs of the %.0fs budget used)",
            describe,
            delay,
            _describe_error(error),
            clock() - started,
            budget_s,
        )

    retrying = tenacity.Retrying(
        stop=stop,
        wait=wait,
        retry=tenacity.retry_if_exception(is_retryable),
        sleep=_as_tenacity_sleep(sleep),
        before_sleep=before_sleep,
        reraise=True,
    )
    return retrying(fn)


def _describe_error(error: BaseException | None) -> str:
    if isinstance(error, APIStatusError):
        return f"HTTP {error.status_code}"
    if error is None:
        return "an error"
    return type(error).__name__
