"""The requestor: named operations in ``types`` between the clients and the transport.

Clients call an operation (``create_model``, ``submit_training``, ``list_training_runs``, ...)
with ``types`` models and get ``types`` models (or futures of them) back. This module alone knows
the endpoint paths, the request and result encodings (JSON, protobuf, zstd), the pool each
operation uses, the ``x-sdk-*`` headers and which statuses an operation accepts. The session
holder below it sends bytes with retries; :mod:`tinker_lite._transport.http` knows HTTP only.

Threading: a :class:`Requestor` is stateless beyond its holder and may be shared by every thread.

Size (over the house's ~600 lines): one named operation per service endpoint (about forty);
it is the one place that knows paths, content types, pools and decoders, so it stays whole.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs

from tinker_lite import types
from tinker_lite._chunking import DEFAULT_LIMITS, ChunkLimits
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.decoding import parse_model
from tinker_lite._errors import APIResponseValidationError, ClientClosedError, TinkerError
from tinker_lite._futures.future import APIFuture
from tinker_lite._transport.http import (
    JSON,
    PROTOBUF,
    HttpResponse,
    PoolKind,
    path_param,
    raise_for_status,
    register_secret,
)
from tinker_lite._transport.retry import (
    RetryableStatus,
    ServiceWait,
    StallWatch,
    attempt_error,
    call_of,
    retry_loop,
)

if TYPE_CHECKING:
    from tinker_lite._futures.poller import Poller
    from tinker_lite._session.holder import SampleGate, SessionHolder
    from tinker_lite.telemetry import Telemetry

__all__ = [
    "ACCESS_SCOPES",
    "ASAMPLE_PATH",
    "CONSOLE_URL",
    "SAMPLE_BACKPRESSURE_HEADERS",
    "Requestor",
    "TraceExportStatus",
    "TrainingRequest",
    "decode_forward_backward",
    "decode_sample",
    "json_result",
]

CONSOLE_URL = "https://tinker.thinkingmachines.ai"
"""The web console; training runs and sessions have pages under it."""

T = TypeVar("T")

logger = logging.getLogger("tinker_lite.api")

API = "/api/v1"
ASAMPLE_PATH = f"{API}/asample"
# WIRE.md §P.8: asample asks the service for 429 backpressure rather than queueing.
SAMPLE_BACKPRESSURE_HEADERS: Mapping[str, str] = {"X-Tinker-Sampling-Backpressure": "1"}
ACCESS_SCOPES = ("owned", "accessible")
# WIRE.md §3.10: the archive URL is a redirect that is read, never followed.
REDIRECT_STATUSES = (301, 302, 303, 307, 308)
ARCHIVE_ACCEPT: Mapping[str, str] = {"Accept": "application/json, application/gzip"}


_zstd_warned = threading.Event()


def _warn_zstd_missing() -> None:
    """Say once per process that the service asks for zstd bodies and they go uncompressed."""
    if _zstd_warned.is_set():
        return
    _zstd_warned.set()
    logger.warning(
        "The service asks for zstd-compressed forward/forward_backward requests "
        "(proto_compress_fwdbwd), but the 'zstandard' package is not installed: they are sent "
        "uncompressed. Install it with: pip install 'tinker-lite[zstd]'"
    )


# ---------------------------------------------------------------------------------------------
# Decoding polled results


def json_result(cls: type[T]) -> Callable[[HttpResponse], T]:
    """A poll decoder reading a JSON result into ``cls``."""

    def decode(resp: HttpResponse) -> T:
        return _wire.structure(resp.json(), cls)

    return decode


def decode_forward_backward(resp: HttpResponse) -> types.ForwardBackwardOutput:
    """A forward/forward_backward result in whichever content type came back (WIRE.md §P.10)."""
    if resp.is_protobuf:
        from tinker_lite._codec import proto as _proto

        return _proto.decode_forward_backward_output(resp.body)
    return _wire.structure(resp.json(), types.ForwardBackwardOutput)


def decode_sample(resp: HttpResponse) -> types.SampleResponse:
    """A sample result in whichever content type came back (WIRE.md §P.10)."""
    if resp.is_protobuf:
        from tinker_lite._codec import proto as _proto

        return _proto.decode_sample_response(resp.body)
    return _wire.structure(resp.json(), types.SampleResponse)


# ---------------------------------------------------------------------------------------------
# Training requests


@attrs.frozen
class TrainingRequest:
    """One training request, encoded at call time, waiting for its turn to be submitted."""

    path: str
    body: bytes
    content_type: str
    request_type: str
    decode: Callable[[HttpResponse], Any]
    accept: str = JSON
    headers: Mapping[str, str] = attrs.field(factory=dict)
    tokens: int | None = None  # input tokens of a forward/forward_backward chunk (journal)


_TRAINING_PATHS: Mapping[type[Any], tuple[str, str]] = {
    types.OptimStepRequest: ("optim_step", "OptimStep"),
    types.SaveWeightsRequest: ("save_weights", "SaveWeights"),
    types.LoadWeightsRequest: ("load_weights", "LoadWeights"),
    types.SaveWeightsForSamplerRequest: ("save_weights_for_sampler", "SaveWeightsForSampler"),
}


def _query(**values: object) -> dict[str, str]:
    return {key: str(value) for key, value in values.items() if value is not None}


def _page(limit: int, offset: int, access_scope: str | None) -> dict[str, object]:
    """The query of a listing page (WIRE.md §13.5: ``access_scope`` is left out when None)."""
    return {"limit": limit, "offset": offset, "access_scope": access_scope}


def _segment(value: str) -> str:
    return path_param(value, keep_slash=False)


# ---------------------------------------------------------------------------------------------
# The requestor


class Requestor:
    """Named operations of the Tinker API over one session holder."""

    def __init__(self, holder: SessionHolder) -> None:
        self._holder = holder
        policy = holder._retry_policy
        # WIRE.md §P.8: the sampling 429 loop; its wait is the shared window of the gate.
        self._sample_submits = retry_loop(
            wait=ServiceWait(
                policy,
                fallback=lambda state: (
                    0.0
                    if isinstance(attempt_error(state), _HeldBack)
                    else policy.throttle_backoff.delay(0)
                ),
                wall_clock=holder._wall_clock,
                at_most=lambda state: call_of(state).life.remaining(),
                window=holder.sample_gate,
            ),
            stop=lambda state: call_of(state).closing.is_set(),
            retry_on=lambda error: isinstance(error, (RetryableStatus, _HeldBack)),
            sleep=holder._sleep,
        )

    def __repr__(self) -> str:
        return f"Requestor(base_url={self._holder.base_url!r})"

    # -- what the clients may know about the connection ------------------------------------------

    @property
    def base_url(self) -> str:
        """The service's base URL."""
        return self._holder.base_url

    @property
    def poller(self) -> Poller:
        """The poller resolving this connection's futures."""
        return self._holder.poller

    @property
    def telemetry(self) -> Telemetry | None:
        """The telemetry queue (``None`` before start-up)."""
        return self._holder.telemetry

    @property
    def sample_gate(self) -> SampleGate:
        """The process-wide sampling gate of this service and key (WIRE.md §P.8)."""
        return self._holder.sample_gate

    @property
    def result_accept(self) -> str:
        """The content type asked for polled forward/sample results (WIRE.md §P.10)."""
        return PROTOBUF if self._holder.wire_format == "protobuf" else JSON

    def chunk_limits(self) -> ChunkLimits:
        """Forward/forward_backward chunk limits: the service's client config, else WIRE.md §6.4."""
        if self._holder.client_config_from_server:
            config = self._holder.client_config
            return ChunkLimits(
                max_datums=max(1, config.fwdbwd_max_chunk_len),
                max_numbers=None,
                max_bytes=max(1, config.fwdbwd_max_chunk_bytes_count),
            )
        return DEFAULT_LIMITS

    def session_id(self) -> str:
        """The session's id, starting the session on first use (WIRE.md §P.10)."""
        return self._holder.ensure_session()

    def next_model_seq_id(self) -> int:
        """The next training-client number of this session (WIRE.md §6.1)."""
        return self._holder.next_model_seq_id()

    def next_sampling_session_seq_id(self) -> int:
        """The next sampling-session number of this session (WIRE.md §6.1)."""
        return self._holder.next_sampling_session_seq_id()

    # -- the one place requests are sent -----------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        sdk_method: str,
        body_obj: object | None = None,
        body: bytes | None = None,
        content_type: str | None = JSON,
        pool: PoolKind = PoolKind.TRAIN,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        operation_retries: bool = True,
        accept_status: Collection[int] = (),
        allow_redirects: bool = True,
        deadline: StallWatch | None = None,
    ) -> HttpResponse:
        if method == "GET":
            content_type = None
        if operation_retries:
            return self._holder.submit(
                pool,
                method,
                path,
                body_obj=body_obj,
                body=body,
                content_type=content_type,
                query=query,
                headers=headers,
                sdk_method=sdk_method,
                accept_status=accept_status,
                deadline=deadline,
            )
        return self._holder.request(
            pool,
            method,
            path,
            body_obj=body_obj,
            body=body,
            content_type=content_type,
            query=query,
            headers=headers,
            sdk_method=sdk_method,
            accept_status=accept_status,
            allow_redirects=allow_redirects,
        )

    def _get(self, path: str, cls: type[T], *, sdk_method: str, **query: object) -> T:
        resp = self._send("GET", path, sdk_method=sdk_method, query=_query(**query))
        return parse_model(resp, cls)

    # -- service -----------------------------------------------------------------------------------

    def get_server_capabilities(self, *, sdk_method: str) -> types.GetServerCapabilitiesResponse:
        """The base models the service supports."""
        return self._get(
            f"{API}/get_server_capabilities",
            types.GetServerCapabilitiesResponse,
            sdk_method=sdk_method,
        )

    def create_model(
        self, request: types.CreateModelRequest, *, sdk_method: str, created_at: float
    ) -> APIFuture[types.CreateModelResponse]:
        """Send ``create_model`` (HTTP retries only, WIRE.md §5.7) and poll its result."""
        try:
            resp = self._send(
                "POST",
                f"{API}/create_model",
                body_obj=request,
                sdk_method=sdk_method,
                operation_retries=False,
            )
            submitted = parse_model(resp, types.UntypedAPIFuture, what="create_model")
        except Exception as e:
            return APIFuture.failed(e)
        return self.poll(
            submitted.request_id,
            "CreateModel",
            json_result(types.CreateModelResponse),
            created_at=created_at,
            sdk_method=sdk_method,
        )

    @property
    def service_is_current(self) -> bool:
        """Whether the service answered ``client/config`` (0.38-era: e.g. it creates a model
        from a ``load_weights``); a 0.4.1-era service does not."""
        return self._holder.client_config_from_server

    @property
    def first_chunk_last(self) -> bool:
        """Whether a split forward/forward_backward sends its first chunk after the others.

        golden-0.38 (``parallel_fwdbwd_chunks``, on by default): the service holds the later
        chunks until the first arrives, then takes the whole batch together. A 0.4.1-era
        service gets the chunks in ``seq_id`` order.
        """
        return self.service_is_current and self._holder.client_config.parallel_fwdbwd_chunks

    def load_weights_creating_model(
        self, request: types.LoadWeightsRequest, *, sdk_method: str, created_at: float
    ) -> APIFuture[types.LoadWeightsResponse]:
        """Send a ``load_weights`` that creates its model (``session_id`` + ``model_seq_id``,
        golden-0.38) with HTTP retries only, like ``create_model``, and poll its result."""
        try:
            resp = self._send(
                "POST",
                f"{API}/load_weights",
                body_obj=request,
                sdk_method=sdk_method,
                operation_retries=False,
            )
            submitted = parse_model(resp, types.UntypedAPIFuture, what="load_weights")
        except Exception as e:
            return APIFuture.failed(e)
        return self.poll(
            submitted.request_id,
            "LoadWeights",
            json_result(types.LoadWeightsResponse),
            created_at=created_at,
            sdk_method=sdk_method,
        )

    def weights_info(self, tinker_path: str, *, sdk_method: str) -> types.WeightsInfoResponse:
        """What a checkpoint holds (a 0.4.1-era service answers 404: NotFoundError)."""
        resp = self._send(
            "POST",
            f"{API}/weights_info",
            body_obj=types.WeightsInfoRequest(tinker_path=tinker_path),
            sdk_method=sdk_method,
        )
        return parse_model(resp, types.WeightsInfoResponse)

    def create_sampling_session(
        self, request: types.CreateSamplingSessionRequest, *, sdk_method: str
    ) -> types.CreateSamplingSessionResponse:
        """Create a sampling session (HTTP retries only, WIRE.md §5.7)."""
        resp = self._send(
            "POST",
            f"{API}/create_sampling_session",
            body_obj=request,
            sdk_method=sdk_method,
            pool=PoolKind.SESSION,
            operation_retries=False,
        )
        return parse_model(resp, types.CreateSamplingSessionResponse)

    def get_info(
        self, model_id: str, *, sdk_method: str, operation_retries: bool = True
    ) -> types.GetInfoResponse:
        """A model's base model, LoRA rank and tokenizer id."""
        resp = self._send(
            "POST",
            f"{API}/get_info",
            body_obj=types.GetInfoRequest(model_id=model_id),
            sdk_method=sdk_method,
            operation_retries=operation_retries,
        )
        return parse_model(resp, types.GetInfoResponse)

    # -- training ----------------------------------------------------------------------------

    def encode_training(self, request: object, result_cls: type[Any]) -> TrainingRequest:
        """Encode an optim_step / save / load request for :meth:`submit_training`."""
        name, request_type = _TRAINING_PATHS[type(request)]
        return TrainingRequest(
            path=f"{API}/{name}",
            body=_wire.dumps(request),
            content_type=JSON,
            request_type=request_type,
            decode=json_result(result_cls),
        )

    def encode_forward_backward(
        self,
        *,
        model_id: str,
        seq_id: int,
        data: list[types.Datum],
        loss_fn: str,
        loss_fn_config: dict[str, float | str] | None,
        forward_only: bool,
        wire: Literal["protobuf", "json"],
    ) -> TrainingRequest:
        """Encode one forward/forward_backward chunk in the connection's wire format."""
        request_type = "Forward" if forward_only else "ForwardBackward"
        tokens = sum(datum.model_input.length for datum in data)
        if wire == "protobuf":
            from tinker_lite._codec import proto as _proto

            # WIRE.md §13.3/§P.10: protobuf to /forward_backward; forward_only marks a forward.
            body = _proto.encode_forward_backward_request(
                model_id=model_id,
                seq_id=seq_id,
                data=data,
                loss_fn=loss_fn,
                loss_fn_config=loss_fn_config,
                forward_only=forward_only,
            )
            headers: dict[str, str] = {}
            if self._holder.client_config.proto_compress_fwdbwd:
                if _proto.zstd_available():
                    body = _proto.compress(body)
                    headers["Content-Encoding"] = "zstd"
                else:
                    _warn_zstd_missing()
            return TrainingRequest(
                path=f"{API}/forward_backward",
                body=body,
                content_type=PROTOBUF,
                request_type=request_type,
                decode=decode_forward_backward,
                accept=PROTOBUF,
                headers=headers,
                tokens=tokens,
            )
        fb_input = types.ForwardBackwardInput(
            data=data, loss_fn=loss_fn, loss_fn_config=loss_fn_config
        )
        request: object
        if forward_only:
            request = types.ForwardRequest(forward_input=fb_input, model_id=model_id, seq_id=seq_id)
        else:
            request = types.ForwardBackwardRequest(
                forward_backward_input=fb_input, model_id=model_id, seq_id=seq_id
            )
        return TrainingRequest(
            path=f"{API}/forward" if forward_only else f"{API}/forward_backward",
            body=_wire.dumps(request),
            content_type=JSON,
            request_type=request_type,
            decode=decode_forward_backward,
            tokens=tokens,
        )

    def encode_optim_step(
        self, model_id: str, seq_id: int, params: types.AdamParams | types.DimuonParams
    ) -> TrainingRequest:
        """Encode an optim_step: AdamW settings go as ``adam_params``, others (Dimuon) as
        ``optimizer_params`` with their ``type``, as 0.38 sends them."""
        if isinstance(params, types.AdamParams):
            request = types.OptimStepRequest(model_id=model_id, seq_id=seq_id, adam_params=params)
            return self.encode_training(request, types.OptimStepResponse)
        body = {
            "model_id": model_id,
            "seq_id": seq_id,
            "type": "optim_step",
            "optimizer_params": _wire.to_builtins(params),
        }
        return TrainingRequest(
            path=f"{API}/optim_step",
            body=_wire.dumps(body),
            content_type=JSON,
            request_type="OptimStep",
            decode=json_result(types.OptimStepResponse),
        )

    def encode_save_weights_external(
        self, request: types.SaveWeightsExternalRequest
    ) -> TrainingRequest:
        """Encode a save_weights_external (a training request, polled like save_weights)."""
        return TrainingRequest(
            path=f"{API}/save_weights_external",
            body=_wire.dumps(request),
            content_type=JSON,
            request_type="SaveWeightsExternal",
            decode=json_result(types.SaveWeightsExternalResponseInternal),
        )

    # -- sampling --------------------------------------------------------------------------------

    def submit_sample(
        self, request: types.SampleRequest, *, sdk_method: str, closing: threading.Event
    ) -> str:
        """Send one ``asample`` until the service accepts it; its request id (WIRE.md §P.8).

        A 429 is backpressure, not an error: it opens the back-off window every sampler of this
        service and key shares (``Retry-After`` when given, else 1 s), and the same bytes, hence
        the same ``seq_id``, are sent again once it closes; a window opened by another sampler
        is waited out before sending. The stall timeout bounds the whole loop (WIRE.md §P.7):
        HTTP and operation retries, 429 waits and re-sends alike; a service that keeps answering
        429 for that long raises :class:`~tinker_lite.RateLimitError`.
        """
        call = _SampleCall(closing, self._holder.stall_watch(), _wire.dumps(request), sdk_method)
        try:
            return self._sample_submits(self._submit_sample_once, call)
        except (RetryableStatus, _HeldBack) as e:  # stopped: the client is closing
            raise ClientClosedError("The ServiceClient was closed during a 429 back-off.") from (
                e if isinstance(e, RetryableStatus) else None
            )

    def _submit_sample_once(self, call: _SampleCall) -> str:
        """One turn of the sample loop: wait out an open window (or give up), else send."""
        if call.closing.is_set():
            raise ClientClosedError("The ServiceClient was closed during a 429 back-off.")
        life = call.life
        window = self.sample_gate.backoff_remaining()
        if window > 0:
            if window <= life.remaining():
                raise _HeldBack
            if call.throttled is not None:
                # WIRE.md §P.7: the back-off would outlast the stall timeout.
                raise_for_status(
                    call.throttled,
                    what=f"POST {ASAMPLE_PATH} (held back by HTTP 429 for "
                    f"{life.silent_for():.0f} s; stall timeout {life.stall_timeout:g} s)",
                )
        resp = self._send(
            "POST",
            ASAMPLE_PATH,
            body=call.body,
            sdk_method=call.sdk_method,
            pool=PoolKind.SAMPLE,
            headers=SAMPLE_BACKPRESSURE_HEADERS,
            accept_status=(429,),
            deadline=life,
        )
        if resp.status == 429:
            call.throttled = resp
            logger.debug("asample answered 429; backing off")
            raise RetryableStatus(resp)
        self.sample_gate.note_accepted()
        return self.submitted_request_id(resp, what="asample")

    def client_flags(self) -> types.ClientConfigResponse:
        """The service's client config flags (defaults for a service without one)."""
        return self._holder.client_config

    def join_sampling_session(self, sampling_session_id: str, *, sdk_method: str) -> int:
        """Join a sampling session as a copied sampler; its ``client_counter`` (WIRE.md §13.4)."""
        resp = self._send(
            "POST",
            f"{API}/join_sampling_session",
            body_obj=types.JoinSamplingSessionRequest(sampling_session_id=sampling_session_id),
            sdk_method=sdk_method,
            pool=PoolKind.SESSION,
        )
        return parse_model(resp, types.JoinSamplingSessionResponse).client_counter

    def stall_watch(self) -> StallWatch:
        """A new deadline for one request's life (WIRE.md §P.7)."""
        return self._holder.stall_watch()

    @staticmethod
    def submitted_request_id(resp: HttpResponse, *, what: str) -> str:
        """The request id of an accepted submit's answer ``{"request_id": ...}``."""
        return parse_model(resp, types.UntypedAPIFuture, what=what).request_id

    @property
    def wire_format(self) -> Literal["protobuf", "json"]:
        """The forward/forward_backward encoding in use (WIRE.md §P.10)."""
        return self._holder.wire_format

    def submit_training(self, request: TrainingRequest, *, sdk_method: str) -> str:
        """Submit an encoded training request (HTTP and operation retries); its request id."""
        resp = self._send(
            "POST",
            request.path,
            body=request.body,
            content_type=request.content_type,
            headers=request.headers,
            sdk_method=sdk_method,
        )
        return self.submitted_request_id(resp, what=request.path)

    def sdk_headers(self, sdk_method: str | None) -> Mapping[str, str]:
        """The ``x-sdk-version`` / ``x-sdk-method`` headers of a request sent for ``sdk_method``."""
        return self._holder.settings.sdk_headers(sdk_method)

    def poll(
        self,
        request_id: str,
        request_type: str,
        decode: Callable[[HttpResponse], T],
        *,
        created_at: float,
        accept: str = JSON,
        resubmit: Callable[[], str] | None = None,
        on_queue_state: Callable[[str, str | None], None] | None = None,
        sdk_method: str | None = None,
    ) -> APIFuture[T]:
        """Poll ``request_id`` until its result (decoded with ``decode``), error or deadline.

        ``sdk_method`` is the public call the request belongs to: 0.38 puts its
        ``x-sdk-version`` / ``x-sdk-method`` headers on the polls too (golden-0.38).
        """
        return self._holder.poller.poll(
            request_id,
            request_type,
            decode,
            created_at=created_at,
            accept=accept,
            resubmit=resubmit,
            on_queue_state=on_queue_state,
            headers=self._holder.settings.sdk_headers(sdk_method),
        )

    # -- REST: runs, checkpoints, sessions, samplers -----------------------------------------------

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
        self._send(
            method,
            _checkpoint_path(training_run_id, checkpoint_id, action),
            body_obj=body_obj,
            sdk_method=sdk_method,
        )

    def checkpoint_archive(
        self, training_run_id: str, checkpoint_id: str, *, sdk_method: str
    ) -> HttpResponse:
        """The archive answer: a redirect to a signed URL (read, not followed), or JSON.

        The official SDK asks for ``application/json`` and ``application/gzip`` (two ``Accept``
        lines in 0.4.1); one ``Accept`` listing both says the same (RFC 9110 §5.3).
        """
        return self._send(
            "GET",
            _checkpoint_path(training_run_id, checkpoint_id, "archive"),
            sdk_method=sdk_method,
            headers=ARCHIVE_ACCEPT,
            operation_retries=False,
            accept_status=REDIRECT_STATUSES,
            allow_redirects=False,
        )

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

    # -- REST: identity, traces, search, copies, projects and admin views ------------------------
    # (appended: operations the official 0.38 RestClient / AdminClient added)

    @property
    def started_session_id(self) -> str | None:
        """The session's id if it has started (asking does not start it)."""
        return self._holder._session_id

    @property
    def project_id(self) -> str | None:
        """The project of this connection (``project_id`` or ``TINKER_PROJECT_ID``)."""
        return self._holder.settings.project_id

    def identity_claims(self) -> Mapping[str, Any] | None:
        """The claims of the JWT this connection authenticates with, read locally (nothing is
        sent beyond the start-up); ``None`` when the credential is a plain API key (§13.2)."""
        holder = self._holder
        holder.ensure_started()
        token = holder._credentials.current() if holder.uses_jwt else None
        if token is None:
            return None
        try:
            payload = token.split(".")[1]
            claims = _wire.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (IndexError, ValueError, TinkerError) as e:
            raise APIResponseValidationError(
                f"the access token's claims cannot be read: {e}"
            ) from e
        if not isinstance(claims, dict):
            raise APIResponseValidationError("the access token's claims are not an object")
        return claims

    def session_trace_export(self, session_id: str, *, sdk_method: str) -> TraceExportStatus:
        """One look at a session's trace export: ``pending``, ``ready`` (with its URL) or
        ``failed`` (with the service's reason)."""
        resp = self._send(
            "GET", f"{API}/sessions/{_segment(session_id)}/trace_export", sdk_method=sdk_method
        )
        return parse_model(resp, TraceExportStatus, what="trace_export")

    def search_sessions(
        self, request: types.SessionSearchRequest, *, sdk_method: str
    ) -> types.SessionSearchResponse:
        """One page of the sessions matching ``request``."""
        resp = self._send("POST", f"{API}/sessions/search", body_obj=request, sdk_method=sdk_method)
        return parse_model(resp, types.SessionSearchResponse)

    def external_weights_urls(
        self, training_run_id: str, checkpoint_id: str, *, sdk_method: str
    ) -> types.ExternalWeightsUrlsResponse:
        """Signed per-file URLs of an external-weights checkpoint."""
        return self._get(
            _checkpoint_path(training_run_id, checkpoint_id, "external_weights_urls"),
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
        resp = self._send(
            "POST", f"{API}/copy_weights", body_obj=request, sdk_method=sdk_method, headers=headers
        )
        return parse_model(resp, types.CopyWeightsResponse)

    def assign_session_project(self, session_id: str, project_id: str, *, sdk_method: str) -> None:
        """Move a session (its runs and samplers) into a project; the answer carries nothing."""
        self._send(
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

    def create_custom_loss(
        self, request: types.CreateCustomLossRequest, *, sdk_method: str, created_at: float
    ) -> APIFuture[types.CreateCustomLossResponse]:
        """Upload a custom loss (HTTP retries only, like create_model) and poll its loss id."""
        try:
            resp = self._send(
                "POST",
                f"{API}/create_custom_loss",
                body_obj=request,
                sdk_method=sdk_method,
                operation_retries=False,
            )
            submitted = parse_model(resp, types.UntypedAPIFuture, what="create_custom_loss")
        except Exception as e:
            return APIFuture.failed(e)
        return self.poll(
            submitted.request_id,
            "CreateCustomLoss",
            json_result(types.CreateCustomLossResponse),
            created_at=created_at,
        )

    def custom_loss_server_side(self) -> bool:
        """Whether the service runs uploaded custom losses (client config, §P.1)."""
        return self._holder.client_config.custom_loss_server_side


class _SampleCall:
    """One sample's submit loop: its life (WIRE.md §P.7), bytes and last 429."""

    __slots__ = ("body", "closing", "life", "sdk_method", "throttled")

    def __init__(
        self, closing: threading.Event, life: StallWatch, body: bytes, sdk_method: str
    ) -> None:
        self.closing = closing
        self.life = life
        self.body = body
        self.sdk_method = sdk_method
        self.throttled: HttpResponse | None = None


class _HeldBack(Exception):
    """A sample not sent: the shared 429 window is open (its loop waits it out, then sends)."""


@attrs.frozen(kw_only=True)
class TraceExportStatus:
    """The answer of ``GET sessions/{id}/trace_export`` (not a public type, as officially)."""

    status: Literal["pending", "ready", "failed"]
    url: str | None = None
    error: str | None = None


def _checkpoint_path(training_run_id: str, checkpoint_id: str, action: str) -> str:
    # WIRE.md §1.1: the checkpoint id keeps its '/' (two path segments).
    run = _segment(training_run_id)
    path = f"{API}/training_runs/{run}/checkpoints/{path_param(checkpoint_id)}"
    return f"{path}/{action}" if action else path
