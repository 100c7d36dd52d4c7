"""The local server's sessions: lifecycle, heartbeats, projects, usage and session search."""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from tinker_lite import types
from tinker_lite.local.refusals import NotFound, SessionFinished, field_error
from tinker_lite.local.service.identity import LOCAL_USER_URN
from tinker_lite.local.service.ledger import Ledger
from tinker_lite.local.storage.checkpoints import CheckpointStore
from tinker_lite.local.storage.durable import DataDir

__all__ = ["Session", "SessionStore", "utc"]

log = logging.getLogger("tinker_lite.local")


def utc(ts: float) -> datetime:
    """Epoch seconds as an aware UTC datetime."""
    return datetime.fromtimestamp(ts, tz=timezone.utc)


@dataclass
class Session:
    """One client session and what was created in it."""

    session_id: str
    created: float
    tags: list[str]
    user_metadata: dict[str, Any] | None
    sdk_version: str
    last_heartbeat: float
    display_name: str | None = None
    project_id: str | None = None
    finished: bool = False
    training_run_ids: list[str] = field(default_factory=list)
    sampler_ids: list[str] = field(default_factory=list)


class SessionStore:
    """Every session of one server; every method is safe to call from any thread."""

    def __init__(
        self,
        clock: Callable[[], float],
        ledger: Ledger,
        checkpoints: CheckpointStore,
        data: DataDir | None = None,
    ) -> None:
        self._clock = clock
        self._ledger = ledger
        self._checkpoints = checkpoints
        self._data = data
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    def _keep(self, session: Session) -> None:
        """Write the session through to the data dir (call with the lock held)."""
        if self._data is not None:
            self._data.write(f"sessions/{session.session_id}.json", dataclasses.asdict(session))

    def restore(self) -> int:
        """Bring back the sessions kept in the data dir (heartbeats count from now)."""
        if self._data is None:
            return 0
        now = self._clock()
        restored = 0
        for _, record in self._data.records("sessions"):
            try:
                session = Session(**{**record, "last_heartbeat": now})
            except TypeError:
                continue
            with self._lock:
                self._sessions[session.session_id] = session
            restored += 1
        return restored

    def create(self, req: types.CreateSessionRequest) -> types.CreateSessionResponse:
        """Open a session."""
        now = self._clock()
        session = Session(
            session_id=f"sess-{uuid.uuid4()}",
            created=now,
            tags=list(req.tags),
            user_metadata=req.user_metadata,
            sdk_version=req.sdk_version,
            last_heartbeat=now,
            display_name=req.display_name,
            project_id=req.project_id,
        )
        with self._lock:
            self._sessions[session.session_id] = session
            self._keep(session)
        log.debug("session %s created (sdk %s)", session.session_id, req.sdk_version)
        return types.CreateSessionResponse(session_id=session.session_id)

    def get(self, session_id: str) -> Session:
        """The session ``session_id``; 404 when unknown."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise NotFound(f"Invalid session_id: session {session_id!r} not found")
        return session

    def heartbeat(self, req: types.SessionHeartbeatRequest) -> types.SessionHeartbeatResponse:
        """Record a heartbeat; 410 once the session is finished (that stops the client)."""
        session = self.get(req.session_id)
        if session.finished:
            raise SessionFinished(f"Session {req.session_id} is finished")
        session.last_heartbeat = self._clock()
        return types.SessionHeartbeatResponse()

    def finish(self, session_id: str, req: types.SessionFinishRequest) -> None:
        """Mark a session finished (its models and checkpoints stay available)."""
        session = self.get(session_id)
        with self._lock:
            session.finished = True
            self._keep(session)
        log.debug("session %s finished: %s", session_id, req.reason.type)

    def list_page(self, limit: int, offset: int) -> types.ListSessionsResponse:
        """Session ids, newest first."""
        with self._lock:
            ordered = sorted(self._sessions.values(), key=lambda s: s.created, reverse=True)
        page = ordered[offset : offset + limit]
        return types.ListSessionsResponse(
            sessions=[s.session_id for s in page],
            cursor=types.Cursor(offset=offset, limit=limit, total_count=len(ordered)),
        )

    def describe(self, session_id: str) -> dict[str, Any]:
        """The training runs, samplers, user_metadata and display_name of one session."""
        session = self.get(session_id)
        with self._lock:
            return {
                "training_run_ids": list(session.training_run_ids),
                "sampler_ids": list(session.sampler_ids),
                "user_metadata": session.user_metadata,
                "display_name": session.display_name,
            }

    def add_training_run(self, session: Session, model_id: str) -> None:
        """Record a model created in ``session``."""
        with self._lock:
            session.training_run_ids.append(model_id)
            self._keep(session)

    def training_runs(self, session: Session) -> list[str]:
        """The ids of the models created in ``session``, in order."""
        with self._lock:
            return list(session.training_run_ids)

    def add_sampler(self, session_id: str | None, sampler_id: str) -> None:
        """Record a sampling session opened in ``session_id`` (if that session exists)."""
        with self._lock:
            session = self._sessions.get(session_id) if session_id is not None else None
            if session is not None and sampler_id not in session.sampler_ids:
                session.sampler_ids.append(sampler_id)
                self._keep(session)

    def counts(self) -> tuple[int, int]:
        """(active sessions, all sessions)."""
        with self._lock:
            sessions = list(self._sessions.values())
        return sum(1 for s in sessions if not s.finished), len(sessions)

    def project_of(self, session_id: str | None) -> str | None:
        """The project a session is counted in (None: the default project or no session)."""
        with self._lock:
            session = self._sessions.get(session_id) if session_id is not None else None
        return None if session is None else session.project_id

    def metadata(self) -> dict[str, dict[str, str] | None]:
        """user_metadata of every session, by id (for the billing view)."""
        with self._lock:
            return {sid: s.user_metadata for sid, s in self._sessions.items()}

    def record_use(self, session_id: str | None, base_model: str, kind: str, amount: int) -> None:
        """Count usage (tokens trained or sampled, checkpoints) in the session's project."""
        self._ledger.use(
            self._clock(),
            kind,
            amount,
            base_model=base_model,
            session_id=session_id,
            project_id=self.project_of(session_id),
        )

    def assign_project(self, session_id: str, project_id: Any) -> None:
        """Move a session into a project (its usage is then counted there)."""
        if not isinstance(project_id, str) or not project_id:
            raise field_error(
                ["body", "project_id"], "project_id: a non-empty string", "string_type"
            )
        session = self.get(session_id)
        with self._lock:
            previous, session.project_id = session.project_id, project_id
            self._keep(session)
        self._ledger.audit(
            self._clock(),
            "session.project_assigned",
            session_id=session_id,
            project_id=project_id,
            previous_project_id=previous,
        )

    def search(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``SessionSearchResponse``: the sessions matching the filters, newest first."""
        limit = body.get("limit", 50)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 200:
            raise field_error(["body", "limit"], "limit: between 1 and 200", "int_type")
        wanted_meta = body.get("user_metadata") or {}
        words = str(body.get("display_name") or "").lower().split()
        projects = body.get("project_ids")
        statuses = {s.get("type") for s in body.get("statuses") or [] if isinstance(s, dict)}
        cursor = body.get("cursor") if isinstance(body.get("cursor"), dict) else None
        with self._lock:
            ordered = sorted(
                self._sessions.values(), key=lambda s: (s.created, s.session_id), reverse=True
            )
        found: list[dict[str, Any]] = []
        for session in ordered:
            if body.get("session_id") not in (None, session.session_id):
                continue
            if projects is not None and session.project_id not in projects:
                continue
            meta = session.user_metadata or {}
            if any(meta.get(k) != v for k, v in wanted_meta.items()):
                continue
            name = (session.display_name or "").lower()
            if any(word not in name for word in words):
                continue
            status = "client_finished" if session.finished else "active"
            if statuses and status not in statuses:
                continue
            if cursor is not None and (utc(session.created).isoformat(), session.session_id) >= (
                str(cursor.get("last_created_at")),
                str(cursor.get("last_session_id")),
            ):
                continue
            found.append(self._summary(session, status))
            if len(found) > limit:
                break
        page = found[:limit]
        next_cursor = None
        if len(found) > limit:
            last = page[-1]
            next_cursor = {
                "last_created_at": last["created_at"],
                "last_session_id": last["session_id"],
            }
        return {"sessions": page, "next_cursor": next_cursor}

    def _summary(self, session: Session, status: str) -> dict[str, Any]:
        runs = set(session.training_run_ids)
        ckpts = [r for r in self._checkpoints.list_all() if r.run_id in runs]
        reason = {"type": "client_finished", "reason": {"type": "success"}}
        return {
            "session_id": session.session_id,
            "created_at": utc(session.created).isoformat(),
            "owner": LOCAL_USER_URN,
            "project_id": session.project_id or "default",
            "status": reason if status == "client_finished" else {"type": "active"},
            "checkpoints_count": len(ckpts),
            "display_name": session.display_name,
            "user_metadata": session.user_metadata,
            "checkpoint_storage_bytes": sum(r.size_bytes for r in ckpts),
        }
