"""Every answer the client reads is capped: by its Content-Length before reading, by what has been
read while streaming, and by what gzip / deflate / zstd inflate it to (docs/configuration.rst,
"Limits"). Each case is a small server on loopback; time and Python memory are measured."""

from __future__ import annotations

import socket
import threading
import time
import zlib
from collections.abc import Callable

import pytest
import urllib3.response

from tests.hostile.servers import HostileServer, Request, peak_traced, reply
from tests.support.holder import requests_over
from tinker_lite import ResponseTooLargeError
from tinker_lite._session.settings import resolve_settings
from tinker_lite._transport.answers import DEFAULT_MAX_ANSWER_BYTES
from tinker_lite._transport.http import PoolKind, Transport

MiB = 1024 * 1024
REST = "/api/v1/training_runs"
CAP = 4 * MiB
BLOCK = b"[" + b"0," * (64 * 1024) + b"0]"


def _config_or(answer: Callable[[Request, socket.socket], None]) -> Callable[..., None]:
    """Answer ``client/config`` with 404 (built-in defaults), every other request with
    ``answer``."""

    def dispatch(request: Request, sock: socket.socket) -> None:
        if request.path.endswith("/client/config"):
            reply(sock, 404, b"{}")
        else:
            answer(request, sock)

    return dispatch


def _endless_chunks(request: Request, sock: socket.socket) -> None:
    """A 200 whose chunked body never ends (for the client: it stops after 512 MiB)."""
    sock.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"%x\r\n" % len(BLOCK) + BLOCK + b"\r\n"
    for _ in range(512 * MiB // len(BLOCK)):
        sock.sendall(chunk)


def test_an_endless_chunked_answer_to_a_rest_call_ends_at_the_cap() -> None:
    with HostileServer(_config_or(_endless_chunks)) as server:
        with requests_over(server.url, max_answer_bytes=CAP) as api, peak_traced() as peak:
            started = time.monotonic()
            with pytest.raises(ResponseTooLargeError) as info:
                api.call("GET", REST)
            elapsed = time.monotonic() - started
            peak_bytes = peak()
    # Before: 12 GB in 40 s and no answer. Now: the cap (4 MiB) in well under a second.
    assert elapsed < 3.0, elapsed
    assert peak_bytes < 4 * CAP, peak_bytes
    assert f"GET {REST}" in str(info.value)
    assert "TINKER_LITE_MAX_ANSWER_BYTES" in str(info.value)
    assert info.value.limit == CAP
    # Not retried: one request reached the service.
    assert server.paths().count(f"GET {REST}") == 1


def _declares(length: int) -> Callable[[Request, socket.socket], None]:
    def answer(request: Request, sock: socket.socket) -> None:
        sock.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n[0," % length
        )
        # Then nothing more: a client that read on would wait for its read timeout.

    return answer


def test_a_body_declared_over_the_default_cap_is_refused_before_reading() -> None:
    declared = DEFAULT_MAX_ANSWER_BYTES + 1
    with HostileServer(_declares(declared)) as server:
        transport = Transport(server.url, headers={}, auth=lambda: None)
        try:
            with peak_traced() as peak:
                started = time.monotonic()
                with pytest.raises(ResponseTooLargeError) as info:
                    transport.send(PoolKind.TRAIN, "GET", REST)
                elapsed = time.monotonic() - started
                peak_bytes = peak()
        finally:
            transport.close()
    assert elapsed < 1.0, elapsed  # no read timeout waited for
    assert peak_bytes < MiB, peak_bytes
    assert f"Content-Length: {declared}" in str(info.value)
    assert info.value.status_code == 200


def test_an_answer_within_the_cap_is_read_whole() -> None:
    body = b"[" + b"1," * (CAP // 2 - 2) + b"1]"
    assert len(body) <= CAP
    with HostileServer(lambda request, sock: reply(sock, 200, body)) as server:
        transport = Transport(server.url, headers={}, auth=lambda: None, max_answer_bytes=CAP)
        try:
            assert transport.send(PoolKind.TRAIN, "GET", REST).body == body
        finally:
            transport.close()


def _bomb(encoding: str, inflated: int) -> bytes:
    """``inflated`` bytes of JSON-looking zeros, compressed with ``encoding``."""
    block = b"0" * MiB
    if encoding == "zstd":
        zstandard = pytest.importorskip("zstandard")
        compressor = zstandard.ZstdCompressor(level=3).compressobj()
        parts = [compressor.compress(block) for _ in range(inflated // MiB)]
        return bytes(b"".join(parts) + compressor.flush())
    wbits = 31 if encoding == "gzip" else 15
    deflater = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return b"".join(deflater.compress(block) for _ in range(inflated // MiB)) + deflater.flush()


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "zstd"])
def test_a_compression_bomb_stops_at_the_inflated_cap(encoding: str) -> None:
    bomb = _bomb(encoding, 300 * MiB)
    assert len(bomb) < 400 * 1024  # ~300 KB on the wire, 300 MiB once inflated

    def answer(request: Request, sock: socket.socket) -> None:
        reply(sock, 200, bomb, {"Content-Encoding": encoding})

    # urllib3 inflates zstd only with the standard library's (or the backported) zstd module.
    inflated = encoding != "zstd" or urllib3.response.HAS_ZSTD
    with HostileServer(_config_or(answer)) as server:
        with requests_over(server.url, max_answer_bytes=CAP) as api, peak_traced() as peak:
            started = time.monotonic()
            if inflated:
                with pytest.raises(ResponseTooLargeError):
                    api.call("GET", REST)
            else:
                assert api.call("GET", REST).body == bomb  # passed on as it came, never inflated
            elapsed = time.monotonic() - started
            peak_bytes = peak()
    # Before: 300 MiB inflated and 637 MB peak before a typed error.
    assert elapsed < 3.0, elapsed
    assert peak_bytes < 4 * CAP, peak_bytes


def test_an_endless_redirect_body_is_not_read_whole() -> None:
    def answer(request: Request, sock: socket.socket) -> None:
        sock.sendall(
            b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"%x\r\n" % len(BLOCK) + BLOCK + b"\r\n"
        for _ in range(512 * MiB // len(BLOCK)):
            sock.sendall(chunk)

    with HostileServer(answer) as server:
        transport = Transport(server.url, headers={}, auth=lambda: None)
        try:
            with peak_traced() as peak:
                started = time.monotonic()
                with pytest.raises(ResponseTooLargeError):
                    transport.send(PoolKind.TRAIN, "GET", REST)
                elapsed = time.monotonic() - started
                peak_bytes = peak()
        finally:
            transport.close()
    assert elapsed < 2.0, elapsed
    assert peak_bytes < 4 * MiB, peak_bytes


def test_the_cap_is_a_setting_with_an_environment_variable() -> None:
    url = "http://127.0.0.1:9"
    assert resolve_settings(base_url=url, environ={}).max_answer_bytes == DEFAULT_MAX_ANSWER_BYTES
    env = {"TINKER_LITE_MAX_ANSWER_BYTES": "1048576"}
    assert resolve_settings(base_url=url, environ=env).max_answer_bytes == MiB
    assert resolve_settings(base_url=url, max_answer_bytes=5, environ=env).max_answer_bytes == 5
    with pytest.raises(ValueError, match="TINKER_LITE_MAX_ANSWER_BYTES"):
        resolve_settings(base_url=url, environ={"TINKER_LITE_MAX_ANSWER_BYTES": "lots"})
    with pytest.raises(ValueError, match="max_answer_bytes"):
        resolve_settings(base_url=url, max_answer_bytes=0, environ={})


def test_the_deadline_thread_ends_when_no_attempt_is_in_flight() -> None:
    with HostileServer(lambda request, sock: reply(sock, 200, b"{}")) as server:
        transport = Transport(server.url, headers={}, auth=lambda: None)
        try:
            transport.send(PoolKind.TRAIN, "GET", REST)
        finally:
            transport.close()
    for thread in threading.enumerate():
        if thread.name == "tinker-lite-deadline":
            thread.join(5.0)  # it lingers a second after the last attempt, then ends
    assert not [t for t in threading.enumerate() if t.name == "tinker-lite-deadline"]
