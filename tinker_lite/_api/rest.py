"""The requestor's REST operations: training runs, checkpoints, sessions, samplers, admin views.

:class:`RestRequests` is part of the requestor (``requestor.rest``): each operation names
its endpoint and decodes its answer, and every request goes through the requestor's one send.
The trace export's wait for the service is a tenacity loop with the one wait strategy.
"""

from __future__ import annotations

import email.utils
import logging
import urllib.parse
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Literal, TypeVar

import attrs

from tinker_lite import types
from tinker_lite._api.endpoints import API, REDIRECT_STATUSES
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.decoding import parse_model
from tinker_lite._errors import (
    APIError,
    APIResponseValidationError,
    APITimeoutError,
    ClientClosedError,
)
from tinker_lite._repr import tolerant_repr
from tinker_lite._transport.http import HttpResponse, path_param, register_secret
from tinker_lite._transport.loops import RetryCallState, ServiceWait, call_of, retry_loop
from tinker_lite._transport.retry import StallWatch

if TYPE_CHECKING:
    from tinker_lite._api.requestor import Requestor

__all__ = [
    "RestRequests",
    "TraceExportStatus",
    "archive_url",
    "checkpoint_path",
]

T = TypeVar("T")

logger = logging.getLogger("tinker_lite.api")

ARCHIVE_ACCEPT: Mapping[str, str] = {"Accept": "application/json, application/gzip"}
# docs/protocol.rst §4.6: how long an archive URL is taken to be valid when the answer does not say.
ARCHIVE_VALIDITY = timedelta(minutes=15)


def _query(**values: object) -> dict[str, str]:
    return {key: str(value) for key, value in values.items() if value is not None}


def _page(limit: int, offset: int, access_scope: str | None) -> dict[str, object]:
    """The query of a listing page (docs/protocol.rst §4.5: ``access_scope`` is left out when
    None)."""
    return {"limit": limit, "offset": offset, "access_scope": access_scope}


def _segment(value: str) -> str:
    return path_param(value, keep_slash=False)


class RestRequests:
    """The REST operations of one requestor (``requestor.rest``)."""

    def __init__(self, api: Requestor) -> None:
        self._api = api
        policy = api.policy
        # The trace export is asked again while the service builds it (one loop for all calls).
        self._trace_exports = retry_loop(
            wait=ServiceWait(policy, policy.trace_export_backoff, wall_clock=api.wall_clock),
            stop=self._export_stops,
            retry_on=lambda error: False,
            retry_result=lambda answer: answer is None,
            sleep=api.sleep,
        )

    @tolerant_repr
    def __repr__(self) -> str:
        return f"RestRequests(base_url={self._api.base_url!r})"

    def _get(self, path: str, cls: type[T], *, sdk_method: str, **query: object) -> T:
        resp = self._api.call("GET", path, sdk_method=sdk_method, query=_query(**query))
        return parse_model(resp, cls)

    def get_server_capabilities(self, *, sdk_method: str) -> types.GetServerCapabilitiesResponse:
        """The base models the service supports."""
        return self._get(
            f"{API}/get_server_capabilities",
            types.GetServerCapabilitiesResponse,
            sdk_method=sdk_method,
        )

    def list_training_runs(
        self,
        limit: int,
        offset: int,
        access_scope: str | None,
        *,
        sdk_method: str,
        project_id: str | None = None,
    ) -> types.TrainingRunsResponse:
        """A page of training runs (of one project when ``project_id`` is given)."""
        return self._get(
            f"{API}/training_runs",
            types.TrainingRunsResponse,
            sdk_method=sdk_method,
            **_page(limit, offset, access_scope),
            project_id=project_id,
        )

    def get_training_run(
        self, training_run_id: str, access_scope: str | None = None, *, sdk_method: str
    ) -> types.TrainingRun:
        """One training run."""
        return self._get(
            f"{API}/training_runs/{_segment(training_run_id)}",
            types.TrainingRun,
            sdk_method=sdk_method,
            access_scope=access_scope,
        )

    def list_checkpoints(
        self, training_run_id: str, *, sdk_method: str
    ) -> types.CheckpointsListResponse:
        """The checkpoints of one training run."""
        return self._get(
            f"{API}/training_runs/{_segment(training_run_id)}/checkpoints",
            types.CheckpointsListResponse,
            sdk_method=sdk_method,
        )

    def list_user_checkpoints(
        self, limit: int, offset: int, *, sdk_method: str
    ) -> types.CheckpointsListResponse:
        """A page of the caller's checkpoints."""
        return self._get(
            f"{API}/checkpoints",
            types.CheckpointsListResponse,
            sdk_method=sdk_method,
            limit=limit,
            offset=offset,
        )

    def checkpoint_action(
        self,
        method: Literal["DELETE", "POST", "PUT"],
        training_run_id: str,
        checkpoint_id: str,
        action: Literal["", "publish", "ttl"],
        *,
        sdk_method: str,
        body_obj: object | None = None,
    ) -> None:
        """Delete a checkpoint, (un)publish it or set its TTL; the answer carries nothing."""
        self._api.call(
            method,
            checkpoint_path(training_run_id, checkpoint_id, action),
            body_obj=body_obj,
            sdk_method=sdk_method,
        )

    def checkpoint_archive(
        self, training_run_id: str, checkpoint_id: str, *, sdk_method: str
    ) -> types.CheckpointArchiveUrlResponse:
        """A checkpoint's signed download URL and its expiry (docs/protocol.rst §4.6).

        The service answers with a redirect, read and not followed: the URL is its
        ``Location`` and the expiry its ``Expires`` (now + 15 minutes when absent); a JSON
        answer ``{"url", "expires"}`` is accepted too. The official SDK asks for
        ``application/json`` and ``application/gzip`` (two ``Accept`` lines in 0.4.1); one
        ``Accept`` listing both says the same (RFC 9110 §5.3).
        """
        resp = self._api.call(
            "GET",
            checkpoint_path(training_run_id, checkpoint_id, "archive"),
            sdk_method=sdk_method,
            headers=ARCHIVE_ACCEPT,
            operation_retries=False,
            accept_status=REDIRECT_STATUSES,
            allow_redirects=False,
        )
        return archive_url(resp, self._api.base_url)

    def list_sessions(
        self, limit: int, offset: int, access_scope: str | None, *, sdk_method: str
    ) -> types.ListSessionsResponse:
        """A page of session ids."""
        return self._get(
            f"{API}/sessions",
            types.ListSessionsResponse,
            sdk_method=sdk_method,
            **_page(limit, offset, access_scope),
        )

    def get_session(
        self, session_id: str, access_scope: str | None, *, sdk_method: str
    ) -> types.GetSessionResponse:
        """The training runs and samplers of one session."""
        return self._get(
            f"{API}/sessions/{_segment(session_id)}",
            types.GetSessionResponse,
            sdk_method=sdk_method,
            access_scope=access_scope,
        )

    def get_sampler(self, sampler_id: str, *, sdk_method: str) -> types.GetSamplerResponse:
        """A sampler's base model and model path."""
        return self._get(
            f"{API}/samplers/{_segment(sampler_id)}",
            types.GetSamplerResponse,
            sdk_method=sdk_method,
        )

    def export_session_trace(self, session_id: str, *, sdk_method: str) -> str:
        """The download URL of a session's trace, asked again every 5 s while the service
        builds it, for at most the stall timeout (docs/protocol.rst §6.6)."""
        export = _TraceExport(session_id, sdk_method, self._api.stall_watch())
        url = self._trace_exports(self._look_at_export, export)
        if url is None:
            if self._api.closing.is_set():
                raise ClientClosedError("The client was closed during the trace export.")
            raise APITimeoutError(
                f"The trace export of session {session_id} was still being built after "
                f"{export.life.stall_timeout:g} s; call export_session_trace again later"
            )
        return str(url)

    def _look_at_export(self, export: _TraceExport) -> str | None:
        """One look at the export: its URL when ready, None while it is being built."""
        resp = self._api.call(
            "GET",
            f"{API}/sessions/{_segment(export.session_id)}/trace_export",
            sdk_method=export.sdk_method,
        )
        answer = parse_model(resp, TraceExportStatus, what="trace_export")
        if answer.status == "ready" and answer.url:
            return answer.url
        if answer.status != "pending":
            reason = answer.error or "the service gave no URL"
            raise APIError(f"Trace export failed for session {export.session_id}: {reason}")
        if not export.announced:
            export.announced = True
            logger.warning(
                "Building the trace export of session %s (this may take a while)",
                export.session_id,
            )
        return None

    def _export_stops(self, state: RetryCallState) -> bool:
        export: _TraceExport = call_of(state)
        return (
            self._api.closing.is_set()
            or export.life.remaining() <= self._api.policy.trace_export_interval
        )

    def search_sessions(
        self, request: types.SessionSearchRequest, *, sdk_method: str
    ) -> types.SessionSearchResponse:
        """One page of the sessions matching ``request``."""
        resp = self._api.call(
            "POST", f"{API}/sessions/search", body_obj=request, sdk_method=sdk_method
        )
        return parse_model(resp, types.SessionSearchResponse)

    def external_weights_urls(
        self, training_run_id: str, checkpoint_id: str, *, sdk_method: str
    ) -> types.ExternalWeightsUrlsResponse:
        """Signed per-file URLs of an external-weights checkpoint."""
        return self._get(
            checkpoint_path(training_run_id, checkpoint_id, "external_weights_urls"),
            types.ExternalWeightsUrlsResponse,
            sdk_method=sdk_method,
        )

    def copy_weights(
        self,
        request: types.CopyWeightsRequest,
        *,
        sdk_method: str,
        idempotency_key: str,
        weights_access_token: str | None = None,
    ) -> types.CopyWeightsResponse:
        """Copy a checkpoint; every re-send carries the same ``X-Idempotency-Key``, so the
        service copies once."""
        headers = {"X-Idempotency-Key": idempotency_key}
        if weights_access_token is not None:
            register_secret(weights_access_token)
            headers["X-Tinker-Weights-Access-Token"] = weights_access_token
        resp = self._api.call(
            "POST", f"{API}/copy_weights", body_obj=request, sdk_method=sdk_method, headers=headers
        )
        return parse_model(resp, types.CopyWeightsResponse)

    def assign_session_project(self, session_id: str, project_id: str, *, sdk_method: str) -> None:
        """Move a session (its runs and samplers) into a project; the answer carries nothing."""
        self._api.call(
            "PUT",
            f"{API}/sessions/{_segment(session_id)}/project",
            body_obj={"project_id": project_id},
            sdk_method=sdk_method,
        )

    def audit_log(
        self, event_type: str, day: str | None, *, sdk_method: str
    ) -> types.AuditLogResponse:
        """The organization's audit log of one UTC day (``None``: today)."""
        return self._get(
            f"{API}/audit",
            types.AuditLogResponse,
            sdk_method=sdk_method,
            event_type=event_type,
            day=day,
        )

    def billing_usage(
        self, request: types.GetBillingUsageRequest, *, sdk_method: str
    ) -> types.BillingUsageResponse:
        """Hourly billing usage events of a time window."""
        return self._get(
            f"{API}/billing/usage/events",
            types.BillingUsageResponse,
            sdk_method=sdk_method,
            **_wire.loads(_wire.dumps(request)),
        )

    def checkpoint_storage_usage(
        self, project_id: str | None, *, sdk_method: str
    ) -> types.CurrentCheckpointStorageUsageResponse:
        """Checkpoint count, size and projected cost now (of one project when given)."""
        return self._get(
            f"{API}/billing/usage/checkpoints/current",
            types.CurrentCheckpointStorageUsageResponse,
            sdk_method=sdk_method,
            project_id=project_id,
        )


class _TraceExport:
    """One trace export being waited for."""

    __slots__ = ("announced", "life", "sdk_method", "session_id")

    def __init__(self, session_id: str, sdk_method: str, life: StallWatch) -> None:
        self.session_id = session_id
        self.sdk_method = sdk_method
        self.life = life
        self.announced = False


@attrs.frozen(kw_only=True)
class TraceExportStatus:
    """The answer of ``GET sessions/{id}/trace_export`` (not a public type, as officially)."""

    status: Literal["pending", "ready", "failed"]
    url: str | None = None
    error: str | None = None


def archive_url(resp: HttpResponse, base_url: str) -> types.CheckpointArchiveUrlResponse:
    """The signed URL and expiry of an archive answer: a redirect or JSON
    (docs/protocol.rst §4.6)."""
    now = datetime.now(timezone.utc)
    if resp.status in REDIRECT_STATUSES:
        location = resp.headers.get("Location")
        if not location:
            raise APIResponseValidationError(
                f"the archive request was answered {resp.status} without a Location header",
                status_code=resp.status,
            )
        return types.CheckpointArchiveUrlResponse(
            url=urllib.parse.urljoin(base_url, location),
            expires=_expires(resp.headers.get("Expires"), now),
        )
    answer = parse_model(resp, types.CheckpointArchiveUrlResponse)
    expires = answer.expires
    if expires.tzinfo is None:
        expires = expires.replace(tzinfo=timezone.utc)
    return types.CheckpointArchiveUrlResponse(url=answer.url, expires=expires)


def _expires(value: str | None, now: datetime) -> datetime:
    """An ``Expires`` header as an aware datetime; now + 15 minutes when absent or unreadable."""
    if value:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=timezone.utc)
            return parsed.astimezone(timezone.utc)
    return now + ARCHIVE_VALIDITY


def checkpoint_path(training_run_id: str, checkpoint_id: str, action: str) -> str:
    """The path of a checkpoint, or of an action on it (``""``: the checkpoint itself)."""
    # docs/protocol.rst §2.1: the checkpoint id keeps its '/' (two path segments).
    run = _segment(training_run_id)
    path = f"{API}/training_runs/{run}/checkpoints/{path_param(checkpoint_id)}"
    return f"{path}/{action}" if action else path
