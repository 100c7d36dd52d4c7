"""A scripted HTTP/1.1 server on 127.0.0.1 for transport tests, plus a fake clock.

The server records every request (method, path, query, headers, body) and answers from a script:
per ``(method, path)`` a queue of actions consumed in order, then a default action. Actions can
reply, drop the connection before or in the middle of the answer, send a truncated JSON body,
hang until released (the client's read timeout fires), or compute the answer from the request.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = [
    "API_KEY",
    "Drop",
    "DropMidBody",
    "FakeClock",
    "Hang",
    "Recorded",
    "Reply",
    "Respond",
    "ScriptedServer",
    "TruncatedJSON",
    "clean_env_fixture",
    "server_fixture",
]


@dataclass
class Recorded:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    raw_headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """A header value by case-insensitive name."""
        for key, value in self.raw_headers:
            if key.lower() == name.lower():
                return value
        return None

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """Answer with ``status`` and a JSON (``json_body``) or raw (``body``) body."""

    status: int = 200
    json_body: Any = None
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    def payload(self) -> bytes:
        if self.body is not None:
            return self.body
        if self.json_body is None:
            return b""
        return json.dumps(self.json_body).encode()


@dataclass
class Drop:
    """Close the connection without answering."""


@dataclass
class DropMidBody:
    """Send the status line and headers announcing ``declared`` bytes, part of the body, close."""

    partial: bytes = b'{"request_id": "r'
    declared: int = 200


@dataclass
class TruncatedJSON:
    """A complete HTTP answer whose JSON body is cut short (Content-Length matches)."""

    status: int = 200
    text: bytes = b'{"type": "try_ag'


@dataclass
class Hang:
    """Never answer (until ``release`` is set or the server closes)."""

    release: threading.Event | None = None


@dataclass
class Respond:
    """Compute the action from the request (called on the server thread)."""

    fn: Callable[[Recorded], Any]


Action = Reply | Drop | DropMidBody | TruncatedJSON | Hang | Respond


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 10
    # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and
    # delayed ACKs add ~40 ms to every answer.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        split = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        raw = list(self.headers.items())
        recorded = Recorded(
            method=self.command,
            path=split.path,
            query=query,
            headers=dict(raw),
            raw_headers=raw,
            body=body,
        )
        owner = self.server.owner
        action = owner._take(recorded)
        while isinstance(action, Respond):
            action = action.fn(recorded)
        self._perform(action)

    def _perform(self, action: Any) -> None:
        owner = self.server.owner
        if isinstance(action, Reply):
            payload = action.payload()
            self.send_response(action.status)
            if payload or action.json_body is not None:
                self.send_header("Content-Type", action.content_type)
            for key, value in action.headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        elif isinstance(action, Drop):
            self.close_connection = True
            self._abort()
        elif isinstance(action, DropMidBody):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(action.declared))
            self.end_headers()
            self.wfile.write(action.partial)
            self.wfile.flush()
            self.close_connection = True
            self._abort()
        elif isinstance(action, TruncatedJSON):
            self.send_response(action.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(action.text)))
            self.end_headers()
            self.wfile.write(action.text)
            self.wfile.flush()
        elif isinstance(action, Hang):
            event = action.release or owner.release_all
            while not event.is_set() and not owner.release_all.is_set():
                event.wait(0.05)
            self.close_connection = True
            self._abort()
        else:  # pragma: no cover - a test bug
            raise TypeError(f"unknown action {action!r}")

    def _abort(self) -> None:
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_GET
    do_PUT = do_GET
    do_DELETE = do_GET
    do_PATCH = do_GET


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True
    request_queue_size = 1024  # hundreds of clients may connect at once
    owner: ScriptedServer

    def __init__(self, owner: ScriptedServer) -> None:
        self.owner = owner
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def abort_open(self) -> None:
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ScriptedServer:
    """The scripted loopback server; use as a context manager (``with ScriptedServer() as s``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: dict[tuple[str, str], collections.deque[Any]] = {}
        self._defaults: dict[tuple[str, str], Any] = {}
        self._recorded: list[Recorded] = []
        self._arrivals = threading.Condition(self._lock)
        self.release_all = threading.Event()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.release_all.set()
        self._server.shutdown()
        self._server.abort_open()
        self._server.server_close()
        self._thread.join(5)

    # -- scripting ---------------------------------------------------------------------------

    def on(self, method: str, path: str, *actions: Any) -> ScriptedServer:
        """Queue ``actions`` for the next requests to ``method path`` (in order)."""
        with self._lock:
            self._script.setdefault((method.upper(), path), collections.deque()).extend(actions)
        return self

    def default(self, method: str, path: str, action: Any) -> ScriptedServer:
        """The action once the queue of ``method path`` is empty."""
        with self._lock:
            self._defaults[(method.upper(), path)] = action
        return self

    def _take(self, recorded: Recorded) -> Any:
        key = (recorded.method, recorded.path)
        with self._lock:
            self._recorded.append(recorded)
            self._arrivals.notify_all()
            queue = self._script.get(key)
            if queue:
                return queue.popleft()
            if key in self._defaults:
                return self._defaults[key]
        return Reply(404, {"detail": f"no script for {recorded.method} {recorded.path}"})

    # -- inspection --------------------------------------------------------------------------

    def requests(self, path: str | None = None, method: str | None = None) -> list[Recorded]:
        """Recorded requests, optionally only those to ``path`` / with ``method``."""
        with self._lock:
            items = list(self._recorded)
        return [
            r
            for r in items
            if (path is None or r.path == path) and (method is None or r.method == method.upper())
        ]

    def wait_for(self, path: str, count: int, timeout: float = 10.0) -> list[Recorded]:
        """Block until ``count`` requests to ``path`` arrived (event-driven, bounded)."""
        with self._arrivals:
            ok = self._arrivals.wait_for(
                lambda: sum(1 for r in self._recorded if r.path == path) >= count, timeout
            )
        if not ok:
            raise AssertionError(
                f"only {len(self.requests(path))} of {count} requests to {path} arrived"
            )
        return self.requests(path)


class FakeClock:
    """A clock whose ``sleep`` advances time instantly and records the delays."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._lock = threading.Lock()
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += seconds

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


# ---------------------------------------------------------------------------------------------
# Fixtures shared by the transport tests (import them by name into a test module).

API_KEY = "tml-secret-test-key-0123456789"


@pytest.fixture(name="clean_env")
def clean_env_fixture(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> Iterator[None]:
    """No TINKER_* / CLOUDFLARE_* variables, loopback never proxied, and no key in any log.

    Every log record of the test (DEBUG and up, all loggers) is checked for the API key.
    """
    for name in list(os.environ):
        if name.startswith(("TINKER_", "CLOUDFLARE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    caplog.set_level(logging.DEBUG)
    yield
    leaked = [r.getMessage() for r in caplog.records if API_KEY in r.getMessage()]
    assert leaked == [], "the API key reached a log record"


@pytest.fixture(name="server")
def server_fixture(clean_env: None) -> Iterator[ScriptedServer]:
    """A running scripted server, shut down (and its threads joined) after the test."""
    with ScriptedServer() as scripted:
        yield scripted
