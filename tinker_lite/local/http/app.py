"""The local server's routing: one parsed HTTP request in, one :class:`Response` out.

:class:`App` applies fault rules and auth, then routes ``/api/v1`` operations (the tables at the
end: endpoints that structure a body and call one store, and the ones with handlers here),
``/_local`` control endpoints and, through :class:`~tinker_lite.local.http.rest.RestRoutes`, the
REST views.
"""

from __future__ import annotations

import email.utils
import hmac
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._errors import TinkerError
from tinker_lite.local.http.faults import FaultDecision, FaultInjector, FaultSpecError
from tinker_lite.local.http.responses import (
    API,
    JSON,
    MAX_BODY,
    PROTOBUF,
    Response,
    as_json,
    http_error,
    is_protobuf,
    prefers_protobuf,
)
from tinker_lite.local.http.rest import RestRoutes
from tinker_lite.local.protocol import codecs as _codecs
from tinker_lite.local.protocol.parsing import (
    check_empty_object,
    optim_step_request,
    parse_json,
    structure_request,
)
from tinker_lite.local.refusals import (
    InvalidRequest,
    NotFound,
    RequestRefused,
    checkpoint_refusal,
    field_error,
)
from tinker_lite.local.service.futures import FutureEntry
from tinker_lite.local.service.identity import LOCAL_EMAIL, LOCAL_ORG_ID, JwtIssuer
from tinker_lite.local.service.sampling import SampleOutcome
from tinker_lite.local.service.state import ServerState
from tinker_lite.local.storage.checkpoints import CheckpointError

if TYPE_CHECKING:
    from tinker_lite.local.protocol.codecs import ProtoForwardBackwardRequest

__all__ = ["App"]

log = logging.getLogger("tinker_lite.local")


class App:
    """Routes one parsed HTTP request to the state and builds the response."""

    def __init__(
        self,
        state: ServerState,
        *,
        api_key: str | None,
        jwt: JwtIssuer | None,
        faults: FaultInjector,
        faults_enabled: bool,
        long_poll_s: float,
        pending_status: int,
        config: dict[str, Any],
        archive_ttl_s: float,
        base_url: Callable[[], str],
        max_body_bytes: int = MAX_BODY,
    ) -> None:
        self.state = state
        self.max_body_bytes = max_body_bytes
        self.api_key = api_key
        self.jwt = jwt
        self.faults = faults
        self.faults_enabled = faults_enabled
        self.long_poll_s = long_poll_s
        self.pending_status = pending_status
        self.config = config
        self.rest = RestRoutes(state, archive_ttl_s=archive_ttl_s, base_url=base_url)
        self.stopping = threading.Event()

    # -- auth -----------------------------------------------------------------------------------

    def _authorized(self, headers: Mapping[str, str], *, key_only: bool = False) -> bool:
        if self.api_key is None:
            return True
        given = headers.get("X-API-Key")
        if given is None:
            auth = headers.get("Authorization") or ""
            if auth.lower().startswith("bearer "):
                given = auth[7:].strip()
        if not given:
            return False
        if hmac.compare_digest(given.encode(), self.api_key.encode()):
            return True
        if self.jwt is not None and not key_only and given.count(".") == 2:
            return self.jwt.verify(given, self.state.clock()) is not None
        return False

    def refuse_before_body(
        self, method: str, path: str, headers: Mapping[str, str]
    ) -> Response | None:
        """The 401 of a request whose key (or token) is missing or wrong, else None.

        Called with the headers alone: a request that is refused has its body neither read
        into memory nor inflated (STYLE "Safe by default": authenticate before reading).
        """
        if self.api_key is None:
            return None
        key_only = False
        if path.startswith(API):
            name = path[len(API) :]
            if name == "healthz" and method in ("GET", "HEAD"):
                return None
            if name == "auth/token" and self.jwt is None:
                return None  # answered 404 by the route, key or not
            key_only = name in ("auth/token", "auth/apikey/me")
        elif path.startswith("/_local/download/") and method in ("GET", "HEAD"):
            return None  # a signed URL (its token is the credential)
        elif not path.startswith("/_local/"):
            return None  # 404 whoever asks
        if self._authorized(headers, key_only=key_only):
            return None
        return http_error(401, "Invalid or missing API key (X-API-Key)")

    # -- dispatch -------------------------------------------------------------------------------

    def handle(
        self,
        method: str,
        path: str,
        query: Mapping[str, list[str]],
        headers: Mapping[str, str],
        body: bytes,
    ) -> Response:
        """Answer one request (faults, auth, then the endpoint)."""
        decision = self.faults.decide("request", method, path, headers)
        if decision.delay:
            time.sleep(decision.delay)
        if decision.rule is not None and decision.action == "status":
            return self._fault_status(decision)
        try:
            response = self._route(method, path, query, headers, body)
        except RequestRefused as e:
            response = http_error(e.status, e.detail, e.headers)
            if method == "POST" and e.status in _REJECTED_STATUSES:
                self._consume_rejected_seq(path, headers, body, e)
        except CheckpointError as e:
            refused = checkpoint_refusal(e)
            response = http_error(refused.status, refused.detail)
        except Exception:
            log.exception("local server: %s %s failed", method, path)
            response = http_error(500, "Internal error in the local server")
        if decision.action == "drop_after":
            response.drop = True
        elif decision.action == "truncate" and decision.rule is not None:
            response.truncate_at = decision.rule.truncate_at
        return response

    def _consume_rejected_seq(
        self, path: str, headers: Mapping[str, str], body: bytes, error: RequestRefused
    ) -> None:
        """A training request refused before it was queued still takes its seq_id (as failed).

        Otherwise the model's next request would wait forever for the refused seq_id: the
        official client retries ``try_again`` until its caller gives up.
        """
        if path[len(API) :] not in _SEQUENCED_ROUTES:
            return
        ids = _model_and_seq(body, headers)
        if ids is not None:
            self.state.models.reject_seq(ids[0], ids[1], error.status, error.detail)

    def _fault_status(self, decision: FaultDecision) -> Response:
        rule = decision.rule
        assert rule is not None
        assert rule.status is not None
        headers: dict[str, str] = {}
        if rule.retry_after is not None:
            headers["Retry-After"] = rule.retry_after
        if rule.retry_after_ms is not None:
            headers["retry-after-ms"] = str(rule.retry_after_ms)
        if rule.retry_after_date is not None:
            headers["Retry-After"] = email.utils.formatdate(
                time.time() + rule.retry_after_date, usegmt=True
            )
        body: dict[str, Any] = {"detail": rule.reason or f"injected fault: HTTP {rule.status}"}
        if rule.status == 408:
            body["queue_state"] = rule.queue_state
            if rule.reason:
                body["queue_state_reason"] = rule.reason
        return as_json(body, rule.status, headers)

    def _route(
        self,
        method: str,
        path: str,
        query: Mapping[str, list[str]],
        headers: Mapping[str, str],
        body: bytes,
    ) -> Response:
        if path.startswith("/_local/"):
            return self._route_local(method, path, headers, body)
        if not path.startswith(API):
            raise NotFound(f"Not found: {path}")
        name = path[len(API) :]
        if name == "healthz" and method in ("GET", "HEAD"):
            return as_json(types.HealthResponse())
        if name == "auth/token" and method == "POST":
            return self._auth_token(headers, body)
        if name == "auth/apikey/me" and method in ("GET", "DELETE"):
            return self._api_key_self(method, headers)
        if not self._authorized(headers):
            return http_error(401, "Invalid or missing API key (X-API-Key)")
        if method == "POST" and name in _EXTENDED_ROUTES:
            request_type, extended_call = _EXTENDED_ROUTES[name]
            data = parse_json(body)
            extras = _pop_extras(data, _EXTRA_KEYS[name])
            return as_json(extended_call(self.state, structure_request(data, request_type), extras))
        if method == "POST" and name in _STATE_ROUTES:
            request_type, call = _STATE_ROUTES[name]
            return as_json(call(self.state, structure_request(parse_json(body), request_type)))
        if method == "POST" and name in _POST_ROUTES:
            return _POST_ROUTES[name](self, body, headers)
        if name == "get_server_capabilities" and method == "GET":
            return self._capabilities()
        return self.rest.route(method, name, query, body, headers)

    # -- control endpoints ----------------------------------------------------------------------

    def _route_local(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> Response:
        if path.startswith("/_local/download/") and method in ("GET", "HEAD"):
            # a signed URL: no API key, like the service's archive links (docs/protocol.rst §4.6)
            return self.rest.download(path[len("/_local/download/") :], method, headers)
        if not self._authorized(headers):
            return http_error(401, "Invalid or missing API key (X-API-Key)")
        if path == "/_local/stats" and method == "GET":
            return as_json(self.stats())
        if path == "/_local/faults" and self.faults_enabled:
            if method == "GET":
                return as_json({"rules": self.faults.describe()})
            if method == "POST":
                data = parse_json(body) if body.strip() else {}
                spec = data.get("spec") if isinstance(data, dict) else None
                if spec is not None and not isinstance(spec, str):
                    raise field_error(["body", "spec"], "spec: expected a string", "string_type")
                try:
                    self.faults.set_spec(spec)
                except FaultSpecError as e:
                    raise field_error(["body", "spec"], str(e), "value_error") from e
                return as_json({"rules": self.faults.describe()})
        raise NotFound(f"Not found: {path}")

    def stats(self) -> dict[str, Any]:
        """The stats document (state counters + fault rules)."""
        stats = self.state.stats()
        stats["faults"] = self.faults.describe()
        return stats

    # -- endpoints beyond "structure the body, call the state" (_STATE_ROUTES) -----------------

    def _auth_token(self, headers: Mapping[str, str], body: bytes) -> Response:
        if self.jwt is None:
            raise NotFound("JWT exchange is not enabled on this server (start it with --jwt)")
        if not self._authorized(headers, key_only=True):
            return http_error(401, "Invalid or missing API key (X-API-Key)")
        check_empty_object(parse_json(body) if body.strip() else {})
        return as_json(types.AuthTokenResponse(jwt=self.jwt.issue(self.state.clock())))

    def _api_key_self(self, method: str, headers: Mapping[str, str]) -> Response:
        """The presented API key's own metadata (what ``auth login`` checks and stores).

        The server has one key, set by ``--api-key``: it cannot be deleted (403).
        """
        if not self._authorized(headers, key_only=True):
            return http_error(401, "Invalid or missing API key (X-API-Key)")
        if method == "DELETE":
            return http_error(403, "The local server's API key is set by --api-key")
        return as_json(
            {
                "key_id": 1,
                "name": "tinker-lite-local",
                "note": "",
                "details": {
                    "org_details": {"name": LOCAL_ORG_ID},
                    "user_details": {"email": LOCAL_EMAIL},
                },
            }
        )

    def _client_config(self, body: bytes, headers: Mapping[str, str]) -> Response:
        structure_request(parse_json(body), types.ClientConfigRequest)
        return as_json(self.config)

    def _dynamic_config(self, body: bytes, headers: Mapping[str, str]) -> Response:
        structure_request(parse_json(body), types.ClientConfigRequest)
        return as_json(types.DynamicConfigResponse(refresh_interval_sec=300.0))

    def _telemetry(self, body: bytes, headers: Mapping[str, str]) -> Response:
        req = structure_request(parse_json(body), types.TelemetrySendRequest)
        self.state.count_telemetry(len(req.events), body)
        return as_json(types.TelemetryResponse())

    def _capabilities(self) -> Response:
        return as_json(
            types.GetServerCapabilitiesResponse(
                supported_models=[
                    # Every listed name is backed by the tiny model: trained and sampled alike.
                    types.SupportedModel(
                        model_name=name,
                        max_context_length=self.state.catalog.context_length,
                        trainable=True,
                        sampleable=True,
                    )
                    for name in self.state.catalog.names
                ]
            )
        )

    def _forward_backward(
        self, body: bytes, headers: Mapping[str, str], *, forward_only: bool = False
    ) -> Response:
        """``forward`` (``forward_only``) or ``forward_backward``, as JSON or protobuf."""
        if not is_protobuf(headers):
            model_id, seq_id, fb = _structure_forward_backward(body, forward_only)
            data, loss_fn, config = fb.data, fb.loss_fn, fb.loss_fn_config
        else:
            # docs/protocol.rst §3.4: protobuf ForwardBackwardRequest; forward_only marks a forward
            proto = _decode_forward_backward_proto(body)
            model_id, seq_id, data = proto.model_id, proto.seq_id, proto.data
            loss_fn, config = proto.loss_fn, proto.loss_fn_config
            forward_only = forward_only or proto.forward_only
        return as_json(
            self.state.training.forward_backward(
                model_id, seq_id, data, loss_fn, config, forward_only=forward_only
            )
        )

    # -- futures --------------------------------------------------------------------------------

    def _retrieve_future(self, body: bytes, headers: Mapping[str, str]) -> Response:
        req = structure_request(parse_json(body), types.FutureRetrieveRequest)
        request_id = req.request_id
        decision = self.faults.decide(
            "poll", "POST", API + "retrieve_future", headers, request_id=request_id
        )
        if decision.delay:
            time.sleep(decision.delay)
        rule = decision.rule
        if rule is not None and rule.action == "expire":
            self.state.futures.forget(request_id)
            return http_error(410, f"Promise expired/broken for request {request_id} (injected)")
        if rule is not None and rule.action == "try_again":
            return self._try_again(request_id, rule.status or 200, rule.queue_state, rule.reason)
        entry = self.state.futures.get(request_id)
        if entry is None:
            # docs/service.rst §8: unknown or expired ids answer 410; sampling then re-submits
            return http_error(410, f"Promise expired or unknown: {request_id}")
        if not entry.done:
            entry.event.wait(self.long_poll_s)
        if not entry.done:
            if entry.cancelled or self.stopping.is_set():
                return http_error(503, "The local server is shutting down")
            reason = entry.waiting_reason() if entry.waiting_reason is not None else None
            return self._try_again(request_id, self.pending_status, "active", reason)
        return self._result(entry, headers)

    def _retrieve_futures(self, body: bytes, headers: Mapping[str, str]) -> Response:
        """``retrieve_futures``: the sampling completions of one (session, clone), long-polled."""
        data = parse_json(body)
        if not isinstance(data, dict):
            raise field_error(["body"], "Input should be a JSON object", "dict_type")
        target = data.get("target")
        if not isinstance(target, dict) or not isinstance(target.get("sampling_session_id"), str):
            raise field_error(
                ["body", "target", "sampling_session_id"],
                "target.sampling_session_id: is required",
                "missing",
            )
        clone = target.get("cloned_sampler_id", 0)
        cursor = data.get("prev_cursor", 0)
        timeout = data.get("timeout")
        for loc, value in (("cloned_sampler_id", clone), ("prev_cursor", cursor)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise field_error(["body", loc], f"{loc}: must be an integer >= 0", "int_type")
        if timeout is not None and (
            not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout < 0
        ):
            raise field_error(["body", "timeout"], "timeout: must be a number >= 0", "float_type")
        wait_s = self.long_poll_s if timeout is None else min(float(timeout), 30.0)
        target_key = (str(target["sampling_session_id"]), int(clone))
        return as_json(self.state.samplers.retrieve_futures(target_key, int(cursor), wait_s))

    def _try_again(
        self, request_id: str, status: int, queue_state: str, reason: str | None
    ) -> Response:
        return as_json(
            types.TryAgainResponse(
                request_id=request_id, queue_state=queue_state, queue_state_reason=reason
            ),
            status,
        )

    def _result(self, entry: FutureEntry, headers: Mapping[str, str]) -> Response:
        extra = {
            "X-Local-Ready-At": f"{entry.ready_wall:.6f}",
            "X-Local-Ready-At-Perf": f"{entry.ready_perf:.9f}",
            "X-Local-Created-At-Perf": f"{entry.created_perf:.9f}",
        }
        if entry.error is not None:
            failed = types.RequestFailedResponse(
                error=entry.error, category=types.RequestErrorCategory.parse(entry.category)
            )
            return Response(200, entry.encoded("json", lambda: _wire.dumps(failed)), JSON, extra)
        result = entry.result
        if prefers_protobuf(headers.get("Accept")) and isinstance(
            result, types.ForwardBackwardOutput | SampleOutcome
        ):

            def encode_proto() -> bytes:
                if isinstance(result, types.ForwardBackwardOutput):
                    return _codecs.encode_forward_backward_output(result)
                return _codecs.encode_sample_outcome(result)

            return Response(200, entry.encoded("proto", encode_proto), PROTOBUF, extra)
        if isinstance(result, SampleOutcome):
            result = _codecs.sample_outcome_json(result)
        try:
            data = entry.encoded("json", lambda: _wire.dumps(result))
        except (TinkerError, ValueError) as e:
            log.error("local server: cannot encode the result of %s: %s", entry.request_id, e)
            data = _wire.dumps(
                types.RequestFailedResponse(
                    error=f"The result could not be encoded: {e}",
                    category=types.RequestErrorCategory.SERVER,
                )
            )
        return Response(200, data, JSON, extra)


def _model_and_seq(body: bytes, headers: Mapping[str, str]) -> tuple[str, int] | None:
    """Best-effort ``(model_id, seq_id)`` of a training request body that failed validation."""
    if is_protobuf(headers):
        return _codecs.peek_model_and_seq(body)
    try:
        data = _wire.loads(body)
    except (TinkerError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    model_id, seq_id = data.get("model_id"), data.get("seq_id")
    if isinstance(model_id, str) and isinstance(seq_id, int) and not isinstance(seq_id, bool):
        return model_id, seq_id
    return None


def _structure_forward_backward(
    body: bytes, forward_only: bool
) -> tuple[str, int | None, types.ForwardBackwardInput]:
    """Structure a JSON forward / forward_backward body: (model_id, seq_id, input)."""
    if forward_only:
        fwd = structure_request(parse_json(body), types.ForwardRequest)
        return fwd.model_id, fwd.seq_id, fwd.forward_input
    req = structure_request(parse_json(body), types.ForwardBackwardRequest)
    return req.model_id, req.seq_id, req.forward_backward_input


def _decode_forward_backward_proto(body: bytes) -> ProtoForwardBackwardRequest:
    """Decode and check a protobuf ForwardBackwardRequest; 400/422 naming the problem."""
    try:
        req = _codecs.decode_forward_backward_request(body)
    except (TinkerError, ValueError) as e:
        raise InvalidRequest(f"Invalid protobuf ForwardBackwardRequest: {e}") from e
    if not req.model_id:
        raise field_error(["body", "model_id"], "model_id: is required", "missing")
    if req.seq_id < 0:
        raise field_error(["body", "seq_id"], "seq_id: must be >= 0", "greater_than_equal")
    if not req.data:
        raise field_error(["body", "data"], "data: is empty", "value_error")
    try:
        types.check_loss_fn(req.loss_fn)
    except TinkerError as e:
        raise field_error(["body", "loss_fn"], str(e), "value_error") from e
    return req


# Endpoints that structure the JSON body into a request type, pass it to one ServerState method
# and answer with what it returns.
_STATE_ROUTES: dict[str, tuple[type[Any], Callable[[ServerState, Any], Any]]] = {
    "create_session": (types.CreateSessionRequest, lambda s, r: s.sessions.create(r)),
    "session_heartbeat": (types.SessionHeartbeatRequest, lambda s, r: s.sessions.heartbeat(r)),
    "create_model": (types.CreateModelRequest, lambda s, r: s.training.create_model(r)),
    "get_info": (types.GetInfoRequest, lambda s, r: s.training.get_info(r)),
    "unload_model": (types.UnloadModelRequest, lambda s, r: s.training.unload_model(r)),
    "create_sampling_session": (
        types.CreateSamplingSessionRequest,
        lambda s, r: s.samplers.create_session(r),
    ),
    "join_sampling_session": (
        types.JoinSamplingSessionRequest,
        lambda s, r: s.samplers.join(r),
    ),
    "asample": (types.SampleRequest, lambda s, r: s.samplers.asample(r)),
    "weights_info": (types.WeightsInfoRequest, lambda s, r: s.views.weights_info(r)),
}

# Endpoints whose 0.38 requests carry keys the shared request models do not (yet) hold: those
# keys are taken out of the body before it is structured and passed on as ``extras``.
_EXTRA_KEYS: dict[str, tuple[str, ...]] = {
    "save_weights": ("user_metadata",),
    "save_weights_for_sampler": ("user_metadata",),
    "load_weights": ("optimizer_config",),
}
_EXTENDED_ROUTES: dict[str, tuple[type[Any], Callable[[ServerState, Any, dict[str, Any]], Any]]] = {
    "save_weights": (types.SaveWeightsRequest, lambda s, r, x: s.training.save_weights(r, x)),
    "save_weights_for_sampler": (
        types.SaveWeightsForSamplerRequest,
        lambda s, r, x: s.training.save_weights_for_sampler(r, x),
    ),
    "load_weights": (types.LoadWeightsRequest, lambda s, r, x: s.training.load_weights(r, x)),
}


def _pop_extras(data: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """Remove ``keys`` from a JSON object body (when the request model lacks them)."""
    if not isinstance(data, dict):
        return {}
    return {key: data.pop(key) for key in keys if key in data}


# Training requests that carry a model's seq_id, and the refusals that still consume it.
_SEQUENCED_ROUTES = frozenset(
    {
        "forward",
        "forward_backward",
        "optim_step",
        "save_weights",
        "save_weights_for_sampler",
        "load_weights",
        "save_weights_external",
    }
)
_REJECTED_STATUSES = frozenset({400, 404, 413, 415, 422})

_Handler = Callable[[App, bytes, Mapping[str, str]], Response]

_POST_ROUTES: dict[str, _Handler] = {
    "client/config": App._client_config,
    "client/dynamic_config": App._dynamic_config,
    "telemetry": App._telemetry,
    "forward": lambda app, body, headers: app._forward_backward(body, headers, forward_only=True),
    "forward_backward": App._forward_backward,
    "optim_step": lambda app, body, headers: as_json(
        app.state.training.optim_step(optim_step_request(parse_json(body)))
    ),
    "retrieve_future": App._retrieve_future,
    "retrieve_futures": App._retrieve_futures,
}
