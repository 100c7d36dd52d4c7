"""A service-like scripted server for the golden-0.38 replay, and the request comparison.

:class:`GoldenService` makes a :class:`~tests.support.scripted_server.ScriptedServer` answer every
endpoint the official SDK 0.38 calls, with the ids of the capture in
``../shared/wire/golden-0.38/`` (``sess-0001``, ``run-0001``, ``req-000001``,
``<session>:sample:<n>``, ``<model>:ephemeral:<n>``; a model created by ``load_weights`` is
named ``<session>:train:<model_seq_id>`` by the client itself, the server only echoes it),
the ``client/config`` flags of the group being replayed, JWT exchange, metadata-only poll
answers, ``retrieve_futures`` batch polls, and protobuf results when a poll asks for them
(``Accept: application/x-protobuf``). It records which endpoint created each request id, so a
poll can be checked against the request its fixture ``refers_to``.

:func:`compare` lists how a recorded request differs from its fixture: method, path, query,
the headers that matter (case-insensitive names; ``User-Agent`` and ``x-stainless-*`` are the
official SDK's own; volatile ones by presence), the body key for key (server-assigned ids
masked, counters equal, floats as float32, maps as sets) and protobuf bodies field for field
after decoding (``body_decoded`` is the reference).
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import threading
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import numpy as np

from tests.support.golden import GOLDEN_038_DIR, VOLATILE_KEYS
from tests.support.proto import decode_to_dict, encode_decoded
from tests.support.scripted_server import Recorded, Reply, Respond, ScriptedServer

__all__ = [
    "API_KEY",
    "BACKGROUND_PATHS",
    "GoldenService",
    "best_match",
    "compare",
    "fixtures_by_step",
    "fresh_jwt",
    "golden_038_fixtures",
    "step_capacity",
]

API_KEY = "tml-test-key"
MASK = "<masked>"
PROTOBUF = "application/x-protobuf"
API = "/api/v1"

# Requests no public call sends: compared only in their own step (background fixtures).
BACKGROUND_PATHS = frozenset({f"{API}/session_heartbeat", f"{API}/telemetry"})

# Headers compared by value (names lower case); the fixture's volatile ones by presence.
COMPARED_HEADERS = frozenset(
    {
        "accept",
        "content-type",
        "content-encoding",
        "x-api-key",
        "x-sdk-version",
        "x-sdk-method",
        "x-idempotency-key",
    }
)
SKIPPED_HEADER_PREFIXES = ("user-agent", "x-stainless-")

# Poll results 0.38 wants as protobuf (golden-0.38 README, "Polling and sampling").
_PROTOBUF_RESULTS = frozenset({"forward_backward", "forward", "asample"})


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------


@cache
def _all_fixtures() -> tuple[str, ...]:
    if not GOLDEN_038_DIR.is_dir():
        return ()
    paths = sorted(GOLDEN_038_DIR.glob("*.json"))
    return tuple(path.read_text(encoding="utf-8") for path in paths)


def golden_038_fixtures() -> list[dict[str, Any]]:
    """Every golden-0.38 fixture (fresh dicts), in capture ``order``."""
    fixtures = [json.loads(text) for text in _all_fixtures()]
    return sorted(fixtures, key=lambda f: f["order"])


def fixtures_by_step() -> dict[str, list[dict[str, Any]]]:
    """Fixtures grouped by ``step``; steps and their fixtures in capture order."""
    steps: dict[str, list[dict[str, Any]]] = {}
    for fixture in golden_038_fixtures():
        steps.setdefault(fixture["step"], []).append(fixture)
    return steps


def step_capacity(steps: Mapping[str, list[dict[str, Any]]]) -> dict[str, int | None]:
    """The most requests each step can have sent in the capture (``order`` counts all of them).

    A step owns at most the orders between the previous step's last request and the next
    step's first one; ``None`` for the last step (no bound).
    """
    names = list(steps)
    capacity: dict[str, int | None] = {}
    for i, name in enumerate(names):
        low = steps[names[i - 1]][-1]["order"] if i else 0
        high = steps[names[i + 1]][0]["order"] if i + 1 < len(names) else None
        capacity[name] = None if high is None else high - low - 1
    return capacity


# ---------------------------------------------------------------------------------------------
# The service
# ---------------------------------------------------------------------------------------------


class GoldenService:
    """Answers like the Tinker service did during the capture (see the module docstring)."""

    def __init__(self, server: ScriptedServer, jwt: str) -> None:
        self.server = server
        self.jwt = jwt
        self.client_config: dict[str, Any] = {}
        self.metadata_first_samples = 0
        self._lock = threading.Lock()
        self._sessions = itertools.count(1)
        self._models = itertools.count(1)
        self._request_ids = itertools.count(1)
        self._join_counters = itertools.count(1)
        self._cursor = itertools.count(1)
        self._results: dict[str, tuple[str, Any]] = {}
        self.submitted_to: dict[str, str] = {}  # request id -> the path that created it
        self._metadata_pending: set[str] = set()
        self._pending_samples: dict[tuple[str, int], list[str]] = {}
        self.sessions: list[str] = []
        self.samplers: list[str] = []
        for name in (
            "client/config",
            "client/dynamic_config",
            "auth/token",
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
            "join_sampling_session",
            "asample",
            "retrieve_future",
            "retrieve_futures",
            "weights_info",
            "sessions/search",
        ):
            server.default("POST", f"{API}/{name}", Respond(self.handle))
        self._rest = Respond(self.handle_rest)

    # -- scripting -------------------------------------------------------------------------------

    def rest(self, method: str, path: str) -> None:
        """Answer ``method path`` (a REST path with ids known only during the replay)."""
        self.server.default(method, path, self._rest)

    def _future(self, r: Recorded, kind: str, result: Any) -> Reply:
        """Answer a submit with a new request id; ``result`` is what its polls get."""
        request_id = f"req-{next(self._request_ids):06d}"
        with self._lock:
            self._results[request_id] = (kind, result)
            self.submitted_to[request_id] = r.path
        return Reply(200, {"request_id": request_id})

    # -- answers ---------------------------------------------------------------------------------

    def handle(self, r: Recorded) -> Reply:
        """The answer to a POST under /api/v1/."""
        name = r.path.removeprefix(f"{API}/")
        if (r.header("Content-Type") or "").startswith(PROTOBUF):
            return self._protobuf_submit(r)
        body = r.json() if r.body else {}
        if name == "client/config":
            return Reply(200, dict(self.client_config))
        if name == "client/dynamic_config":
            return Reply(200, {"refresh_interval_sec": 300.0})
        if name == "auth/token":
            return Reply(200, {"jwt": self.jwt})
        if name == "create_session":
            session = f"sess-{next(self._sessions):04d}"
            self.sessions.append(session)
            return Reply(200, {"session_id": session, "type": "create_session"})
        if name == "session_heartbeat":
            return Reply(200, {"type": "session_heartbeat"})
        if name == "telemetry":
            return Reply(200, {"status": "accepted"})
        if name == "create_model":
            model_id = f"run-{next(self._models):04d}"
            return self._future(r, "create_model", {"model_id": model_id, "type": "create_model"})
        if name == "get_info":
            return Reply(200, _info(body.get("model_id", "")))
        if name in ("forward", "forward_backward"):
            key = "forward_input" if name == "forward" else "forward_backward_input"
            sizes = [_target_count_json(d) for d in body.get(key, {}).get("data", [])]
            return self._future(r, "forward_backward", sizes)
        if name == "optim_step":
            return self._future(r, "optim_step", {"metrics": {}, "type": "optim_step"})
        if name == "save_weights":
            path = f"tinker://{body.get('model_id')}/weights/{body.get('path')}"
            return self._future(r, "save_weights", {"path": path, "type": "save_weights"})
        if name == "load_weights":
            return self._future(
                r, "load_weights", {"path": body.get("path"), "type": "load_weights"}
            )
        if name == "save_weights_for_sampler":
            return self._future(r, "save_weights_for_sampler", _sampler_save(body))
        if name == "create_sampling_session":
            session = body.get("session_id", "")
            sampler = f"{session}:sample:{body.get('sampling_session_seq_id')}"
            self.samplers.append(sampler)
            return Reply(200, {"sampling_session_id": sampler, "type": "create_sampling_session"})
        if name == "join_sampling_session":
            counter = next(self._join_counters)
            return Reply(200, {"client_counter": counter, "type": "join_sampling_session"})
        if name == "asample":
            return self._sample(r, body)
        if name == "retrieve_future":
            return self._retrieve(r, body)
        if name == "retrieve_futures":
            return self._retrieve_futures(body)
        if name == "weights_info":
            return Reply(
                200,
                {
                    "base_model": "Qwen/Qwen3-8B",
                    "is_lora": True,
                    "lora_rank": 32,
                    "train_unembed": True,
                    "train_mlp": True,
                    "train_attn": True,
                },
            )
        if name == "sessions/search":
            return Reply(200, {"sessions": [], "next_cursor": None})
        return Reply(404, {"detail": f"no answer for {name}"})

    def _protobuf_submit(self, r: Recorded) -> Reply:
        body = r.body
        if (r.header("Content-Encoding") or "").lower() == "zstd":
            import zstandard

            body = zstandard.ZstdDecompressor().decompress(body, max_output_size=1 << 28)
        decoded = decode_to_dict("ForwardBackwardRequest", body)
        sizes = [_target_count_proto(d) for d in decoded.get("data", [])]
        return self._future(r, "forward_backward", sizes)

    def _sample(self, r: Recorded, body: Mapping[str, Any]) -> Reply:
        reply = self._future(r, "asample", dict(body))
        request_id = reply.json_body["request_id"]
        with self._lock:
            if self.metadata_first_samples:
                self.metadata_first_samples -= 1
                self._metadata_pending.add(request_id)
            # Completions belong to the sampler clone that sent them (seq_id // 1e9), as the
            # service and tinker_lite.local keep them.
            clone = int(body.get("seq_id") or 0) // 1_000_000_000
            key = (str(body.get("sampling_session_id")), clone)
            self._pending_samples.setdefault(key, []).append(request_id)
        reply.json_body["sample_sequence_ids"] = [
            f"{request_id}:{i}" for i in range(int(body.get("num_samples", 1)))
        ]
        return reply

    def _retrieve(self, r: Recorded, body: Mapping[str, Any]) -> Reply:
        request_id = str(body.get("request_id"))
        with self._lock:
            stored = self._results.get(request_id)
            metadata_first = request_id in self._metadata_pending
            self._metadata_pending.discard(request_id)
        if stored is None:
            return Reply(410, {"detail": f"unknown request {request_id}"})
        kind, result = stored
        protobuf = kind in _PROTOBUF_RESULTS and PROTOBUF in (r.header("Accept") or "")
        payload = _result_payload(kind, result, protobuf=protobuf)
        if metadata_first:
            return Reply(
                200, {"status": "complete_metadata", "response_payload_size": len(payload)}
            )
        return Reply(200, body=payload, content_type=PROTOBUF if protobuf else "application/json")

    def _retrieve_futures(self, body: Mapping[str, Any]) -> Reply:
        target = body.get("target") or {}
        key = (str(target.get("sampling_session_id")), int(target.get("cloned_sampler_id") or 0))
        with self._lock:
            pending = self._pending_samples.pop(key, [])
        completions = []
        for request_id in pending:
            kind, result = self._results[request_id]
            size = len(_result_payload(kind, result, protobuf=True))
            completions.append(
                {
                    "state": "finished",
                    "request_id": request_id,
                    "response_payload_uncompressed_size": size,
                }
            )
        return Reply(200, {"completions": completions, "cursor": next(self._cursor)})

    def handle_rest(self, r: Recorded) -> Reply:
        """The answer to a REST call (training runs, checkpoints, samplers, sessions)."""
        path = r.path.removeprefix(f"{API}/")
        parts = path.split("/")
        if r.method in ("DELETE", "PUT") or path.endswith("/publish"):
            return Reply(204)
        if parts[0] == "samplers":
            return Reply(
                200,
                {"sampler_id": parts[1], "base_model": "Qwen/Qwen3-8B", "model_path": None},
            )
        if path == "get_server_capabilities":
            return Reply(200, {"supported_models": [{"model_name": "Qwen/Qwen3-8B"}]})
        if path == "training_runs":
            return Reply(200, {"training_runs": [_run()], "cursor": _cursor(r)})
        if parts[0] == "training_runs" and len(parts) == 2:
            return Reply(200, _run())
        if path.endswith("/checkpoints"):
            return Reply(200, {"checkpoints": [_checkpoint()]})
        if path == "checkpoints":
            return Reply(200, {"checkpoints": [_checkpoint()], "cursor": _cursor(r)})
        if path == "sessions":
            return Reply(200, {"sessions": list(self.sessions), "cursor": _cursor(r)})
        if parts[0] == "sessions" and len(parts) == 3 and parts[2] == "trace_export":
            return Reply(200, {"status": "ready", "url": "https://storage.example/trace.json"})
        if parts[0] == "sessions" and len(parts) == 2:
            return Reply(200, {"training_run_ids": ["run-0001"], "sampler_ids": self.samplers})
        return Reply(404, {"detail": f"no answer for {r.method} {path}"})


def _info(model_id: str) -> dict[str, Any]:
    return {
        "model_id": model_id,
        "model_data": {"arch": "qwen3", "model_name": "Qwen/Qwen3-8B"},
        "is_lora": True,
        "lora_rank": 32,
        "model_name": "Qwen/Qwen3-8B",
        "type": "get_info",
    }


def _run() -> dict[str, Any]:
    return {
        "training_run_id": "run-0001",
        "base_model": "Qwen/Qwen3-8B",
        "model_owner": "me",
        "is_lora": True,
        "lora_rank": 32,
        "last_request_time": "2026-01-02T03:04:05Z",
        "user_metadata": {},
    }


def _checkpoint() -> dict[str, Any]:
    return {
        "checkpoint_id": "weights/ckpt-001",
        "checkpoint_type": "training",
        "time": "2026-01-02T03:04:05Z",
        "tinker_path": "tinker://run-0001/weights/ckpt-001",
    }


def _cursor(r: Recorded) -> dict[str, int]:
    return {"offset": int(r.query.get("offset", 0)), "limit": 20, "total_count": 1}


def _sampler_save(body: Mapping[str, Any]) -> dict[str, Any]:
    model_id = body.get("model_id")
    if body.get("path") is not None:
        return {
            "path": f"tinker://{model_id}/sampler_weights/{body['path']}",
            "type": "save_weights_for_sampler",
        }
    seq = body.get("sampling_session_seq_id")
    return {
        "sampling_session_id": f"{model_id}:ephemeral:{seq}",
        "type": "save_weights_for_sampler",
    }


def _target_count_json(datum: Mapping[str, Any]) -> int:
    target = datum.get("loss_fn_inputs", {}).get("target_tokens")
    if isinstance(target, Mapping):
        return len(target.get("data", []))
    return len(target or [])


def _target_count_proto(datum: Mapping[str, Any]) -> int:
    target = datum.get("loss_fn_inputs", {}).get("target_tokens", {})
    dense = target.get("dense", {})
    return sum(len(values) for values in dense.values())


def _result_payload(kind: str, result: Any, *, protobuf: bool) -> bytes:
    if kind == "forward_backward":
        return _fb_proto(result) if protobuf else json.dumps(_fb_json(result)).encode()
    if kind == "asample":
        return _sample_proto(result) if protobuf else json.dumps(_sample_json(result)).encode()
    return json.dumps(result).encode()


def _fb_json(sizes: list[int]) -> dict[str, Any]:
    outputs = [{"logprobs": {"data": [-1.0] * n, "dtype": "float32", "shape": [n]}} for n in sizes]
    return {
        "loss_fn_output_type": "CrossEntropyLossReturn",
        "loss_fn_outputs": outputs,
        "metrics": {"loss:sum": float(sum(sizes))},
    }


def _fb_proto(sizes: list[int]) -> bytes:
    offsets = [0, *itertools.accumulate(4 * n for n in sizes)]
    record = {
        "fields": {
            "logprobs": {
                "data": {"float32le": [-1.0] * sum(sizes)},
                "offsets": {"int64le": offsets},
                "dtype": "DTYPE_FLOAT32",
            }
        },
        "num_datums": len(sizes),
    }
    message = {
        "loss_fn_output_type": "CrossEntropyLossReturn",
        "loss_fn_outputs": [record] if sizes else [],
        "metrics": {"loss:sum": float(sum(sizes))},
    }
    return encode_decoded("ForwardBackwardOutput", message)


def _prompt_length(body: Mapping[str, Any]) -> int:
    chunks = body.get("prompt", {}).get("chunks", [])
    return sum(len(c.get("tokens", [])) if "tokens" in c else 0 for c in chunks)


def _sample_json(body: Mapping[str, Any]) -> dict[str, Any]:
    sequences = [
        {"stop_reason": "length", "tokens": [1, 2], "logprobs": [-0.5, -0.5]}
        for _ in range(int(body.get("num_samples", 1)))
    ]
    out: dict[str, Any] = {"type": "sample", "sequences": sequences}
    if body.get("prompt_logprobs"):
        out["prompt_logprobs"] = [None] + [-1.0] * (_prompt_length(body) - 1)
    return out


def _sample_proto(body: Mapping[str, Any]) -> bytes:
    sequences = [
        {
            "stop_reason": "STOP_REASON_LENGTH",
            "tokens": {"int32le": [1, 2]},
            "logprobs": {"float32le": [-0.5, -0.5]},
        }
        for _ in range(int(body.get("num_samples", 1)))
    ]
    message: dict[str, Any] = {"sequences": sequences}
    if body.get("prompt_logprobs"):
        n = _prompt_length(body)
        message["prompt_logprobs"] = {"float32le": [math.nan] + [-1.0] * (n - 1)}
    return encode_decoded("SampleResponse", message)


# ---------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------


def _normalise(value: Any, volatile: frozenset[str], key: str | None = None) -> Any:
    if isinstance(value, Mapping):
        return {k: MASK if k in volatile else _normalise(v, volatile, k) for k, v in value.items()}
    if isinstance(value, list):
        if key == "float32le":
            return [_f32(v) for v in value]
        return [_normalise(item, volatile) for item in value]
    return value


def _f32(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        as32 = float(np.float32(value))
        return "nan" if math.isnan(as32) else as32
    return value


def _diff(expected: Any, actual: Any, path: str, out: list[str]) -> None:
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        for key in expected:
            if key not in actual:
                out.append(f"{path}.{key}: missing (0.38 sends {_short(expected[key])})")
            else:
                _diff(expected[key], actual[key], f"{path}.{key}", out)
        for key in actual:
            if key not in expected:
                out.append(f"{path}.{key}: extra key ({_short(actual[key])})")
        return
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            out.append(f"{path}: {len(actual)} items, 0.38 sends {len(expected)}")
            return
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _diff(e, a, f"{path}[{i}]", out)
        return
    if not _scalar_equal(expected, actual):
        out.append(f"{path}: {_short(actual)} != 0.38's {_short(expected)}")


def _scalar_equal(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(actual, numbers):
        if isinstance(expected, int) and isinstance(actual, int):
            return expected == actual
        # floats compared as float32 (README "Comparing", rule 5)
        return bool(np.float32(expected) == np.float32(actual))
    return bool(expected == actual)


def _short(value: Any) -> str:
    return json.dumps(value, default=str)[:80]


def _decoded_body(fixture: Mapping[str, Any], recorded: Recorded, out: list[str]) -> Any:
    body = recorded.body
    encoding = (recorded.header("Content-Encoding") or "").lower()
    if encoding == "zstd":
        try:
            import zstandard
        except ImportError:  # pragma: no cover - zstandard is in the dev extra
            out.append("body: zstd body and zstandard is not installed")
            return None
        body = zstandard.ZstdDecompressor().decompress(body, max_output_size=1 << 28)
    if not (recorded.header("Content-Type") or "").startswith(PROTOBUF):
        out.append("body: sent as JSON, 0.38 sends protobuf")
        return None
    try:
        return decode_to_dict(fixture["body_decoded_message"].rsplit(".", 1)[-1], body)
    except Exception as e:
        out.append(f"body: not a decodable protobuf message ({e})")
        return None


def compare(
    fixture: Mapping[str, Any],
    recorded: Recorded,
    *,
    aliases: Mapping[str, str] | None = None,
    submitted_to: Mapping[str, str] | None = None,
) -> list[str]:
    """How ``recorded`` differs from ``fixture`` (empty when it matches).

    ``aliases`` maps a captured header value to the value this replay's server gave out
    (the JWT); ``submitted_to`` maps the server's request ids to the path that created them,
    so that a poll must poll the request its fixture ``refers_to``.
    """
    out: list[str] = []
    if (recorded.method, recorded.path) != (fixture["method"], fixture["path"]):
        out.append(f"sent {recorded.method} {recorded.path}")
        return out
    if recorded.query != fixture["query"]:
        out.append(f"query {recorded.query} != 0.38's {fixture['query']}")
    out.extend(_header_diffs(fixture, recorded, aliases or {}))
    volatile = VOLATILE_KEYS | frozenset(fixture.get("volatile_body_keys", ()))
    if fixture.get("body_decoded") is not None:
        ours = _decoded_body(fixture, recorded, out)
        if ours is not None:
            _diff(
                _normalise(fixture["body_decoded"], volatile),
                _normalise(ours, volatile),
                "body",
                out,
            )
        return out
    expected_body = fixture["body"]
    if not recorded.body:
        if expected_body is not None:
            out.append("body: none sent, 0.38 sends one")
        return out
    if expected_body is None:
        out.append(f"body: sent {recorded.body[:60]!r}, 0.38 sends none")
        return out
    try:
        ours = json.loads(recorded.body)
    except ValueError:
        out.append("body: not JSON")
        return out
    _diff(_normalise(expected_body, volatile), _normalise(ours, volatile), "body", out)
    refers_to = fixture.get("refers_to")
    if refers_to is not None and submitted_to is not None and isinstance(ours, dict):
        polled = submitted_to.get(str(ours.get("request_id")))
        if polled != refers_to["path"]:
            out.append(f"body.request_id: polls a {polled} request, 0.38 polls {refers_to['path']}")
    return out


def _header_diffs(
    fixture: Mapping[str, Any], recorded: Recorded, aliases: Mapping[str, str]
) -> list[str]:
    expected = {k.lower(): aliases.get(v, v) for k, v in fixture["headers"].items()}
    volatile = {h.lower() for h in fixture.get("volatile_headers", ())}
    ours: dict[str, list[str]] = {}
    for name, value in recorded.raw_headers:
        ours.setdefault(name.lower(), []).append(value)
    out = []
    names = {n for n in set(expected) | set(ours) if _compared_header(n)}
    for name in sorted(names):
        if name not in ours:
            out.append(f"header {name}: missing (0.38 sends {expected[name]!r})")
        elif name not in expected:
            out.append(f"header {name}: extra ({ours[name][0]!r})")
        elif name not in volatile and ours[name] != [expected[name]]:
            out.append(f"header {name}: {ours[name]} != 0.38's {expected[name]!r}")
    return out


def _compared_header(name: str) -> bool:
    if name.startswith(SKIPPED_HEADER_PREFIXES):
        return False
    return name in COMPARED_HEADERS or name.startswith("x-tinker-")


def best_match(
    fixture: Mapping[str, Any],
    candidates: Iterable[Recorded],
    *,
    aliases: Mapping[str, str] | None = None,
    submitted_to: Mapping[str, str] | None = None,
) -> tuple[int, list[str]]:
    """The index of the candidate that differs least from ``fixture``, and its differences.

    ``(-1, [reason])`` when no candidate has the fixture's method and path.
    """
    best: tuple[int, list[str]] | None = None
    for index, recorded in enumerate(candidates):
        if (recorded.method, recorded.path) != (fixture["method"], fixture["path"]):
            continue
        diffs = compare(fixture, recorded, aliases=aliases, submitted_to=submitted_to)
        if best is None or len(diffs) < len(best[1]):
            best = (index, diffs)
        if not diffs:
            break
    if best is None:
        return -1, [f"no {fixture['method']} {fixture['path']} sent"]
    return best


def fresh_jwt(captured: str, now: float) -> str:
    """The captured JWT with the same claims, issued at ``now`` and valid for an hour.

    The capture's token has long expired; a client would refresh it before every request.
    """
    header, payload, signature = captured.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims.update(iat=int(now), exp=int(now) + 3600)
    encoded = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{header}.{encoded}.{signature}"
