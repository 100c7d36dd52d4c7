"""Checkpoints of the local server on disk: training state, sampler weights, TTL, publish, archives.

Layout under the data dir (docs/service.rst §7)::

    runs/<run_id>/run.json                           the training run (base model, LoRA config)
    runs/<run_id>/weights/<name>/                     save_state: adapter + optimizer state
        adapter_model.safetensors  optimizer.safetensors  state.json  checkpoint_complete
    runs/<run_id>/sampler_weights/<name>/             save_weights_for_sampler (PEFT LoRA layout)
        adapter_config.json  adapter_model.safetensors  checkpoint_complete
    runs/<run_id>/<kind>/<name>.meta.json             time, TTL, public flag (kept out of archives)
    archives/<token>.tar.gz                           downloads handed out by the archive URL
    archives/<token>.json                             what a download URL serves, until when

``adapter_model.safetensors`` is written by hand in the safetensors format
(:mod:`~tinker_lite.local.storage.safetensors`).
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import tarfile
import threading
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tinker_lite.local.refusals import CheckpointConflict, CheckpointError, CheckpointNotFound
from tinker_lite.local.storage.safetensors import (
    flatten_state,
    read_safetensors,
    unflatten_state,
    write_safetensors,
)

__all__ = [
    "KINDS",
    "CheckpointConflict",
    "CheckpointError",
    "CheckpointNotFound",
    "CheckpointRecord",
    "CheckpointStore",
    "RunRecord",
    "TinkerPath",
    "parse_tinker_path",
    "read_safetensors",
    "untyped_checkpoint_id",
    "write_safetensors",
]

KINDS = {"weights": "training", "sampler_weights": "sampler", "external_weights": "external"}
ADAPTER_FILE = "adapter_model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "state.json"
ADAPTER_CONFIG_FILE = "adapter_config.json"
COMPLETE_FILE = "checkpoint_complete"
PEFT_PREFIX = "base_model.model."


@dataclass(frozen=True)
class TinkerPath:
    """A parsed ``tinker://<run_id>/<kind>/<name>`` path (docs/protocol.rst §4.8)."""

    run_id: str
    kind: str
    name: str

    @property
    def checkpoint_id(self) -> str:
        """``<kind>/<name>``, as used in REST paths."""
        return f"{self.kind}/{self.name}"

    @property
    def uri(self) -> str:
        """The full ``tinker://`` path."""
        return f"tinker://{self.run_id}/{self.kind}/{self.name}"


def valid_name(name: str) -> bool:
    """True when ``name`` can be a checkpoint name or run id (one safe path segment)."""
    return (
        bool(name)
        and "/" not in name
        and "\\" not in name
        and name not in (".", "..")
        and ("\x00" not in name)
    )


# The server's own files beside a checkpoint's folder (``<name>.meta.json``) and its temporary
# folders (``.<name>.tmp-*``): a new checkpoint name may not look like either.
META_SUFFIX = ".meta.json"
MAX_NAME_BYTES = 200
# Unicode categories refused in a new name: controls (CR, LF, ESC, DEL, C1), surrogates, and the
# line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a new checkpoint, or None when it can."""
    if not valid_name(name):
        return "use one path segment (not empty, '.' or '..'; no '/' or '\\')"
    for char in name:
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            return f"control characters are not allowed (U+{ord(char):04X})"
    if name.endswith(META_SUFFIX):
        return f"names ending in {META_SUFFIX!r} are reserved for the server's own files"
    if name.startswith("."):
        return "names starting with '.' are reserved for the server's temporary files"
    if len(name.encode()) > MAX_NAME_BYTES:
        return f"at most {MAX_NAME_BYTES} bytes (UTF-8)"
    return None


def untyped_checkpoint_id(checkpoint_id: str) -> str:
    """The 400 message for a checkpoint id without its kind (``weights/`` ...)."""
    return (
        f"Invalid checkpoint id {checkpoint_id!r}: expected weights/<name> or "
        "sampler_weights/<name>"
    )


def parse_tinker_path(path: str) -> TinkerPath | None:
    """Parse a tinker path; None when it is not ``tinker://<run>/<weights|sampler_weights>/<name>``."""
    if not isinstance(path, str) or not path.startswith("tinker://"):
        return None
    parts = path[len("tinker://") :].split("/")
    if len(parts) != 3 or parts[1] not in KINDS:
        return None
    if not valid_name(parts[0]) or not valid_name(parts[2]):
        return None
    return TinkerPath(parts[0], parts[1], parts[2])


# ---------------------------------------------------------------------------------------------
# records


@dataclass
class RunRecord:
    """A training run (one per model id)."""

    run_id: str
    base_model: str
    lora_rank: int
    train_unembed: bool = True
    train_mlp: bool = True
    train_attn: bool = True
    session_id: str | None = None
    user_metadata: dict[str, Any] | None = None
    created: float = 0.0
    last_request_time: float = 0.0


@dataclass
class CheckpointRecord:
    """One saved checkpoint."""

    run_id: str
    kind: str
    name: str
    created: float
    size_bytes: int = 0
    public: bool = False
    expires_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> TinkerPath:
        """The checkpoint's parsed ``tinker://`` path."""
        return TinkerPath(self.run_id, self.kind, self.name)

    @property
    def tinker_path(self) -> str:
        """The checkpoint's ``tinker://`` path."""
        return self.path.uri

    @property
    def checkpoint_id(self) -> str:
        """``<kind>/<name>``."""
        return self.path.checkpoint_id

    @property
    def checkpoint_type(self) -> str:
        """``training`` for ``weights``, ``sampler`` for ``sampler_weights``."""
        return KINDS[self.kind]


@dataclass
class _Archive:
    path: Path
    expires_at: float
    filename: str


class CheckpointStore:
    """Thread-safe registry of runs and checkpoints, written through to the data dir."""

    def __init__(self, root: Path, clock: Callable[[], float]) -> None:
        self.root = root
        self._clock = clock
        self._lock = threading.RLock()
        self._runs: dict[str, RunRecord] = {}
        self._checkpoints: dict[tuple[str, str, str], CheckpointRecord] = {}
        self._reserved: set[tuple[str, str, str]] = set()
        self._archives: dict[str, _Archive] = {}
        (root / "runs").mkdir(parents=True, exist_ok=True)
        self._load_index()

    # -- persistence ------------------------------------------------------------------------

    def _run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    def _ckpt_dir(self, key: tuple[str, str, str]) -> Path:
        return self._run_dir(key[0]) / key[1] / key[2]

    def _meta_path(self, key: tuple[str, str, str]) -> Path:
        return self._run_dir(key[0]) / key[1] / f"{key[2]}{META_SUFFIX}"

    def _load_index(self) -> None:
        """Read the runs and checkpoints of the data dir, whichever server version wrote it.

        What cannot be read is skipped, never fatal: an older server let a checkpoint be named
        ``<other>.meta.json``, so a folder may stand where a record is looked for.
        """
        for run_json in sorted((self.root / "runs").glob("*/run.json")):
            try:
                run = RunRecord(**json.loads(run_json.read_text()))
            except (OSError, ValueError, TypeError):
                continue
            self._runs[run.run_id] = run
            for kind in KINDS:
                for meta in sorted((run_json.parent / kind).glob("*" + META_SUFFIX)):
                    if not meta.is_file():
                        continue
                    try:
                        rec = CheckpointRecord(**json.loads(meta.read_text()))
                    except (OSError, ValueError, TypeError):
                        continue
                    key = (rec.run_id, rec.kind, rec.name)
                    if not isinstance(rec.name, str) or meta.name != rec.name + META_SUFFIX:
                        continue
                    if (self._ckpt_dir(key) / COMPLETE_FILE).is_file():
                        self._checkpoints[key] = rec
                # saves cut short by a kill
                for tmp in (run_json.parent / kind).glob(".*.tmp-*"):
                    shutil.rmtree(tmp, ignore_errors=True)
        for link in sorted((self.root / "archives").glob("*.json")):
            try:
                record = json.loads(link.read_text())
                archive = _Archive(Path(record["path"]), record["expires_at"], record["filename"])
            except (OSError, ValueError, TypeError, KeyError):
                continue
            self._archives[link.stem] = archive

    def _write_run(self, run: RunRecord) -> None:
        path = self._run_dir(run.run_id)
        path.mkdir(parents=True, exist_ok=True)
        _atomic_write(path / "run.json", json.dumps(asdict(run)).encode())

    def _write_meta(self, rec: CheckpointRecord) -> None:
        key = (rec.run_id, rec.kind, rec.name)
        _atomic_write(self._meta_path(key), json.dumps(asdict(rec)).encode())

    # -- runs -------------------------------------------------------------------------------

    def register_run(self, run: RunRecord) -> None:
        """Record a new training run (or replace the record of a re-created one)."""
        if not valid_name(run.run_id):
            raise CheckpointError(f"invalid training run id {run.run_id!r}")
        with self._lock:
            self._runs[run.run_id] = run
            self._write_run(run)

    def touch_run(self, run_id: str) -> None:
        """Mark a run as used now (``last_request_time``), in memory only."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None:
                run.last_request_time = self._clock()

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run record, or None."""
        with self._lock:
            return self._runs.get(run_id)

    def list_runs(self) -> list[RunRecord]:
        """Every run, newest first."""
        with self._lock:
            return sorted(self._runs.values(), key=lambda r: r.created, reverse=True)

    # -- lookups ----------------------------------------------------------------------------

    def _purge_expired(self) -> None:
        now = self._clock()
        for key, rec in list(self._checkpoints.items()):
            if rec.expires_at is not None and rec.expires_at <= now:
                self._remove(key)
        for token, archive in list(self._archives.items()):
            if archive.expires_at <= now:
                del self._archives[token]
                (self.root / "archives" / f"{token}.json").unlink(missing_ok=True)
                # an archive or an export is the link's own file; a checkpoint's file is not
                if archive.path.parent in (self.root / "archives", self.root / "artifacts"):
                    archive.path.unlink(missing_ok=True)

    def _remove(self, key: tuple[str, str, str]) -> None:
        self._checkpoints.pop(key, None)
        shutil.rmtree(self._ckpt_dir(key), ignore_errors=True)
        self._meta_path(key).unlink(missing_ok=True)

    def get(self, path: TinkerPath) -> CheckpointRecord | None:
        """The live checkpoint at ``path``, or None (expired ones are purged first)."""
        with self._lock:
            self._purge_expired()
            return self._checkpoints.get((path.run_id, path.kind, path.name))

    def exists_or_pending(self, path: TinkerPath) -> bool:
        """True when the checkpoint exists or a queued save will create it."""
        key = (path.run_id, path.kind, path.name)
        with self._lock:
            return self.get(path) is not None or key in self._reserved

    def lookup(self, run_id: str, checkpoint_id: str) -> CheckpointRecord:
        """The checkpoint ``<kind>/<name>`` of a run; CheckpointNotFound otherwise."""
        kind, _, name = checkpoint_id.partition("/")
        if kind not in KINDS:
            raise CheckpointError(untyped_checkpoint_id(checkpoint_id))
        path = parse_tinker_path(f"tinker://{run_id}/{kind}/{name}")
        rec = None if path is None else self.get(path)
        if rec is None:
            raise CheckpointNotFound(f"Checkpoint not found: tinker://{run_id}/{checkpoint_id}")
        return rec

    def list_run(self, run_id: str) -> list[CheckpointRecord]:
        """The run's checkpoints, oldest first."""
        with self._lock:
            self._purge_expired()
            recs = [r for r in self._checkpoints.values() if r.run_id == run_id]
        return sorted(recs, key=lambda r: r.created)

    def list_all(self) -> list[CheckpointRecord]:
        """Every checkpoint, newest first."""
        with self._lock:
            self._purge_expired()
            recs = list(self._checkpoints.values())
        return sorted(recs, key=lambda r: r.created, reverse=True)

    def last_of_kind(self, run_id: str, kind: str) -> CheckpointRecord | None:
        """The newest checkpoint of one kind for a run."""
        recs = [r for r in self.list_run(run_id) if r.kind == kind]
        return recs[-1] if recs else None

    # -- saving -----------------------------------------------------------------------------

    def reserve(self, run_id: str, kind: str, name: str, *, overwrite: bool) -> TinkerPath:
        """Claim a checkpoint name for a queued save; CheckpointConflict if taken."""
        problem = name_problem(name)
        path = parse_tinker_path(f"tinker://{run_id}/{kind}/{name}")
        if problem is not None or path is None:
            raise CheckpointError(f"path: invalid checkpoint name {name!r}: {problem}")
        key = (run_id, kind, name)
        with self._lock:
            if key in self._reserved or (self.get(path) is not None and not overwrite):
                raise CheckpointConflict(
                    f"Checkpoint already exists: {path.uri} (ResourceAlreadyExists); "
                    "pass overwrite=true to replace it"
                )
            self._reserved.add(key)
        return path

    def _commit(
        self,
        path: TinkerPath,
        write: Callable[[Path], None],
        ttl_seconds: int | None,
        info: Mapping[str, Any],
    ) -> CheckpointRecord:
        key = (path.run_id, path.kind, path.name)
        final = self._ckpt_dir(key)
        tmp = final.parent / f".{path.name}.tmp-{secrets.token_hex(4)}"
        try:
            tmp.mkdir(parents=True)
            write(tmp)
            (tmp / COMPLETE_FILE).write_bytes(b"")
            size = sum(p.stat().st_size for p in tmp.iterdir())
            now = self._clock()
            rec = CheckpointRecord(
                run_id=path.run_id,
                kind=path.kind,
                name=path.name,
                created=now,
                size_bytes=size,
                expires_at=None if ttl_seconds is None else now + ttl_seconds,
                extra=dict(info),
            )
            with self._lock:
                self._remove(key)
                os.replace(tmp, final)
                self._checkpoints[key] = rec
                self._write_meta(rec)
                self._reserved.discard(key)
            return rec
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            with self._lock:
                self._reserved.discard(key)

    def save_state(
        self,
        path: TinkerPath,
        adapter: Any,
        optimizer: Any,
        info: Mapping[str, Any],
        ttl_seconds: int | None,
    ) -> CheckpointRecord:
        """Write a ``weights/`` checkpoint: adapter and optimizer state plus run info."""

        def write(d: Path) -> None:
            adapter_tensors, adapter_manifest = flatten_state(adapter)
            optim_tensors, optim_manifest = flatten_state(optimizer)
            write_safetensors(d / ADAPTER_FILE, adapter_tensors, {"format": "pt"})
            write_safetensors(d / OPTIMIZER_FILE, optim_tensors, {"format": "pt"})
            state = {"adapter": adapter_manifest, "optimizer": optim_manifest}
            (d / STATE_FILE).write_text(json.dumps(state))

        return self._commit(path, write, ttl_seconds, info)

    def save_sampler(
        self,
        path: TinkerPath,
        adapter: Mapping[str, np.ndarray],
        adapter_config: Mapping[str, Any],
        info: Mapping[str, Any],
        ttl_seconds: int | None,
    ) -> CheckpointRecord:
        """Write a ``sampler_weights/`` checkpoint in the PEFT LoRA layout."""

        def write(d: Path) -> None:
            tensors, manifest = flatten_state(adapter)
            named = {
                (k if k.startswith("base_model.") else PEFT_PREFIX + k): v
                for k, v in tensors.items()
            }
            keymap = {(k if k.startswith("base_model.") else PEFT_PREFIX + k): k for k in tensors}
            meta = {
                "format": "pt",
                "tinker_lite.keys": json.dumps(keymap, sort_keys=True),
                "tinker_lite.manifest": json.dumps(manifest),
            }
            write_safetensors(d / ADAPTER_FILE, named, meta)
            (d / ADAPTER_CONFIG_FILE).write_text(json.dumps(dict(adapter_config), indent=2))

        return self._commit(path, write, ttl_seconds, info)

    # -- loading ----------------------------------------------------------------------------

    def load_state(self, path: TinkerPath) -> tuple[Any, Any, dict[str, Any]]:
        """Read a checkpoint: (adapter state, optimizer state or None, run info)."""
        with self._lock:
            rec = self.get(path)
            if rec is None:
                raise CheckpointNotFound(f"Invalid checkpoint tinker path {path.uri}.")
            d = self._ckpt_dir((path.run_id, path.kind, path.name))
            info = dict(rec.extra)
            if path.kind == "sampler_weights":
                return self._load_sampler_dir(d), None, info
            state = json.loads((d / STATE_FILE).read_text())
            adapter_tensors, _ = read_safetensors(d / ADAPTER_FILE)
            optim_tensors, _ = read_safetensors(d / OPTIMIZER_FILE)
        adapter = unflatten_state(adapter_tensors, state["adapter"])
        optimizer = unflatten_state(optim_tensors, state["optimizer"])
        return adapter, optimizer, info

    def _load_sampler_dir(self, d: Path) -> Any:
        tensors, meta = read_safetensors(d / ADAPTER_FILE)
        keymap = json.loads(meta.get("tinker_lite.keys", "{}"))
        flat = {
            keymap.get(k, k[len(PEFT_PREFIX) :] if k.startswith(PEFT_PREFIX) else k): v
            for k, v in tensors.items()
        }
        manifest_text = meta.get("tinker_lite.manifest")
        if manifest_text is None:
            return flat
        return unflatten_state(flat, json.loads(manifest_text))

    # -- REST operations --------------------------------------------------------------------

    def delete(self, run_id: str, checkpoint_id: str) -> None:
        """Delete a checkpoint; CheckpointNotFound if absent."""
        with self._lock:
            rec = self.lookup(run_id, checkpoint_id)
            self._remove((rec.run_id, rec.kind, rec.name))

    def set_public(self, run_id: str, checkpoint_id: str, public: bool) -> None:
        """Publish or unpublish; CheckpointConflict when already in that state."""
        with self._lock:
            rec = self.lookup(run_id, checkpoint_id)
            if rec.public == public:
                state = "public" if public else "private"
                raise CheckpointConflict(f"Checkpoint {rec.tinker_path} is already {state}")
            rec.public = public
            self._write_meta(rec)

    def set_ttl(self, run_id: str, checkpoint_id: str, ttl_seconds: int | None) -> None:
        """Set (or with None clear) the checkpoint's time to live, counted from now."""
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise CheckpointError("ttl_seconds must be positive (or null to remove the TTL)")
        with self._lock:
            rec = self.lookup(run_id, checkpoint_id)
            rec.expires_at = None if ttl_seconds is None else self._clock() + ttl_seconds
            self._write_meta(rec)

    def make_archive(self, run_id: str, checkpoint_id: str, ttl_s: float) -> tuple[str, float]:
        """Pack a checkpoint as tar.gz for download: (token, expires_at)."""
        with self._lock:
            rec = self.lookup(run_id, checkpoint_id)
            d = self._ckpt_dir((rec.run_id, rec.kind, rec.name))
            archive_dir = self.root / "archives"
            archive_dir.mkdir(parents=True, exist_ok=True)
            token = secrets.token_urlsafe(18)
            target = archive_dir / f"{token}.tar.gz"
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                for file in sorted(d.iterdir()):
                    tar.add(file, arcname=file.name, filter=_plain_member)
            _atomic_write(target, buf.getvalue())
            expires_at = self._clock() + ttl_s
            safe = f"{rec.run_id}-{rec.kind}-{rec.name}".replace(":", "_")
            self._add_link(token, _Archive(target, expires_at, f"{safe}.tar.gz"))
        return token, expires_at

    def link_file(self, file: Path, filename: str, ttl_s: float) -> tuple[str, float]:
        """A download token for one file (signed-URL style): (token, expires_at)."""
        token = secrets.token_urlsafe(18)
        expires_at = self._clock() + ttl_s
        with self._lock:
            self._add_link(token, _Archive(file, expires_at, filename))
        return token, expires_at

    def _add_link(self, token: str, archive: _Archive) -> None:
        """Hand out a download token; kept on disk, so a restarted server still serves it."""
        record = {
            "path": str(archive.path),
            "expires_at": archive.expires_at,
            "filename": archive.filename,
        }
        archive_dir = self.root / "archives"
        archive_dir.mkdir(parents=True, exist_ok=True)
        _atomic_write(archive_dir / f"{token}.json", json.dumps(record).encode())
        self._archives[token] = archive

    def checkpoint_files(self, run_id: str, checkpoint_id: str) -> dict[str, Path]:
        """The files of a checkpoint by their path relative to its root (no marker file)."""
        with self._lock:
            rec = self.lookup(run_id, checkpoint_id)
            d = self._ckpt_dir((rec.run_id, rec.kind, rec.name))
        return {f.name: f for f in sorted(d.iterdir()) if f.is_file() and f.name != COMPLETE_FILE}

    def write_artifact(self, name: str, data: bytes) -> Path:
        """Store a generated file (a trace export) under the data dir; return its path."""
        target = self.root / "artifacts" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(target, data)
        return target

    def copy(self, source: TinkerPath, run: RunRecord, ttl_seconds: int | None) -> CheckpointRecord:
        """Copy a checkpoint into the new run ``run`` (same kind and name); return the copy."""
        with self._lock:
            rec = self.get(source)
            if rec is None:
                raise CheckpointNotFound(f"Checkpoint not found: {source.uri}")
            src = self._ckpt_dir((rec.run_id, rec.kind, rec.name))
            extra = dict(rec.extra)
        self.register_run(run)
        target = TinkerPath(run.run_id, rec.kind, rec.name)

        def write(d: Path) -> None:
            for file in src.iterdir():
                if file.is_file() and file.name != COMPLETE_FILE:
                    shutil.copy2(file, d / file.name)

        with self._lock:
            self._reserved.add((target.run_id, target.kind, target.name))
        return self._commit(target, write, ttl_seconds, extra)

    def archive(self, token: str) -> tuple[Path, str] | None:
        """The archive file for a download token and its file name, or None if unknown/expired."""
        with self._lock:
            self._purge_expired()
            archive = self._archives.get(token)
            if archive is None or not archive.path.exists():
                return None
            return archive.path, archive.filename


def _plain_member(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
