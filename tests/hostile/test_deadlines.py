"""Every attempt has one deadline for connect, headers and the whole body, and the stall timeout
bounds REST calls, submits and polls alike: a server trickling a byte every half second (the
read timeout, which bounds each read, never trips) or a listener that really closes cannot hold
a call past its bound (docs/protocol.rst §2.4, §6.6)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.hostile.servers import HostileServer, Request, reply
from tests.support.holder import requestor_for, requests_over
from tinker_lite import APIConnectionError, APITimeoutError
from tinker_lite._futures.poller import Poller
from tinker_lite._transport.http import PoolKind, Timeout, Transport

STALL = 3.0
# WIRE.md §P.7: the stall timeout is never overshot by more than a second.
BOUND = STALL + 1.0
EVERY = 0.5  # seconds between two trickled bytes: well under any read timeout here
BODY = b'{"training_runs": [], "cursor": {"offset": 0, "limit": 20, "total_count": 0}}'
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(
    BODY
)
TRY_AGAIN = b'{"type": "try_again", "request_id": "req-1", "queue_state": "active"}'


def _trickler(server_closed: threading.Event, phase: str) -> object:
    """An answer that sends its headers (``phase="headers"``) or its body a byte at a time."""

    def answer(request: Request, sock: socket.socket) -> None:
        if request.path.endswith("/client/config"):
            reply(sock, 404, b"{}")
            return
        slow = HEAD + BODY if phase == "headers" else BODY
        if phase == "body":
            sock.sendall(HEAD)
        for i in range(len(slow)):
            if server_closed.wait(EVERY):
                return
            sock.sendall(slow[i : i + 1])

    return answer


@pytest.mark.parametrize("phase", ["headers", "body"])
@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/api/v1/training_runs"), ("POST", "/api/v1/optim_step")]
)
def test_a_trickled_answer_ends_within_the_stall_timeout(
    phase: str, method: str, path: str
) -> None:
    closed = threading.Event()
    with HostileServer() as server:
        server.answer = _trickler(closed, phase)  # type: ignore[assignment]
        try:
            with requests_over(server.url, stall_timeout=STALL) as api:
                started = time.monotonic()
                with pytest.raises(APITimeoutError) as info:
                    api.call(method, path, body=b"{}" if method == "POST" else None)
                elapsed = time.monotonic() - started
        finally:
            closed.set()
    # Before: 240 s with stall_timeout=8 (each byte restarted the read timeout).
    assert elapsed <= BOUND, elapsed
    assert f"{method} {path}" in str(info.value)


def test_an_attempt_past_its_deadline_ends_even_when_bytes_keep_coming() -> None:
    closed = threading.Event()
    with HostileServer() as server:
        server.answer = _trickler(closed, "headers")  # type: ignore[assignment]
        transport = Transport(server.url, headers={}, auth=lambda: None)
        try:
            started = time.monotonic()
            with pytest.raises(APITimeoutError) as info:
                transport.send(
                    PoolKind.TRAIN, "GET", "/x", timeout=Timeout(connect=1.0, read=5.0, total=1.5)
                )
            elapsed = time.monotonic() - started
        finally:
            closed.set()
            transport.close()
    assert 1.5 <= elapsed <= 2.5, elapsed
    assert "deadline of 1.5s" in str(info.value)


def _poller(url: str) -> tuple[Poller, object]:
    api = requestor_for(url)
    return Poller(api.retrieve_future, abort=api.abort_polls, stall_timeout=STALL), api


def test_a_trickled_poll_ends_within_the_stall_timeout() -> None:
    closed = threading.Event()
    with HostileServer() as server:
        server.answer = _trickler(closed, "body")  # type: ignore[assignment]
        poller, api = _poller(server.url)
        try:
            started = time.monotonic()
            future = poller.poll("req-1", "OptimStep", lambda resp: resp, created_at=started)
            with pytest.raises(APITimeoutError) as info:
                future.result(timeout=60)
            elapsed = time.monotonic() - started
        finally:
            closed.set()
            poller.close()
            api.close()  # type: ignore[attr-defined]
    assert elapsed <= BOUND, elapsed
    assert "stall timeout 3s" in str(info.value)


def test_polls_answered_try_again_then_refused_by_a_closed_listener_end_in_time() -> None:
    """The listener and its connections really close after a few ``try_again`` answers."""
    answered: list[float] = []
    enough = threading.Event()

    def answer(request: Request, sock: socket.socket) -> None:
        reply(sock, 200, TRY_AGAIN)
        answered.append(time.monotonic())
        if len(answered) >= 3:
            enough.set()

    server = HostileServer(answer)
    poller, api = _poller(server.url)
    try:
        future = poller.poll("req-1", "OptimStep", lambda resp: resp, created_at=time.monotonic())
        assert enough.wait(30)
        server.close()  # from now on: connection refused
        with pytest.raises(APITimeoutError) as info:
            future.result(timeout=60)
        ended = time.monotonic()
    finally:
        server.close()
        poller.close()
        api.close()  # type: ignore[attr-defined]
    # Before (issue 31): 9.0 s after the last answer with stall_timeout=3, in a real run.
    assert ended - answered[-1] <= BOUND, ended - answered[-1]
    assert isinstance(info.value.__cause__, APIConnectionError)
    assert "Connection refused" in str(info.value)
