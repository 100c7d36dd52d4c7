"""What the local server keeps in its data dir so that a server restarted on it carries on.

With a data dir given (``serve --data-dir DIR``, ``LocalServer(data_dir=...)``), every change a
client could rely on is written through before it is answered, so a server killed at any moment
(even ``kill -9``) and started again on the same directory comes back with it::

    sessions/<session_id>.json          a session: tags, metadata, project, its runs and samplers
    runs/<model_id>/model.json          a training model: base model, LoRA settings, optimizer
    runs/<model_id>/ledger.jsonl        its requests: accepted / rejected / applied (with result)
    runs/<model_id>/state.npz           its weights, optimizer state and gradients after the last
                                        request that changed them
    samplers/<digest>.json (+ .npz)     a sampling session (+ the weights of an unsaved one)
    ledger/audit.jsonl, usage.jsonl     the audit log and the usage records

A training request is *applied* once its ledger line is written: the state snapshot comes first
(it names the request it includes, so a line lost to a kill between the two is written again on
restart), the future completes last. A restarted server so answers every request it accepted:
applied ones with their stored result (while ``result_ttl`` lasts), and those that had not run
yet fail with a "lost in a restart" error, consuming their ``seq_id`` so the model's next request
runs. Sampling requests and their results are not kept (a poll gets 410 and the client
re-submits), nor are heartbeat times, JWT secrets or fault counters.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tinker_lite.local.model import tiny_lm as model_mod

__all__ = [
    "LOST_IN_RESTART",
    "DataDir",
    "ModelJournal",
    "RestoredModel",
    "lm_state",
    "load_lm_state",
    "npz_bytes",
    "npz_read",
]

log = logging.getLogger("tinker_lite.local")

LOST_IN_RESTART = (
    "The local server restarted before this request ran; it was not applied. Its seq_id is "
    "consumed: later requests of the model run."
)
# The training requests that change a model's weights, optimizer state or gradients.
MUTATING_KINDS = frozenset(
    {"create_model", "create_via_load", "forward_backward", "optim_step", "load_weights"}
)
_META_KEY = "__meta__"


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _dumps(record: Any) -> bytes:
    return json.dumps(record, separators=(",", ":"), allow_nan=False).encode()


class DataDir:
    """JSON records and append-only JSON-lines logs under the server's data dir."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, relative: str, record: Any) -> None:
        """Replace one JSON record atomically (a reader sees the old or the new one)."""
        _atomic_write(self.root / relative, _dumps(record))

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Replace one file atomically."""
        _atomic_write(self.root / relative, data)

    def read(self, relative: str) -> Any:
        """One JSON record, or None when it is missing or unreadable."""
        try:
            return json.loads((self.root / relative).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            log.warning("local server: skipping the unreadable record %s", relative)
            return None

    def records(self, folder: str) -> Iterator[tuple[Path, Any]]:
        """Every ``*.json`` record of a folder, sorted by file name; unreadable ones skipped."""
        for path in sorted((self.root / folder).glob("*.json")):
            try:
                yield path, json.loads(path.read_bytes())
            except (OSError, ValueError):
                log.warning("local server: skipping the unreadable record %s", path)

    def append(self, relative: str, record: Any) -> None:
        """Append one line with a single ``write`` (a kill loses at most that line)."""
        path = self.root / relative
        line = _dumps(record) + b"\n"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def lines(self, relative: str) -> list[Any]:
        """The records of a JSON-lines log; a torn last line (a kill mid-write) is skipped."""
        try:
            data = (self.root / relative).read_bytes()
        except FileNotFoundError:
            return []
        out = []
        for line in data.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    @staticmethod
    def digest(name: str) -> str:
        """A file-name-safe stand-in for an id."""
        return hashlib.sha256(name.encode()).hexdigest()[:32]


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Arrays in one ``.npz`` file, as bytes (named as ``np.load`` gives them back)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub: a key could be allow_pickle
    return buffer.getvalue()


def npz_read(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file written by :func:`npz_bytes`."""
    with np.load(path) as npz:
        return {key: npz[key] for key in npz.files}


def lm_state(lm: model_mod.TinyLM) -> dict[str, np.ndarray]:
    """Everything a training request can change in a model: weights, optimizer, gradients."""
    arrays = {f"adapter:{k}": v for k, v in lm.adapter_state().items()}
    arrays.update({f"optimizer:{k}": np.asarray(v) for k, v in lm.optimizer_state().items()})
    # The accumulated gradients between forward_backward and optim_step are model state too:
    # TinyLM keeps them private (it has no accessor), so they are read here directly.
    with lm._lock:
        arrays.update({f"grads:{k}": v.copy() for k, v in lm._grads.items()})
    return arrays


def load_lm_state(lm: model_mod.TinyLM, arrays: Mapping[str, np.ndarray]) -> None:
    """Put back what :func:`lm_state` took."""

    def part(prefix: str) -> dict[str, np.ndarray]:
        return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}

    lm.load_adapter_state(part("adapter:"))
    lm.load_optimizer_state(part("optimizer:"))
    grads = part("grads:")
    with lm._lock:
        lm._grads = {k: grads[k].astype(v.dtype) for k, v in lm._grads.items()}


@dataclass
class RestoredModel:
    """A training model as read back from its files (see :meth:`ModelJournal.read`)."""

    record: dict[str, Any]
    # seq_id -> ("accepted", kind, request_id) or ("rejected", status, detail)
    by_seq: dict[int, tuple[str, Any, Any]] = field(default_factory=dict)
    # every applied request in execution order: (its ``applied`` entry, its ledger line)
    applied: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    # accepted requests that never ran: (seq_id or None, kind, request_id)
    lost: list[tuple[int | None, str, str]] = field(default_factory=list)
    snapshot: Callable[[], dict[str, np.ndarray] | None] = lambda: None


class ModelJournal:
    """The files of one training model: its record, its request ledger and its state."""

    def __init__(self, data: DataDir, model_id: str) -> None:
        self._data = data
        self._folder = f"runs/{model_id}"
        self._ledger = f"{self._folder}/ledger.jsonl"
        self._state = data.root / self._folder / "state.npz"

    def create(self, record: Mapping[str, Any]) -> None:
        """Write the model's record (before its first request is accepted)."""
        self._data.write(f"{self._folder}/model.json", dict(record))

    def accepted(self, seq_id: int | None, kind: str, request_id: str) -> None:
        """A request was queued under ``request_id``."""
        self._data.append(
            self._ledger, {"event": "accepted", "seq_id": seq_id, "kind": kind, "id": request_id}
        )

    def rejected(self, seq_id: int, status: int, detail: Any) -> None:
        """A request was refused before it was queued; it consumed ``seq_id``."""
        self._data.append(
            self._ledger,
            {"event": "rejected", "seq_id": seq_id, "status": status, "detail": detail},
        )

    def applied(
        self,
        entry: Mapping[str, Any],
        *,
        result: Any,
        error: str | None,
        category: str | None,
        done_at: float,
        lm: model_mod.TinyLM | None,
    ) -> None:
        """A request ran: snapshot the model's state if given, then write the ledger line.

        ``entry`` is the request's line of the model's ``applied`` list; ``result`` its answer
        as JSON builtins, or ``error`` and ``category`` its failure; ``done_at`` the server
        clock's time (results expire ``result_ttl`` after it).
        """
        line = {
            "event": "applied",
            "entry": dict(entry),
            "result": result,
            "error": error,
            "category": category,
            "done_at": done_at,
        }
        if lm is not None:
            arrays = lm_state(lm)
            arrays[_META_KEY] = np.frombuffer(_dumps(line), dtype=np.uint8)
            _atomic_write(self._state, npz_bytes(arrays))
        self._data.append(self._ledger, line)

    def _read_snapshot(self) -> tuple[dict[str, Any] | None, dict[str, np.ndarray] | None]:
        try:
            arrays = npz_read(self._state)
        except FileNotFoundError:
            return None, None
        except (OSError, ValueError):
            log.warning("local server: the state of %s is unreadable", self._folder)
            return None, None
        meta = json.loads(arrays.pop(_META_KEY).tobytes())
        return meta, arrays

    def read(self) -> RestoredModel | None:
        """Read the model back; the last applied line is re-written if a kill lost it."""
        record = self._data.read(f"{self._folder}/model.json")
        if not isinstance(record, dict):
            return None
        restored = RestoredModel(record=record)
        events = self._data.lines(self._ledger)
        meta, _ = self._read_snapshot()
        applied_ids = {e["entry"]["request_id"] for e in events if e.get("event") == "applied"}
        if meta is not None and meta["entry"]["request_id"] not in applied_ids:
            self._data.append(self._ledger, meta)  # snapshot written, ledger line lost
            events.append(meta)
        queued: dict[str, tuple[int | None, str]] = {}
        for event in events:
            kind = event.get("event")
            if kind == "accepted":
                seq_id = event["seq_id"]
                queued[event["id"]] = (seq_id, event["kind"])
                if seq_id is not None:
                    restored.by_seq[seq_id] = ("accepted", event["kind"], event["id"])
            elif kind == "rejected":
                restored.by_seq[event["seq_id"]] = ("rejected", event["status"], event["detail"])
            elif kind == "applied":
                queued.pop(event["entry"]["request_id"], None)
                restored.applied.append((event["entry"], event))
        restored.lost = [(seq, kind, rid) for rid, (seq, kind) in queued.items()]
        restored.snapshot = lambda: self._read_snapshot()[1]
        return restored
