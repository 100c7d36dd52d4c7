"""A service-like script for the scripted loopback server, and helpers for the client tests.

:class:`FakeTinker` makes a :class:`ScriptedServer` answer every endpoint the clients use the way
the service does (submits answer ``{"request_id"}``, the first ``retrieve_future`` returns the
result), with the server-assigned ids of the golden fixtures (``sess-0001``, ``run-0001``, ...).
Tests queue their own actions on top (``server.on(...)``) to delay, fail or throttle requests;
:meth:`FakeTinker.handle` gives the normal answer to wrap.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tests.support.scripted_server import Recorded, Reply, Respond, ScriptedServer
from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._context import ClientContext
from tinker_lite._session.settings import resolve_settings
from tinker_lite.local.protocol import codecs as _codecs
from tinker_lite.service_client import ServiceClient

__all__ = [
    "API_KEY",
    "RUN",
    "SESSION",
    "FakeTinker",
    "ce_datum",
    "joined_threads_fixture",
    "seq_ids",
    "service_with",
]

API_KEY = "tml-test-key"
SESSION = "sess-0001"
RUN = "run-0001"

_POSTS = (
    "client/config",
    "create_session",
    "session_heartbeat",
    "telemetry",
    "create_model",
    "get_info",
    "forward",
    "forward_backward",
    "optim_step",
    "save_weights",
    "load_weights",
    "save_weights_for_sampler",
    "create_sampling_session",
    "asample",
    "retrieve_future",
    "weights_info",
    "unload_model",
)


def ce_datum(tokens: list[int], weights: list[float] | None = None) -> types.Datum:
    """A cross-entropy datum: input ``tokens[:-1]``, targets ``tokens[1:]``."""
    inputs: dict[str, Any] = {"target_tokens": tokens[1:]}
    if weights is not None:
        inputs["weights"] = weights
    return types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs)


def service_with(holder_options: Mapping[str, Any], **settings: Any) -> ServiceClient:
    """A ServiceClient whose session holder takes test-only options (injected sleep, clock,
    heartbeat and telemetry intervals); ``settings`` are ClientContext's connection settings."""
    resolved = resolve_settings(allow_local=True, **settings)
    return ServiceClient._on_context(ClientContext(resolved, holder_options=holder_options))


def seq_ids(requests: list[Recorded]) -> list[int]:
    """The ``seq_id`` of each recorded JSON request."""
    return [int(r.json()["seq_id"]) for r in requests]


class FakeTinker:
    """Answers like the Tinker service (see the module docstring)."""

    def __init__(
        self,
        server: ScriptedServer,
        *,
        client_config: dict[str, Any] | None = None,
        weights_info: bool = False,
    ) -> None:
        self.server = server
        self.client_config = client_config
        self.weights_info = weights_info
        self._lock = threading.Lock()
        self._request_ids = itertools.count(1)
        self._models = itertools.count(1)
        self._samplers = itertools.count(1)
        self._results: dict[str, Any] = {}
        for name in _POSTS:
            server.default("POST", f"/api/v1/{name}", Respond(self.handle))
        server.default("POST", f"/api/v1/sessions/{SESSION}/finish", Reply(204))
        server.default(
            "GET",
            "/api/v1/get_server_capabilities",
            Reply(200, {"supported_models": [{"model_name": "Qwen/Qwen3-8B"}]}),
        )
        for path in (
            f"/api/v1/training_runs/{RUN}",
            "/api/v1/training_runs",
            f"/api/v1/training_runs/{RUN}/checkpoints",
            "/api/v1/checkpoints",
            f"/api/v1/training_runs/{RUN}/checkpoints/weights/ckpt-001/archive",
            f"/api/v1/training_runs/{RUN}/checkpoints/weights/ckpt-001/publish",
            f"/api/v1/training_runs/{RUN}/checkpoints/weights/ckpt-001",
        ):
            for method in ("GET", "POST", "DELETE", "PUT"):
                server.default(method, path, Respond(self.handle_rest))

    # -- futures ---------------------------------------------------------------------------------

    def future(self, result: Any, *, model_id: str | None = None) -> Reply:
        """Store ``result`` under a new request id and answer the submit."""
        request_id = f"req-{next(self._request_ids):06d}"
        with self._lock:
            self._results[request_id] = result
        body: dict[str, Any] = {"request_id": request_id}
        if model_id is not None:
            body["model_id"] = model_id
        return Reply(200, body)

    def handle(self, r: Recorded) -> Reply:
        """The normal answer to a POST under /api/v1/."""
        name = r.path.removeprefix("/api/v1/")
        if (r.header("Content-Type") or "").startswith("application/x-protobuf"):
            return self.handle_protobuf(r)
        body = r.json() if r.body else {}
        if name == "client/config":
            if self.client_config is None:
                return Reply(404, {"detail": "Not Found"})
            return Reply(200, self.client_config)
        if name == "create_session":
            return Reply(200, {"session_id": SESSION, "type": "create_session"})
        if name in ("session_heartbeat", "telemetry"):
            return Reply(200, {"status": "accepted"} if name == "telemetry" else {})
        if name == "create_model":
            model_id = f"run-{next(self._models):04d}"
            return self.future({"model_id": model_id, "type": "create_model"}, model_id=model_id)
        if name == "get_info":
            return Reply(
                200,
                {
                    "model_id": body["model_id"],
                    "model_data": {"arch": "x", "model_name": "Qwen/Qwen3-8B"},
                    "is_lora": True,
                    "lora_rank": 32,
                    "model_name": "Qwen/Qwen3-8B",
                },
            )
        if name in ("forward", "forward_backward"):
            key = "forward_input" if name == "forward" else "forward_backward_input"
            return self.future(self.fb_output(body[key]["data"]), model_id=body["model_id"])
        if name == "optim_step":
            return self.future({"metrics": None}, model_id=body["model_id"])
        if name == "save_weights":
            return self.future({"path": f"tinker://{RUN}/weights/{body['path']}"})
        if name == "load_weights":
            return self.future({"path": body["path"]})
        if name == "save_weights_for_sampler":
            if "path" in body:
                return self.future({"path": f"tinker://{RUN}/sampler_weights/{body['path']}"})
            n = body["sampling_session_seq_id"]
            return self.future({"path": None, "sampling_session_id": f"{RUN}:ephemeral:{n}"})
        if name == "create_sampling_session":
            n = next(self._samplers)
            return Reply(200, {"sampling_session_id": f"{SESSION}:sample:{n}"})
        if name == "asample":
            return self.future(self.sample_output(body))
        if name == "weights_info":
            if not self.weights_info:
                return Reply(404, {"detail": "Not Found"})
            return Reply(
                200,
                {
                    "base_model": "Qwen/Qwen3-8B",
                    "is_lora": True,
                    "lora_rank": 8,
                    "train_mlp": False,
                },
            )
        if name == "retrieve_future":
            with self._lock:
                result = self._results.get(body["request_id"])
            if result is None:
                return Reply(410, {"detail": "expired"})
            return Reply(200, result)
        return Reply(404, {"detail": f"no fake for {name}"})

    def handle_protobuf(self, r: Recorded) -> Reply:
        """forward/forward_backward sent as protobuf (docs/protocol.rst §3.4); answered in JSON."""
        request = _codecs.decode_forward_backward_request(r.body)
        data = [_wire.to_builtins(datum) for datum in request.data]
        return self.future(self.fb_output(data), model_id=request.model_id)

    @staticmethod
    def fb_output(data: list[dict[str, Any]]) -> dict[str, Any]:
        outputs = []
        for datum in data:
            n = len(datum["loss_fn_inputs"]["target_tokens"]["data"])
            outputs.append({"logprobs": {"data": [-1.0] * n, "dtype": "float32", "shape": [n]}})
        return {
            "loss_fn_output_type": "CrossEntropyLossReturn",
            "loss_fn_outputs": outputs,
            "metrics": {"loss:sum": float(len(data))},
        }

    @staticmethod
    def sample_output(body: dict[str, Any]) -> dict[str, Any]:
        sequences = [
            {"stop_reason": "length", "tokens": [1, 2], "logprobs": [-0.5, -0.5]}
            for _ in range(body["num_samples"])
        ]
        out: dict[str, Any] = {"type": "sample", "sequences": sequences}
        if body.get("prompt_logprobs"):
            n = sum(len(c.get("tokens", [])) for c in body["prompt"]["chunks"])
            out["prompt_logprobs"] = [None] + [-1.0] * (n - 1)
        return out

    def handle_rest(self, r: Recorded) -> Reply:
        """The normal answer to the REST calls on ``run-0001`` / ``weights/ckpt-001``."""
        checkpoint = {
            "checkpoint_id": "weights/ckpt-001",
            "checkpoint_type": "training",
            "time": "2025-01-02T03:04:05Z",
            "tinker_path": f"tinker://{RUN}/weights/ckpt-001",
        }
        run = {
            "training_run_id": RUN,
            "base_model": "Qwen/Qwen3-8B",
            "model_owner": "me",
            "is_lora": True,
            "lora_rank": 32,
            "last_request_time": "2025-01-02T03:04:05Z",
            "user_metadata": {},
        }
        if r.path.endswith("/archive"):
            return Reply(
                302,
                headers={
                    "Location": "https://storage.example/archive.tar?sig=1",
                    "Expires": "Wed, 21 Oct 2026 07:28:00 GMT",
                },
            )
        if r.path.endswith("/publish") or r.method == "DELETE":
            return Reply(204)
        if r.path == f"/api/v1/training_runs/{RUN}":
            return Reply(200, run)
        if r.path == "/api/v1/training_runs":
            return Reply(
                200,
                {
                    "training_runs": [run],
                    "cursor": {"offset": 0, "limit": int(r.query["limit"]), "total_count": 1},
                },
            )
        if r.path.endswith("/checkpoints") and r.path != "/api/v1/checkpoints":
            return Reply(200, {"checkpoints": [checkpoint]})
        return Reply(
            200,
            {
                "checkpoints": [checkpoint],
                "cursor": {"offset": 0, "limit": int(r.query["limit"]), "total_count": 1},
            },
        )

    # -- helpers ---------------------------------------------------------------------------------

    def delayed(self, seconds: float) -> Respond:
        """An action answering normally after ``seconds`` (the server is slow, not the test)."""

        def respond(r: Recorded) -> Reply:
            time.sleep(seconds)
            return self.handle(r)

        return Respond(respond)

    def submits(self, *names: str) -> list[Recorded]:
        """Recorded requests to the given endpoints, in arrival order."""
        paths = {f"/api/v1/{name}" for name in names}
        return [r for r in self.server.requests() if r.path in paths]


@pytest.fixture(name="joined_threads")
def joined_threads_fixture() -> Callable[[], list[str]]:
    """Returns a function listing threads started since the test began (after joining them)."""
    baseline = set(threading.enumerate())

    def leftover() -> list[str]:
        extra = [t for t in threading.enumerate() if t not in baseline]
        for thread in extra:
            if thread.name.startswith("tinker-lite") or thread.daemon:
                thread.join(5.0)
        return [t.name for t in threading.enumerate() if t not in baseline and t.is_alive()]

    return leftover
