"""What a poll's answer says: its queue state, a failed request, a result that cannot be read,
an expired promise, a stall (docs/protocol.rst §5).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs

from tinker_lite._errors import (
    APIError,
    APIResponseValidationError,
    APITimeoutError,
    PromiseExpiredError,
    RequestErrorCategory,
    RequestFailedError,
    TinkerError,
)
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import redact
from tinker_lite._transport.loops import RetryableStatus
from tinker_lite._transport.retry import describe_error

if TYPE_CHECKING:
    from tinker_lite._futures.tasks import PollTask

__all__ = [
    "QueueKind",
    "QueueStateLogger",
    "default_queue_reason",
    "expired_error",
    "json_object",
    "note_queue_state",
    "result_of",
    "stall_error",
    "unexpected_error",
]

logger = logging.getLogger("tinker_lite.futures")

QueueKind = Literal["training", "sampling", "model_creation", "request"]


def default_queue_reason(state: str, kind: QueueKind = "request") -> str:
    """The reason logged for a paused queue state the service gives none for (§5.6)."""
    if state == "paused_rate_limit":
        if kind in ("training", "model_creation"):
            return "concurrent training clients rate limit hit"
        if kind == "sampling":
            return "concurrent sampler weights limit hit"
        return "rate limit hit"
    if state == "paused_capacity":
        return "Tinker backend is running short on capacity, please wait"
    return "unknown"


@attrs.define(eq=False)
class QueueStateLogger:
    """An ``on_queue_state`` callback: a WARNING at most once a minute while paused."""

    prefix: str
    identifier: object
    kind: QueueKind = attrs.field(default="request", kw_only=True)
    _clock: Callable[[], float] = attrs.field(default=time.monotonic, kw_only=True)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)
    _last_logged: float | None = attrs.field(default=None, init=False)

    def __call__(self, state: str, reason: str | None) -> None:
        if state == "active":
            return
        now = self._clock()
        with self._lock:
            if self._last_logged is not None and now - self._last_logged < 60.0:
                return
            self._last_logged = now
        text = (reason or default_queue_reason(state, self.kind)).rstrip(".")
        logger.warning(
            "%s for %s is paused. Reason: %s.", self.prefix, self.identifier, redact(text)
        )


def json_object(resp: HttpResponse) -> dict[str, Any] | None:
    """The answer's JSON object, or None (not JSON, or not an object)."""
    try:
        data = resp.json()
    except Exception:
        return None
    return data if isinstance(data, dict) else None


def validation_error(
    what: str, request_id: str, resp: HttpResponse, problem: str, cause: BaseException
) -> APIResponseValidationError:
    """The error of a result that cannot be read (``cause`` kept)."""
    error = APIResponseValidationError(
        f"Could not read the result of {what}: {redact(problem)}",
        body=resp.text(2000) if not resp.is_protobuf else None,
        request_id=request_id,
        status_code=resp.status,
    )
    error.__cause__ = cause
    return error


def note_queue_state(task: PollTask, data: Mapping[str, Any] | None) -> None:
    """Record the queue state an answer reports on ``task``'s future and tell its callback."""
    if not data:
        return
    state = data.get("queue_state")
    if not isinstance(state, str) or not state:
        return
    reason = data.get("queue_state_reason")
    task.future._queue_state = state
    try:
        task.on_queue_state(state, reason if isinstance(reason, str) and reason else None)
    except Exception:
        logger.debug("on_queue_state callback failed", exc_info=True)


def result_of(task: PollTask, resp: HttpResponse) -> tuple[Any, BaseException | None]:
    """A final 2xx answer's ``(value, None)``, or ``(None, error)``."""
    if not resp.is_protobuf:
        try:
            data = resp.json()
        except Exception as e:
            return None, validation_error(
                task.describe(),
                task.request_id,
                resp,
                f"the body is not valid JSON ({e})",
                e,
            )
        if isinstance(data, dict) and "error" in data:  # the service says the request failed
            category = RequestErrorCategory.parse(data.get("category"))
            text = redact(str(data.get("error")))
            logger.debug("%s failed (%s): %s", task.describe(), category.value, text)
            return None, RequestFailedError(
                f"Request failed: {text} ({task.describe()}, category {category.value})",
                request_id=task.request_id,
                category=category,
                details=data,
            )
    try:
        return task.decode(resp), None
    except (APIError, RequestFailedError) as e:
        return None, e
    except Exception as e:
        return None, validation_error(task.describe(), task.request_id, resp, str(e), e)


def expired_error(task: PollTask, resp: HttpResponse) -> PromiseExpiredError:
    """The error of a 410 that is not (or no longer) re-submitted (docs/protocol.rst §5.3)."""
    body: object = json_object(resp) or resp.text(2000)
    more = (
        f" after {task.resubmits} re-submissions"
        if task.resubmit is not None
        else ". It is not re-sent automatically (its seq_id may already have been "
        "applied); retry the call if that is safe"
    )
    return PromiseExpiredError(
        f"Promise expired for {task.describe()}: the service no longer holds its "
        f"result (HTTP 410){more}.",
        status_code=410,
        body=body,
        request_id=task.request_id,
        headers=dict(resp.headers),
    )


def stall_error(task: PollTask, error: BaseException, *, elapsed: float) -> APITimeoutError:
    """The error of a poll loop that stopped on ``error`` past the stall timeout (§6.6)."""
    resp = error.response if isinstance(error, RetryableStatus) else None
    problem = f"HTTP {resp.status}" if resp is not None else describe_error(error)
    state = task.future._queue_state
    timeout_error = APITimeoutError(
        f"No answer from the service for {task.stall.silent_for():.0f}s while waiting for "
        f"{task.describe()} (stall timeout {task.stall.stall_timeout:g}s; last problem: "
        f"{redact(problem)}; last queue state: {state or 'not reported'}).",
        request_id=task.request_id,
        queue_state=state,
        elapsed=elapsed,
    )
    if resp is None:
        timeout_error.__cause__ = error
    return timeout_error


def unexpected_error(task: PollTask, exc: Exception) -> BaseException:
    """What a poll that failed outside the protocol resolves ``task``'s future with."""
    if isinstance(exc, TinkerError):
        return exc
    logger.error("Polling %s failed unexpectedly", task.describe(), exc_info=exc)
    error = TinkerError(
        f"Polling {task.describe()} failed: {type(exc).__name__}: {redact(str(exc))}"
    )
    error.__cause__ = exc
    return error
