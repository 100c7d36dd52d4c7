"""The one retry and deadline policy of tinker_lite: a frozen value of pure decisions
(docs/protocol.rst §6)."""

from __future__ import annotations

import email.utils
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from requests.structures import CaseInsensitiveDict

from tinker_lite._errors import APIConnectionError, APIStatusError, InvalidInputError
from tinker_lite._transport.http import ClientClosedError, Timeout, redact

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "MIN_ATTEMPT_TIMEOUT",
    "NO_RETRIES",
    "RetryNotice",
    "RetryPolicy",
    "StallWatch",
    "announce_retry",
    "cut_timeout",
    "describe_error",
    "is_invisible_failure",
    "is_retryable_error",
    "parse_retry_after",
]

logger = logging.getLogger("tinker_lite.retry")


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """A header by case-insensitive name (an answer's headers are requests' own such dict)."""
    if not headers:
        return None
    if not isinstance(headers, CaseInsensitiveDict):
        headers = CaseInsensitiveDict(headers)
    value: str | None = headers.get(name)
    return value


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float) -> float | None:
    """Seconds the service asks to wait (``retry-after-ms``, else ``retry-after`` in seconds or as
    an HTTP date less ``now``), maybe <= 0; ``None``: not said (docs/protocol.rst §6.2)."""
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
    """The numbers of docs/protocol.rst §6 (Layer A §6.2, Layer B §6.3, polls §5.2, 429s §6.4)
    and the decisions made from them; ``budget_s`` bounds one logical request in time."""

    max_retries: int = 10
    initial_delay: float = 0.5
    max_delay: float = 10.0
    jitter: float = 0.25
    max_retry_after: float = 60.0
    # docs/protocol.rst §6.2 / §6.3: statuses retried besides every 5xx.
    retry_statuses: frozenset[int] = frozenset({408, 409, 429})
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
    conflict_retries: int = 2

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

    def should_retry(self, status: int, headers: Mapping[str, str] | None = None) -> bool:
        """Whether an error answer is retried (``x-should-retry`` first, then the status)."""
        # docs/protocol.rst §6.2: the header is checked first, exact lower-case comparison.
        flag = _header(headers, "x-should-retry")
        if flag == "true":
            return True
        if flag == "false":
            return False
        return status in self.retry_statuses or status >= 500

    def honoured_retry_after(
        self, headers: Mapping[str, str] | None, *, now: float
    ) -> float | None:
        """The wait the service asks for when it is honoured, else ``None`` (``now``: epoch s)."""
        # docs/protocol.rst §6.2: retry-after is honoured only when 0 < delay <= 60 s.
        asked = parse_retry_after(headers, now=now)
        if asked is not None and 0 < asked <= self.max_retry_after:
            return asked
        return None

    def pace_delay(self, answered_in: float, fast_answers: int) -> float:
        """The pause before a poll after a ``try_again`` or 408: none after a held poll, growing
        with ``fast_answers`` (in a row, under ``pace_below_s``) so no future polls hot."""
        if answered_in >= self.pace_below_s or fast_answers < 1:
            return 0.0
        return min(self.pace_initial * 2.0 ** min(fast_answers - 1, 64), self.pace_max)


# The shortest timeout an attempt made at the end of a retry budget still gets.
MIN_ATTEMPT_TIMEOUT = 0.1
# The shortest overall deadline (connect, headers and body) such an attempt gets.
MIN_ATTEMPT_DEADLINE = 1.0

DEFAULT_RETRY_POLICY = RetryPolicy()
NO_RETRIES = RetryPolicy(max_retries=0)


def cut_timeout(timeout: Timeout, left: float) -> Timeout:
    """``timeout`` cut to the ``left`` seconds of its budget (the deadline to at least a second,
    docs/protocol.rst §6.6)."""
    left = max(left, MIN_ATTEMPT_TIMEOUT)
    total = max(left, MIN_ATTEMPT_DEADLINE)
    if timeout.deadline <= total and timeout.connect <= left and timeout.read <= left:
        return timeout
    return Timeout(
        connect=min(timeout.connect, left),
        read=min(timeout.read, left),
        total=min(timeout.deadline, total),
    )


class StallWatch:
    """The deadline of one request's life: no useful answer for ``stall_timeout`` s
    (docs/protocol.rst §6.6); :meth:`answered` restarts it. One thread at a time uses it."""

    __slots__ = ("_clock", "_parked_at", "last_answer", "stall_timeout")

    def __init__(self, stall_timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_timeout = stall_timeout
        self._clock = clock
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
        return self.stall_timeout - self.silent_for()

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
# Telling the caller about retries it cannot see (docs/protocol.rst §6.6)


def is_invisible_failure(error: BaseException | None, status: int | None = None) -> bool:
    """Whether a failure is one the caller cannot see: connection errors and 5xx answers."""
    if status is not None:
        return status >= 500
    if isinstance(error, ClientClosedError):
        return False
    if isinstance(error, APIStatusError):
        return error.status_code >= 500
    return isinstance(error, APIConnectionError)


@dataclass(slots=True)
class RetryNotice:
    """Whether the first retry of one logical request was announced already."""

    warned: bool = False


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
    """Log one retry: the first invisible one of a request (``notice``) at WARNING, the others at
    DEBUG, with how long it may go on (``until_s``; ``None``: no time bound)."""
    first = invisible and not notice.warned
    if first:
        notice.warned = True
    level = logging.WARNING if first else logging.DEBUG
    if not logger.isEnabledFor(level):
        return
    if until_s is None:
        until = "with no time bound"
    else:
        wall_until = time.strftime("%H:%M:%S", time.localtime(wall_now + until_s))
        until = f"for up to {until_s:.0f} s more, until {wall_until}"
    logger.log(
        level,
        "%s failed (%s); retrying in %.1f s, %s.",
        what,
        redact(problem).rstrip("."),
        delay,
        until,
        # For a handler or filter that weighs the wait (``tinker-lite`` shows only long ones).
        extra={"retry_delay_s": delay, "retry_until_s": until_s},
    )


def is_retryable_error(exc: BaseException) -> bool:
    """Whether Layer B retries an error (docs/protocol.rst §6.3): connection errors,
    408/429/5xx. A 409 is not: waiting does not free a name that exists."""
    if isinstance(exc, ClientClosedError):
        return False
    if isinstance(exc, APIStatusError):
        return exc.status_code != 409 and DEFAULT_RETRY_POLICY.should_retry(exc.status_code)
    return isinstance(exc, APIConnectionError)


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
