"""Resumable archive downloads against a scripted loopback HTTP server, and safe extraction."""

from __future__ import annotations

import email.utils
import io
import random
import socket
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tinker_lite import (
    APIConnectionError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
)
from tinker_lite._progress import Progress
from tinker_lite._transport import download as _download
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.download import (
    DownloadError,
    UnsafeArchiveError,
    download,
    extract_archive,
    part_path,
)
from tinker_lite._transport.loops import (
    RetryableStatus,
    ServiceWait,
    download_backoff,
    retry_loop,
)
from tinker_lite._transport.retry import DEFAULT_RETRY_POLICY


def make_archive(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


ARCHIVE = make_archive(
    {
        "adapter_config.json": b'{"r": 8}',
        "adapter_model.safetensors": random.Random(0).randbytes(20_000),
        "checkpoint_complete": b"",
    }
)


class ArchiveServer:
    """Serves ``ARCHIVE`` at ``/archive/<token>`` with Range support and scripted failures.

    ``script`` is a list of actions consumed one per request; when it is empty, requests are
    served normally. Actions: ``("drop", n)`` sends the headers for the whole answer but only
    ``n`` body bytes; ``("status", code, headers)`` answers ``code`` with no body;
    ``("ignore_range",)`` answers 200 with the whole body. Tokens in ``expired`` get 403.
    """

    def __init__(self, body: bytes = ARCHIVE) -> None:
        self.body = body
        self.script: list[tuple[Any, ...]] = []
        self.expired: set[str] = set()
        self.requests: list[dict[str, str | None]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner.handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)
        self.thread.start()

    def url(self, token: str = "t1") -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/archive/{token}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        range_header = req.headers.get("Range")
        self.requests.append({"path": req.path, "range": range_header})
        token = req.path.rsplit("/", 1)[-1]
        action = self.script.pop(0) if self.script else ("serve",)
        if token in self.expired:
            self._empty(req, 403)
            return
        if action[0] == "status":
            self._empty(req, action[1], action[2] if len(action) > 2 else {})
            return
        body = self.body
        start = 0
        if range_header and action[0] != "ignore_range":
            start = int(range_header.removeprefix("bytes=").split("-")[0])
            if start >= len(body):
                self._empty(req, 416, {"Content-Range": f"bytes */{len(body)}"})
                return
            req.send_response(206)
            req.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            req.send_response(200)
        payload = body[start:]
        req.send_header("Content-Type", "application/gzip")
        req.send_header("Content-Length", str(len(payload)))
        req.end_headers()
        if action[0] == "drop":
            req.wfile.write(payload[: action[1]])
            req.wfile.flush()
            req.close_connection = True
            return
        req.wfile.write(payload)

    @staticmethod
    def _empty(
        req: BaseHTTPRequestHandler, code: int, headers: dict[str, str] | None = None
    ) -> None:
        req.send_response(code)
        for key, value in (headers or {}).items():
            req.send_header(key, value)
        req.send_header("Content-Length", "0")
        req.end_headers()


@pytest.fixture
def server() -> Iterator[ArchiveServer]:
    srv = ArchiveServer()
    try:
        yield srv
    finally:
        srv.close()


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def test_downloads_whole_archive_and_removes_part(server: ArchiveServer, tmp_path: Path) -> None:
    dest = tmp_path / "ckpt.tar.gz"
    result = download(server.url(), dest, sleep=Sleeps())
    assert dest.read_bytes() == ARCHIVE
    assert result.size == len(ARCHIVE)
    assert result.resumed_from == 0
    assert result.attempts == 1
    assert not part_path(dest).exists()
    assert server.requests[0]["range"] is None


def test_resumes_from_existing_part_file_with_range(server: ArchiveServer, tmp_path: Path) -> None:
    dest = tmp_path / "ckpt.tar.gz"
    part_path(dest).write_bytes(ARCHIVE[:1000])
    result = download(server.url(), dest, sleep=Sleeps())
    assert dest.read_bytes() == ARCHIVE
    assert result.resumed_from == 1000
    assert server.requests[0]["range"] == "bytes=1000-"


def test_dropped_connection_is_resumed_where_it_stopped(
    server: ArchiveServer, tmp_path: Path
) -> None:
    server.script = [("drop", 3000)]
    sleeps = Sleeps()
    dest = tmp_path / "ckpt.tar.gz"
    result = download(server.url(), dest, sleep=sleeps, chunk_size=512)
    assert dest.read_bytes() == ARCHIVE
    assert result.attempts == 2
    assert server.requests[1]["range"] == "bytes=3000-"
    assert sleeps.calls == [1.0]


def test_503_honours_retry_after_seconds(server: ArchiveServer, tmp_path: Path) -> None:
    server.script = [("status", 503, {"Retry-After": "7"}), ("status", 409, {})]
    sleeps = Sleeps()
    download(server.url(), tmp_path / "a.tgz", sleep=sleeps)
    # 503 waits as told; 409 without Retry-After backs off (second failure in a row: 2 s).
    assert sleeps.calls == [7.0, 2.0]


def test_retry_after_http_date_and_bounds() -> None:
    # docs/protocol.rst §6.2, one rule for every loop: Retry-After when 0 < delay <= 60 s, else
    # back-off.
    now = 1_000_000.0
    date = email.utils.formatdate(now + 12, usegmt=True)
    policy = DEFAULT_RETRY_POLICY
    wait = ServiceWait(policy, download_backoff(policy), wall_clock=lambda: now)
    asked = [{"Retry-After": date}, {"Retry-After": "3600"}, {"Retry-After": "-4"}]
    asked += [{"Retry-After": "soon"}, {}, {}, {}]
    left = [HttpResponse(503, headers, b"") for headers in asked]
    sleeps: list[float] = []

    def attempt() -> str:
        if left:
            raise RetryableStatus(left.pop(0))
        return "done"

    loop = retry_loop(
        wait=wait,
        stop=lambda state: False,
        retry_on=lambda e: isinstance(e, RetryableStatus),
        sleep=sleeps.append,
    )
    assert loop(attempt) == "done"
    # The date is honoured (12 s); the rest fall back to min(2**n, 30) at their own turn.
    assert sleeps == [pytest.approx(12.0), 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_gives_up_before_the_stall_timeout_without_progress(
    server: ArchiveServer, tmp_path: Path
) -> None:
    server.script = [("status", 503, {})] * 10
    elapsed = [0.0]

    def sleep(seconds: float) -> None:
        elapsed[0] += seconds

    with pytest.raises(InternalServerError):
        download(
            server.url(),
            tmp_path / "a.tgz",
            sleep=sleep,
            clock=lambda: elapsed[0],
            stall_timeout=10.0,
        )
    assert elapsed[0] == 7.0  # 1 + 2 + 4; the next 8 s wait would end past 10 s


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes 0-9/10", (0, 10)),
        ("bytes */10", (None, 10)),
        ("bytes 5-9/*", (5, None)),
        ("bytes 0-9/\u00b2", (0, None)),  # a Latin-1 byte that str.isdigit() accepts
        ("bytes \u00b2-9/10", (None, 10)),
        ("items 0-9/10", (None, None)),
        (None, (None, None)),
    ],
)
def test_content_range_reads_ascii_digits_only(
    header: str | None, expected: tuple[int | None, int | None]
) -> None:
    assert _download._parse_content_range(header) == expected


def test_gives_up_after_bounded_attempts(server: ArchiveServer, tmp_path: Path) -> None:
    server.script = [("status", 503, {})] * 10
    sleeps = Sleeps()
    dest = tmp_path / "a.tgz"
    with pytest.raises(InternalServerError) as info:
        download(server.url(), dest, sleep=sleeps, max_attempts=4)
    assert info.value.status_code == 503
    assert sleeps.calls == [1.0, 2.0, 4.0]
    assert not dest.exists()


def test_expired_url_is_refreshed_once_and_resumed(server: ArchiveServer, tmp_path: Path) -> None:
    server.script = [("drop", 2000)]
    original = server.url("t1")
    calls: list[str] = []

    def refresh() -> str:
        calls.append("refresh")
        return server.url("fresh")

    # First request (t1) drops after 2000 bytes; the URL then "expires".
    def expire_after_first(*_: Any) -> None:
        server.expired.add("t1")

    dest = tmp_path / "a.tgz"
    result = download(original, dest, refresh_url=refresh, sleep=expire_after_first)
    assert dest.read_bytes() == ARCHIVE
    assert calls == ["refresh"]
    assert result.url_refreshes == 1
    assert server.requests[-1] == {"path": "/archive/fresh", "range": "bytes=2000-"}


def test_expired_url_twice_in_a_row_raises(server: ArchiveServer, tmp_path: Path) -> None:
    server.expired.update({"t1", "t2"})
    with pytest.raises(PermissionDeniedError):
        download(server.url("t1"), tmp_path / "a.tgz", refresh_url=lambda: server.url("t2"))


def test_missing_archive_without_refresh_is_not_found(
    server: ArchiveServer, tmp_path: Path
) -> None:
    server.script = [("status", 404, {})]
    with pytest.raises(NotFoundError):
        download(server.url(), tmp_path / "a.tgz", sleep=Sleeps())


def test_server_ignoring_range_restarts_cleanly(server: ArchiveServer, tmp_path: Path) -> None:
    dest = tmp_path / "a.tgz"
    part_path(dest).write_bytes(b"garbage-that-is-not-the-archive")
    server.script = [("ignore_range",)]
    download(server.url(), dest, sleep=Sleeps())
    assert dest.read_bytes() == ARCHIVE


def test_part_longer_than_archive_restarts(server: ArchiveServer, tmp_path: Path) -> None:
    dest = tmp_path / "a.tgz"
    part_path(dest).write_bytes(b"x" * (len(ARCHIVE) + 10))
    download(server.url(), dest, sleep=Sleeps())
    assert dest.read_bytes() == ARCHIVE


def test_complete_part_file_is_verified_and_renamed(server: ArchiveServer, tmp_path: Path) -> None:
    dest = tmp_path / "a.tgz"
    part_path(dest).write_bytes(ARCHIVE)
    result = download(server.url(), dest, sleep=Sleeps())
    assert dest.read_bytes() == ARCHIVE
    assert result.resumed_from == len(ARCHIVE)
    assert server.requests[0]["range"] == f"bytes={len(ARCHIVE)}-"


def test_truncated_bodies_exhaust_attempts(server: ArchiveServer, tmp_path: Path) -> None:
    server.body = ARCHIVE
    server.script = [("drop", 0)] * 5
    with pytest.raises(APIConnectionError):
        download(server.url(), tmp_path / "a.tgz", sleep=Sleeps(), max_attempts=3)


def test_existing_destination_needs_overwrite(server: ArchiveServer, tmp_path: Path) -> None:
    dest = tmp_path / "a.tgz"
    dest.write_bytes(b"old")
    with pytest.raises(FileExistsError):
        download(server.url(), dest)
    download(server.url(), dest, overwrite=True)
    assert dest.read_bytes() == ARCHIVE


def test_connection_refused_is_a_connection_error(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps = Sleeps()
    with pytest.raises(APIConnectionError):
        download(f"http://127.0.0.1:{port}/x", tmp_path / "a", sleep=sleeps, max_attempts=2)
    assert sleeps.calls == [1.0]


def test_progress_lines_report_bytes(server: ArchiveServer, tmp_path: Path) -> None:
    out = io.StringIO()
    with Progress(desc="download", unit="bytes", stream=out, mode="lines") as progress:
        download(server.url(), tmp_path / "a.tgz", progress=progress)
    text = out.getvalue()
    assert text.startswith("download: ")
    assert f"/{_download_size_text()} (100%)" in text.splitlines()[-1]


def _download_size_text() -> str:
    from tinker_lite._progress import format_bytes

    return format_bytes(len(ARCHIVE))


def test_extracts_safe_archive(tmp_path: Path) -> None:
    archive = tmp_path / "a.tgz"
    archive.write_bytes(ARCHIVE)
    names = extract_archive(archive, tmp_path / "out")
    assert sorted(names) == [
        "adapter_config.json",
        "adapter_model.safetensors",
        "checkpoint_complete",
    ]
    assert (tmp_path / "out" / "adapter_config.json").read_bytes() == b'{"r": 8}'


@pytest.mark.parametrize("name", ["../evil.txt", "a/../../evil.txt", "/tmp/evil.txt"])
@pytest.mark.parametrize("with_filter", [True, False])
def test_refuses_members_outside_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, with_filter: bool
) -> None:
    monkeypatch.setattr(_download, "_has_data_filter", lambda: with_filter)
    archive = tmp_path / "bad.tgz"
    archive.write_bytes(make_archive({"ok.txt": b"ok", name: b"evil"}))
    with pytest.raises(UnsafeArchiveError):
        extract_archive(archive, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "out").exists()


def test_fallback_extraction_refuses_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_download, "_has_data_filter", lambda: False)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        link = tarfile.TarInfo("passwd")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tar.addfile(link)
    archive = tmp_path / "link.tar"
    archive.write_bytes(buf.getvalue())
    with pytest.raises(UnsafeArchiveError):
        extract_archive(archive, tmp_path / "out")


def test_fallback_extraction_writes_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_download, "_has_data_filter", lambda: False)
    archive = tmp_path / "a.tgz"
    archive.write_bytes(make_archive({"dir/x.bin": b"123", "y.json": b"{}"}))
    extract_archive(archive, tmp_path / "out")
    assert (tmp_path / "out" / "dir" / "x.bin").read_bytes() == b"123"
    assert (tmp_path / "out" / "y.json").read_bytes() == b"{}"


def test_corrupt_archive_is_a_download_error(tmp_path: Path) -> None:
    archive = tmp_path / "a.tgz"
    archive.write_bytes(b"not a tar at all" * 10)
    with pytest.raises(DownloadError):
        extract_archive(archive, tmp_path / "out")
