"""A checkpoint's archive to disk: resumable download, safe extraction (docs/protocol.rst §4.6)."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinker_lite._transport.download import (
    DEFAULT_MAX_ARCHIVE_BYTES,
    download,
    extract_archive,
    part_path,
)
from tinker_lite.types import ParsedCheckpointTinkerPath

__all__ = [
    "DEFAULT_MAX_ARCHIVE_BYTES",
    "DownloadProgress",
    "default_archive_name",
    "download_checkpoint",
]


@dataclass(frozen=True)
class DownloadProgress:
    """Where a checkpoint download stands, as given to a ``progress`` callback.

    ``bytes_done`` counts the archive's bytes on disk (a resumed download starts at
    ``resumed_from``), ``total_bytes`` is the archive's size once the server has said it
    (``None`` before). ``attempts`` counts the GET requests so far and ``url_refreshes`` the
    signed URLs asked for again because one expired. ``done`` is true on the last call, once
    the archive is verified (and extracted, when asked).
    """

    path: Path
    bytes_done: int
    total_bytes: int | None
    resumed_from: int
    attempts: int = 0
    url_refreshes: int = 0
    done: bool = False


ProgressCallback = Callable[[DownloadProgress], object]


def default_archive_name(parsed: ParsedCheckpointTinkerPath) -> str:
    """A file name for a checkpoint's archive: ``<run>-<kind>-<name>.tar.gz``, filesystem-safe."""
    kind, _, name = parsed.checkpoint_id.partition("/")
    raw = f"{parsed.training_run_id}-{kind}-{name}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", raw) + ".tar.gz"


class _ProgressRelay:
    """The download's progress hooks (``set_total``/``reset``/``update``) as callback values."""

    def __init__(self, path: Path, callback: ProgressCallback, resumed_from: int) -> None:
        self.callback = callback
        self.now = DownloadProgress(path, resumed_from, None, resumed_from)

    def set_total(self, total: int | None) -> None:
        self.now = dataclasses.replace(self.now, total_bytes=total)

    def reset(self, count: int = 0) -> None:
        self.say(bytes_done=count)

    def update(self, n: int = 1) -> None:
        self.say(bytes_done=self.now.bytes_done + n)

    def say(self, **changes: Any) -> None:
        self.now = dataclasses.replace(self.now, **changes)
        self.callback(self.now)


def download_checkpoint(
    parsed: ParsedCheckpointTinkerPath,
    archive_url: Callable[[], str],
    dest: str | os.PathLike[str],
    *,
    extract: bool = False,
    progress: ProgressCallback | None = None,
    overwrite: bool = False,
    max_bytes: int | None = DEFAULT_MAX_ARCHIVE_BYTES,
    sleep: Callable[[float], object],
    stall_timeout: float,
) -> Path:
    """Download the checkpoint's archive to ``dest`` and, when asked, extract it (docs/api.rst,
    "Downloading a checkpoint"); ``archive_url`` gives a fresh signed URL."""
    dest_path = Path(dest)
    folder: Path | None = None
    if extract:
        folder = dest_path
        archive = dest_path.with_name(dest_path.name + ".tar.gz")
        if folder.exists() and any(folder.iterdir()) and not overwrite:
            raise FileExistsError(f"{folder} is not empty (pass overwrite=True to extract anyway)")
    else:
        archive = dest_path / default_archive_name(parsed) if dest_path.is_dir() else dest_path
        if archive.exists() and not overwrite:
            raise FileExistsError(f"{archive} already exists (use --force to replace it)")
    relay: _ProgressRelay | None = None
    if progress is not None:
        part = part_path(archive)
        relay = _ProgressRelay(archive, progress, part.stat().st_size if part.exists() else 0)
    result = download(
        archive_url(),
        archive,
        refresh_url=archive_url,
        progress=relay,
        overwrite=overwrite or extract,
        sleep=sleep,
        stall_timeout=stall_timeout,
        max_bytes=max_bytes,
    )
    if folder is not None:
        try:
            extract_archive(result.path, folder, max_bytes=max_bytes)
        finally:
            result.path.unlink()  # asked for the folder: the archive goes, extracted or refused
    if relay is not None:
        relay.say(
            bytes_done=result.size,
            total_bytes=result.size,
            attempts=result.attempts,
            url_refreshes=result.url_refreshes,
            done=True,
        )
    return result.path if folder is None else folder
