"""The local server's REST views: checkpoints, training runs, storage, traces and copies."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite.local.refusals import (
    InvalidRequest,
    NotFound,
    checkpoint_refusal,
    field_error,
)
from tinker_lite.local.service.catalog import LoraSpec
from tinker_lite.local.service.identity import LOCAL_USER_URN
from tinker_lite.local.service.ledger import Ledger
from tinker_lite.local.service.runs import ModelStore
from tinker_lite.local.service.sessions import SessionStore, utc
from tinker_lite.local.storage.checkpoints import (
    CheckpointError,
    CheckpointRecord,
    CheckpointStore,
    RunRecord,
    parse_tinker_path,
)

__all__ = ["Views"]


class Views:
    """REST answers built from the server's checkpoints, sessions, models and ledger."""

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        checkpoints: CheckpointStore,
        sessions: SessionStore,
        models: ModelStore,
        ledger: Ledger,
    ) -> None:
        self._clock = clock
        self._checkpoints = checkpoints
        self._sessions = sessions
        self._models = models
        self._ledger = ledger
        self._lock = threading.Lock()
        self._copies: dict[str, str] = {}

    def checkpoint_view(self, rec: CheckpointRecord) -> dict[str, Any]:
        """A checkpoint record as its REST JSON object (with its ``user_metadata``)."""
        model = types.Checkpoint(
            checkpoint_id=rec.checkpoint_id,
            checkpoint_type=rec.checkpoint_type,
            time=utc(rec.created),
            tinker_path=rec.tinker_path,
            size_bytes=rec.size_bytes,
            public=rec.public,
            expires_at=None if rec.expires_at is None else utc(rec.expires_at),
        )
        view: dict[str, Any] = _wire.to_builtins(model)
        view["user_metadata"] = rec.extra.get("user_metadata")
        return view

    def training_run_view(self, run: RunRecord) -> dict[str, Any]:
        """A run record as the REST model."""
        last = self._checkpoints.last_of_kind(run.run_id, "weights")
        last_sampler = self._checkpoints.last_of_kind(run.run_id, "sampler_weights")
        metadata = (
            {str(k): str(v) for k, v in run.user_metadata.items()}
            if run.user_metadata is not None
            else None
        )
        model = types.TrainingRun(
            training_run_id=run.run_id,
            base_model=run.base_model,
            model_owner=LOCAL_USER_URN,
            is_lora=True,
            corrupted=False,
            lora_rank=run.lora_rank,
            last_request_time=utc(run.last_request_time or run.created),
            user_metadata=metadata,
        )
        view: dict[str, Any] = _wire.to_builtins(model)
        view["last_checkpoint"] = None if last is None else self.checkpoint_view(last)
        view["last_sampler_checkpoint"] = (
            None if last_sampler is None else self.checkpoint_view(last_sampler)
        )
        return view

    def weights_info(self, req: types.WeightsInfoRequest) -> types.WeightsInfoResponse:
        """Base model and LoRA settings of a checkpoint."""
        parsed = parse_tinker_path(req.tinker_path)
        if parsed is None:  # untyped or malformed: a bad request, as elsewhere (400)
            raise InvalidRequest(f"Invalid checkpoint tinker path {req.tinker_path}.")
        rec = self._checkpoints.get(parsed)
        if rec is None:
            raise NotFound(f"Checkpoint not found: {req.tinker_path}")
        info = rec.extra
        lora = LoraSpec.from_info(info)
        return types.WeightsInfoResponse(
            base_model=str(info.get("base_model", "")),
            is_lora=True,
            lora_rank=lora.rank,
            train_unembed=lora.train_unembed,
            train_mlp=lora.train_mlp,
            train_attn=lora.train_attn,
            optimizer_config=(
                types.DimuonOptimizerConfig()
                if (info.get("optimizer_config") or {}).get("type") == "dimuon"
                else types.AdamOptimizerConfig()
            ),
        )

    def copy_weights(self, body: Mapping[str, Any], idempotency_key: str | None) -> dict[str, Any]:
        """Copy a checkpoint into a new training run (of a project); ``{"tinker_path"}``.

        One ``X-Idempotency-Key`` copies once, however often the request is retried.
        """
        source = body.get("source_path")
        parsed = parse_tinker_path(source) if isinstance(source, str) else None
        if parsed is None:
            raise InvalidRequest(f"Invalid checkpoint tinker path {source}.")
        ttl = body.get("ttl_seconds")
        if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 3600):
            raise field_error(
                ["body", "ttl_seconds"], "ttl_seconds: at least 3600 or null", "int_type"
            )
        with self._lock:
            done = self._copies.get(idempotency_key) if idempotency_key else None
        if done is not None:
            return {"tinker_path": done}
        rec = self._checkpoints.get(parsed)
        run = self._checkpoints.get_run(parsed.run_id)
        if rec is None or run is None:
            raise NotFound(f"Checkpoint not found: {source}")
        session_id = body.get("session_id")
        session_id = session_id if isinstance(session_id, str) else f"copy-{uuid.uuid4()}"
        now = self._clock()
        copy_run = RunRecord(
            run_id=f"{session_id}:copy:{uuid.uuid4().hex[:8]}",
            base_model=run.base_model,
            lora_rank=run.lora_rank,
            train_unembed=run.train_unembed,
            train_mlp=run.train_mlp,
            train_attn=run.train_attn,
            session_id=session_id,
            created=now,
            last_request_time=now,
        )
        try:
            copied = self._checkpoints.copy(parsed, copy_run, ttl)
        except CheckpointError as e:
            raise checkpoint_refusal(e) from e
        project = body.get("destination_project_id")
        self._ledger.audit(
            now,
            "checkpoint.copied",
            tinker_path=copied.tinker_path,
            source_path=source,
            destination_project_id=project,
        )
        with self._lock:
            if idempotency_key:
                self._copies[idempotency_key] = copied.tinker_path
        return {"tinker_path": copied.tinker_path}

    def session_trace(self, session_id: str) -> bytes:
        """A Perfetto-readable (Chrome trace JSON) timeline of the session's training requests."""
        session = self._sessions.get(session_id)
        events: list[dict[str, Any]] = []
        models = self._models.find(self._sessions.training_runs(session))
        for tid, model in enumerate(models, start=1):
            events.append(
                {
                    "name": "thread_name",
                    "ph": "M",
                    "pid": 1,
                    "tid": tid,
                    "args": {"name": model.model_id},
                }
            )
            with model.lock:
                applied = list(model.applied)
            for step in applied:
                events.append(
                    {
                        "name": step["kind"],
                        "ph": "X",
                        "pid": 1,
                        "tid": tid,
                        "ts": step.get("started_us", 0),
                        "dur": step.get("duration_us", 0),
                        "args": {"seq_id": step["seq_id"], "ok": step["ok"]},
                    }
                )
        trace = {
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {"session": session_id},
        }
        return _wire.dumps(trace)

    def storage_usage(self, project_id: str | None) -> dict[str, Any]:
        """``CurrentCheckpointStorageUsageResponse``: checkpoints stored, per project."""
        per_project: dict[str | None, list[int]] = {}
        for rec in self._checkpoints.list_all():
            run = self._checkpoints.get_run(rec.run_id)
            project = self._sessions.project_of(run.session_id if run is not None else None)
            if project_id is not None and project != project_id:
                continue
            counts = per_project.setdefault(project, [0, 0])
            counts[0] += 1
            counts[1] += rec.size_bytes
        data = [
            {
                "project_id": project,
                "org_user_urn": LOCAL_USER_URN,
                "checkpoint_count": count,
                "size_bytes": size,
                "size_gigabytes": size / 1e9,
            }
            for project, (count, size) in per_project.items()
        ]
        return {"data": data}
