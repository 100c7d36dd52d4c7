"""RestClient: training runs, checkpoints, sessions and samplers (WIRE.md §3.9-§3.12, §13.5).

Every method returns an :class:`~tinker_lite.APIFuture` at once, like the official RestClient;
the request runs on the ServiceClient's REST threads with HTTP and operation-level retries.
``RestClient(api_key=..., base_url=...)`` without a ServiceClient opens its own session-less
connection (client config, no ``create_session``; golden-0.38 README), started on first use.
``tinker://`` paths are parsed by :meth:`types.ParsedCheckpointTinkerPath.from_tinker_path`, whose
errors say which kinds exist: ``tinker://<run>/weights/<name>`` (a training state: loadable with
``load_state`` / ``create_training_client_from_state``) and
``tinker://<run>/sampler_weights/<name>`` (sampleable and downloadable).

Threading contract: every method may be called from any thread.
"""

from __future__ import annotations

import email.utils
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from tinker_lite import types
from tinker_lite._errors import APIResponseValidationError, InvalidInputError
from tinker_lite._futures import APIFuture
from tinker_lite._http import JSON, HttpResponse, PoolKind, path_param

if TYPE_CHECKING:
    from tinker_lite.service_client import ServiceClient

__all__ = ["RestClient", "parse_tinker_path"]

T = TypeVar("T")

_API = "/api/v1"
# WIRE.md §3.10: without an Expires header the signed URL is assumed valid for 15 minutes.
_DEFAULT_ARCHIVE_VALIDITY = timedelta(minutes=15)
_REDIRECTS = (301, 302, 303, 307, 308)
ACCESS_SCOPES = ("owned", "accessible")


def parse_tinker_path(tinker_path: str) -> types.ParsedCheckpointTinkerPath:
    """Split ``tinker://<run>/<weights|sampler_weights>/<name>`` into its parts.

    Raises :class:`~tinker_lite.InvalidInputError` saying what is wrong and which kinds exist.
    """
    return types.ParsedCheckpointTinkerPath.from_tinker_path(tinker_path)


def _check_id(field: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(field, f"must be a non-empty string, got {value!r}")
    return value


def _segment(field: str, value: object) -> str:
    """``value`` checked as a non-empty id and escaped as one path segment."""
    return path_param(_check_id(field, value), keep_slash=False)


def _check_checkpoint_id(value: object) -> str:
    checkpoint_id = _check_id("checkpoint_id", value)
    kind, _, name = checkpoint_id.partition("/")
    if kind not in ("weights", "sampler_weights") or not name or "/" in name:
        raise InvalidInputError(
            "checkpoint_id",
            f"must look like 'weights/<name>' or 'sampler_weights/<name>', got {checkpoint_id!r}",
            "use Checkpoint.checkpoint_id from list_checkpoints, or the *_from_tinker_path method",
        )
    return checkpoint_id


def _check_page(limit: object, offset: object) -> tuple[int, int]:
    for field, value, minimum in (("limit", limit, 1), ("offset", offset, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InvalidInputError(field, f"must be an int >= {minimum}, got {value!r}")
    return int(limit), int(offset)  # type: ignore[call-overload]


def _scope_query(access_scope: object) -> dict[str, str]:
    """WIRE.md §13.5: ``access_scope`` as a query parameter (``None``: not sent)."""
    if access_scope is None:
        return {}
    if not isinstance(access_scope, str) or access_scope not in ACCESS_SCOPES:
        raise InvalidInputError(
            "access_scope", f"must be 'owned' or 'accessible', got {access_scope!r}"
        )
    return {"access_scope": access_scope}


def _parse_expires(value: str | None, now: datetime) -> datetime:
    if value:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=timezone.utc)
            return parsed.astimezone(timezone.utc)
    return now + _DEFAULT_ARCHIVE_VALIDITY


class RestClient:
    """Reads and manages training runs, checkpoints, sessions and samplers.

    ``RestClient(service)`` (what :meth:`ServiceClient.create_rest_client` returns) shares the
    ServiceClient's connection and session. ``RestClient(api_key=..., base_url=...)`` opens a
    connection of its own without creating a session; ``base_url="local://"`` starts the
    offline local server, like :class:`ServiceClient`. The keyword-only options ``verify``,
    ``default_headers``, ``max_retries``, ``stall_timeout`` and ``telemetry`` mean what they
    mean for :class:`ServiceClient`. Close it with :meth:`close` or use ``with``.
    """

    def __init__(
        self,
        service: ServiceClient | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        verify: bool | str = True,
        default_headers: Mapping[str, str] | None = None,
        max_retries: int | None = None,
        stall_timeout: float | None = None,
        telemetry: bool | None = None,
        _session_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._owns_service = service is None
        if service is None:
            # Imported here: service_client imports this module lazily as well.
            from tinker_lite.service_client import ServiceClient

            options = dict(_session_options or {})
            # golden-0.38 README: a REST-only client creates no session and sends nothing
            # until its first call.
            options.update(create_session=False, lazy=True)
            service = ServiceClient(
                api_key=api_key,
                base_url=base_url,
                verify=verify,
                default_headers=default_headers,
                max_retries=max_retries,
                stall_timeout=stall_timeout,
                telemetry=telemetry,
                _session_options=options,
            )
        else:
            given = {
                "api_key": api_key is not None,
                "base_url": base_url is not None,
                "verify": verify is not True,
                "default_headers": default_headers is not None,
                "max_retries": max_retries is not None,
                "stall_timeout": stall_timeout is not None,
                "telemetry": telemetry is not None,
                "_session_options": _session_options is not None,
            }
            conflicting = [name for name, set_ in given.items() if set_]
            if conflicting:
                raise InvalidInputError(
                    conflicting[0],
                    "cannot be combined with a ServiceClient, which has its own settings",
                    "pass either the ServiceClient or the connection settings",
                )
        self._service = service
        self._holder = service.holder

    def __repr__(self) -> str:
        return f"RestClient(base_url={self._holder.base_url!r})"

    def close(self) -> None:
        """Close the connection this RestClient opened itself (idempotent).

        Stops its threads and a local server it started. A RestClient created from a
        ServiceClient leaves that ServiceClient open: close the ServiceClient instead.
        """
        if self._owns_service:
            self._service.close()

    def __enter__(self) -> RestClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        parse: Callable[[HttpResponse], T],
        *,
        sdk_method: str,
        query: Mapping[str, str] | None = None,
        body_obj: object | None = None,
        body: bytes | None = None,
    ) -> APIFuture[T]:
        pool = self._service._rest_pool()

        def run() -> T:
            resp = self._holder.submit(
                PoolKind.TRAIN,
                method,
                path,
                body_obj=body_obj,
                body=body,
                content_type=None if method == "GET" else JSON,
                query=query,
                sdk_method=sdk_method,
            )
            return parse(resp)

        return self._service._run_in(pool, run, request_type=sdk_method)

    def _parser(self, cls: type[T]) -> Callable[[HttpResponse], T]:
        def parse(resp: HttpResponse) -> T:
            return self._holder.parse(resp, cls)

        return parse

    @staticmethod
    def _ignore(resp: HttpResponse) -> None:
        return None

    @staticmethod
    def _checkpoint_path(training_run_id: str, checkpoint_id: str, suffix: str = "") -> str:
        run = _segment("training_run_id", training_run_id)
        # WIRE.md §1.1: the checkpoint id keeps its '/' (two path segments).
        checkpoint = path_param(_check_checkpoint_id(checkpoint_id))
        return f"{_API}/training_runs/{run}/checkpoints/{checkpoint}{suffix}"

    # -- service -----------------------------------------------------------------------------------

    def get_server_capabilities(self) -> APIFuture[types.GetServerCapabilitiesResponse]:
        """Return the base models the service supports."""
        return self._call(
            "GET",
            f"{_API}/get_server_capabilities",
            self._parser(types.GetServerCapabilitiesResponse),
            sdk_method="RestClient.get_server_capabilities",
        )

    # -- training runs ---------------------------------------------------------------------------

    def list_training_runs(
        self, limit: int = 20, offset: int = 0, access_scope: str | None = "owned"
    ) -> APIFuture[types.TrainingRunsResponse]:
        """List training runs, newest first (``limit`` and ``offset`` page through them).

        ``access_scope``: ``"owned"`` (yours) or ``"accessible"`` (also those shared with you);
        ``None`` leaves the parameter out, for services that predate it.
        """
        limit, offset = _check_page(limit, offset)
        return self._call(
            "GET",
            f"{_API}/training_runs",
            self._parser(types.TrainingRunsResponse),
            query={"limit": str(limit), "offset": str(offset), **_scope_query(access_scope)},
            sdk_method="RestClient.list_training_runs",
        )

    def get_training_run(
        self, training_run_id: str, access_scope: str | None = "owned"
    ) -> APIFuture[types.TrainingRun]:
        """Return one training run (its id is the TrainingClient's ``model_id``).

        ``access_scope`` as for :meth:`list_training_runs`.
        """
        run = _segment("training_run_id", training_run_id)
        return self._call(
            "GET",
            f"{_API}/training_runs/{run}",
            self._parser(types.TrainingRun),
            query=_scope_query(access_scope),
            sdk_method="RestClient.get_training_run",
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
        request = types.WeightsInfoRequest(tinker_path=tinker_path)
        return self._call(
            "POST",
            f"{_API}/weights_info",
            self._parser(types.WeightsInfoResponse),
            body_obj=request,
            sdk_method="RestClient.get_weights_info_by_tinker_path",
        )

    # -- checkpoints -----------------------------------------------------------------------------

    def list_checkpoints(self, training_run_id: str) -> APIFuture[types.CheckpointsListResponse]:
        """List the checkpoints of one training run."""
        run = _segment("training_run_id", training_run_id)
        return self._call(
            "GET",
            f"{_API}/training_runs/{run}/checkpoints",
            self._parser(types.CheckpointsListResponse),
            sdk_method="RestClient.list_checkpoints",
        )

    def list_user_checkpoints(
        self, limit: int = 100, offset: int = 0
    ) -> APIFuture[types.CheckpointsListResponse]:
        """List the checkpoints of all your training runs, newest first."""
        limit, offset = _check_page(limit, offset)
        return self._call(
            "GET",
            f"{_API}/checkpoints",
            self._parser(types.CheckpointsListResponse),
            query={"limit": str(limit), "offset": str(offset)},
            sdk_method="RestClient.list_user_checkpoints",
        )

    def delete_checkpoint(self, training_run_id: str, checkpoint_id: str) -> APIFuture[None]:
        """Delete a checkpoint (``checkpoint_id`` like ``weights/<name>``)."""
        return self._call(
            "DELETE",
            self._checkpoint_path(training_run_id, checkpoint_id),
            self._ignore,
            sdk_method="RestClient.delete_checkpoint",
        )

    def delete_checkpoint_from_tinker_path(self, tinker_path: str) -> APIFuture[None]:
        """Delete the checkpoint at a ``tinker://`` path."""
        parsed = parse_tinker_path(tinker_path)
        return self.delete_checkpoint(parsed.training_run_id, parsed.checkpoint_id)

    def publish_checkpoint(self, training_run_id: str, checkpoint_id: str) -> APIFuture[None]:
        """Make a checkpoint public (anyone may load or sample it); 409 if it already is."""
        return self._call(
            "POST",
            self._checkpoint_path(training_run_id, checkpoint_id, "/publish"),
            self._ignore,
            sdk_method="RestClient.publish_checkpoint",
        )

    def publish_checkpoint_from_tinker_path(self, tinker_path: str) -> APIFuture[None]:
        """Make the checkpoint at a ``tinker://`` path public."""
        parsed = parse_tinker_path(tinker_path)
        return self.publish_checkpoint(parsed.training_run_id, parsed.checkpoint_id)

    def unpublish_checkpoint(self, training_run_id: str, checkpoint_id: str) -> APIFuture[None]:
        """Make a checkpoint private again; 409 if it is not public."""
        return self._call(
            "DELETE",
            self._checkpoint_path(training_run_id, checkpoint_id, "/publish"),
            self._ignore,
            sdk_method="RestClient.unpublish_checkpoint",
        )

    def unpublish_checkpoint_from_tinker_path(self, tinker_path: str) -> APIFuture[None]:
        """Make the checkpoint at a ``tinker://`` path private."""
        parsed = parse_tinker_path(tinker_path)
        return self.unpublish_checkpoint(parsed.training_run_id, parsed.checkpoint_id)

    def set_checkpoint_ttl(
        self, training_run_id: str, checkpoint_id: str, ttl_seconds: int | None
    ) -> APIFuture[None]:
        """Expire a checkpoint ``ttl_seconds`` from now (``None`` keeps it forever)."""
        request = types.SetCheckpointTTLRequest(ttl_seconds=ttl_seconds)
        return self._call(
            "PUT",
            self._checkpoint_path(training_run_id, checkpoint_id, "/ttl"),
            self._ignore,
            body_obj=request,
            sdk_method="RestClient.set_checkpoint_ttl",
        )

    def set_checkpoint_ttl_from_tinker_path(
        self, tinker_path: str, ttl_seconds: int | None
    ) -> APIFuture[None]:
        """Set the time-to-live of the checkpoint at a ``tinker://`` path."""
        parsed = parse_tinker_path(tinker_path)
        return self.set_checkpoint_ttl(parsed.training_run_id, parsed.checkpoint_id, ttl_seconds)

    def get_checkpoint_archive_url(
        self, training_run_id: str, checkpoint_id: str
    ) -> APIFuture[types.CheckpointArchiveUrlResponse]:
        """Return a signed URL to download a checkpoint archive, and when it expires.

        WIRE.md §3.10: the service answers with a redirect (read, not followed): the URL is its
        ``Location`` and the expiry its ``Expires`` (now + 15 minutes when absent). A JSON
        answer ``{"url", "expires"}`` is accepted too.
        """
        path = self._checkpoint_path(training_run_id, checkpoint_id, "/archive")
        pool = self._service._rest_pool()

        def run() -> types.CheckpointArchiveUrlResponse:
            # WIRE.md §3.10: redirects are read, never followed (the URL is signed, no API key).
            resp = self._holder.request(
                PoolKind.TRAIN,
                "GET",
                path,
                content_type=None,
                accept_status=_REDIRECTS,
                allow_redirects=False,
                sdk_method="RestClient.get_checkpoint_archive_url",
            )
            return self._archive_url(resp)

        return self._service._run_in(
            pool, run, request_type="RestClient.get_checkpoint_archive_url"
        )

    def get_checkpoint_archive_url_from_tinker_path(
        self, tinker_path: str
    ) -> APIFuture[types.CheckpointArchiveUrlResponse]:
        """Return a signed download URL for the checkpoint at a ``tinker://`` path."""
        parsed = parse_tinker_path(tinker_path)
        return self.get_checkpoint_archive_url(parsed.training_run_id, parsed.checkpoint_id)

    def _archive_url(self, resp: HttpResponse) -> types.CheckpointArchiveUrlResponse:
        now = datetime.now(timezone.utc)
        if resp.status in _REDIRECTS:
            location = resp.headers.get("Location")
            if not location:
                raise APIResponseValidationError(
                    f"the archive request was answered {resp.status} without a Location header",
                    status_code=resp.status,
                )
            url = urllib.parse.urljoin(self._holder.base_url, location)
            return types.CheckpointArchiveUrlResponse(
                url=url, expires=_parse_expires(resp.headers.get("Expires"), now)
            )
        answer = self._holder.parse(resp, types.CheckpointArchiveUrlResponse)
        expires = answer.expires
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=timezone.utc)
        return types.CheckpointArchiveUrlResponse(url=answer.url, expires=expires)

    # -- sessions and samplers -------------------------------------------------------------------

    def list_sessions(
        self, limit: int = 20, offset: int = 0, access_scope: str | None = "owned"
    ) -> APIFuture[types.ListSessionsResponse]:
        """List session ids (``access_scope`` as for :meth:`list_training_runs`)."""
        limit, offset = _check_page(limit, offset)
        return self._call(
            "GET",
            f"{_API}/sessions",
            self._parser(types.ListSessionsResponse),
            query={"limit": str(limit), "offset": str(offset), **_scope_query(access_scope)},
            sdk_method="RestClient.list_sessions",
        )

    def get_session(
        self, session_id: str, access_scope: str | None = "owned"
    ) -> APIFuture[types.GetSessionResponse]:
        """Return the training runs and samplers of one session.

        ``access_scope`` as for :meth:`list_training_runs`.
        """
        session = _segment("session_id", session_id)
        return self._call(
            "GET",
            f"{_API}/sessions/{session}",
            self._parser(types.GetSessionResponse),
            query=_scope_query(access_scope),
            sdk_method="RestClient.get_session",
        )

    def get_sampler(self, sampler_id: str) -> APIFuture[types.GetSamplerResponse]:
        """Return a sampler's base model and model path (its id is the sampling session id)."""
        sampler = _segment("sampler_id", sampler_id)
        return self._call(
            "GET",
            f"{_API}/samplers/{sampler}",
            self._parser(types.GetSamplerResponse),
            sdk_method="RestClient.get_sampler",
        )
