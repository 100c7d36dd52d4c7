"""Resumable download of checkpoint archives from a signed URL, and safe extraction
(docs/protocol.rst §4.6)."""

from __future__ import annotations

import os
import stat
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

import requests

from tinker_lite._errors import (
    APIConnectionError,
    APIStatusError,
    DownloadError,
    TinkerError,
    UnsafeArchiveError,
    status_error_class,
)
from tinker_lite._transport.failures import TRANSPORT_ERRORS, classify_failure
from tinker_lite._transport.loops import (
    ServiceWait,
    at_attempt,
    attempt_error,
    download_backoff,
    retry_loop,
)
from tinker_lite._transport.retry import DEFAULT_RETRY_POLICY, StallWatch

__all__ = [
    "DownloadError",
    "DownloadResult",
    "ProgressSink",
    "UnsafeArchiveError",
    "download",
    "extract_archive",
    "part_path",
]

RETRY_STATUSES = frozenset({408, 409, 425, 429})
EXPIRED_URL_STATUSES = frozenset({403, 404, 410})
DEFAULT_STALL_TIMEOUT_S = 300.0
DEFAULT_MAX_ARCHIVE_BYTES = 32 * 1024**3
"""The default bound on a checkpoint archive, downloaded (32 GiB) and extracted alike."""
_CHUNK_SIZE = 1 << 16
_TIMEOUT = (10.0, 60.0)  # connect, read


class ProgressSink(Protocol):
    """What a download reports its progress to (:class:`tinker_lite._progress.Progress`)."""

    def set_total(self, total: int | None) -> None: ...

    def reset(self, count: int = 0) -> None: ...

    def update(self, n: int = 1) -> None: ...


@dataclass(frozen=True)
class DownloadResult:
    """What :func:`download` did: the final path, its size, where it resumed, how many tries."""

    path: Path
    size: int
    resumed_from: int
    attempts: int
    url_refreshes: int


def part_path(dest: str | os.PathLike[str]) -> Path:
    """The temporary file a download of ``dest`` writes to: ``<dest>.part``."""
    dest_path = Path(dest)
    return dest_path.with_name(dest_path.name + ".part")


def _header_int(text: str | None) -> int | None:
    """Read a byte count from a header value: ASCII digits only, else None."""
    digits = (text or "").strip()
    # str.isdigit() alone admits "²" (a Latin-1 header byte), which int() refuses.
    return int(digits) if digits.isascii() and digits.isdigit() else None


def _parse_content_range(value: str | None) -> tuple[int | None, int | None]:
    """Return (first byte, total) from ``bytes a-b/total`` or ``bytes */total``."""
    if not value:
        return None, None
    unit, _, spec = value.strip().partition(" ")
    if unit.lower() != "bytes" or "/" not in spec:
        return None, None
    span, _, total_text = spec.partition("/")
    return _header_int(span.split("-", 1)[0]), _header_int(total_text)


def _status_error(resp: requests.Response, what: str) -> APIStatusError:
    cls = status_error_class(resp.status_code)
    reason = resp.reason or ""
    return cls(
        f"{what}: HTTP {resp.status_code} {reason}".rstrip(),
        status_code=resp.status_code,
        headers=dict(resp.headers),
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def download(
    url: str,
    dest: str | os.PathLike[str],
    *,
    refresh_url: Callable[[], str] | None = None,
    progress: ProgressSink | None = None,
    overwrite: bool = False,
    max_attempts: int = 8,
    chunk_size: int = _CHUNK_SIZE,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT_S,
    max_bytes: int | None = DEFAULT_MAX_ARCHIVE_BYTES,
) -> DownloadResult:
    """Download ``url`` to ``dest`` by the rules of docs/protocol.rst §4.6, resuming from
    ``<dest>.part``; ``refresh_url`` gives a new signed URL for an expired one."""
    dest_path = Path(dest)
    if dest_path.exists() and not overwrite:
        raise FileExistsError(f"{dest_path} already exists (use --force to replace it)")
    dest_path.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest_path)
    state = _Download(
        part,
        url,
        what=f"download of {dest_path.name}",
        http=requests.Session(),
        refresh_url=refresh_url,
        progress=progress,
        chunk_size=chunk_size,
        stall=StallWatch(stall_timeout, clock),
        max_bytes=max_bytes,
    )
    resumed_from = _size(part)
    backoff = download_backoff(DEFAULT_RETRY_POLICY)
    retrier = retry_loop(
        wait=ServiceWait(
            DEFAULT_RETRY_POLICY,
            fallback=lambda retry: (
                0.0
                if isinstance(attempt_error(retry), _Restart)
                else backoff(at_attempt(retry, state.failures))
            ),
        ),
        stop=lambda retry: (
            state.failures >= max_attempts or retry.upcoming_sleep > state.stall.remaining()
        ),
        retry_on=_retried,
        sleep=sleep,
    )
    with state.http:
        retrier(state.attempt)

    size = _size(part)
    if state.total is not None and size != state.total:
        raise DownloadError(f"downloaded {size} bytes, expected {state.total}")
    os.replace(part, dest_path)
    return DownloadResult(
        path=dest_path,
        size=size,
        resumed_from=resumed_from,
        attempts=state.attempts,
        url_refreshes=state.refreshes,
    )


class _Restart(DownloadError):
    """The part file was wrong and is emptied: the download restarts at once, without a wait."""


def _retried(error: BaseException) -> bool:
    """Whether a failed attempt is tried again: the connection, 408/409/425/429/5xx, a restart."""
    if isinstance(error, APIStatusError):
        return error.status_code in RETRY_STATUSES or error.status_code >= 500
    return isinstance(error, (APIConnectionError, _Restart))


@dataclass(eq=False)
class _Download:
    """One download's progress between its attempts (each attempt is one GET from the offset)."""

    part: Path
    url: str
    what: str
    http: requests.Session
    refresh_url: Callable[[], str] | None
    progress: ProgressSink | None
    chunk_size: int
    stall: StallWatch
    max_bytes: int | None
    attempts: int = 0
    failures: int = 0  # failed attempts since the last byte written
    refreshes: int = 0
    refreshed_since_progress: bool = False
    total: int | None = None

    def failed(self, error: TinkerError) -> TinkerError:
        self.failures += 1
        return error

    def attempt(self) -> None:
        """GET from the part file's size until the archive is whole (refreshing an expired URL
        once between two successful reads); raise what went wrong otherwise."""
        while True:
            offset = _size(self.part)
            if self.total is not None and offset == self.total:
                return
            headers = {"Accept-Encoding": "identity"}
            if offset:
                headers["Range"] = f"bytes={offset}-"
            self.attempts += 1
            try:
                resp = self.http.get(self.url, headers=headers, timeout=_TIMEOUT, stream=True)
            except TRANSPORT_ERRORS as exc:
                # The exception text holds the signed URL: only its kind is shown.
                raise self.failed(
                    APIConnectionError(
                        f"{self.what} failed after {self.failures + 1} attempts: connection "
                        f"{classify_failure(exc)} ({type(exc).__name__})"
                    )
                ) from None
            with resp:
                if self._read(resp, offset):
                    return

    def _read(self, resp: requests.Response, offset: int) -> bool:
        """Handle one answer: True when the archive is whole; False to GET again at once."""
        status = resp.status_code
        what = self.what
        if status in EXPIRED_URL_STATUSES:
            if self.refresh_url is not None and not self.refreshed_since_progress:
                self.url = self.refresh_url()
                self.refreshes += 1
                self.refreshed_since_progress = True
                return False
            raise _status_error(resp, f"{what} refused")
        if status == 416:
            _, range_total = _parse_content_range(resp.headers.get("Content-Range"))
            if range_total is not None and offset == range_total:
                self.total = range_total
                return True
            self.part.write_bytes(b"")
            raise self.failed(_Restart("the server refused to resume; restarting"))
        if status in RETRY_STATUSES or status >= 500:
            raise self.failed(
                _status_error(resp, f"{what} failed after {self.failures + 1} attempts")
            )
        if status not in (200, 206):
            raise _status_error(resp, f"{what} failed")

        if status == 206:
            first, range_total = _parse_content_range(resp.headers.get("Content-Range"))
            if first != offset:
                # The server answered a different range: start over from byte 0.
                self.part.write_bytes(b"")
                raise self.failed(_Restart("unexpected Content-Range; restarting"))
            self.total = range_total
            mode = "ab"
            start = offset
        else:
            # 200: the whole body (the server ignored or did not get our Range).
            self.total = _header_int(resp.headers.get("Content-Length"))
            mode = "wb"
            start = 0
        bound = self.max_bytes
        if bound is not None and self.total is not None and self.total > bound:
            raise DownloadError(
                f"{what}: the archive is {self.total} bytes, more than max_bytes={bound}"
            )
        progress = self.progress
        if progress is not None:
            progress.set_total(self.total)
            progress.reset(start)

        written = 0
        overflow = False
        interrupted: BaseException | None = None
        with self.part.open(mode) as out:
            try:
                # Raw bytes exactly as sent: the archive is verified against Content-Length.
                for chunk in resp.raw.stream(self.chunk_size, decode_content=False):
                    if bound is not None and start + written + len(chunk) > bound:
                        overflow = True
                        break
                    out.write(chunk)
                    written += len(chunk)
                    if progress is not None:
                        progress.update(len(chunk))
            except TRANSPORT_ERRORS as exc:
                interrupted = exc
            out.flush()
            os.fsync(out.fileno())
        if overflow:
            self.part.unlink()
            raise DownloadError(f"{what}: the archive grows past max_bytes={bound}; stopped")
        if written:
            self.failures = 0
            self.stall.answered()
            self.refreshed_since_progress = False
        size = _size(self.part)
        total = self.total
        if total is None and interrupted is None:
            self.total = size
            return True
        if total is not None and size == total:
            return True
        if total is not None and size > total:
            self.part.write_bytes(b"")
            raise self.failed(_Restart(f"received {size} bytes, more than the expected {total}"))
        reason = f": {interrupted}" if interrupted is not None else ""
        raise self.failed(
            APIConnectionError(
                f"download interrupted at {size}/{total if total is not None else '?'} "
                f"bytes{reason}"
            )
        )


def _has_data_filter() -> bool:
    return hasattr(tarfile, "data_filter")


def _within(root: str, path: str) -> bool:
    """Whether ``path`` is ``root`` or below it (pip's ``is_within_directory``, on real paths)."""
    return os.path.commonpath([root, path]) == root


def _check_member(member: tarfile.TarInfo, root: str) -> None:
    """Refuse a member that is not a plain file or directory, or whose path leaves ``root``; a
    link is refused whatever it points to (every escape from tarfile's checks used one)."""
    name = member.name
    if member.issym() or member.islnk():
        kind = "symbolic link" if member.issym() else "hard link"
        target = member.linkname if len(member.linkname) <= 60 else member.linkname[:57] + "..."
        raise UnsafeArchiveError(
            f"archive member {name!r} is a {kind} (to {target!r}); "
            "checkpoint archives hold plain files only"
        )
    if not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(f"archive member {name!r} is not a file or directory")
    pure = PurePosixPath(name)
    if (
        not name
        or "\x00" in name
        or name.startswith(("/", "\\"))  # what PurePosixPath calls absolute, and more
        or (len(name) > 1 and name[1] == ":")
    ):
        raise UnsafeArchiveError(f"archive member {name!r} has an absolute or empty path")
    if ".." in pure.parts or not _within(root, os.path.abspath(os.path.join(root, *pure.parts))):
        raise UnsafeArchiveError(f"archive member {name!r} leaves the target directory")


def _safe_directory(root: str, parts: tuple[str, ...], name: str) -> str:
    """Create ``root/parts...`` one directory at a time; refuse any existing link on the way."""
    current = root
    for part in parts:
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            os.mkdir(current)
            continue
        if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
            raise UnsafeArchiveError(
                f"archive member {name!r} would be written through {current!r}, "
                "which is a link or not a directory in the target"
            )
    if not _within(root, os.path.realpath(current)):
        raise UnsafeArchiveError(f"archive member {name!r} leaves the target directory")
    return current


def _extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, root: str) -> None:
    parts = tuple(part for part in PurePosixPath(member.name).parts if part != ".")
    if member.isdir():
        _safe_directory(root, parts, member.name)
        return
    if not parts:
        raise UnsafeArchiveError(f"archive member {member.name!r} has no file name")
    parent = _safe_directory(root, parts[:-1], member.name)
    path = os.path.join(parent, parts[-1])
    if os.path.islink(path):
        raise UnsafeArchiveError(f"archive member {member.name!r} would replace a link")
    source = tar.extractfile(member)
    if source is None:
        raise UnsafeArchiveError(f"archive member {member.name!r} has no content")
    # O_NOFOLLOW: a link that appears at the last moment is not followed either.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with source, os.fdopen(os.open(path, flags, 0o644), "wb") as out:
        while block := source.read(_CHUNK_SIZE):
            out.write(block)


def extract_archive(
    archive: str | os.PathLike[str],
    dest_dir: str | os.PathLike[str],
    *,
    max_bytes: int | None = DEFAULT_MAX_ARCHIVE_BYTES,
) -> list[str]:
    """Extract a checkpoint tar into ``dest_dir`` after checking every member (docs/protocol.rst
    §4.6); return the member names. A refusal is an UnsafeArchiveError naming the member."""
    target = Path(dest_dir)
    use_filter = _has_data_filter()
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            root = os.path.realpath(target)
            total = 0
            for member in members:
                _check_member(member, root)
                if use_filter:
                    try:
                        tarfile.data_filter(member, root)
                    except tarfile.FilterError as exc:
                        raise UnsafeArchiveError(
                            f"archive member {member.name!r} refused: {exc}"
                        ) from None
                total += member.size if member.isfile() else 0
                if max_bytes is not None and total > max_bytes:
                    raise UnsafeArchiveError(
                        f"archive member {member.name!r} takes the extracted size past "
                        f"max_bytes={max_bytes}"
                    )
            target.mkdir(parents=True, exist_ok=True)
            root = os.path.realpath(target)
            for member in members:
                try:
                    _extract_member(tar, member, root)
                except OSError as exc:  # e.g. a file and a directory of the same name
                    raise DownloadError(
                        f"cannot extract archive member {member.name!r} of {archive}: {exc}"
                    ) from exc
    except tarfile.TarError as exc:
        raise DownloadError(f"cannot extract {archive}: {exc}") from exc
    return [member.name for member in members]
