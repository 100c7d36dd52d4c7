"""The local server's training models: one worker thread each, running requests in seq_id order.

docs/service.rst §8: a model's training requests run strictly in ``seq_id`` order; a request
arriving early is held until every lower seq_id has arrived; a resend of a seq_id is the same
request, applied once; a request refused before it was queued still consumes its seq_id (as failed).
With a data dir, each model's requests and state are written through
(:mod:`~tinker_lite.local.storage.durable`) and :meth:`ModelStore.restore` brings them back.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite.local.model import tiny_lm as model_mod
from tinker_lite.local.refusals import (
    Conflict,
    InvalidRequest,
    NotFound,
    RequestRefused,
    Unavailable,
    UserInputError,
    refusal,
)
from tinker_lite.local.service.catalog import Catalog, LoraSpec
from tinker_lite.local.service.futures import FutureEntry, FutureStore, failure_of
from tinker_lite.local.service.sessions import Session, SessionStore
from tinker_lite.local.storage.checkpoints import CheckpointStore, RunRecord
from tinker_lite.local.storage.durable import (
    LOST_IN_RESTART,
    MUTATING_KINDS,
    DataDir,
    ModelJournal,
    RestoredModel,
    load_lm_state,
)

__all__ = ["ModelState", "ModelStore", "optimizer_config"]

log = logging.getLogger("tinker_lite.local")

# The requests that create a model (its seq_id 0); every other one needs the model built.
_CREATES = ("create_model", "create_via_load")


def optimizer_config(family: str) -> dict[str, Any]:
    """The ``optimizer_config`` of a family, as 0.38 sends it (and get_info answers it)."""
    return {"type": "dimuon", "version": 1} if family == "dimuon" else {"type": "adamw"}


@dataclass
class _Job:
    seq_id: int | None
    kind: str
    entry: FutureEntry
    run: Callable[[ModelState], Any]


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


class ModelState:
    """One training model: its LM, its seq_id ordering and its worker thread."""

    def __init__(
        self,
        model_id: str,
        session_id: str,
        base_model: str,
        lora: LoraSpec,
        user_metadata: dict[str, Any] | None,
        *,
        optimizer: str = "adamw",
    ) -> None:
        self.model_id = model_id
        self.session_id = session_id
        self.base_model = base_model
        self.lora = lora
        self.user_metadata = user_metadata
        # the optimizer_config family ("adamw" or "dimuon"), fixed when the model is created
        self.optimizer = optimizer
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
        # with a data dir: where its requests and state are written through
        self.journal: ModelJournal | None = None
        # a restored model builds its LM from the kept state when its first request runs
        self.restore_lm: Callable[[], model_mod.TinyLM] | None = None

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

    def checkpoint_info(self, metadata: dict[str, str] | None) -> dict[str, Any]:
        """What is stored beside a checkpoint: the LoRA settings, plus its user_metadata."""
        info = self.lora.info(self.base_model)
        info["optimizer_config"] = optimizer_config(self.optimizer)
        if metadata is not None:
            info["user_metadata"] = metadata
        return info

    def advance(self) -> None:
        """Release the held requests whose turn has come (call with ``lock`` held)."""
        while self.next_seq in self.pending:
            job = self.pending.pop(self.next_seq)
            self.next_seq += 1
            if job is not None:
                self.queue.put(job)

    def describe(self) -> dict[str, Any]:
        """The model's progress, for the stats document."""
        with self.lock:
            return {
                "base_model": self.base_model,
                "applied": [dict(a) for a in self.applied],
                "applied_count": len(self.applied),
                "next_seq_id": self.next_seq,
                "waiting_seq_ids": sorted(self.pending),
                "unloaded": self.unloaded,
            }


class ModelStore:
    """Every training model of one server and their request queues."""

    def __init__(
        self,
        clock: Callable[[], float],
        futures: FutureStore,
        checkpoints: CheckpointStore,
        sessions: SessionStore,
        data: DataDir | None = None,
    ) -> None:
        self._clock = clock
        self._futures = futures
        self._checkpoints = checkpoints
        self._sessions = sessions
        self._data = data
        self._lock = threading.Lock()
        self._models: dict[str, ModelState] = {}
        self._closed = False

    def get(self, model_id: str) -> ModelState:
        """The live model ``model_id``; 404 when unknown or unloaded."""
        with self._lock:
            model = self._models.get(model_id)
        if model is None:
            raise NotFound(f"Model not found: {model_id!r}")
        if model.unloaded:
            raise NotFound(f"Model {model_id!r} was unloaded")
        return model

    def find(self, model_ids: list[str]) -> list[ModelState]:
        """The models of ``model_ids`` this server knows, unloaded ones included."""
        with self._lock:
            return [self._models[m] for m in model_ids if m in self._models]

    def all(self) -> list[ModelState]:
        """Every model, unloaded ones included."""
        with self._lock:
            return list(self._models.values())

    def create(
        self,
        session: Session,
        *,
        model_seq_id: int,
        base_model: str,
        lora: LoraSpec,
        user_metadata: dict[str, Any] | None,
        optimizer: str = "adamw",
        create_kind: str,
        create: Callable[[ModelState], Any],
    ) -> tuple[ModelState, str]:
        """Register a model (seq 0 = its creation) or return the existing one's seq-0 future."""
        model_id = f"{session.session_id}:train:{model_seq_id}"
        with self._lock:
            if self._closed:  # no worker thread may start after close()
                raise Unavailable("The local server is shutting down")
            existing = self._models.get(model_id)
            if existing is not None:
                first = existing.by_seq.get(0)
                if isinstance(first, _Accepted):
                    return existing, first.request_id
                raise Conflict(f"Model {model_id!r} already exists")
            model = ModelState(
                model_id, session.session_id, base_model, lora, user_metadata, optimizer=optimizer
            )
            self._models[model_id] = model
            self._sessions.add_training_run(session, model_id)
        now = self._clock()
        self._checkpoints.register_run(
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
        if self._data is not None:
            model.journal = ModelJournal(self._data, model_id)
            model.journal.create(
                {
                    "model_id": model_id,
                    "session_id": session.session_id,
                    "base_model": base_model,
                    "lora": dataclasses.asdict(lora),
                    "optimizer": optimizer,
                    "user_metadata": user_metadata,
                }
            )
        entry = self.enqueue(model, 0, create_kind, create)
        return model, entry.request_id

    def _start_worker(self, model: ModelState) -> None:
        """Start the model's worker thread if it has none (call with ``model.lock`` held)."""
        if model.worker is None and not self._closed:
            number = model.model_id.rsplit(":", 1)[-1]
            model.worker = threading.Thread(
                target=self._work, args=(model,), name=f"tinker-lite-model-{number}", daemon=True
            )
            model.worker.start()

    def enqueue(
        self,
        model: ModelState,
        seq_id: int | None,
        kind: str,
        run: Callable[[ModelState], Any],
        reject: Callable[[], None] | None = None,
    ) -> FutureEntry:
        """Queue a training request in seq_id order, de-duplicating repeated seq_ids.

        ``reject`` runs first (under the model lock); a refusal it raises consumes the seq_id,
        so later requests are not held forever, and a resend of that seq_id gets the same answer.
        """
        with model.lock:
            if seq_id is not None:
                prior = model.by_seq.get(seq_id)
                if isinstance(prior, _Rejection):
                    raise refusal(prior.status, prior.detail)
                if prior is not None:
                    if prior.kind != kind:
                        raise InvalidRequest(
                            f"seq_id {seq_id} of model {model.model_id} was already used by its "
                            f"{prior.kind} request; each training request takes the next seq_id",
                        )
                    # docs/service.rst §8: a resend of the same seq_id is the same request,
                    # applied once; when its result expired, polls of its id get 410
                    return self._futures.get(prior.request_id) or FutureEntry(prior.request_id)
                if reject is not None:
                    try:
                        reject()
                    except RequestRefused as e:
                        model.by_seq[seq_id] = _Rejection(e.status, e.detail)
                        if model.journal is not None:
                            model.journal.rejected(seq_id, e.status, e.detail)
                        model.pending[seq_id] = None
                        model.advance()
                        raise
            entry = self._futures.create()
            if model.journal is not None:
                model.journal.accepted(seq_id, kind, entry.request_id)
            self._start_worker(model)
            job = _Job(seq_id, kind, entry, run)
            if seq_id is None:
                model.queue.put(job)
            else:
                model.by_seq[seq_id] = _Accepted(kind, entry.request_id)
                model.pending[seq_id] = job
                entry.waiting_reason = model.waiting_reason(seq_id)
                model.advance()
        return entry

    def reject_seq(self, model_id: str, seq_id: int, status: int, detail: Any) -> None:
        """Consume ``seq_id`` of ``model_id`` as failed: its request was refused before queueing.

        The service applies a refused request's seq_id as failed, so the model's next request
        runs instead of waiting forever for it; a resend of that seq_id gets the same answer.
        """
        with self._lock:
            model = self._models.get(model_id)
        if model is None or seq_id < 0:
            return
        with model.lock:
            if seq_id in model.by_seq or seq_id < model.next_seq:
                return
            model.by_seq[seq_id] = _Rejection(status, detail)
            if model.journal is not None:
                model.journal.rejected(seq_id, status, detail)
            model.pending[seq_id] = None
            model.advance()

    def unload(self, model: ModelState) -> FutureEntry:
        """Queue the model's unloading after the requests already queued for it."""

        def unload(m: ModelState) -> types.UnloadModelResponse:
            m.lm = None
            m.unloaded = True
            with m.lock:
                # requests held for a missing lower seq_id can never run now
                held = [job.entry for job in m.pending.values() if job is not None]
                m.pending.clear()
            for held_entry in held:
                self._futures.fail(held_entry, f"Model {m.model_id} was unloaded", "user")
            return types.UnloadModelResponse(model_id=m.model_id)

        entry = self._futures.create()
        with model.lock:
            if model.journal is not None:
                model.journal.accepted(None, "unload_model", entry.request_id)
            self._start_worker(model)
        model.queue.put(_Job(None, "unload_model", entry, unload))
        return entry

    def _work(self, model: ModelState) -> None:
        while True:
            job = model.queue.get()
            if job is None:
                return
            self._run(model, job)
            self._checkpoints.touch_run(model.model_id)

    @staticmethod
    def _check_ready(model: ModelState, kind: str) -> None:
        """Build a restored model's LM; refuse a request its model cannot run."""
        if kind in _CREATES:
            return
        if model.lm is None and model.restore_lm is not None:
            restore, model.restore_lm = model.restore_lm, None
            try:
                model.lm = restore()
            except Exception as exc:
                model.create_error = f"its kept state could not be restored ({exc})"
                raise
        if model.lm is None:
            if model.unloaded:
                raise UserInputError(f"Model {model.model_id} was unloaded")
            raise UserInputError(
                f"Model {model.model_id} could not be created: {model.create_error}"
            )

    def _run(self, model: ModelState, job: _Job) -> None:
        """Run one request; write it through (with a data dir), then complete its future."""
        entry = job.entry
        started = time.time()
        result: Any = None
        error: str | None = None
        category: str | None = None
        try:
            self._check_ready(model, job.kind)
            result = job.run(model)
        except Exception as exc:
            error, category = failure_of(exc)
            if job.kind in _CREATES:
                model.create_error = error
        applied = {
            "seq_id": job.seq_id,
            "kind": job.kind,
            "request_id": entry.request_id,
            "ok": error is None,
            "started_us": int(started * 1e6),
            "duration_us": int((time.time() - started) * 1e6),
        }
        if model.journal is not None:
            snapshot = model.lm if error is None and job.kind in MUTATING_KINDS else None
            try:
                model.journal.applied(
                    applied,
                    result=None if error is not None else _wire.to_builtins(result),
                    error=error,
                    category=category,
                    done_at=self._clock(),
                    lm=snapshot,
                )
            except Exception as exc:  # e.g. the disk is full: it ran, but is not kept
                log.exception("local server: cannot record %s in the data dir", entry.request_id)
                error = (
                    f"The request ran, but the local server could not record it in its data dir "
                    f"({type(exc).__name__}: {exc}); a server restarted on that dir will not "
                    "have it"
                )
                category = "server"
        with model.lock:
            model.applied.append(applied)
        if error is not None:
            assert category is not None
            self._futures.fail(entry, error, category)
            return
        self._futures.complete(entry, result)
        if job.kind == "unload_model":
            model.queue.put(None)  # nothing can be queued for it any more

    def restore(self, data: DataDir, catalog: Catalog) -> tuple[int, int]:
        """Bring back the models kept in the data dir; return (models, requests lost).

        Applied requests keep their results (polls answer them while ``result_ttl`` lasts);
        accepted ones that had not run fail with :data:`LOST_IN_RESTART`, consuming their
        seq_id. A model's LM is rebuilt from its kept state when its first request runs.
        """
        done: list[tuple[float, str, Any, str | None, str | None]] = []
        models = lost = 0
        for record_path in sorted((data.root / "runs").glob("*/model.json")):
            journal = ModelJournal(data, record_path.parent.name)
            restored = journal.read()
            if restored is None:
                continue
            model = self._restored_model(restored, journal, catalog, done)
            lost += len(restored.lost)
            with self._lock:
                self._models[model.model_id] = model
            models += 1
        self._futures.restore(done)
        return models, lost

    def _restored_model(
        self,
        restored: RestoredModel,
        journal: ModelJournal,
        catalog: Catalog,
        done: list[tuple[float, str, Any, str | None, str | None]],
    ) -> ModelState:
        record = restored.record
        model = ModelState(
            record["model_id"],
            record["session_id"],
            record["base_model"],
            LoraSpec(**record["lora"]),
            record.get("user_metadata"),
            optimizer=record.get("optimizer", "adamw"),
        )
        model.journal = journal
        now = self._clock()
        applied = list(restored.applied)
        lost = sorted(restored.lost, key=lambda x: (x[0] is None, x[0] or 0))
        for seq_id, kind, request_id in lost:
            entry: dict[str, Any] = {
                "seq_id": seq_id,
                "kind": kind,
                "request_id": request_id,
                "ok": False,
                "started_us": int(now * 1e6),
                "duration_us": 0,
                "lost_in_restart": True,
            }
            line: dict[str, Any] = {"error": LOST_IN_RESTART, "category": "server", "done_at": now}
            journal.applied(entry, result=None, lm=None, **line)
            applied.append((entry, line))
        for entry, line in applied:
            model.applied.append(entry)
            done.append(
                (
                    line.get("done_at", now),
                    entry["request_id"],
                    line.get("result"),
                    line.get("error"),
                    line.get("category"),
                )
            )
            if entry["kind"] in _CREATES and not entry["ok"]:
                model.create_error = line.get("error")
            if entry["kind"] == "unload_model" and entry["ok"]:
                model.unloaded = True
        for seq_id, (what, first, second) in restored.by_seq.items():
            model.by_seq[seq_id] = (
                _Accepted(first, second) if what == "accepted" else _Rejection(first, second)
            )
        while model.next_seq in model.by_seq:
            model.next_seq += 1
        # known seq_ids above a gap: consumed once the gap's requests have run
        model.pending = {seq: None for seq in model.by_seq if seq > model.next_seq}
        if not model.unloaded and model.create_error is None:

            def build() -> model_mod.TinyLM:
                lm = catalog.make_lm(model.base_model, model.lora, model.optimizer)
                arrays = restored.snapshot()
                if arrays is not None:
                    load_lm_state(lm, arrays)
                return lm

            model.restore_lm = build
        return model

    def stop(self) -> None:
        """Tell every worker to stop after its current request; queued work is abandoned."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            models = list(self._models.values())
        for m in models:
            m.queue.put(None)

    def join(self, deadline: float) -> None:
        """Wait for the stopped workers until ``deadline`` (``time.monotonic``)."""
        for m in self.all():
            if m.worker is not None:
                m.worker.join(max(0.0, deadline - time.monotonic()))
