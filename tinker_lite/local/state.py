"""Server-side state of the local Tinker service: sessions, models, samplers, futures, checkpoints.

Everything here is transport-free: the HTTP layer (:mod:`tinker_lite.local.server`) parses and
validates a request into a ``types`` object, calls one method of :class:`ServerState`, and encodes
what it returns. Submits return at once with an ``UntypedAPIFuture``; the work runs on a worker
thread (one per training model, executing its requests strictly in ``seq_id`` order, SERVER.md §8)
or on the sampling pool, and completes a :class:`~tinker_lite.local._futures.FutureEntry`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from tinker_lite import types
from tinker_lite._errors import TinkerError
from tinker_lite.local import model as model_mod
from tinker_lite.local._checkpoints import (
    CheckpointError,
    CheckpointRecord,
    CheckpointStore,
    RunRecord,
    TinkerPath,
    parse_tinker_path,
)
from tinker_lite.local._futures import FutureEntry, FutureStore

__all__ = ["SUPPORTED_MODELS", "HTTPError", "ServerState"]

log = logging.getLogger("tinker_lite.local")

# Names listed by get_server_capabilities; any base_model string is accepted and maps to TinyLM.
SUPPORTED_MODELS = (
    "tinker-lite/tiny-64",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-4B-Instruct-2507",
    "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.1-8B",
)

# SERVER.md §1.0: the live service names the cross-entropy output record "CrossEntropyLossReturn";
# the names for the other losses are not documented, these follow the same pattern.
_OUTPUT_TYPES = {
    "cross_entropy": "CrossEntropyLossReturn",
    "importance_sampling": "ImportanceSamplingLossReturn",
    "ppo": "PPOLossReturn",
    "cispo": "CISPOLossReturn",
    "dro": "DROLossReturn",
}


class HTTPError(Exception):
    """Answer the current request with ``status`` and a JSON body ``{"detail": detail}``."""

    def __init__(self, status: int, detail: Any, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.headers = dict(headers or {})


class UserError(Exception):
    """A request failed because of its input: the future fails with category "user"."""


@dataclass(frozen=True)
class LoraSpec:
    """The LoRA settings a model was created with."""

    rank: int = 32
    seed: int | None = None
    train_unembed: bool = True
    train_mlp: bool = True
    train_attn: bool = True

    def info(self, base_model: str) -> dict[str, Any]:
        """As stored beside a checkpoint (what weights_info and from-state creation read)."""
        return {
            "base_model": base_model,
            "lora_rank": self.rank,
            "seed": self.seed,
            "train_unembed": self.train_unembed,
            "train_mlp": self.train_mlp,
            "train_attn": self.train_attn,
        }

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> LoraSpec:
        """Read the LoRA settings stored beside a checkpoint."""
        seed = info.get("seed")
        return cls(
            rank=int(info.get("lora_rank", 32)),
            seed=None if seed is None else int(seed),
            train_unembed=bool(info.get("train_unembed", True)),
            train_mlp=bool(info.get("train_mlp", True)),
            train_attn=bool(info.get("train_attn", True)),
        )


def _check_lora(lora: LoraSpec) -> None:
    # SERVER.md §6: the service's 400s for a bad LoRA config.
    if lora.rank <= 0:
        raise HTTPError(400, "lora_config.rank must be positive")
    if lora.rank & (lora.rank - 1):
        raise HTTPError(400, "lora_config.rank must be a power of 2")
    if not (lora.train_unembed or lora.train_mlp or lora.train_attn):
        raise HTTPError(400, "At least one of train_unembed, train_mlp, or train_attn must be True")


@dataclass
class _Session:
    session_id: str
    created: float
    tags: list[str]
    user_metadata: dict[str, Any] | None
    sdk_version: str
    last_heartbeat: float
    finished: bool = False
    training_run_ids: list[str] = field(default_factory=list)
    sampler_ids: list[str] = field(default_factory=list)


@dataclass
class _Job:
    seq_id: int | None
    kind: str
    entry: FutureEntry
    run: Callable[[_ModelState], Any]


@dataclass(frozen=True)
class _Accepted:
    """A seq_id taken by a queued or applied request (its resends get the same future)."""

    kind: str
    request_id: str


@dataclass(frozen=True)
class _Rejection:
    """A seq_id consumed by a request answered with an HTTP error (its resends get it again)."""

    status: int
    detail: Any


class _ModelState:
    """One training model: its LM, its seq_id ordering and its worker thread."""

    def __init__(
        self,
        model_id: str,
        session_id: str,
        base_model: str,
        lora: LoraSpec,
        user_metadata: dict[str, Any] | None,
    ) -> None:
        self.model_id = model_id
        self.session_id = session_id
        self.base_model = base_model
        self.lora = lora
        self.user_metadata = user_metadata
        self.lm: model_mod.TinyLM | None = None
        self.create_error: str | None = None
        self.unloaded = False
        self.lock = threading.Lock()
        self.next_seq = 0
        self.by_seq: dict[int, _Accepted | _Rejection] = {}
        # held until every lower seq_id has arrived; None marks a rejected seq_id
        self.pending: dict[int, _Job | None] = {}
        self.queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.applied: list[dict[str, Any]] = []
        self.worker: threading.Thread | None = None

    def waiting_reason(self, seq_id: int) -> Callable[[], str | None]:
        """A callable telling why request ``seq_id`` has not run yet (for try_again)."""

        def reason() -> str | None:
            with self.lock:
                if seq_id in self.pending and self.next_seq < seq_id:
                    return (
                        f"waiting for seq_id {self.next_seq} of model {self.model_id} "
                        "(requests run strictly in seq_id order)"
                    )
            return None

        return reason


class _Sampler:
    """A sampling session: base model or saved weights, with its LM built on first use."""

    def __init__(
        self,
        sampler_id: str,
        session_id: str | None,
        *,
        base_model: str,
        model_path: str | None = None,
        lora: LoraSpec | None = None,
        adapter: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        self.sampler_id = sampler_id
        self.session_id = session_id
        self.base_model = base_model
        self.model_path = model_path
        self.lora = lora
        self.adapter = adapter
        self.error = error
        self.lock = threading.Lock()
        self.lm: model_mod.TinyLM | None = None


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


class ServerState:
    """All state of one local server; every public method is safe to call from any thread."""

    def __init__(
        self,
        *,
        data_dir: Path,
        clock: Callable[[], float] = time.time,
        stub_model: bool = False,
        result_ttl: float = 3600.0,
        sample_workers: int = 4,
    ) -> None:
        self.clock = clock
        self.stub_model = stub_model
        self.futures = FutureStore(result_ttl, clock)
        self.checkpoints = CheckpointStore(data_dir, clock)
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._models: dict[str, _ModelState] = {}
        self._samplers: dict[str, _Sampler] = {}
        self._sample_dedup: dict[tuple[str, int], str] = {}
        self._base_lms: dict[str, model_mod.TinyLM] = {}
        self._sample_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, sample_workers), thread_name_prefix="tinker-lite-local-sample"
        )
        self._closed = False
        self._stats_lock = threading.Lock()
        self.request_counts: Counter[str] = Counter()
        self.status_counts: dict[str, Counter[int]] = {}
        self.samples_submitted = 0
        self.samples_completed = 0
        self.telemetry_events = 0
        self.telemetry_batches = 0
        # The last telemetry bodies received, as sent (for tests that inspect what clients send).
        self.telemetry_bodies: deque[bytes] = deque(maxlen=1000)

    # -- models ---------------------------------------------------------------------------------

    def make_lm(self, base_model: str, lora: LoraSpec) -> model_mod.TinyLM:
        """Build the model behind ``base_model`` (TinyLM, or its instant stub)."""
        build = model_mod.TinyLM.stub if self.stub_model else model_mod.TinyLM
        return build(
            base_model,
            rank=lora.rank,
            seed=lora.seed,
            train_attn=lora.train_attn,
            train_mlp=lora.train_mlp,
            train_unembed=lora.train_unembed,
        )

    # -- stats ----------------------------------------------------------------------------------

    def count_request(self, path: str) -> None:
        """Count one received HTTP request for ``path``."""
        with self._stats_lock:
            self.request_counts[path] += 1

    def count_status(self, path: str, status: int) -> None:
        """Count one answered HTTP request by status."""
        with self._stats_lock:
            self.status_counts.setdefault(path, Counter())[status] += 1

    def stats(self) -> dict[str, Any]:
        """The server's counters as JSON-able builtins (see the package docstring)."""
        models: dict[str, Any] = {}
        with self._lock:
            model_list = list(self._models.values())
            sessions = list(self._sessions.values())
        for m in model_list:
            with m.lock:
                models[m.model_id] = {
                    "base_model": m.base_model,
                    "applied": [dict(a) for a in m.applied],
                    "applied_count": len(m.applied),
                    "next_seq_id": m.next_seq,
                    "waiting_seq_ids": sorted(m.pending),
                    "unloaded": m.unloaded,
                }
        with self._stats_lock:
            return {
                "requests": dict(self.request_counts),
                "responses": {
                    path: {str(k): v for k, v in sorted(c.items())}
                    for path, c in self.status_counts.items()
                },
                "models": models,
                "samples_submitted": self.samples_submitted,
                "samples_completed": self.samples_completed,
                "telemetry_events": self.telemetry_events,
                "telemetry_batches": self.telemetry_batches,
                "active_sessions": sum(1 for s in sessions if not s.finished),
                "sessions": len(sessions),
                "futures": {
                    "stored": len(self.futures),
                    "pending": len(self.futures.pending()),
                    "completed": self.futures.completed_count,
                },
            }

    # -- sessions -------------------------------------------------------------------------------

    def create_session(self, req: types.CreateSessionRequest) -> types.CreateSessionResponse:
        """Open a session."""
        now = self.clock()
        session = _Session(
            session_id=f"sess-{uuid.uuid4()}",
            created=now,
            tags=list(req.tags),
            user_metadata=req.user_metadata,
            sdk_version=req.sdk_version,
            last_heartbeat=now,
        )
        with self._lock:
            self._sessions[session.session_id] = session
        log.debug("session %s created (sdk %s)", session.session_id, req.sdk_version)
        return types.CreateSessionResponse(session_id=session.session_id)

    def _session(self, session_id: str) -> _Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise HTTPError(404, f"Invalid session_id: session {session_id!r} not found")
        return session

    def heartbeat(self, req: types.SessionHeartbeatRequest) -> types.SessionHeartbeatResponse:
        """Record a heartbeat."""
        session = self._session(req.session_id)
        session.last_heartbeat = self.clock()
        return types.SessionHeartbeatResponse()

    def finish_session(self, session_id: str, req: types.SessionFinishRequest) -> None:
        """Mark a session finished (its models and checkpoints stay available)."""
        session = self._session(session_id)
        session.finished = True
        log.debug("session %s finished: %s", session_id, req.reason.type)

    def list_sessions(self, limit: int, offset: int) -> types.ListSessionsResponse:
        """Session ids, newest first."""
        with self._lock:
            ordered = sorted(self._sessions.values(), key=lambda s: s.created, reverse=True)
        page = ordered[offset : offset + limit]
        return types.ListSessionsResponse(
            sessions=[s.session_id for s in page],
            cursor=types.Cursor(offset=offset, limit=limit, total_count=len(ordered)),
        )

    def get_session(self, session_id: str) -> types.GetSessionResponse:
        """The training runs and samplers of one session."""
        session = self._session(session_id)
        with self._lock:
            return types.GetSessionResponse(
                training_run_ids=list(session.training_run_ids),
                sampler_ids=list(session.sampler_ids),
            )

    def count_telemetry(self, events: int, body: bytes = b"") -> None:
        """Count a received telemetry batch (its body is kept in ``telemetry_bodies``)."""
        with self._stats_lock:
            self.telemetry_batches += 1
            self.telemetry_events += events
            self.telemetry_bodies.append(body)

    # -- model lifecycle ------------------------------------------------------------------------

    def _model(self, model_id: str) -> _ModelState:
        with self._lock:
            model = self._models.get(model_id)
        if model is None:
            raise HTTPError(404, f"Model not found: {model_id!r}")
        if model.unloaded:
            raise HTTPError(404, f"Model {model_id!r} was unloaded")
        return model

    def _new_model(
        self,
        session: _Session,
        *,
        model_seq_id: int,
        base_model: str,
        lora: LoraSpec,
        user_metadata: dict[str, Any] | None,
        create_kind: str,
        create: Callable[[_ModelState], Any],
    ) -> tuple[_ModelState, str]:
        """Register a model (seq 0 = its creation) or return the existing one's seq-0 future."""
        model_id = f"{session.session_id}:train:{model_seq_id}"
        with self._lock:
            if self._closed:  # no worker thread may start after close()
                raise HTTPError(503, "The local server is shutting down")
            existing = self._models.get(model_id)
            if existing is not None:
                first = existing.by_seq.get(0)
                if isinstance(first, _Accepted):
                    return existing, first.request_id
                raise HTTPError(409, f"Model {model_id!r} already exists")
            model = _ModelState(model_id, session.session_id, base_model, lora, user_metadata)
            self._models[model_id] = model
            session.training_run_ids.append(model_id)
        now = self.clock()
        self.checkpoints.register_run(
            RunRecord(
                run_id=model_id,
                base_model=base_model,
                lora_rank=lora.rank,
                train_unembed=lora.train_unembed,
                train_mlp=lora.train_mlp,
                train_attn=lora.train_attn,
                session_id=session.session_id,
                user_metadata=user_metadata,
                created=now,
                last_request_time=now,
            )
        )
        model.worker = threading.Thread(
            target=self._model_worker,
            args=(model,),
            name=f"tinker-lite-model-{model_seq_id}",
            daemon=True,
        )
        model.worker.start()
        entry = self._enqueue(model, 0, create_kind, create)
        return model, entry.request_id

    def create_model(self, req: types.CreateModelRequest) -> types.UntypedAPIFuture:
        """Create a LoRA training model; its creation is the model's seq_id 0."""
        session = self._session(req.session_id)
        if not req.base_model:
            raise HTTPError(400, "base_model is required")
        cfg = req.lora_config or types.LoraConfig()
        lora = LoraSpec(cfg.rank, cfg.seed, cfg.train_unembed, cfg.train_mlp, cfg.train_attn)
        _check_lora(lora)
        if req.optimizer_config is not None:
            kind = req.optimizer_config.get("type", "adamw")
            if kind != "adamw":
                raise HTTPError(400, f"optimizer_config.type: unsupported optimizer {kind!r}")

        def build(model: _ModelState) -> types.CreateModelResponse:
            model.lm = self.make_lm(model.base_model, model.lora)
            return types.CreateModelResponse(model_id=model.model_id)

        model, request_id = self._new_model(
            session,
            model_seq_id=req.model_seq_id,
            base_model=req.base_model,
            lora=lora,
            user_metadata=req.user_metadata,
            create_kind="create_model",
            create=build,
        )
        return types.UntypedAPIFuture(request_id=request_id, model_id=model.model_id)

    def get_info(self, req: types.GetInfoRequest) -> types.GetInfoResponse:
        """Describe a model (answered directly, not through a future)."""
        model = self._model(req.model_id)
        return types.GetInfoResponse(
            model_id=model.model_id,
            model_data=types.ModelData(
                arch="tinylm",
                model_name=model.base_model,
                tokenizer_id=model_mod.TOKENIZER_ID,
            ),
            is_lora=True,
            lora_rank=model.lora.rank,
            model_name=model.base_model,
        )

    def unload_model(self, req: types.UnloadModelRequest) -> types.UntypedAPIFuture:
        """Unload a model after the requests already queued for it."""
        model = self._model(req.model_id)

        def unload(m: _ModelState) -> types.UnloadModelResponse:
            m.lm = None
            m.unloaded = True
            with m.lock:
                # requests held for a missing lower seq_id can never run now
                held = [job.entry for job in m.pending.values() if job is not None]
                m.pending.clear()
            for held_entry in held:
                self.futures.fail(held_entry, f"Model {m.model_id} was unloaded", "user")
            return types.UnloadModelResponse(model_id=m.model_id)

        entry = self.futures.create()
        model.queue.put(_Job(None, "unload_model", entry, unload))
        return types.UntypedAPIFuture(request_id=entry.request_id, model_id=model.model_id)

    # -- ordering -------------------------------------------------------------------------------

    def _enqueue(
        self,
        model: _ModelState,
        seq_id: int | None,
        kind: str,
        run: Callable[[_ModelState], Any],
        reject: Callable[[], None] | None = None,
    ) -> FutureEntry:
        """Queue a training request in seq_id order, de-duplicating repeated seq_ids.

        ``reject`` runs first (under the model lock); an HTTPError it raises consumes the seq_id,
        so later requests are not held forever, and a resend of that seq_id gets the same answer.
        """
        with model.lock:
            if seq_id is not None:
                prior = model.by_seq.get(seq_id)
                if isinstance(prior, _Rejection):
                    raise HTTPError(prior.status, prior.detail)
                if prior is not None:
                    if prior.kind != kind:
                        raise HTTPError(
                            400,
                            f"seq_id {seq_id} of model {model.model_id} was already used by its "
                            f"{prior.kind} request; each training request takes the next seq_id",
                        )
                    # SERVER.md §8: a resend of the same seq_id is the same request, applied once;
                    # when its result expired, polls of its id get 410
                    return self.futures.get(prior.request_id) or FutureEntry(prior.request_id)
                if reject is not None:
                    try:
                        reject()
                    except HTTPError as e:
                        model.by_seq[seq_id] = _Rejection(e.status, e.detail)
                        model.pending[seq_id] = None
                        self._advance(model)
                        raise
            entry = self.futures.create()
            job = _Job(seq_id, kind, entry, run)
            if seq_id is None:
                model.queue.put(job)
            else:
                model.by_seq[seq_id] = _Accepted(kind, entry.request_id)
                model.pending[seq_id] = job
                entry.waiting_reason = model.waiting_reason(seq_id)
                self._advance(model)
        return entry

    @staticmethod
    def _advance(model: _ModelState) -> None:
        while model.next_seq in model.pending:
            job = model.pending.pop(model.next_seq)
            model.next_seq += 1
            if job is not None:
                model.queue.put(job)

    def _model_worker(self, model: _ModelState) -> None:
        while True:
            job = model.queue.get()
            if job is None:
                return
            entry = job.entry
            ok = False
            try:
                if job.kind not in ("create_model", "create_via_load") and model.lm is None:
                    if model.unloaded:
                        raise UserError(f"Model {model.model_id} was unloaded")
                    raise UserError(
                        f"Model {model.model_id} could not be created: {model.create_error}"
                    )
                result = job.run(model)
            except Exception as exc:
                error, category = _classify(exc)
                if job.kind in ("create_model", "create_via_load"):
                    model.create_error = error
                self.futures.fail(entry, error, category)
            else:
                ok = True
                self.futures.complete(entry, result)
                if job.kind == "unload_model":
                    model.queue.put(None)  # nothing can be queued for it any more
            finally:
                with model.lock:
                    model.applied.append(
                        {
                            "seq_id": job.seq_id,
                            "kind": job.kind,
                            "request_id": entry.request_id,
                            "ok": ok,
                        }
                    )
                self.checkpoints.touch_run(model.model_id)

    # -- training requests ----------------------------------------------------------------------

    def forward_backward(
        self,
        model_id: str,
        seq_id: int | None,
        data: Sequence[types.Datum],
        loss_fn: str,
        loss_fn_config: Mapping[str, float | str] | None,
        *,
        forward_only: bool,
    ) -> types.UntypedAPIFuture:
        """Queue a forward (``forward_only``) or forward_backward pass."""
        model = self._model(model_id)
        kind = "forward" if forward_only else "forward_backward"

        def run(m: _ModelState) -> types.ForwardBackwardOutput:
            assert m.lm is not None
            batch = [_datum_arrays(d, i) for i, d in enumerate(data)]
            outputs, metrics = m.lm.forward_backward(
                batch, loss_fn, loss_fn_config, backward=not forward_only
            )
            return types.ForwardBackwardOutput(
                loss_fn_output_type=_OUTPUT_TYPES.get(loss_fn, "LossReturn"),
                loss_fn_outputs=[
                    {k: types.TensorData.from_numpy(np.asarray(v)) for k, v in out.items()}
                    for out in outputs
                ],
                metrics={k: float(v) for k, v in metrics.items()},
            )

        entry = self._enqueue(model, seq_id, kind, run)
        return types.UntypedAPIFuture(request_id=entry.request_id, model_id=model.model_id)

    def optim_step(self, req: types.OptimStepRequest) -> types.UntypedAPIFuture:
        """Queue an AdamW step."""
        model = self._model(req.model_id)
        p = req.adam_params

        def run(m: _ModelState) -> types.OptimStepResponse:
            assert m.lm is not None
            metrics = m.lm.optim_step(
                learning_rate=p.learning_rate,
                beta1=p.beta1,
                beta2=p.beta2,
                eps=p.eps,
                weight_decay=p.weight_decay or 0.0,
                grad_clip_norm=p.grad_clip_norm or 0.0,
            )
            return types.OptimStepResponse(metrics=metrics)

        entry = self._enqueue(model, req.seq_id, "optim_step", run)
        return types.UntypedAPIFuture(request_id=entry.request_id, model_id=model.model_id)

    def save_weights(self, req: types.SaveWeightsRequest) -> types.UntypedAPIFuture:
        """Queue save_state: adapter + optimizer state under ``weights/<name>``."""
        model = self._model(req.model_id)
        name = req.path or f"checkpoint-{uuid.uuid4().hex[:8]}"
        target: list[TinkerPath] = []

        def reserve() -> None:
            target.append(self._reserve(model, "weights", name, bool(req.overwrite)))

        def run(m: _ModelState) -> types.SaveWeightsResponse:
            assert m.lm is not None
            rec = self.checkpoints.save_state(
                target[0],
                m.lm.adapter_state(),
                m.lm.optimizer_state(),
                m.lora.info(m.base_model),
                req.ttl_seconds,
            )
            return types.SaveWeightsResponse(path=rec.tinker_path)

        entry = self._enqueue(model, req.seq_id, "save_weights", run, reject=reserve)
        return types.UntypedAPIFuture(request_id=entry.request_id, model_id=model.model_id)

    def _reserve(self, model: _ModelState, kind: str, name: str, overwrite: bool) -> TinkerPath:
        try:
            return self.checkpoints.reserve(model.model_id, kind, name, overwrite=overwrite)
        except CheckpointError as e:
            raise HTTPError(e.status, e.detail) from e

    def save_weights_for_sampler(
        self, req: types.SaveWeightsForSamplerRequest
    ) -> types.UntypedAPIFuture:
        """Queue a sampler save: named (``sampler_weights/<name>``) or ephemeral (a session)."""
        model = self._model(req.model_id)
        target: list[TinkerPath] = []

        def reserve() -> None:
            if req.path is not None:
                target.append(self._reserve(model, "sampler_weights", req.path, False))

        def run(m: _ModelState) -> types.SaveWeightsForSamplerResponseInternal:
            assert m.lm is not None
            adapter = m.lm.adapter_state()
            path = None
            if target:
                rec = self.checkpoints.save_sampler(
                    target[0],
                    adapter,
                    m.lm.lora_config(),
                    m.lora.info(m.base_model),
                    req.ttl_seconds,
                )
                path = rec.tinker_path
            sampler_id = None
            if req.sampling_session_seq_id is not None:
                sampler_id = f"{m.session_id}:sample:{req.sampling_session_seq_id}"
                sampler = _Sampler(
                    sampler_id,
                    m.session_id,
                    base_model=m.base_model,
                    model_path=path,
                    lora=m.lora,
                    adapter=adapter,
                )
                self._register_sampler(sampler)
            return types.SaveWeightsForSamplerResponseInternal(
                path=path, sampling_session_id=sampler_id
            )

        entry = self._enqueue(model, req.seq_id, "save_weights_for_sampler", run, reject=reserve)
        return types.UntypedAPIFuture(request_id=entry.request_id, model_id=model.model_id)

    def _checkpoint_path(self, path: str) -> TinkerPath:
        """Parse a path that must name an existing (or queued) checkpoint; 400 otherwise."""
        parsed = parse_tinker_path(path)
        if parsed is None or not self.checkpoints.exists_or_pending(parsed):
            # TX-LIVE: the service's answer for a missing or deleted path
            raise HTTPError(400, f"Invalid checkpoint tinker path {path}.")
        return parsed

    def _load_into(self, lm: model_mod.TinyLM, path: TinkerPath, optimizer: bool) -> None:
        try:
            adapter, optim_state, _ = self.checkpoints.load_state(path)
        except CheckpointError as e:
            raise UserError(e.detail) from e
        if optimizer and optim_state is None:
            raise UserError(
                f"{path.uri} is a sampler checkpoint and holds no optimizer state; "
                "load a weights/ checkpoint with optimizer=true"
            )
        lm.load_adapter_state(adapter)
        if optimizer:
            lm.load_optimizer_state(optim_state)
        else:
            # SERVER.md §7: load_state loads weights only and resets the optimizer
            lm.reset_optimizer()

    def load_weights(self, req: types.LoadWeightsRequest) -> types.UntypedAPIFuture:
        """Queue load_state[_with_optimizer], or create a model from a checkpoint."""
        if req.model_id is None:
            return self._create_via_load(req)
        model = self._model(req.model_id)
        parsed: list[TinkerPath] = []

        def check() -> None:
            parsed.append(self._checkpoint_path(req.path))

        def run(m: _ModelState) -> types.LoadWeightsResponse:
            assert m.lm is not None
            self._load_into(m.lm, parsed[0], req.optimizer)
            return types.LoadWeightsResponse(path=req.path)

        entry = self._enqueue(model, req.seq_id, "load_weights", run, reject=check)
        return types.UntypedAPIFuture(request_id=entry.request_id, model_id=model.model_id)

    def _create_via_load(self, req: types.LoadWeightsRequest) -> types.UntypedAPIFuture:
        # WIRE.md §13.3: load_weights with session_id + model_seq_id creates the model (its seq 0).
        assert req.session_id is not None
        assert req.model_seq_id is not None
        session = self._session(req.session_id)
        path = self._checkpoint_path(req.path)
        rec = self.checkpoints.get(path)
        info = dict(rec.extra) if rec is not None else {}
        base_model = req.base_model or str(info.get("base_model") or "")
        if not base_model:
            raise HTTPError(400, f"Invalid checkpoint tinker path {req.path}.")
        lora = LoraSpec.from_info(info)

        def build(m: _ModelState) -> types.LoadWeightsResponse:
            lm = self.make_lm(m.base_model, m.lora)
            self._load_into(lm, path, req.optimizer)
            m.lm = lm  # only once loaded: a failed load leaves no model to train
            return types.LoadWeightsResponse(path=req.path, model_id=m.model_id)

        model, request_id = self._new_model(
            session,
            model_seq_id=req.model_seq_id,
            base_model=base_model,
            lora=lora,
            user_metadata=req.user_metadata,
            create_kind="create_via_load",
            create=build,
        )
        return types.UntypedAPIFuture(request_id=request_id, model_id=model.model_id)

    # -- sampling -------------------------------------------------------------------------------

    def _register_sampler(self, sampler: _Sampler) -> None:
        with self._lock:
            self._samplers[sampler.sampler_id] = sampler
            session = (
                self._sessions.get(sampler.session_id) if sampler.session_id is not None else None
            )
            if session is not None and sampler.sampler_id not in session.sampler_ids:
                session.sampler_ids.append(sampler.sampler_id)

    def _sampler_for_path(
        self, model_path: str, sampler_id: str, session_id: str | None
    ) -> _Sampler:
        parsed = parse_tinker_path(model_path)
        rec = self.checkpoints.get(parsed) if parsed is not None else None
        if parsed is None or rec is None:
            raise HTTPError(400, f"Invalid checkpoint tinker path {model_path}.")
        info = dict(rec.extra)
        base_model = str(info.get("base_model") or SUPPORTED_MODELS[0])
        if parsed.kind == "weights":
            # CB-ERR: the service fails such samples as a user error
            return _Sampler(
                sampler_id,
                session_id,
                base_model=base_model,
                model_path=model_path,
                error="State checkpoints can't be used for sampling; save the weights with "
                "save_weights_for_sampler and sample from the sampler_weights/ path",
            )
        try:
            adapter, _, _ = self.checkpoints.load_state(parsed)
        except CheckpointError as e:
            raise HTTPError(400, f"Invalid checkpoint tinker path {model_path}.") from e
        return _Sampler(
            sampler_id,
            session_id,
            base_model=base_model,
            model_path=model_path,
            lora=LoraSpec.from_info(info),
            adapter=adapter,
        )

    def create_sampling_session(
        self, req: types.CreateSamplingSessionRequest
    ) -> types.CreateSamplingSessionResponse:
        """Open a sampling session on a base model or a sampler checkpoint."""
        session = self._session(req.session_id)
        sampler_id = f"{session.session_id}:sample:{req.sampling_session_seq_id}"
        with self._lock:
            existing = self._samplers.get(sampler_id)
        if existing is not None:
            return types.CreateSamplingSessionResponse(sampling_session_id=sampler_id)
        if req.model_path is not None:
            sampler = self._sampler_for_path(req.model_path, sampler_id, session.session_id)
        else:
            assert req.base_model is not None
            sampler = _Sampler(sampler_id, session.session_id, base_model=req.base_model)
        self._register_sampler(sampler)
        return types.CreateSamplingSessionResponse(sampling_session_id=sampler_id)

    def get_sampler(self, sampler_id: str) -> types.GetSamplerResponse:
        """Describe a sampling session."""
        with self._lock:
            sampler = self._samplers.get(sampler_id)
        if sampler is None:
            raise HTTPError(404, f"Sampler not found: {sampler_id!r}")
        return types.GetSamplerResponse(
            sampler_id=sampler.sampler_id,
            base_model=sampler.base_model,
            model_path=sampler.model_path,
        )

    def join_sampling_session(self, req: types.JoinSamplingSessionRequest) -> dict[str, Any]:
        """Let a copied sampling client join an existing sampling session."""
        with self._lock:
            if req.sampling_session_id not in self._samplers:
                raise HTTPError(404, f"Sampling session not found: {req.sampling_session_id!r}")
        return {"sampling_session_id": req.sampling_session_id, "type": "join_sampling_session"}

    def _sampler_lm(self, sampler: _Sampler) -> model_mod.TinyLM:
        if sampler.error is not None:
            raise UserError(sampler.error)
        if sampler.adapter is None:
            with self._lock:
                lm = self._base_lms.get(sampler.base_model)
            if lm is None:
                lm = self.make_lm(sampler.base_model, LoraSpec())
                with self._lock:
                    lm = self._base_lms.setdefault(sampler.base_model, lm)
            return lm
        with sampler.lock:
            if sampler.lm is None:
                lm = self.make_lm(sampler.base_model, sampler.lora or LoraSpec())
                lm.load_adapter_state(sampler.adapter)
                sampler.lm = lm
            return sampler.lm

    def asample(self, req: types.SampleRequest) -> dict[str, Any]:
        """Queue a sample on the sampling pool; answer the future (+ ``sample_sequence_ids``)."""
        if req.sampling_session_id is not None:
            with self._lock:
                sampler = self._samplers.get(req.sampling_session_id)
            if sampler is None:
                raise HTTPError(404, f"Sampling session not found: {req.sampling_session_id!r}")
        elif req.model_path is not None:
            sampler = self._path_sampler(req.model_path)
        else:
            assert req.base_model is not None
            sampler = _Sampler(f"base:{req.base_model}", None, base_model=req.base_model)
        dedup_key = (
            (req.sampling_session_id, req.seq_id)
            if req.sampling_session_id is not None and req.seq_id is not None
            else None
        )
        with self._lock:
            entry = None
            if dedup_key is not None and dedup_key in self._sample_dedup:
                entry = self.futures.get(self._sample_dedup[dedup_key])
            submit = entry is None
            if entry is None:
                entry = self.futures.create()
                if dedup_key is not None:
                    self._sample_dedup[dedup_key] = entry.request_id
                    if len(self._sample_dedup) > 2 * max(4096, len(self.futures)):
                        # forget keys whose results the future store no longer holds
                        self._sample_dedup = {
                            k: v
                            for k, v in self._sample_dedup.items()
                            if self.futures.get(v) is not None
                        }
        if submit:
            with self._stats_lock:
                self.samples_submitted += 1
            try:
                self._sample_pool.submit(self._run_sample, sampler, req, entry)
            except RuntimeError as e:
                raise HTTPError(503, "The local server is shutting down") from e
        # golden-0.38 README: the current SDK expects `sample_sequence_ids` in the asample answer
        return {
            "request_id": entry.request_id,
            "sample_sequence_ids": [f"{entry.request_id}:{i}" for i in range(req.num_samples)],
        }

    def _path_sampler(self, model_path: str) -> _Sampler:
        key = f"path:{model_path}"
        with self._lock:
            sampler = self._samplers.get(key)
        parsed = parse_tinker_path(model_path)
        rec = self.checkpoints.get(parsed) if parsed is not None else None
        if sampler is not None and rec is not None:
            return sampler
        sampler = self._sampler_for_path(model_path, key, None)
        with self._lock:
            self._samplers[key] = sampler
        return sampler

    def _run_sample(self, sampler: _Sampler, req: types.SampleRequest, entry: FutureEntry) -> None:
        try:
            lm = self._sampler_lm(sampler)
            prompt = _chunk_tokens(req.prompt.chunks, "prompt")
            params = req.sampling_params
            stop = params.stop
            stop_tokens: list[int] | None = None
            stop_strings: list[str] | None = None
            if isinstance(stop, str):
                stop_strings = [stop]
            elif isinstance(stop, list):
                if stop and isinstance(stop[0], str):
                    stop_strings = [str(s) for s in stop]
                else:
                    # SERVER.md §5: an empty list disables every stop, EOS included
                    stop_tokens = [int(s) for s in stop]
            result = lm.sample(
                prompt,
                num_samples=req.num_samples,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_k=params.top_k,
                top_p=params.top_p,
                seed=params.seed,
                stop_tokens=stop_tokens,
                stop_strings=stop_strings,
                prompt_logprobs=bool(req.prompt_logprobs),
                topk_prompt_logprobs=req.topk_prompt_logprobs,
            )
            response = types.SampleResponse(
                sequences=[
                    types.SampledSequence(
                        stop_reason=types.StopReason(s.stop_reason),
                        tokens=list(s.tokens),
                        logprobs=list(s.logprobs),
                    )
                    for s in result.sequences
                ],
                prompt_logprobs=result.prompt_logprobs,
                topk_prompt_logprobs=result.topk_prompt_logprobs,
            )
        except Exception as exc:
            error, category = _classify(exc)
            self.futures.fail(entry, error, category)
        else:
            self.futures.complete(entry, response)
        with self._stats_lock:
            self.samples_completed += 1

    # -- checkpoints (REST) ---------------------------------------------------------------------

    def checkpoint_view(self, rec: CheckpointRecord) -> types.Checkpoint:
        """A checkpoint record as the REST model."""
        return types.Checkpoint(
            checkpoint_id=rec.checkpoint_id,
            checkpoint_type=rec.checkpoint_type,
            time=_utc(rec.created),
            tinker_path=rec.tinker_path,
            size_bytes=rec.size_bytes,
            public=rec.public,
            expires_at=None if rec.expires_at is None else _utc(rec.expires_at),
        )

    def training_run_view(self, run: RunRecord) -> types.TrainingRun:
        """A run record as the REST model."""
        last = self.checkpoints.last_of_kind(run.run_id, "weights")
        last_sampler = self.checkpoints.last_of_kind(run.run_id, "sampler_weights")
        metadata = (
            {str(k): str(v) for k, v in run.user_metadata.items()}
            if run.user_metadata is not None
            else None
        )
        return types.TrainingRun(
            training_run_id=run.run_id,
            base_model=run.base_model,
            model_owner="tinker-lite:local-user",
            is_lora=True,
            corrupted=False,
            lora_rank=run.lora_rank,
            last_request_time=_utc(run.last_request_time or run.created),
            last_checkpoint=None if last is None else self.checkpoint_view(last),
            last_sampler_checkpoint=(
                None if last_sampler is None else self.checkpoint_view(last_sampler)
            ),
            user_metadata=metadata,
        )

    def weights_info(self, req: types.WeightsInfoRequest) -> types.WeightsInfoResponse:
        """Base model and LoRA settings of a checkpoint."""
        parsed = parse_tinker_path(req.tinker_path)
        rec = self.checkpoints.get(parsed) if parsed is not None else None
        if rec is None:
            raise HTTPError(404, f"Checkpoint not found: {req.tinker_path}")
        info = rec.extra
        lora = LoraSpec.from_info(info)
        return types.WeightsInfoResponse(
            base_model=str(info.get("base_model", "")),
            is_lora=True,
            lora_rank=lora.rank,
            train_unembed=lora.train_unembed,
            train_mlp=lora.train_mlp,
            train_attn=lora.train_attn,
        )

    # -- shutdown -------------------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Stop the workers, release waiting polls; queued work is abandoned."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            models = list(self._models.values())
        for m in models:
            m.queue.put(None)
        self._sample_pool.shutdown(wait=False, cancel_futures=True)
        self.futures.wake_all()
        deadline = time.monotonic() + timeout
        for m in models:
            if m.worker is not None:
                m.worker.join(max(0.0, deadline - time.monotonic()))


def _classify(exc: BaseException) -> tuple[str, str]:
    """Map an exception raised by a job to (message, category) of a failed future."""
    if isinstance(exc, UserError | CheckpointError | TinkerError | ValueError):
        return str(exc), "user"
    log.exception("local server: request failed with an internal error")
    return f"Internal error in the local server: {type(exc).__name__}: {exc}", "server"


def _chunk_tokens(chunks: Sequence[Any], where: str) -> list[int]:
    tokens: list[int] = []
    for index, chunk in enumerate(chunks):
        if not isinstance(chunk, types.EncodedTextChunk):
            kind = getattr(chunk, "type", type(chunk).__name__)
            # SERVER.md §2: tinker_lite's model takes text chunks only
            raise UserError(
                f"{where}.chunks[{index}]: {kind} chunks are not supported by the local server's "
                "text-only model; send encoded_text chunks"
            )
        tokens.extend(chunk.tokens)
    return tokens


def _datum_arrays(datum: types.Datum, index: int) -> model_mod.DatumArrays:
    tokens = _chunk_tokens(datum.model_input.chunks, f"data[{index}].model_input")
    return model_mod.DatumArrays(
        tokens=np.asarray(tokens, dtype=np.int64),
        inputs={key: td.to_numpy() for key, td in datum.loss_fn_inputs.items()},
    )
