"""The local server against hostile requests: body bombs, crafted checkpoint names, old data dirs.

Everything goes over real sockets on 127.0.0.1. Memory is the server process's own peak RSS
(``VmHWM`` in ``/proc/<pid>/status``) for a server run as a separate process, so nothing the test
itself allocates is counted.
"""

from __future__ import annotations

import functools
import http.client
import json
import shutil
import socket
import time
import urllib.parse
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.local_server import Api
from tests.support.served import start_served
from tinker_lite.local import LocalServer

KEY = "tml-hostile-key"
BOMB_INFLATED = 400 << 20  # 400 MiB of zeros, about 400 KB gzip-compressed
SERVER_CAP_MIB = 16


@functools.lru_cache(maxsize=1)
def gzip_bomb() -> bytes:
    """A gzip body of ``BOMB_INFLATED`` zero bytes, built without holding them."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    parts = [compressor.compress(block) for _ in range(BOMB_INFLATED >> 20)]
    parts.append(compressor.flush())
    return b"".join(parts)


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """``python -m tinker_lite.local serve --api-key KEY`` on an ephemeral port: (url, pid)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("peak RSS is read from /proc")
    data_dir = tmp_path_factory.mktemp("hostile-data")
    proc, url = start_served(
        "--api-key",
        KEY,
        "--stub-model",
        "--data-dir",
        str(data_dir),
        "--max-body-mb",
        str(SERVER_CAP_MIB),
        "--log-level",
        "WARNING",
    )
    try:
        # warm up: the first real requests import and build what every later request uses
        api = Api(url, KEY)
        api.session()
        api.close()
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.communicate(timeout=30)  # also closes its stdout pipe


def _post_raw(
    url: str, path: str, body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_gzip_bomb_without_a_key_is_refused_before_it_is_read(
    server_process: tuple[str, int],
) -> None:
    """A keyless 400 MiB gzip bomb gets 401 and costs the server next to no memory."""
    url, pid = server_process
    bomb = gzip_bomb()
    before = _peak_rss_kib(pid)
    status, _, body = _post_raw(
        url,
        "/api/v1/create_session",
        bomb,
        {"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    grown_mib = (_peak_rss_kib(pid) - before) / 1024
    assert status == 401, body
    assert "API key" in json.loads(body)["detail"]
    assert grown_mib < 8, f"the server's peak RSS grew by {grown_mib:.1f} MiB"


def test_gzip_bomb_with_the_key_stops_at_the_inflated_cap(
    server_process: tuple[str, int],
) -> None:
    """With the key, inflation stops at the cap: 413, and the peak grows by about the cap."""
    url, pid = server_process
    bomb = gzip_bomb()
    before = _peak_rss_kib(pid)
    status, _, body = _post_raw(
        url,
        "/api/v1/create_session",
        bomb,
        {"Content-Type": "application/json", "Content-Encoding": "gzip", "X-API-Key": KEY},
    )
    grown_mib = (_peak_rss_kib(pid) - before) / 1024
    assert status == 413, body
    assert "Inflated request body too large" in json.loads(body)["detail"]
    assert grown_mib < 3 * SERVER_CAP_MIB, f"the server's peak RSS grew by {grown_mib:.1f} MiB"


def _exchange(url: str, request: bytes, *, then_send: bytes = b"") -> bytes:
    """Send raw request bytes, optionally more after the answer starts; return all received."""
    parts = urllib.parse.urlsplit(url)
    assert parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        if then_send:
            try:
                sock.sendall(then_send)
            except OSError:
                pass
        sock.settimeout(5)
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return received


def _head(raw: bytes) -> tuple[int, dict[str, str]]:
    head = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    status_line, *lines = head.split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers


def test_a_huge_declared_body_is_refused_from_its_headers(
    server_process: tuple[str, int],
) -> None:
    """Content-Length past the cap: 413 at once (nothing read), and the connection closes."""
    url, _ = server_process
    started = time.monotonic()
    raw = _exchange(
        url,
        b"POST /api/v1/create_session HTTP/1.1\r\nHost: x\r\nX-API-Key: "
        + KEY.encode()
        + b"\r\nContent-Type: application/json\r\nContent-Length: 2147483648\r\n\r\n",
        then_send=bytes(1 << 20),
    )
    status, headers = _head(raw)
    assert status == 413
    assert headers["connection"] == "close"
    assert time.monotonic() - started < 5


def test_a_keyless_request_waiting_for_100_continue_gets_401_and_no_100(
    server_process: tuple[str, int],
) -> None:
    url, _ = server_process
    raw = _exchange(
        url,
        b"POST /api/v1/create_session HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        b"Content-Type: application/json\r\nContent-Length: 104857600\r\n\r\n",
    )
    status, headers = _head(raw)
    assert status == 401
    assert b"100 Continue" not in raw
    assert headers["connection"] == "close"


def test_a_small_keyless_body_is_dropped_and_the_connection_stays_usable(
    server_process: tuple[str, int],
) -> None:
    url, _ = server_process
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("POST", "/api/v1/create_session", body=b"{}" * 1000)
        first = conn.getresponse()
        assert first.status == 401
        first.read()
        conn.request("GET", "/api/v1/training_runs")  # no body at all
        second = conn.getresponse()
        assert second.status == 401
        assert second.getheader("Connection") != "close"
        second.read()
        conn.request("GET", "/api/v1/healthz")
        third = conn.getresponse()
        assert third.status == 200
        assert json.loads(third.read()) == {"status": "ok"}
    finally:
        conn.close()


# -- checkpoint names ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> Iterator[str]:
    with LocalServer(stub_model=True) as url:
        yield url


@pytest.fixture
def api(local: str) -> Iterator[Api]:
    client = Api(local)
    yield client
    client.close()


def _save(api: Api, model_id: str, seq_id: int, name: str) -> Any:
    return api.post(
        "/api/v1/save_weights",
        {"model_id": model_id, "path": name, "seq_id": seq_id, "type": "save_weights"},
    )


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("evil\r\nX-Injected: yes", "U+000D"),
        ("bell\x07", "U+0007"),
        ("esc\x1b[31m", "U+001B"),
        ("del\x7f", "U+007F"),
        ("sep\u2028line", "U+2028"),
        ("a.meta.json", ".meta.json"),
        (".hidden.tmp-1234", "starting with '.'"),
        ("x" * 201, "200 bytes"),
    ],
)
def test_checkpoint_names_that_break_headers_or_files_are_refused(
    api: Api, name: str, reason: str
) -> None:
    model_id = api.model(api.session())
    response = _save(api, model_id, 1, name)
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert detail.startswith("path: invalid checkpoint name"), detail
    assert reason in detail
    # the refused save still took its seq_id: the model goes on
    assert api.result(_save(api, model_id, 2, "fine").json()["request_id"])["path"].endswith(
        "/weights/fine"
    )


def _archive_location(api: Api, run_id: str, checkpoint_id: str) -> str:
    quoted = urllib.parse.quote(checkpoint_id, safe="/")
    response = api.get(
        f"/api/v1/training_runs/{run_id}/checkpoints/{quoted}/archive", allow_redirects=False
    )
    assert response.status_code == 302, response.text
    return str(response.headers["Location"])


def _download_head(location: str) -> tuple[int, dict[str, str], bytes]:
    parts = urllib.parse.urlsplit(location)
    raw = _exchange(
        location,
        f"GET {parts.path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(),
    )
    status, headers = _head(raw)
    return status, headers, raw.split(b"\r\n\r\n", 1)[0]


def test_a_non_ascii_name_downloads_with_an_rfc6266_filename(api: Api) -> None:
    model_id = api.model(api.session())
    saved = api.result(_save(api, model_id, 1, "模型").json()["request_id"])
    assert saved["path"] == f"tinker://{model_id}/weights/模型"
    status, headers, head = _download_head(_archive_location(api, model_id, "weights/模型"))
    assert status == 200
    disposition = headers["content-disposition"]
    assert "filename*=UTF-8''" in disposition
    encoded = disposition.split("filename*=UTF-8''", 1)[1]
    assert urllib.parse.unquote(encoded).endswith("-weights-模型.tar.gz")
    head.decode("ascii")  # every header is plain ASCII


# -- data dirs left by older servers ------------------------------------------------------------


def _old_checkpoint(folder: Path, source: Path, run_id: str, name: str) -> None:
    """A checkpoint folder and record as a server before the name checks wrote them."""
    shutil.copytree(source, folder / name)
    record = json.loads((folder / "ok.meta.json").read_text())
    record["name"] = name
    (folder / f"{name}.meta.json").write_text(json.dumps(record))


def test_a_data_dir_with_colliding_and_crafted_names_still_loads(tmp_path: Path) -> None:
    """The collision an older server allowed (``a.meta.json`` beside ``a``) and a CR/LF name."""
    with LocalServer(data_dir=tmp_path, stub_model=True) as url:
        api = Api(url)
        model_id = api.model(api.session())
        api.result(_save(api, model_id, 1, "ok").json()["request_id"])
        api.close()
    folder = tmp_path / "runs" / model_id / "weights"
    source = folder / "ok"
    # the older server saved "a.meta.json" (a folder and its record "a.meta.json.meta.json"),
    # then a save of "a" wrote its folder but failed on its record: "a.meta.json" is a folder
    _old_checkpoint(folder, source, model_id, "a.meta.json")
    shutil.copytree(source, folder / "a")
    crafted = "evil\r\nX-Injected: yes"
    _old_checkpoint(folder, source, model_id, crafted)

    with LocalServer(data_dir=tmp_path, stub_model=True) as url:
        api = Api(url)
        listed = api.get(f"/api/v1/training_runs/{model_id}/checkpoints").json()
        ids = sorted(c["checkpoint_id"] for c in listed["checkpoints"])
        assert ids == sorted(["weights/ok", "weights/a.meta.json", f"weights/{crafted}"])
        status, headers, head = _download_head(
            _archive_location(api, model_id, f"weights/{crafted}")
        )
        assert status == 200
        assert "\r" not in headers["content-disposition"]
        assert [line for line in head.split(b"\r\n") if line.startswith(b"X-Injected")] == []
        assert urllib.parse.unquote(headers["content-disposition"].split("''", 1)[1]).endswith(
            "-weights-evil__X-Injected_ yes.tar.gz"
        )
        api.close()


def test_a_zstd_bomb_stops_at_the_inflated_cap() -> None:
    zstandard = pytest.importorskip("zstandard")
    compressor = zstandard.ZstdCompressor().compressobj()
    block = bytes(1 << 20)
    bomb = b"".join([compressor.compress(block) for _ in range(256)] + [compressor.flush()])
    assert len(bomb) < 1 << 20
    with LocalServer(stub_model=True, api_key=KEY, max_body_bytes=1 << 20) as url:
        status, _, body = _post_raw(
            url,
            "/api/v1/create_session",
            bomb,
            {"Content-Type": "application/json", "Content-Encoding": "zstd", "X-API-Key": KEY},
        )
    assert status == 413, body
    assert "Inflated request body too large" in json.loads(body)["detail"]
