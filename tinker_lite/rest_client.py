"""RestClient: training runs, checkpoints, sessions and samplers (docs/protocol.rst §4.5-§4.8).

Every method returns an :class:`~tinker_lite.APIFuture` at once, like the official RestClient;
the request runs on the connection's REST threads with HTTP and operation-level retries.
``RestClient(api_key=..., base_url=...)`` without a ServiceClient builds its own session-less
client context (client config, no ``create_session``; golden-0.38 README), started on first use.
``tinker://`` paths are parsed by :meth:`types.ParsedCheckpointTinkerPath.from_tinker_path`, whose
errors say which kinds exist: ``tinker://<run>/weights/<name>`` (a training state: loadable with
``load_state`` / ``create_training_client_from_state``) and
``tinker://<run>/sampler_weights/<name>`` (sampleable and downloadable).

Threading contract: every method may be called from any thread.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import TypeVar

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
from tinker_lite.admin_client import AdminClient, AuditEventType

__all__ = ["CheckpointListing", "DownloadProgress", "RestClient", "parse_tinker_path"]

T = TypeVar("T")

logger = logging.getLogger("tinker_lite.rest_client")

ENV_PROJECT_ID = "TINKER_PROJECT_ID"


def parse_tinker_path(tinker_path: str) -> types.ParsedCheckpointTinkerPath:
    """Split ``tinker://<run>/<weights|sampler_weights>/<name>`` into its parts.

    Raises :class:`~tinker_lite.InvalidInputError` saying what is wrong and which kinds exist.
    """
    return types.ParsedCheckpointTinkerPath.from_tinker_path(tinker_path)


def _whoami_from_claims(claims: Mapping[str, object]) -> types.WhoamiResponse:
    """The identity in a JWT's claims; a principal that is not a user has an empty ``email``
    claim, reported as ``None`` (as the official SDK does)."""
    subject, org = claims.get("sub"), claims.get("org_id")
    if not isinstance(subject, str) or org is None:
        raise APIResponseValidationError(
            "the access token carries no identity claims (sub, org_id)", body=dict(claims)
        )
    email = claims.get("email")
    return types.WhoamiResponse(
        user_urn=subject,
        org_urn=f"tml:organization:{org}",
        email=email if isinstance(email, str) and email else None,
    )


class RestClient(RestOnlyClient):
    """Reads and manages training runs, checkpoints, sessions and samplers.

    ``RestClient(service_client)`` shares the ServiceClient's connection (as the deprecated
    :meth:`ServiceClient.create_rest_client` does). ``RestClient(base_url=..., api_key=...)``
    builds a connection of its own that never creates a session; ``base_url="local://"``
    starts the offline local server, like :class:`ServiceClient`. The keyword-only options
    ``verify``, ``default_headers``, ``max_retries``, ``stall_timeout``, ``startup_timeout``,
    ``telemetry`` and ``requests_session`` mean what they mean for :class:`ServiceClient`.
    Close it with ``close()`` or use ``with``.
    """

    # -- service -----------------------------------------------------------------------------------

    def get_server_capabilities(self) -> APIFuture[types.GetServerCapabilitiesResponse]:
        """Return the base models the service supports."""
        return self._request(endpoints.GET_SERVER_CAPABILITIES)

    # -- training runs ---------------------------------------------------------------------------

    def list_training_runs(
        self,
        limit: int = 20,
        offset: int = 0,
        access_scope: str | None = "owned",
        project_id: str | None = None,
    ) -> APIFuture[types.TrainingRunsResponse]:
        """List training runs, newest first (``limit`` and ``offset`` page through them).

        ``access_scope``: ``"owned"`` (yours) or ``"accessible"`` (also those shared with you);
        ``None`` leaves the parameter out, for services that predate it. ``project_id`` lists
        the runs of one project only.
        """
        limit, offset = check_page(limit, offset)
        scope = check_scope(access_scope)
        project = check_optional_id("project_id", project_id)
        query = {"limit": limit, "offset": offset, "access_scope": scope, "project_id": project}
        return self._request(endpoints.LIST_TRAINING_RUNS, query=query)

    def get_training_run(
        self, training_run_id: str, access_scope: str | None = "owned"
    ) -> APIFuture[types.TrainingRun]:
        """Return one training run (its id is the TrainingClient's ``model_id``).

        ``access_scope`` as for :meth:`list_training_runs`.
        """
        scope = check_scope(access_scope)
        return self._request(
            endpoints.GET_TRAINING_RUN,
            query={"access_scope": scope},
            training_run_id=training_run_id,
        )

    def get_training_run_by_tinker_path(
        self, tinker_path: str, access_scope: str | None = "owned"
    ) -> APIFuture[types.TrainingRun]:
        """Return the training run a ``tinker://`` checkpoint path belongs to."""
        return self.get_training_run(
            parse_tinker_path(tinker_path).training_run_id, access_scope=access_scope
        )

    def get_weights_info_by_tinker_path(
        self, tinker_path: str
    ) -> APIFuture[types.WeightsInfoResponse]:
        """Return what a checkpoint holds: base model and LoRA settings."""
        types.WeightsInfoRequest(tinker_path=tinker_path)
        method = "RestClient.get_weights_info_by_tinker_path"
        return self._call(
            lambda: self._api.training.weights_info(tinker_path, sdk_method=method),
            sdk_method=method,
        )

    # -- checkpoints -----------------------------------------------------------------------------

    def list_checkpoints(self, training_run_id: str) -> APIFuture[types.CheckpointsListResponse]:
        """List the checkpoints of one training run."""
        return self._request(endpoints.LIST_CHECKPOINTS, training_run_id=training_run_id)

    def list_user_checkpoints(
        self, limit: int = 100, offset: int = 0
    ) -> APIFuture[types.CheckpointsListResponse]:
        """List the checkpoints of all your training runs, newest first."""
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

    def delete_checkpoint(self, training_run_id: str, checkpoint_id: str) -> APIFuture[None]:
        """Delete a checkpoint (``checkpoint_id`` like ``weights/<name>``)."""
        return self._checkpoint_call(endpoints.DELETE_CHECKPOINT, training_run_id, checkpoint_id)

    def delete_checkpoint_from_tinker_path(self, tinker_path: str) -> APIFuture[None]:
        """Delete the checkpoint at a ``tinker://`` path."""
        parsed = parse_tinker_path(tinker_path)
        # golden-0.38: a *_from_tinker_path call is named after itself in x-sdk-method.
        return self._checkpoint_call(
            endpoints.DELETE_CHECKPOINT,
            parsed.training_run_id,
            parsed.checkpoint_id,
            sdk_method="RestClient.delete_checkpoint_from_tinker_path",
        )

    def publish_checkpoint(self, training_run_id: str, checkpoint_id: str) -> APIFuture[None]:
        """Make a checkpoint public (anyone may load or sample it); 409 if it already is."""
        return self._checkpoint_call(endpoints.PUBLISH_CHECKPOINT, training_run_id, checkpoint_id)

    def publish_checkpoint_from_tinker_path(self, tinker_path: str) -> APIFuture[None]:
        """Make the checkpoint at a ``tinker://`` path public."""
        parsed = parse_tinker_path(tinker_path)
        return self._checkpoint_call(
            endpoints.PUBLISH_CHECKPOINT,
            parsed.training_run_id,
            parsed.checkpoint_id,
            sdk_method="RestClient.publish_checkpoint_from_tinker_path",
        )

    def unpublish_checkpoint(self, training_run_id: str, checkpoint_id: str) -> APIFuture[None]:
        """Make a checkpoint private again; 409 if it is not public."""
        return self._checkpoint_call(endpoints.UNPUBLISH_CHECKPOINT, training_run_id, checkpoint_id)

    def unpublish_checkpoint_from_tinker_path(self, tinker_path: str) -> APIFuture[None]:
        """Make the checkpoint at a ``tinker://`` path private."""
        parsed = parse_tinker_path(tinker_path)
        return self._checkpoint_call(
            endpoints.UNPUBLISH_CHECKPOINT,
            parsed.training_run_id,
            parsed.checkpoint_id,
            sdk_method="RestClient.unpublish_checkpoint_from_tinker_path",
        )

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
        parsed = parse_tinker_path(tinker_path)
        return self._checkpoint_call(
            endpoints.SET_CHECKPOINT_TTL,
            parsed.training_run_id,
            parsed.checkpoint_id,
            sdk_method="RestClient.set_checkpoint_ttl_from_tinker_path",
            body=types.SetCheckpointTTLRequest(ttl_seconds=ttl_seconds),
        )

    def get_checkpoint_archive_url(
        self, training_run_id: str, checkpoint_id: str
    ) -> APIFuture[types.CheckpointArchiveUrlResponse]:
        """Return a signed URL to download a checkpoint archive, and when it expires.

        docs/protocol.rst §4.6: the service answers with a redirect (read, not followed): the URL
        is its ``Location`` and the expiry its ``Expires`` (now + 15 minutes when absent). A JSON
        answer ``{"url", "expires"}`` is accepted too.
        """
        return self._archive_call(
            training_run_id, checkpoint_id, method="RestClient.get_checkpoint_archive_url"
        )

    def _archive_call(
        self, training_run_id: str, checkpoint_id: str, *, method: str
    ) -> APIFuture[types.CheckpointArchiveUrlResponse]:
        path = endpoints.CHECKPOINT_ARCHIVE.url_path(
            training_run_id=training_run_id, checkpoint_id=check_checkpoint_id(checkpoint_id)
        )
        api = self._api
        return self._call(
            lambda: checkpoint_archive(api, path, sdk_method=method), sdk_method=method
        )

    def get_checkpoint_archive_url_from_tinker_path(
        self, tinker_path: str
    ) -> APIFuture[types.CheckpointArchiveUrlResponse]:
        """Return a signed download URL for the checkpoint at a ``tinker://`` path."""
        parsed = parse_tinker_path(tinker_path)
        return self._archive_call(
            parsed.training_run_id,
            parsed.checkpoint_id,
            method="RestClient.get_checkpoint_archive_url_from_tinker_path",
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
        """Download a checkpoint's archive (resumable, verified), optionally extracted; return
        the archive file, or the folder it was extracted into.

        With ``extract`` false, ``dest`` is the archive file to write (or an existing folder,
        which gets ``<run>-<kind>-<name>.tar.gz``). With ``extract`` true, ``dest`` is the
        folder to extract into; the archive is written beside it as ``<dest>.tar.gz`` and
        removed once extracted. The bytes go to ``<file>.part`` first: a download cut short
        (a dropped connection, a killed process) resumes from it with an HTTP ``Range`` request
        on the next call, and the file appears only once its size is verified. An expired
        signed URL is asked for again. Extraction writes plain files only: links, devices and
        any member that would land outside ``dest`` raise
        :class:`~tinker_lite.UnsafeArchiveError` naming the member, before anything is written.

        ``progress`` is called with a :class:`~tinker_lite.rest_client.DownloadProgress` as
        bytes arrive and once at the end (``done`` true). The archive may not exceed
        ``max_bytes`` (32 GiB by default, ``None`` for no bound), downloaded or extracted: a
        larger one raises
        :class:`~tinker_lite.DownloadError`. An existing archive or a non-empty folder raises
        :class:`FileExistsError` unless ``overwrite``. Blocks until done (no future).
        """
        parsed = parse_tinker_path(tinker_path)

        def archive_url() -> str:
            return str(self.get_checkpoint_archive_url_from_tinker_path(tinker_path).result().url)

        outcome = download_checkpoint(
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
        return outcome.extracted_to if outcome.extracted_to is not None else outcome.archive.path

    # -- sessions and samplers -------------------------------------------------------------------

    def list_sessions(
        self, limit: int = 20, offset: int = 0, access_scope: str | None = "owned"
    ) -> APIFuture[types.ListSessionsResponse]:
        """List session ids (``access_scope`` as for :meth:`list_training_runs`)."""
        limit, offset = check_page(limit, offset)
        query = {"limit": limit, "offset": offset, "access_scope": check_scope(access_scope)}
        return self._request(endpoints.LIST_SESSIONS, query=query)

    def get_session(
        self, session_id: str, access_scope: str | None = "owned"
    ) -> APIFuture[types.GetSessionResponse]:
        """Return the training runs and samplers of one session.

        ``access_scope`` as for :meth:`list_training_runs`.
        """
        scope = check_scope(access_scope)
        return self._request(
            endpoints.GET_SESSION, query={"access_scope": scope}, session_id=session_id
        )

    def get_sampler(self, sampler_id: str) -> APIFuture[types.GetSamplerResponse]:
        """Return a sampler's base model and model path (its id is the sampling session id)."""
        return self._request(endpoints.GET_SAMPLER, sampler_id=sampler_id)

    def assign_session_project(self, session_id: str, project_id: str) -> APIFuture[None]:
        """Move a session, with its training runs and samplers, into a project.

        A session cannot be moved out of a project once placed; the service answers 403 when
        the project is not yours to use and 404 for an unknown session.
        """
        project = check_id("project_id", project_id)
        return self._request(
            endpoints.ASSIGN_SESSION_PROJECT, body={"project_id": project}, session_id=session_id
        )

    def export_session_trace(self, session_id: str) -> APIFuture[str]:
        """Export a session's timeline as a Perfetto trace; the future gives its download URL.

        The service builds the trace (or reuses an up-to-date one); while it is being built the
        export is asked again every 5 s, for at most the stall timeout. The signed URL needs no
        credentials and expires after about an hour. A failed build raises
        :class:`~tinker_lite.APIError` with the service's reason.
        """
        endpoints.TRACE_EXPORT.url_path(session_id=session_id)  # refused now if it cannot be
        method = "RestClient.export_session_trace"
        exports = self._api.trace_exports
        return self._call(
            lambda: exports.export_session_trace(session_id, sdk_method=method), sdk_method=method
        )

    def whoami(self) -> APIFuture[types.WhoamiResponse]:
        """Who the credential in use belongs to: user URN, organization URN and email.

        Read from the claims of the JWT this connection already holds: no request is sent
        beyond the connection's start-up. A service with JWT auth disabled gives no identity to
        a plain API key: the future then fails with :class:`~tinker_lite.APIError` saying so.
        """

        def run_whoami() -> types.WhoamiResponse:
            claims = self._api.identity_claims()
            if claims is None:
                raise APIError(
                    "whoami requires JWT auth, but the server has it disabled and the "
                    "credential is a plain API key."
                )
            return _whoami_from_claims(claims)

        return self._call(run_whoami, sdk_method="RestClient.whoami")

    @deprecated(
        "RestClient.search_sessions is experimental: it may change or be removed in any "
        "release without a deprecation period.",
        category=ExperimentalWarning,
    )
    def search_sessions(
        self, request: types.SessionSearchRequest
    ) -> APIFuture[types.SessionSearchResponse]:
        """Search your organization's sessions, newest first (experimental, as officially).

        Page through them by passing each response's ``next_cursor`` as the next request's
        ``cursor``.
        """
        if not isinstance(request, types.SessionSearchRequest):
            raise InvalidInputError(
                "request",
                f"must be a types.SessionSearchRequest, got {type(request).__name__}",
                "e.g. types.SessionSearchRequest(display_name='nightly')",
            )
        return self._request(endpoints.SEARCH_SESSIONS, body=request)

    # -- weights ---------------------------------------------------------------------------------

    def get_external_weights_urls(
        self, tinker_path: str
    ) -> APIFuture[types.ExternalWeightsUrlsResponse]:
        """Signed download URLs, one per file, of an external-weights checkpoint.

        ``tinker_path`` is what ``save_weights_external`` returned
        (``tinker://<run>/external_weights/<name>``); the URLs are valid until ``expires``.
        """
        parsed = parse_tinker_path(tinker_path)
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
        """Copy a checkpoint into a project; the future gives the copy's ``tinker://`` path.

        Storage is shared with the source; the copy keeps the checkpoint's kind and belongs to
        a new training run that cannot be trained on. ``destination_project_id`` defaults to
        ``TINKER_PROJECT_ID``; ``ttl_seconds`` (3600 s to 10 years, ``None``: no expiry);
        ``weights_access_token`` reads weights of another account. The request carries one
        idempotency key on every re-send, so the service copies once.
        """
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
        if weights_access_token is not None:
            check_id("weights_access_token", weights_access_token)
        return self._copy(request, weights_access_token, sdk_method="RestClient.copy_weights")

    def _copy(
        self,
        request: types.CopyWeightsRequest,
        weights_access_token: str | None,
        *,
        sdk_method: str,
    ) -> APIFuture[str]:
        # Every re-send, operation retries included, carries one X-Idempotency-Key: one copy.
        key = str(uuid.uuid4())
        headers = {}
        if weights_access_token is not None:
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

    # -- admin (deprecated here: AdminClient) ----------------------------------------------------

    def _admin(self) -> AdminClient:
        return AdminClient._on_context(self._context)

    @deprecated(
        "RestClient.get_audit_log() is deprecated as in the official SDK; use "
        "AdminClient.get_audit_log(), constructed like RestClient."
    )
    def get_audit_log(
        self, event_type: AuditEventType = "all", day: date | None = None
    ) -> APIFuture[types.AuditLogResponse]:
        """Deprecated: :meth:`AdminClient.get_audit_log`."""
        return self._admin().get_audit_log(event_type, day)

    @deprecated(
        "RestClient.get_billing_usage() is deprecated as in the official SDK; use "
        "AdminClient.get_billing_usage(), constructed like RestClient."
    )
    def get_billing_usage(
        self, starting_on: datetime | str, ending_before: datetime | str
    ) -> APIFuture[types.BillingUsageResponse]:
        """Deprecated: :meth:`AdminClient.get_billing_usage`."""
        return self._admin().get_billing_usage(starting_on, ending_before)

    @deprecated(
        "RestClient.get_current_checkpoint_storage_usage() is deprecated as in the official "
        "SDK; use AdminClient.get_current_checkpoint_storage_usage(), constructed like "
        "RestClient."
    )
    def get_current_checkpoint_storage_usage(
        self, project_id: str | None = None
    ) -> APIFuture[types.CurrentCheckpointStorageUsageResponse]:
        """Deprecated: :meth:`AdminClient.get_current_checkpoint_storage_usage`."""
        return self._admin().get_current_checkpoint_storage_usage(project_id)

    # -- every page ------------------------------------------------------------------------------

    def list_all_training_runs(
        self,
        access_scope: str | None = "owned",
        *,
        page_size: int = 100,
        page_timeout: float | None = None,
    ) -> list[types.TrainingRun]:
        """Every training run, newest first, paging through :meth:`list_training_runs`.

        Waits for each page (at most ``page_timeout`` seconds each; every page's request has
        the usual retries and bounds). A run that shows up twice while paging is kept once.
        """
        runs: list[types.TrainingRun] = []
        seen: set[str] = set()
        offset = 0
        while True:
            page = self.list_training_runs(
                limit=page_size, offset=offset, access_scope=access_scope
            ).result(page_timeout)
            batch = list(page.training_runs)
            for run in batch:
                if run.training_run_id not in seen:
                    seen.add(run.training_run_id)
                    runs.append(run)
            offset += len(batch)
            if not batch or offset >= page.cursor.total_count:
                return runs

    def list_all_checkpoints(
        self,
        training_run_id: str | None = None,
        *,
        page_size: int = 100,
        page_timeout: float | None = None,
    ) -> CheckpointListing:
        """Every checkpoint of one training run, or of all yours, and whether that is all.

        The user's checkpoints are paged until the cursor's total is reached. The listing is
        marked incomplete (``complete`` false, ``reason`` says why) when the pages do not add up
        to the total (the set changed while paging), a page repeats a checkpoint, or a cursor
        is missing where one is needed to know the end: never delete on such a listing.
        ``page_timeout`` as for :meth:`list_all_training_runs`.
        """
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
        offset = 0
        while True:
            page = self.list_user_checkpoints(limit=page_size, offset=offset).result(page_timeout)
            batch = list(page.checkpoints)
            for checkpoint in batch:
                if checkpoint.tinker_path in seen:
                    reason = "a checkpoint appeared twice while paging"
                    return CheckpointListing(items, complete=False, reason=reason)
                seen.add(checkpoint.tinker_path)
            items.extend(batch)
            offset += len(batch)
            cursor = page.cursor
            if cursor is None:
                if len(batch) >= page_size:
                    reason = "the service sent a full page without a cursor"
                    return CheckpointListing(items, complete=False, reason=reason)
                return CheckpointListing(items)
            if not batch or offset >= cursor.total_count:
                if len(items) != cursor.total_count:
                    reason = (
                        f"got {len(items)} checkpoints but the service counts {cursor.total_count}"
                    )
                    return CheckpointListing(items, complete=False, reason=reason)
                return CheckpointListing(items)

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


class CheckpointListing:
    """Checkpoints gathered over every page, and whether the listing is known to be complete."""

    __slots__ = ("checkpoints", "complete", "reason")

    def __init__(
        self, checkpoints: list[types.Checkpoint], *, complete: bool = True, reason: str = ""
    ) -> None:
        self.checkpoints = checkpoints
        self.complete = complete
        self.reason = reason
        """Why the listing is incomplete (empty when complete)."""

    @tolerant_repr
    def __repr__(self) -> str:
        state = "complete" if self.complete else f"incomplete: {self.reason}"
        return f"CheckpointListing({len(self.checkpoints)} checkpoints, {state})"
