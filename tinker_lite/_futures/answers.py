"""What a poll's answer says: its queue state, a failed request, a result that cannot be read.

The queue state of a paused request is logged at most once a minute (docs/protocol.rst §5.6); a
``{"error", "category"}`` answer becomes :class:`~tinker_lite.RequestFailedError`; a result
that cannot be read becomes :class:`~tinker_lite.APIResponseValidationError`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._errors import (
    APIResponseValidationError,
    RequestErrorCategory,
    RequestFailedError,
)
from tinker_lite._transport.http import HttpResponse, redact

__all__ = [
    "QueueKind",
    "QueueStateLogger",
    "default_queue_reason",
    "json_decoder",
    "json_object",
    "request_failed",
    "validation_error",
]

logger = logging.getLogger("tinker_lite.futures")

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------
# Queue-state logging (docs/protocol.rst §5.6, later wording)

QueueKind = Literal["training", "sampling", "model_creation", "request"]


def default_queue_reason(state: str, kind: QueueKind = "request") -> str:
    """The reason logged for a paused queue state when the service sends none
    (docs/protocol.rst §5.6)."""
    if state == "paused_rate_limit":
        if kind in ("training", "model_creation"):
            return "concurrent training clients rate limit hit"
        if kind == "sampling":
            return "concurrent sampler weights limit hit"
        return "rate limit hit"
    if state == "paused_capacity":
        return "Tinker backend is running short on capacity, please wait"
    return "unknown"


class QueueStateLogger:
    """An ``on_queue_state`` callback: logs a WARNING at most once per ``interval`` while paused.

    The message is ``{prefix} for {identifier} is paused. Reason: {reason}.`` with the
    service's ``queue_state_reason`` when given, else :func:`default_queue_reason`.
    """

    def __init__(
        self,
        prefix: str,
        identifier: object,
        *,
        kind: QueueKind = "request",
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
    ) -> None:
        self.prefix = prefix
        self.identifier = identifier
        self.kind: QueueKind = kind
        self._interval = interval
        self._clock = clock
        self._log = log or logger
        self._lock = threading.Lock()
        self._last_logged: float | None = None

    def __call__(self, state: str, reason: str | None) -> None:
        if state == "active":
            return
        now = self._clock()
        with self._lock:
            if self._last_logged is not None and now - self._last_logged < self._interval:
                return
            self._last_logged = now
        text = (reason or default_queue_reason(state, self.kind)).rstrip(".")
        self._log.warning(
            "%s for %s is paused. Reason: %s.", self.prefix, self.identifier, redact(text)
        )


def json_decoder(cls: type[T]) -> Callable[[HttpResponse], T]:
    """A :meth:`Poller.poll` decoder reading a JSON result into ``cls``."""

    def decode(resp: HttpResponse) -> T:
        return _wire.structure(resp.json(), cls)

    return decode


def json_object(resp: HttpResponse) -> dict[str, Any] | None:
    """The answer's JSON object, or None (not JSON, or not an object)."""
    try:
        data = resp.json()
    except Exception:
        return None
    return data if isinstance(data, dict) else None


def request_failed(what: str, request_id: str, data: dict[str, Any]) -> RequestFailedError:
    """The error of a request the service says failed (``{"error", "category"}``)."""
    try:
        failed = _wire.structure(data, types.RequestFailedResponse)
        message, category = str(failed.error), RequestErrorCategory.parse(failed.category)
    except Exception:
        message = str(data.get("error"))
        category = RequestErrorCategory.parse(data.get("category"))
    text = redact(message)
    logger.debug("%s failed (%s): %s", what, category.value, text)
    return RequestFailedError(
        f"Request failed: {text} ({what}, category {category.value})",
        request_id=request_id,
        category=category,
        details=data,
    )


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
