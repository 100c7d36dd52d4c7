"""The local server's HTTP layer: routing, auth, fault injection, long-polls and downloads.

A stdlib ``ThreadingHTTPServer`` (one daemon thread per connection, HTTP/1.1 keep-alive, every
response with a Content-Length) in front of :class:`~tinker_lite.local.state.ServerState`.
:class:`LocalServer` runs it in a background thread; :func:`serve` runs it in the foreground
until SIGINT/SIGTERM.
"""

from __future__ import annotations

import email.utils
import gzip
import hmac
import http.server
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from tinker_lite import _wire, types
from tinker_lite._errors import TinkerError
from tinker_lite.local import model as model_mod
from tinker_lite.local._checkpoints import CheckpointError
from tinker_lite.local._faults import FaultDecision, FaultInjector, FaultSpecError
from tinker_lite.local._futures import FutureEntry
from tinker_lite.local._jwt import JwtIssuer
from tinker_lite.local._validation import (
    check_empty_object,
    field_error,
    parse_json,
    structure_request,
)
from tinker_lite.local.state import SUPPORTED_MODELS, HTTPError, ServerState

if TYPE_CHECKING:
    from tinker_lite._proto import ProtoForwardBackwardRequest

__all__ = ["FAULTS_ENV", "LocalServer", "serve"]

log = logging.getLogger("tinker_lite.local")

FAULTS_ENV = "TINKER_LITE_LOCAL_FAULTS"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_MAX_BODY = 1 << 30
_API = "/api/v1/"


@dataclass
class Response:
    """An HTTP answer; ``drop`` closes without answering, ``truncate_at`` cuts the body short."""

    status: int
    body: bytes = b""
    content_type: str | None = JSON
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    truncate_at: float | None = None
    content_length: int | None = None


def _json(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(status, _wire.dumps(obj), JSON, dict(headers or {}))


def _error(status: int, detail: Any, headers: Mapping[str, str] | None = None) -> Response:
    return _json({"detail": detail}, status, headers)


def _no_content() -> Response:
    return Response(204, b"", None)


def _prefers_protobuf(accept: str | None) -> bool:
    """True when the Accept header ranks protobuf above (or before) JSON."""
    if not accept:
        return False
    best: dict[str, tuple[float, int]] = {}
    for index, part in enumerate(accept.split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        kind = "proto" if media.lower() in (PROTOBUF, "application/protobuf") else "other"
        if media.lower() in (JSON, "*/*", "application/*"):
            kind = "json"
        if kind != "other" and kind not in best:
            best[kind] = (q, index)
    proto = best.get("proto")
    if proto is None or proto[0] <= 0:
        return False
    other = best.get("json")
    return other is None or proto[0] > other[0] or (proto[0] == other[0] and proto[1] < other[1])


def _decompress(body: bytes, encoding: str | None) -> bytes:
    if not encoding or encoding.lower() == "identity":
        return body
    enc = encoding.lower().strip()
    if enc == "gzip":
        try:
            return gzip.decompress(body)
        except (OSError, EOFError) as e:
            raise HTTPError(400, f"Request body is not valid gzip: {e}") from e
    if enc == "zstd":
        from tinker_lite import _proto

        if not _proto.zstd_available():
            raise HTTPError(
                415, "Content-Encoding zstd needs the 'zstandard' package on the local server"
            )
        try:
            return _proto.decompress(body)
        except TinkerError as e:
            raise HTTPError(400, f"Request body is not valid zstd: {e}") from e
    raise HTTPError(415, f"Unsupported Content-Encoding {encoding!r}")


def _query_int(query: Mapping[str, list[str]], name: str, default: int) -> int:
    values = query.get(name)
    if not values:
        return default
    try:
        value = int(values[-1])
    except ValueError:
        raise field_error(
            ["query", name], f"{name}: Input should be a valid integer", "int_parsing"
        ) from None
    if value < 0:
        raise field_error(["query", name], f"{name}: must be >= 0", "greater_than_equal")
    return value


class _App:
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
    ) -> None:
        self.state = state
        self.api_key = api_key
        self.jwt = jwt
        self.faults = faults
        self.faults_enabled = faults_enabled
        self.long_poll_s = long_poll_s
        self.pending_status = pending_status
        self.config = config
        self.archive_ttl_s = archive_ttl_s
        self.base_url = base_url
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
        except HTTPError as e:
            response = _error(e.status, e.detail, e.headers)
        except CheckpointError as e:
            response = _error(e.status, e.detail)
        except Exception:
            log.exception("local server: %s %s failed", method, path)
            response = _error(500, "Internal error in the local server")
        if decision.action == "drop_after":
            response.drop = True
        elif decision.action == "truncate" and decision.rule is not None:
            response.truncate_at = decision.rule.truncate_at
        return response

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
        return _json(body, rule.status, headers)

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
        if not path.startswith(_API):
            raise HTTPError(404, f"Not found: {path}")
        name = path[len(_API) :]
        if name == "healthz" and method in ("GET", "HEAD"):
            return _json(types.HealthResponse())
        if name == "auth/token" and method == "POST":
            return self._auth_token(headers, body)
        if not self._authorized(headers):
            return _error(401, "Invalid or missing API key (X-API-Key)")
        if method == "POST" and name in _STATE_ROUTES:
            request_type, call = _STATE_ROUTES[name]
            return _json(call(self.state, structure_request(parse_json(body), request_type)))
        if method == "POST" and name in _POST_ROUTES:
            return _POST_ROUTES[name](self, body, headers)
        if name == "get_server_capabilities" and method == "GET":
            return self._capabilities()
        return self._route_rest(method, name, query, body)

    # -- control endpoints ----------------------------------------------------------------------

    def _route_local(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> Response:
        if path.startswith("/_local/download/") and method in ("GET", "HEAD"):
            # a signed URL: no API key, like the service's archive links (WIRE.md §3.10)
            return self._download(path[len("/_local/download/") :], method, headers)
        if not self._authorized(headers):
            return _error(401, "Invalid or missing API key (X-API-Key)")
        if path == "/_local/stats" and method == "GET":
            return _json(self.stats())
        if path == "/_local/faults" and self.faults_enabled:
            if method == "GET":
                return _json({"rules": self.faults.describe()})
            if method == "POST":
                data = parse_json(body) if body.strip() else {}
                spec = data.get("spec") if isinstance(data, dict) else None
                if spec is not None and not isinstance(spec, str):
                    raise field_error(["body", "spec"], "spec: expected a string", "string_type")
                try:
                    self.faults.set_spec(spec)
                except FaultSpecError as e:
                    raise field_error(["body", "spec"], str(e), "value_error") from e
                return _json({"rules": self.faults.describe()})
        raise HTTPError(404, f"Not found: {path}")

    def stats(self) -> dict[str, Any]:
        """The stats document (state counters + fault rules)."""
        stats = self.state.stats()
        stats["faults"] = self.faults.describe()
        return stats

    # -- endpoints beyond "structure the body, call the state" (_STATE_ROUTES) -----------------

    def _auth_token(self, headers: Mapping[str, str], body: bytes) -> Response:
        if self.jwt is None:
            raise HTTPError(404, "JWT exchange is not enabled on this server (start it with --jwt)")
        if not self._authorized(headers, key_only=True):
            return _error(401, "Invalid or missing API key (X-API-Key)")
        check_empty_object(parse_json(body) if body.strip() else {})
        return _json(types.AuthTokenResponse(jwt=self.jwt.issue(self.state.clock())))

    def _client_config(self, body: bytes, headers: Mapping[str, str]) -> Response:
        structure_request(parse_json(body), types.ClientConfigRequest)
        return _json(self.config)

    def _dynamic_config(self, body: bytes, headers: Mapping[str, str]) -> Response:
        structure_request(parse_json(body), types.ClientConfigRequest)
        return _json(types.DynamicConfigResponse(refresh_interval_sec=300.0))

    def _telemetry(self, body: bytes, headers: Mapping[str, str]) -> Response:
        req = structure_request(parse_json(body), types.TelemetrySendRequest)
        self.state.count_telemetry(len(req.events), body)
        return _json(types.TelemetryResponse())

    def _capabilities(self) -> Response:
        return _json(
            types.GetServerCapabilitiesResponse(
                supported_models=[
                    types.SupportedModel(
                        model_name=name, max_context_length=model_mod.CONTEXT_LENGTH
                    )
                    for name in SUPPORTED_MODELS
                ]
            )
        )

    def _forward_backward(
        self, body: bytes, headers: Mapping[str, str], *, forward_only: bool = False
    ) -> Response:
        """``forward`` (``forward_only``) or ``forward_backward``, as JSON or protobuf."""
        if not _is_protobuf(headers):
            model_id, seq_id, fb = _structure_forward_backward(body, forward_only)
            data, loss_fn, config = fb.data, fb.loss_fn, fb.loss_fn_config
        else:
            # WIRE.md §13.3/§13.7: protobuf ForwardBackwardRequest; forward_only marks a forward
            proto = _decode_forward_backward_proto(body)
            model_id, seq_id, data = proto.model_id, proto.seq_id, proto.data
            loss_fn, config = proto.loss_fn, proto.loss_fn_config
            forward_only = forward_only or proto.forward_only
        return _json(
            self.state.forward_backward(
                model_id, seq_id, data, loss_fn, config, forward_only=forward_only
            )
        )

    # -- futures --------------------------------------------------------------------------------

    def _retrieve_future(self, body: bytes, headers: Mapping[str, str]) -> Response:
        req = structure_request(parse_json(body), types.FutureRetrieveRequest)
        request_id = req.request_id
        decision = self.faults.decide(
            "poll", "POST", _API + "retrieve_future", headers, request_id=request_id
        )
        if decision.delay:
            time.sleep(decision.delay)
        rule = decision.rule
        if rule is not None and rule.action == "expire":
            self.state.futures.forget(request_id)
            return _error(410, f"Promise expired/broken for request {request_id} (injected)")
        if rule is not None and rule.action == "try_again":
            return self._try_again(request_id, rule.status or 200, rule.queue_state, rule.reason)
        entry = self.state.futures.get(request_id)
        if entry is None:
            # SERVER.md §8: unknown or expired ids answer 410; sampling then re-submits
            return _error(410, f"Promise expired or unknown: {request_id}")
        if not entry.done:
            entry.event.wait(self.long_poll_s)
        if not entry.done:
            if entry.cancelled or self.stopping.is_set():
                return _error(503, "The local server is shutting down")
            reason = entry.waiting_reason() if entry.waiting_reason is not None else None
            return self._try_again(request_id, self.pending_status, "active", reason)
        return self._result(entry, headers)

    def _try_again(
        self, request_id: str, status: int, queue_state: str, reason: str | None
    ) -> Response:
        return _json(
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
        if _prefers_protobuf(headers.get("Accept")) and isinstance(
            result, types.ForwardBackwardOutput | types.SampleResponse
        ):
            from tinker_lite import _proto

            def encode_proto() -> bytes:
                if isinstance(result, types.ForwardBackwardOutput):
                    return _proto.encode_forward_backward_output(result)
                return _proto.encode_sample_response(result)

            return Response(200, entry.encoded("proto", encode_proto), PROTOBUF, extra)
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

    # -- REST -----------------------------------------------------------------------------------

    def _route_rest(
        self, method: str, name: str, query: Mapping[str, list[str]], body: bytes
    ) -> Response:
        parts = [urllib.parse.unquote(p) for p in name.split("/")]
        state = self.state
        store = state.checkpoints
        if parts == ["training_runs"] and method == "GET":
            limit = _query_int(query, "limit", 20)
            offset = _query_int(query, "offset", 0)
            runs = store.list_runs()
            return _json(
                types.TrainingRunsResponse(
                    training_runs=[
                        state.training_run_view(r) for r in runs[offset : offset + limit]
                    ],
                    cursor=types.Cursor(offset=offset, limit=limit, total_count=len(runs)),
                )
            )
        if parts == ["checkpoints"] and method == "GET":
            limit = _query_int(query, "limit", 100)
            offset = _query_int(query, "offset", 0)
            recs = store.list_all()
            return _json(
                types.CheckpointsListResponse(
                    checkpoints=[state.checkpoint_view(r) for r in recs[offset : offset + limit]],
                    cursor=types.Cursor(offset=offset, limit=limit, total_count=len(recs)),
                )
            )
        if len(parts) >= 2 and parts[0] == "training_runs":
            run_id = parts[1]
            run = store.get_run(run_id)
            if run is None:
                raise HTTPError(404, f"Training run not found: {run_id!r}")
            rest = parts[2:]
            if not rest and method == "GET":
                return _json(state.training_run_view(run))
            if rest == ["checkpoints"] and method == "GET":
                return _json(
                    types.CheckpointsListResponse(
                        checkpoints=[state.checkpoint_view(r) for r in store.list_run(run_id)]
                    )
                )
            if len(rest) in (3, 4) and rest[0] == "checkpoints":
                checkpoint_id = f"{rest[1]}/{rest[2]}"
                action = rest[3] if len(rest) == 4 else None
                return self._checkpoint_action(method, run_id, checkpoint_id, action, body)
        if len(parts) == 2 and parts[0] == "samplers" and method == "GET":
            return _json(state.get_sampler(parts[1]))
        if parts == ["sessions"] and method == "GET":
            return _json(
                state.list_sessions(_query_int(query, "limit", 20), _query_int(query, "offset", 0))
            )
        if len(parts) == 2 and parts[0] == "sessions" and method == "GET":
            return _json(state.get_session(parts[1]))
        if len(parts) == 3 and parts[0] == "sessions" and parts[2] == "finish" and method == "POST":
            req = structure_request(parse_json(body), types.SessionFinishRequest)
            state.finish_session(parts[1], req)
            return _no_content()
        if len(parts) == 3 and parts[0] == "sessions" and parts[2] == "trace_export":
            state.get_session(parts[1])
            return _json(
                {"status": "failed", "error": "Trace export is not available on the local server"}
            )
        raise HTTPError(404, f"Not found: {_API}{name}")

    def _checkpoint_action(
        self, method: str, run_id: str, checkpoint_id: str, action: str | None, body: bytes
    ) -> Response:
        store = self.state.checkpoints
        if action is None and method == "DELETE":
            store.delete(run_id, checkpoint_id)
            return _no_content()
        if action is None and method == "GET":
            return _json(self.state.checkpoint_view(store.lookup(run_id, checkpoint_id)))
        if action == "publish" and method in ("POST", "DELETE"):
            store.set_public(run_id, checkpoint_id, method == "POST")
            return _no_content()
        if action == "ttl" and method == "PUT":
            req = structure_request(parse_json(body), types.SetCheckpointTTLRequest)
            store.set_ttl(run_id, checkpoint_id, req.ttl_seconds)
            return _no_content()
        if action == "archive" and method == "GET":
            token, expires_at = store.make_archive(run_id, checkpoint_id, self.archive_ttl_s)
            # WIRE.md §3.10: success is a 302 whose Location/Expires the client reads
            location = f"{self.base_url()}/_local/download/{token}"
            headers = {
                "Location": location,
                "Expires": email.utils.formatdate(expires_at, usegmt=True),
            }
            return Response(302, b"", None, headers)
        raise HTTPError(404, f"Not found: {_API}training_runs/{run_id}/checkpoints/{checkpoint_id}")

    def _download(self, token: str, method: str, headers: Mapping[str, str]) -> Response:
        found = self.state.checkpoints.archive(token)
        if found is None:
            raise HTTPError(404, "Download link expired or unknown")
        file_path, filename = found
        try:
            data = file_path.read_bytes()
        except OSError:
            raise HTTPError(404, "Download link expired or unknown") from None
        size = len(data)
        out_headers = {
            "Accept-Ranges": "bytes",
            "Content-Disposition": f'attachment; filename="{filename}"',
            "ETag": f'"{token}"',
        }
        status = 200
        range_header = headers.get("Range")
        if range_header is not None and method == "GET":
            parsed = _parse_range(range_header, size)
            if parsed == "unsatisfiable":
                out_headers["Content-Range"] = f"bytes */{size}"
                return Response(416, b"", None, out_headers)
            if isinstance(parsed, tuple):
                start, end = parsed
                data = data[start : end + 1]
                out_headers["Content-Range"] = f"bytes {start}-{end}/{size}"
                status = 206
        return Response(status, data, "application/gzip", out_headers)


def _is_protobuf(headers: Mapping[str, str]) -> bool:
    content_type = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    return content_type in (PROTOBUF, "application/protobuf")


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
    from tinker_lite import _proto

    try:
        req = _proto.decode_forward_backward_request(body)
    except (TinkerError, ValueError) as e:
        raise HTTPError(400, f"Invalid protobuf ForwardBackwardRequest: {e}") from e
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
    "create_session": (types.CreateSessionRequest, ServerState.create_session),
    "session_heartbeat": (types.SessionHeartbeatRequest, ServerState.heartbeat),
    "create_model": (types.CreateModelRequest, ServerState.create_model),
    "get_info": (types.GetInfoRequest, ServerState.get_info),
    "unload_model": (types.UnloadModelRequest, ServerState.unload_model),
    "optim_step": (types.OptimStepRequest, ServerState.optim_step),
    "save_weights": (types.SaveWeightsRequest, ServerState.save_weights),
    "save_weights_for_sampler": (
        types.SaveWeightsForSamplerRequest,
        ServerState.save_weights_for_sampler,
    ),
    "load_weights": (types.LoadWeightsRequest, ServerState.load_weights),
    "create_sampling_session": (
        types.CreateSamplingSessionRequest,
        ServerState.create_sampling_session,
    ),
    "join_sampling_session": (
        types.JoinSamplingSessionRequest,
        ServerState.join_sampling_session,
    ),
    "asample": (types.SampleRequest, ServerState.asample),
    "weights_info": (types.WeightsInfoRequest, ServerState.weights_info),
}

_Handler = Callable[[_App, bytes, Mapping[str, str]], Response]

_POST_ROUTES: dict[str, _Handler] = {
    "client/config": _App._client_config,
    "client/dynamic_config": _App._dynamic_config,
    "telemetry": _App._telemetry,
    "forward": lambda app, body, headers: app._forward_backward(body, headers, forward_only=True),
    "forward_backward": _App._forward_backward,
    "retrieve_future": _App._retrieve_future,
}


def _shutdown(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _stats_key(path: str) -> str:
    if path.startswith("/_local/download/"):
        return "/_local/download"
    return path


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: _App) -> None:
        self.app = app
        # open connections and the threads serving them (one each)
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._conn_lock = threading.Lock()
        super().__init__(address, _RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve a new connection on its own daemon thread, remembered until it ends."""
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        with self._conn_lock:
            self._connections[request] = thread
        thread.start()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self._connections.pop(request, None)

    def stop(self, timeout: float) -> None:
        """Stop accepting, end every open connection and wait (up to ``timeout``) for its thread."""
        self.shutdown()  # serve_forever has returned: no connection is accepted after this
        self.server_close()
        with self._conn_lock:
            connections = list(self._connections.items())
        for conn, _ in connections:
            _shutdown(conn)
        deadline = time.monotonic() + timeout
        for _, thread in connections:
            thread.join(max(0.0, deadline - time.monotonic()))

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("local server: connection error from %s", client_address, exc_info=True)


class _RequestHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tinker-lite-local"
    sys_version = ""
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("local server: " + format, *args)

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            total = 0
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > _MAX_BODY:
                    raise HTTPError(413, "Request body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(chunks)
        length_text = self.headers.get("Content-Length")
        if not length_text:
            return b""
        try:
            length = int(length_text)
        except ValueError:
            raise HTTPError(400, "Invalid Content-Length") from None
        if length < 0 or length > _MAX_BODY:
            raise HTTPError(413, "Request body too large")
        body = self.rfile.read(length)
        if len(body) != length:
            raise ConnectionError("client closed the connection mid-body")
        return body

    def _dispatch(self) -> None:
        app = self.server.app
        started = time.perf_counter()
        method = self.command
        split = urllib.parse.urlsplit(self.path)
        path = split.path
        app.state.count_request(_stats_key(path))
        headers: Any = self.headers  # an http.client.HTTPMessage: case-insensitive .get()
        if app.faults.decide("connect", method, path, headers).rule is not None:
            app.state.count_status(_stats_key(path), 0)
            self._drop()
            return
        try:
            body = self._read_body()
            body = _decompress(body, self.headers.get("Content-Encoding"))
        except HTTPError as e:
            self.close_connection = True
            self._send(_error(e.status, e.detail), path, started)
            return
        except (ConnectionError, OSError, ValueError):
            self.close_connection = True
            return
        query = urllib.parse.parse_qs(split.query)
        response = app.handle(method, path, query, headers, body)
        if response.drop:
            app.state.count_status(_stats_key(path), 0)
            self._drop()
            return
        if method == "HEAD":
            response.content_length = len(response.body)
            response.body = b""
        self._send(response, path, started)

    # every method goes through the same path (BaseHTTPRequestHandler calls do_<METHOD>)
    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _dispatch

    def _drop(self) -> None:
        self.close_connection = True
        _shutdown(self.connection)

    def _send(self, response: Response, path: str, started: float) -> None:
        status = response.status
        self.server.app.state.count_status(_stats_key(path), status)
        reason = (
            http.HTTPStatus(status).phrase if status in http.HTTPStatus._value2member_map_ else ""
        )
        lines = [
            f"HTTP/1.1 {status} {reason}",
            f"Server: {self.server_version}",
            f"Date: {self.date_time_string()}",
        ]
        if response.content_type is not None:
            lines.append(f"Content-Type: {response.content_type}")
        if status != 204 and not (100 <= status < 200):
            length = response.content_length
            lines.append(f"Content-Length: {len(response.body) if length is None else length}")
        lines.extend(f"{k}: {v}" for k, v in response.headers.items())
        if self.close_connection or response.truncate_at is not None:
            lines.append("Connection: close")
            self.close_connection = True
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        body = response.body
        if response.truncate_at is not None:
            body = body[: int(len(body) * response.truncate_at)]
        try:
            self.wfile.write(head + body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True
            return
        if response.truncate_at is not None:
            self._drop()
        log.debug(
            "local server: %s %s -> %d (%.1f ms)",
            self.command,
            path,
            status,
            (time.perf_counter() - started) * 1000,
        )


def _parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """Parse a single ``bytes=`` range; None to ignore it, "unsatisfiable" for 416."""
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash:
        return None
    try:
        if not first:
            if not last:
                return None
            suffix = int(last)
            if suffix <= 0:
                return "unsatisfiable"
            return max(0, size - suffix), size - 1
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if last and end < start:
        # RFC 9110 §14.1.1: a range whose last byte precedes its first is invalid: ignore it.
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(end, size - 1)


class LocalServer:
    """An offline Tinker-compatible server on loopback, backed by the tiny numpy model.

    ``with LocalServer() as base_url: ...`` starts it on an ephemeral port in a background thread
    and stops it (removing its temporary data dir) on exit. See :mod:`tinker_lite.local` for the
    options, the fault spec grammar and the stats format.
    """

    def __init__(  # noqa: PLR0917 (the documented positional signature)
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        data_dir: str | os.PathLike[str] | None = None,
        api_key: str | None = None,
        faults: str | None = None,
        jwt: bool = False,
        stub_model: bool = False,
        *,
        result_ttl: float = 3600.0,
        long_poll_s: float = 1.0,
        pending_status: int = 200,
        config_overrides: Mapping[str, Any] | None = None,
        sample_workers: int = 4,
        clock: Callable[[], float] | None = None,
        jwt_ttl_s: float = 3600.0,
        archive_ttl_s: float = 900.0,
    ) -> None:
        if pending_status not in (200, 408):
            raise ValueError("pending_status must be 200 (try_again) or 408")
        if faults is None:
            faults = os.environ.get(FAULTS_ENV)
        self.host = host
        self.port = port
        self.api_key = api_key
        self.jwt = jwt
        self.stub_model = stub_model
        self.result_ttl = result_ttl
        self.long_poll_s = long_poll_s
        self.pending_status = pending_status
        self.sample_workers = sample_workers
        self.jwt_ttl_s = jwt_ttl_s
        self.archive_ttl_s = archive_ttl_s
        self._clock = clock or time.time
        self._faults = FaultInjector(faults)
        self._faults_enabled = faults is not None
        self._given_data_dir = Path(data_dir) if data_dir is not None else None
        self._data_dir: Path | None = None
        self._owns_data_dir = False
        self._config_overrides = dict(config_overrides or {})
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._app: _App | None = None
        self._state: ServerState | None = None
        self._lock = threading.Lock()
        self._paused = False

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the running server."""
        if self._httpd is None:
            raise RuntimeError("LocalServer is not running; call start() first")
        port = self._httpd.server_address[1]
        shown = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        if ":" in shown:
            shown = f"[{shown}]"
        return f"http://{shown}:{port}"

    @property
    def data_dir(self) -> Path:
        """Where checkpoints are stored."""
        if self._data_dir is None:
            raise RuntimeError("LocalServer is not running")
        return self._data_dir

    @property
    def state(self) -> ServerState:
        """The server's state (for tests and tools in the same process)."""
        if self._state is None:
            raise RuntimeError("LocalServer is not running")
        return self._state

    def _client_config(self) -> dict[str, Any]:
        base = types.ClientConfigResponse(
            pjwt_auth_enabled=self.jwt,
            parallel_fwdbwd_chunks=True,
            sample_max_concurrent_requests=400,
            fwdbwd_max_chunk_len=1024,
            fwdbwd_max_chunk_bytes_count=5_000_000,
        )
        config: dict[str, Any] = _wire.to_builtins(base)
        config.update(self._config_overrides)
        return config

    def start(self) -> str:
        """Start serving in a background thread; return the base URL."""
        with self._lock:
            if self._httpd is not None:
                return self.base_url
            if self._given_data_dir is None:
                self._data_dir = Path(tempfile.mkdtemp(prefix="tinker-lite-local-"))
                self._owns_data_dir = True
            else:
                self._data_dir = self._given_data_dir
                self._data_dir.mkdir(parents=True, exist_ok=True)
            self._state = ServerState(
                data_dir=self._data_dir,
                clock=self._clock,
                stub_model=self.stub_model,
                result_ttl=self.result_ttl,
                sample_workers=self.sample_workers,
            )
            self._app = _App(
                self._state,
                api_key=self.api_key,
                jwt=JwtIssuer(self.jwt_ttl_s) if self.jwt else None,
                faults=self._faults,
                faults_enabled=self._faults_enabled,
                long_poll_s=self.long_poll_s,
                pending_status=self.pending_status,
                config=self._client_config(),
                archive_ttl_s=self.archive_ttl_s,
                base_url=lambda: self.base_url,
            )
            self._listen(self.port)
        log.info("tinker_lite local server listening on %s", self.base_url)
        return self.base_url

    def stop(self) -> None:
        """Stop serving, end open connections and polls, remove a temporary data dir."""
        with self._lock:
            httpd, thread, app, state = self._httpd, self._thread, self._app, self._state
            if httpd is None:
                return
            self._httpd = None
            self._thread = None
            self._paused = False
        assert app is not None
        assert state is not None
        app.stopping.set()
        state.close()  # releases waiting polls: they answer 503
        self._stop_listening(httpd, thread)
        if self._owns_data_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
        log.info("tinker_lite local server stopped")

    def pause_listening(self) -> None:
        """Close the listening socket and every open connection, keeping all state.

        Until :meth:`resume_listening`, connecting to the port is refused: what clients see
        while a server restarts, except that models, futures and checkpoints survive.
        """
        with self._lock:
            httpd, thread = self._httpd, self._thread
            if httpd is None:
                raise RuntimeError("LocalServer is not running; call start() first")
            if self._paused:
                return
            self._paused = True
            self._thread = None
        self._stop_listening(httpd, thread)
        log.info("tinker_lite local server paused (connections refused)")

    def resume_listening(self) -> None:
        """Listen again on the same port after :meth:`pause_listening`."""
        with self._lock:
            old, app = self._httpd, self._app
            if old is None or app is None:
                raise RuntimeError("LocalServer is not running; call start() first")
            if not self._paused:
                return
            self._listen(old.server_address[1])
            self._paused = False
        log.info("tinker_lite local server listening again on %s", self.base_url)

    def _listen(self, port: int) -> None:
        """Bind ``port`` and serve it on a background thread (call with the lock held)."""
        assert self._app is not None
        self._httpd = _HTTPServer((self.host, port), self._app)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="tinker-lite-local-server",
            daemon=True,
        )
        self._thread.start()

    @staticmethod
    def _stop_listening(httpd: _HTTPServer, thread: threading.Thread | None) -> None:
        httpd.stop(timeout=5.0)
        if thread is not None:
            thread.join(5.0)

    def set_faults(self, spec: str | None) -> None:
        """Replace the fault rules (None or "" clears them); enables ``/_local/faults``."""
        self._faults.set_spec(spec)
        self._faults_enabled = True
        if self._app is not None:
            self._app.faults_enabled = True

    def stats(self) -> dict[str, Any]:
        """The same JSON document as ``GET /_local/stats``."""
        if self._app is None:
            raise RuntimeError("LocalServer is not running")
        return self._app.stats()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def serve(  # noqa: PLR0917 (mirrors LocalServer)
    host: str = "127.0.0.1",
    port: int = 8000,
    data_dir: str | os.PathLike[str] | None = None,
    api_key: str | None = None,
    faults: str | None = None,
    jwt: bool = False,
    stub_model: bool = False,
    *,
    ready: Callable[[str], None] | None = None,
    **options: Any,
) -> None:
    """Run a server in the foreground until SIGINT or SIGTERM; ``ready`` gets the base URL."""
    server = LocalServer(host, port, data_dir, api_key, faults, jwt, stub_model, **options)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {}
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        base_url = server.start()
        if ready is not None:
            ready(base_url)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
