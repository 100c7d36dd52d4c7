"""Server-side state of the local Tinker service: the per-resource stores and the server counters.

Everything here is transport-free: the HTTP layer (:mod:`tinker_lite.local.http`) parses and
validates a request into a ``types`` object, calls one method of a store of :class:`ServerState`,
and encodes what it returns. Submits return at once with an ``UntypedAPIFuture``; the work runs on
a worker thread (one per training model, executing its requests strictly in ``seq_id`` order,
docs/service.rst §8) or on the sampling pool, and completes a
:class:`~tinker_lite.local.service.futures.FutureEntry`.

With ``durable`` (a data dir given by the user), the stores write their state through to it and
a new ServerState on the same dir restores it (:mod:`~tinker_lite.local.storage.durable`).

The stores, one per resource: ``sessions`` (:mod:`~tinker_lite.local.service.sessions`),
``models`` and their queues (:mod:`~tinker_lite.local.service.runs`), ``training`` requests
(:mod:`~tinker_lite.local.service.training`), ``samplers``
(:mod:`~tinker_lite.local.service.sampling`), ``checkpoints`` on disk
(:mod:`~tinker_lite.local.storage.checkpoints`), REST ``views``
(:mod:`~tinker_lite.local.service.views`), ``futures``
(:mod:`~tinker_lite.local.service.futures`) and the usage and audit ``ledger``
(:mod:`~tinker_lite.local.service.ledger`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tinker_lite.local.model.tiny_lm import CONTEXT_LENGTH
from tinker_lite.local.service.catalog import (
    MODELS_ENV,
    SUPPORTED_MODELS,
    Catalog,
    registered_models,
)
from tinker_lite.local.service.futures import FutureStore
from tinker_lite.local.service.identity import LOCAL_USER_URN
from tinker_lite.local.service.ledger import Ledger
from tinker_lite.local.service.runs import ModelStore
from tinker_lite.local.service.sampling import SamplerStore
from tinker_lite.local.service.sessions import SessionStore
from tinker_lite.local.service.training import Training
from tinker_lite.local.service.views import Views
from tinker_lite.local.storage.checkpoints import CheckpointStore
from tinker_lite.local.storage.durable import DataDir

__all__ = ["MAX_CLIENT_TAGS", "MODELS_ENV", "SUPPORTED_MODELS", "ServerState", "registered_models"]

# How many distinct X-Local-Client tags the stats count (later ones are not counted).
MAX_CLIENT_TAGS = 1000


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
        models: Sequence[str] = (),
        durable: bool = False,
        context_length: int = CONTEXT_LENGTH,
    ) -> None:
        self.clock = clock
        self.catalog = Catalog(models, stub_model=stub_model, context_length=context_length)
        self.futures = FutureStore(result_ttl, clock)
        self.checkpoints = CheckpointStore(data_dir, clock)
        data = DataDir(data_dir) if durable else None
        self.ledger = Ledger(LOCAL_USER_URN, data)
        self.sessions = SessionStore(clock, self.ledger, self.checkpoints, data)
        self.models = ModelStore(clock, self.futures, self.checkpoints, self.sessions, data)
        self.samplers = SamplerStore(
            self.catalog,
            self.futures,
            self.checkpoints,
            self.sessions,
            workers=sample_workers,
            data=data,
        )
        self.restored: dict[str, int] = {}
        if data is not None:
            sessions = self.sessions.restore()
            samplers = self.samplers.restore()
            restored_models, lost = self.models.restore(data, self.catalog)
            self.restored = {
                "sessions": sessions,
                "models": restored_models,
                "samplers": samplers,
                "lost_requests": lost,
            }
        self.training = Training(
            clock=clock,
            catalog=self.catalog,
            models=self.models,
            sessions=self.sessions,
            samplers=self.samplers,
            checkpoints=self.checkpoints,
            ledger=self.ledger,
        )
        self.views = Views(
            clock=clock,
            checkpoints=self.checkpoints,
            sessions=self.sessions,
            models=self.models,
            ledger=self.ledger,
        )
        self._closed = False
        self._lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self.request_counts: Counter[str] = Counter()
        # requests by X-Local-Client header: {"requests": n, "last_request_at": epoch seconds}
        self.client_requests: dict[str, dict[str, Any]] = {}
        self.status_counts: dict[str, Counter[int]] = {}
        self.telemetry_events = 0
        self.telemetry_batches = 0
        # The last telemetry bodies received, as sent (for tests that inspect what clients send).
        self.telemetry_bodies: deque[bytes] = deque(maxlen=1000)

    def count_request(self, path: str, client: str | None = None) -> None:
        """Count one received HTTP request for ``path`` (and for its ``X-Local-Client`` tag)."""
        now = time.time()
        with self._stats_lock:
            self.request_counts[path] += 1
            if client is not None:
                seen = self.client_requests.get(client)
                if seen is not None:
                    seen["requests"] += 1
                    seen["last_request_at"] = now
                elif len(self.client_requests) < MAX_CLIENT_TAGS:
                    self.client_requests[client] = {"requests": 1, "last_request_at": now}

    def count_status(self, path: str, status: int) -> None:
        """Count one answered HTTP request by status."""
        with self._stats_lock:
            self.status_counts.setdefault(path, Counter())[status] += 1

    def count_telemetry(self, events: int, body: bytes = b"") -> None:
        """Count a received telemetry batch (its body is kept in ``telemetry_bodies``)."""
        with self._stats_lock:
            self.telemetry_batches += 1
            self.telemetry_events += events
            self.telemetry_bodies.append(body)

    def stats(self) -> dict[str, Any]:
        """The server's counters as JSON-able builtins (see the package docstring)."""
        models = {m.model_id: m.describe() for m in self.models.all()}
        active, sessions = self.sessions.counts()
        with self._stats_lock:
            return {
                "requests": dict(self.request_counts),
                "clients": {tag: dict(seen) for tag, seen in self.client_requests.items()},
                "responses": {
                    path: {str(k): v for k, v in sorted(c.items())}
                    for path, c in self.status_counts.items()
                },
                "models": models,
                "samples_submitted": self.samplers.submitted,
                "samples_completed": self.samplers.completed,
                "telemetry_events": self.telemetry_events,
                "telemetry_batches": self.telemetry_batches,
                "active_sessions": active,
                "sessions": sessions,
                "futures": {
                    "stored": len(self.futures),
                    "pending": len(self.futures.pending()),
                    "completed": self.futures.completed_count,
                },
                "restored": dict(self.restored),
            }

    def close(self, timeout: float = 5.0) -> None:
        """Stop the workers, release waiting polls; queued work is abandoned."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.models.stop()
        self.samplers.shutdown()
        self.futures.wake_all()
        self.models.join(time.monotonic() + timeout)
