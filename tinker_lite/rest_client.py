"""RestClient: training runs, checkpoints, sessions and samplers (docs/protocol.rst §4.5-§4.8;
docs/api.rst, "RestClient")."""

from __future__ import annotations

import functools
import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs

from tinker_lite import types
from tinker_lite._api import endpoints
from tinker_lite._api.checkpoint_download import (
    DEFAULT_MAX_ARCHIVE_BYTES,
    DownloadProgress,
    download_checkpoint,
)
from tinker_lite._api.endpoints import Endpoint
from tinker_lite._api.rest import checkpoint_archive
from tinker_lite._deprecation import deprecated
from tinker_lite._errors import (
    APIError,
    APIResponseValidationError,
    ExperimentalWarning,
    InvalidInputError,
)
from tinker_lite._futures.async_twins import async_twin
from tinker_lite._futures.future import APIFuture
from tinker_lite._repr import tolerant_repr
from tinker_lite._rest.args import (
    check_checkpoint_id,
    check_id,
    check_optional_id,
    check_page,
    check_scope,
)
from tinker_lite._rest.base import RestOnlyClient
from tinker_lite._secrets import register_secret
from tinker_lite.admin_client import AdminClient

__all__ = ["CheckpointListing", "DownloadProgress", "RestClient"]

logger = logging.getLogger("tinker_lite.rest_client")

ENV_PROJECT_ID = "TINKER_PROJECT_ID"

T = TypeVar("T")


def _moved_to_admin(method: Callable[..., T]) -> Callable[..., T]:
    """The deprecated RestClient twin of an AdminClient method (the official deprecation)."""
    name = method.__name__

    @deprecated(
        f"RestClient.{name}() is deprecated as in the official SDK; use AdminClient.{name}(), "
        "constructed like RestClient."
    )
    @functools.wraps(method)
    def on_admin(self: RestOnlyClient, *args: Any, **kwargs: Any) -> T:
        return method(AdminClient._on_context(self._context), *args, **kwargs)

    on_admin.__doc__ = f"Deprecated: :meth:`AdminClient.{name}`."
    on_admin.__qualname__ = f"RestClient.{name}"
    return on_admin


class RestClient(RestOnlyClient):
    """Reads and manages training runs, checkpoints, sessions and samplers.

    ``RestClient(service_client)`` shares its connection; ``RestClient(base_url=..., api_key=...)``
    opens a session-less one of its own (docs/api.rst). Every method returns an
    :class:`~tinker_lite.APIFuture` at once."""

    def get_server_capabilities(self) -> APIFuture[types.GetServerCapabilitiesResponse]:
        """The base models the service supports."""
        return self._request(endpoints.GET_SERVER_CAPABILITIES)

    def list_training_runs(
        self,
        limit: int = 20,
        offset: int = 0,
        access_scope: str | None = "owned",
        project_id: str | None = None,
    ) -> APIFuture[types.TrainingRunsResponse]:
        """List training runs, newest first, a page at a time (``access_scope``: docs/api.rst)."""
        limit, offset = check_page(limit, offset)
        scope = check_scope(access_scope)
        project = check_optional_id("project_id", project_id)
        query = {"limit": limit, "offset": offset, "access_scope": scope, "project_id": project}
        return self._request(endpoints.LIST_TRAINING_RUNS, query=query)

    def get_training_run(
        self, training_run_id: str, access_scope: str | None = "owned"
    ) -> APIFuture[types.TrainingRun]:
        """One training run (its id is the TrainingClient's ``model_id``)."""
        scope = check_scope(access_scope)
        return self._request(
            endpoints.GET_TRAINING_RUN,
            query={"access_scope": scope},
            training_run_id=training_run_id,
        )

    def get_training_run_by_tinker_path(
        self, tinker_path: str, access_scope: str | None = "owned"
    ) -> APIFuture[types.TrainingRun]:
        """The training run a ``tinker://`` checkpoint path belongs to."""
        return self.get_training_run(
            types.ParsedCheckpointTinkerPath.from_tinker_path(tinker_path).training_run_id,
            access_scope=access_scope,
        )

    def get_weights_info_by_tinker_path(
        self, tinker_path: str
    ) -> APIFuture[types.WeightsInfoResponse]:
        """What a checkpoint holds: base model and LoRA settings."""
        return self._request(
            endpoints.WEIGHTS_INFO,
            sdk_method="RestClient.get_weights_info_by_tinker_path",
            body=types.WeightsInfoRequest(tinker_path=tinker_path),
        )

    def list_checkpoints(self, training_run_id: str) -> APIFuture[types.CheckpointsListResponse]:
        """The checkpoints of one training run."""
        return self._request(endpoints.LIST_CHECKPOINTS, training_run_id=training_run_id)

    def list_user_checkpoints(
        self, limit: int = 100, offset: int = 0
    ) -> APIFuture[types.CheckpointsListResponse]:
        """The checkpoints of all your training runs, newest first, a page at a time."""
        limit, offset = check_page(limit, offset)
        query = {"limit": limit, "offset": offset}
        return self._request(endpoints.LIST_USER_CHECKPOINTS, query=query)

    def _checkpoint_call(
        self,
        endpoint: Endpoint[None],
        training_run_id: str,
        checkpoint_id: str,
        *,
        sdk_method: str | None = None,
        body: object | None = None,
    ) -> APIFuture[None]:
        return self._request(
            endpoint,
            sdk_method=sdk_method,
            body=body,
            training_run_id=training_run_id,
            checkpoint_id=check_checkpoint_id(checkpoint_id),
        )

    def _at_path(
        self, endpoint: Endpoint[None], tinker_path: str, body: object | None = None
    ) -> APIFuture[None]:
        """``endpoint`` on the checkpoint at ``tinker_path``, named
        ``<row's method>_from_tinker_path`` in x-sdk-method (golden-0.38)."""
        parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(tinker_path)
        return self._checkpoint_call(
            endpoint,
            parsed.training_run_id,
            parsed.checkpoint_id,
            sdk_method=f"{endpoint.sdk_method}_from_tinker_path",
            body=body,
        )

    def delete_checkpoint(self, training_run_id: str, checkpoint_id: str) -> APIFuture[None]:
        """Delete a checkpoint (``checkpoint_id`` like ``weights/<name>``)."""
        return self._checkpoint_call(endpoints.DELETE_CHECKPOINT, training_run_id, checkpoint_id)

    def delete_checkpoint_from_tinker_path(self, tinker_path: str) -> APIFuture[None]:
        """Delete the checkpoint at a ``tinker://`` path."""
        return self._at_path(endpoints.DELETE_CHECKPOINT, tinker_path)

    def publish_checkpoint(self, training_run_id: str, checkpoint_id: str) -> APIFuture[None]:
        """Make a checkpoint public (409 if it already is)."""
        return self._checkpoint_call(endpoints.PUBLISH_CHECKPOINT, training_run_id, checkpoint_id)

    def publish_checkpoint_from_tinker_path(self, tinker_path: str) -> APIFuture[None]:
        """Make the checkpoint at a ``tinker://`` path public."""
        return self._at_path(endpoints.PUBLISH_CHECKPOINT, tinker_path)

    def unpublish_checkpoint(self, training_run_id: str, checkpoint_id: str) -> APIFuture[None]:
        """Make a checkpoint private again (409 if it is not public)."""
        return self._checkpoint_call(endpoints.UNPUBLISH_CHECKPOINT, training_run_id, checkpoint_id)

    def unpublish_checkpoint_from_tinker_path(self, tinker_path: str) -> APIFuture[None]:
        """Make the checkpoint at a ``tinker://`` path private."""
        return self._at_path(endpoints.UNPUBLISH_CHECKPOINT, tinker_path)

    def set_checkpoint_ttl(
        self, training_run_id: str, checkpoint_id: str, ttl_seconds: int | None
    ) -> APIFuture[None]:
        """Expire a checkpoint ``ttl_seconds`` from now (``None`` keeps it forever)."""
        request = types.SetCheckpointTTLRequest(ttl_seconds=ttl_seconds)
        return self._checkpoint_call(
            endpoints.SET_CHECKPOINT_TTL, training_run_id, checkpoint_id, body=request
        )

    def set_checkpoint_ttl_from_tinker_path(
        self, tinker_path: str, ttl_seconds: int | None
    ) -> APIFuture[None]:
        """Set the time-to-live of the checkpoint at a ``tinker://`` path."""
        request = types.SetCheckpointTTLRequest(ttl_seconds=ttl_seconds)
        return self._at_path(endpoints.SET_CHECKPOINT_TTL, tinker_path, request)

    def get_checkpoint_archive_url(
        self, training_run_id: str, checkpoint_id: str
    ) -> APIFuture[types.CheckpointArchiveUrlResponse]:
        """A signed URL to a checkpoint's archive, and its expiry (docs/protocol.rst §4.6)."""
        return self._archive_call(training_run_id, checkpoint_id, "")

    def get_checkpoint_archive_url_from_tinker_path(
        self, tinker_path: str
    ) -> APIFuture[types.CheckpointArchiveUrlResponse]:
        """A signed download URL for the checkpoint at a ``tinker://`` path."""
        parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(tinker_path)
        return self._archive_call(parsed.training_run_id, parsed.checkpoint_id, "_from_tinker_path")

    def _archive_call(
        self, training_run_id: str, checkpoint_id: str, suffix: str
    ) -> APIFuture[types.CheckpointArchiveUrlResponse]:
        path = endpoints.CHECKPOINT_ARCHIVE.url_path(
            training_run_id=training_run_id, checkpoint_id=check_checkpoint_id(checkpoint_id)
        )
        method = f"{endpoints.CHECKPOINT_ARCHIVE.sdk_method}{suffix}"
        api = self._api
        return self._call(
            lambda: checkpoint_archive(api, path, sdk_method=method), sdk_method=method
        )

    def download_checkpoint(
        self,
        tinker_path: str,
        dest: str | os.PathLike[str],
        extract: bool = False,
        progress: Callable[[DownloadProgress], object] | None = None,
        *,
        overwrite: bool = False,
        max_bytes: int | None = DEFAULT_MAX_ARCHIVE_BYTES,
    ) -> Path:
        """Download a checkpoint's archive (resumable, verified, optionally extracted); return
        the file or folder. Blocks (docs/api.rst, "Downloading a checkpoint")."""
        parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(tinker_path)

        def archive_url() -> str:
            return str(self.get_checkpoint_archive_url_from_tinker_path(tinker_path).result().url)

        return download_checkpoint(
            parsed,
            archive_url,
            dest,
            extract=bool(extract),
            progress=progress,
            overwrite=overwrite,
            max_bytes=max_bytes,
            # The connection's sleep and stall bound: closing the client ends a wait at once.
            sleep=self._api.sleep,
            stall_timeout=self._api.settings.stall_timeout,
        )

    def list_sessions(
        self, limit: int = 20, offset: int = 0, access_scope: str | None = "owned"
    ) -> APIFuture[types.ListSessionsResponse]:
        """List session ids, a page at a time."""
        limit, offset = check_page(limit, offset)
        query = {"limit": limit, "offset": offset, "access_scope": check_scope(access_scope)}
        return self._request(endpoints.LIST_SESSIONS, query=query)

    def get_session(
        self, session_id: str, access_scope: str | None = "owned"
    ) -> APIFuture[types.GetSessionResponse]:
        """The training runs and samplers of one session."""
        scope = check_scope(access_scope)
        return self._request(
            endpoints.GET_SESSION, query={"access_scope": scope}, session_id=session_id
        )

    def get_sampler(self, sampler_id: str) -> APIFuture[types.GetSamplerResponse]:
        """A sampler's base model and model path (its id is the sampling session id)."""
        return self._request(endpoints.GET_SAMPLER, sampler_id=sampler_id)

    def assign_session_project(self, session_id: str, project_id: str) -> APIFuture[None]:
        """Move a session, with its training runs and samplers, into a project (for good)."""
        project = check_id("project_id", project_id)
        return self._request(
            endpoints.ASSIGN_SESSION_PROJECT, body={"project_id": project}, session_id=session_id
        )

    def export_session_trace(self, session_id: str) -> APIFuture[str]:
        """Export a session's timeline as a Perfetto trace; the future gives its signed URL."""
        endpoints.TRACE_EXPORT.url_path(session_id=session_id)  # refused now if it cannot be
        method = "RestClient.export_session_trace"
        exports = self._api.trace_exports
        return self._call(
            lambda: exports.export_session_trace(session_id, sdk_method=method), sdk_method=method
        )

    def whoami(self) -> APIFuture[types.WhoamiResponse]:
        """Who the credential belongs to, read from the connection's JWT claims (docs/api.rst)."""

        def run_whoami() -> types.WhoamiResponse:
            claims = self._api.identity_claims()
            if claims is None:
                raise APIError(
                    "whoami requires JWT auth, but the server has it disabled and the "
                    "credential is a plain API key."
                )
            subject, org = claims.get("sub"), claims.get("org_id")
            if not isinstance(subject, str) or org is None:
                raise APIResponseValidationError(
                    "the access token carries no identity claims (sub, org_id)", body=dict(claims)
                )
            email = claims.get("email")  # an empty one is None, as officially
            return types.WhoamiResponse(
                user_urn=subject,
                org_urn=f"tml:organization:{org}",
                email=email if isinstance(email, str) and email else None,
            )

        return self._call(run_whoami, sdk_method="RestClient.whoami")

    @deprecated(
        "RestClient.search_sessions is experimental: it may change or be removed in any "
        "release without a deprecation period.",
        category=ExperimentalWarning,
    )
    def search_sessions(
        self, request: types.SessionSearchRequest
    ) -> APIFuture[types.SessionSearchResponse]:
        """Search your organization's sessions, newest first, a page per ``next_cursor``
        (experimental, as officially)."""
        if not isinstance(request, types.SessionSearchRequest):
            raise InvalidInputError(
                "request",
                f"must be a types.SessionSearchRequest, got {type(request).__name__}",
                "e.g. types.SessionSearchRequest(display_name='nightly')",
            )
        return self._request(endpoints.SEARCH_SESSIONS, body=request)

    def get_external_weights_urls(
        self, tinker_path: str
    ) -> APIFuture[types.ExternalWeightsUrlsResponse]:
        """Signed download URLs, one per file, of an ``external_weights`` checkpoint."""
        parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(tinker_path)
        if not parsed.checkpoint_id.startswith("external_weights/"):
            raise InvalidInputError(
                "tinker_path",
                f"must be an external weights checkpoint, got {parsed.tinker_path!r}",
                "tinker://<training_run_id>/external_weights/<name>, from save_weights_external",
            )
        return self._request(
            endpoints.EXTERNAL_WEIGHTS_URLS,
            training_run_id=parsed.training_run_id,
            checkpoint_id=parsed.checkpoint_id,
        )

    def copy_weights(
        self,
        path: str,
        destination_project_id: str | None = None,
        *,
        ttl_seconds: int | None = None,
        weights_access_token: str | None = None,
    ) -> APIFuture[str]:
        """Copy a checkpoint into a project (default ``TINKER_PROJECT_ID``), once; the future
        gives the copy's ``tinker://`` path (docs/api.rst)."""
        project = destination_project_id
        if project is None:
            project = os.environ.get(ENV_PROJECT_ID) or None
        if project is None:
            raise InvalidInputError(
                "destination_project_id",
                "is required",
                f"pass destination_project_id or set {ENV_PROJECT_ID}",
            )
        request = types.CopyWeightsRequest(
            source_path=path, destination_project_id=project, ttl_seconds=ttl_seconds
        )
        # Every re-send, operation retries included, carries one X-Idempotency-Key: one copy.
        key = str(uuid.uuid4())
        headers = {}
        sdk_method = "RestClient.copy_weights"
        if weights_access_token is not None:
            check_id("weights_access_token", weights_access_token)
            register_secret(weights_access_token)
            headers["X-Tinker-Weights-Access-Token"] = weights_access_token
        api = self._api

        def run_copy() -> str:
            answer = api.request(
                endpoints.COPY_WEIGHTS,
                body=request,
                sdk_method=sdk_method,
                headers=headers,
                idempotency_key=key,
            )
            logger.info("Copied %s to %s", request.source_path, answer.tinker_path)
            return answer.tinker_path

        return self._call(run_copy, sdk_method=sdk_method)

    get_audit_log = _moved_to_admin(AdminClient.get_audit_log)
    get_billing_usage = _moved_to_admin(AdminClient.get_billing_usage)
    get_current_checkpoint_storage_usage = _moved_to_admin(
        AdminClient.get_current_checkpoint_storage_usage
    )

    def list_all_training_runs(
        self,
        access_scope: str | None = "owned",
        *,
        page_size: int = 100,
        page_timeout: float | None = None,
    ) -> list[types.TrainingRun]:
        """Every training run, newest first, paging through :meth:`list_training_runs` (each page
        waited for at most ``page_timeout`` s; a run seen twice is kept once)."""
        runs: dict[str, types.TrainingRun] = {}
        offset = 0
        while True:
            page = self.list_training_runs(
                limit=page_size, offset=offset, access_scope=access_scope
            ).result(page_timeout)
            batch = list(page.training_runs)
            for run in batch:
                runs.setdefault(run.training_run_id, run)
            offset += len(batch)
            if not batch or offset >= page.cursor.total_count:
                return list(runs.values())

    def list_all_checkpoints(
        self,
        training_run_id: str | None = None,
        *,
        page_size: int = 100,
        page_timeout: float | None = None,
    ) -> CheckpointListing:
        """Every checkpoint of one training run, or of all yours, and whether that is all (never
        delete on an incomplete listing; docs/api.rst, "Paging helpers")."""
        if training_run_id is not None:
            single = self.list_checkpoints(training_run_id).result(page_timeout)
            items = list(single.checkpoints)
            cursor = single.cursor
            if cursor is not None and cursor.total_count > len(items):
                reason = f"the run listing returned {len(items)} of {cursor.total_count}"
                return CheckpointListing(items, complete=False, reason=reason)
            return CheckpointListing(items)
        items = []
        seen: set[str] = set()
        while True:
            page = self.list_user_checkpoints(limit=page_size, offset=len(items)).result(
                page_timeout
            )
            batch = list(page.checkpoints)
            paths = {checkpoint.tinker_path for checkpoint in batch}
            if len(paths) < len(batch) or not seen.isdisjoint(paths):
                reason = "a checkpoint appeared twice while paging"
                return CheckpointListing(items, complete=False, reason=reason)
            seen |= paths
            items.extend(batch)
            cursor = page.cursor
            if cursor is not None and batch and len(items) < cursor.total_count:
                continue
            reason = ""
            if cursor is None and len(batch) >= page_size:
                reason = "the service sent a full page without a cursor"
            elif cursor is not None and len(items) != cursor.total_count:
                reason = f"got {len(items)} checkpoints but the service counts {cursor.total_count}"
            return CheckpointListing(items, complete=not reason, reason=reason)

    # -- the official *_async twins (deprecated there too) ---------------------------------------

    assign_session_project_async = async_twin(assign_session_project)
    copy_weights_async = async_twin(copy_weights)
    delete_checkpoint_async = async_twin(delete_checkpoint)
    delete_checkpoint_from_tinker_path_async = async_twin(delete_checkpoint_from_tinker_path)
    export_session_trace_async = async_twin(export_session_trace)
    get_audit_log_async = async_twin(get_audit_log)
    get_billing_usage_async = async_twin(get_billing_usage)
    get_current_checkpoint_storage_usage_async = async_twin(get_current_checkpoint_storage_usage)
    get_external_weights_urls_async = async_twin(get_external_weights_urls)
    get_sampler_async = async_twin(get_sampler)
    get_session_async = async_twin(get_session)
    get_training_run_async = async_twin(get_training_run)
    get_training_run_by_tinker_path_async = async_twin(get_training_run_by_tinker_path)
    list_checkpoints_async = async_twin(list_checkpoints)
    list_sessions_async = async_twin(list_sessions)
    list_training_runs_async = async_twin(list_training_runs)
    list_user_checkpoints_async = async_twin(list_user_checkpoints)
    publish_checkpoint_from_tinker_path_async = async_twin(publish_checkpoint_from_tinker_path)
    set_checkpoint_ttl_from_tinker_path_async = async_twin(set_checkpoint_ttl_from_tinker_path)
    unpublish_checkpoint_from_tinker_path_async = async_twin(unpublish_checkpoint_from_tinker_path)


@attrs.define(repr=False)
class CheckpointListing:
    """Checkpoints gathered over every page, and whether the listing is known to be complete."""

    checkpoints: list[types.Checkpoint]
    complete: bool = attrs.field(default=True, kw_only=True)
    reason: str = attrs.field(default="", kw_only=True)
    """Why the listing is incomplete (empty when complete)."""

    @tolerant_repr
    def __repr__(self) -> str:
        state = "complete" if self.complete else f"incomplete: {self.reason}"
        return f"CheckpointListing({len(self.checkpoints)} checkpoints, {state})"
