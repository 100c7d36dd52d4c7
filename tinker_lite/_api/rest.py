"""What the endpoint table cannot say: the trace export's wait, the archive redirect."""

from __future__ import annotations

import email.utils
import logging
import urllib.parse
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Literal

import attrs

from tinker_lite import types
from tinker_lite._api.endpoints import CHECKPOINT_ARCHIVE, TRACE_EXPORT
from tinker_lite._codec.decoding import parse_model
from tinker_lite._errors import (
    APIError,
    APIResponseValidationError,
    APITimeoutError,
    ClientClosedError,
)
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.loops import ServiceWait, retry_loop

if TYPE_CHECKING:
    from tinker_lite._api.sender import Sender

__all__ = [
    "TraceExports",
    "archive_url",
    "checkpoint_archive",
]

logger = logging.getLogger("tinker_lite.api")

# docs/protocol.rst §4.6: how long an archive URL is taken to be valid when the answer does not say.
ARCHIVE_VALIDITY = timedelta(minutes=15)
# docs/protocol.rst §4.6: the archive URL is a redirect that is read, never followed.
REDIRECT_STATUSES = (301, 302, 303, 307, 308)


def checkpoint_archive(
    api: Sender, path: str, *, sdk_method: str
) -> types.CheckpointArchiveUrlResponse:
    """A checkpoint's signed download URL and its expiry, read from the redirect (or a JSON answer)
    and not followed (docs/protocol.rst §4.6); ``path`` is :data:`CHECKPOINT_ARCHIVE`'s."""
    resp = api.call(
        CHECKPOINT_ARCHIVE.verb,
        path,
        sdk_method=sdk_method,
        headers={"Accept": "application/json, application/gzip"},
        operation_retries=False,
        accept_status=REDIRECT_STATUSES,
        allow_redirects=False,
    )
    return archive_url(resp, api.base_url)


class TraceExports:
    """A session trace's export, asked again while the service builds it."""

    def __init__(self, api: Sender) -> None:
        self._api = api

    def export_session_trace(self, session_id: str, *, sdk_method: str) -> str:
        """The download URL of a session's trace, asked again every 5 s while the service
        builds it, for at most the stall timeout (docs/protocol.rst §6.6)."""
        api = self._api
        policy = api.policy
        life = api.stall_watch()
        announced = False

        def look_at_export() -> str | None:
            """One look at the export: its URL when ready, None while it is being built."""
            nonlocal announced
            resp = api.call(
                TRACE_EXPORT.verb,
                TRACE_EXPORT.url_path(session_id=session_id),
                sdk_method=sdk_method,
            )
            answer = parse_model(resp, TraceExportStatus, what="trace_export")
            if answer.status == "ready" and answer.url:
                return answer.url
            if answer.status != "pending":
                reason = answer.error or "the service gave no URL"
                raise APIError(f"Trace export failed for session {session_id}: {reason}")
            if not announced:
                announced = True
                logger.warning(
                    "Building the trace export of session %s (this may take a while)", session_id
                )
            return None

        exports = retry_loop(
            wait=ServiceWait(
                policy, lambda state: policy.trace_export_interval, wall_clock=api.wall_clock
            ),
            stop=lambda state: (
                api.closing.is_set() or life.remaining() <= policy.trace_export_interval
            ),
            retry_on=lambda error: False,
            retry_result=lambda answer: answer is None,
            sleep=api.sleep,
        )
        url = exports(look_at_export)
        if url is None:
            if api.closing.is_set():
                raise ClientClosedError("The client was closed during the trace export.")
            raise APITimeoutError(
                f"The trace export of session {session_id} was still being built after "
                f"{life.stall_timeout:g} s; call export_session_trace again later"
            )
        return str(url)


@attrs.frozen(kw_only=True)
class TraceExportStatus:
    """The answer of ``GET sessions/{id}/trace_export`` (not a public type, as officially)."""

    status: Literal["pending", "ready", "failed"]
    url: str | None = None
    error: str | None = None


def archive_url(resp: HttpResponse, base_url: str) -> types.CheckpointArchiveUrlResponse:
    """The signed URL and expiry of a redirect or JSON archive answer (docs/protocol.rst §4.6)."""
    if resp.status not in REDIRECT_STATUSES:
        answer = parse_model(resp, types.CheckpointArchiveUrlResponse)
        if answer.expires.tzinfo is None:
            return attrs.evolve(answer, expires=answer.expires.replace(tzinfo=timezone.utc))
        return answer
    location = resp.headers.get("Location")
    if not location:
        raise APIResponseValidationError(
            f"the archive request was answered {resp.status} without a Location header",
            status_code=resp.status,
        )
    try:
        expires = email.utils.parsedate_to_datetime(resp.headers.get("Expires") or "")
    except (TypeError, ValueError, IndexError):  # absent or unreadable
        expires = datetime.now(timezone.utc) + ARCHIVE_VALIDITY
    if expires.tzinfo is None:
        expires = expires.replace(tzinfo=timezone.utc)
    return types.CheckpointArchiveUrlResponse(
        url=urllib.parse.urljoin(base_url, location), expires=expires.astimezone(timezone.utc)
    )
