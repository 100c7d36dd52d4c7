"""The listening socket and its connections: a threading HTTP server in front of the router.

A stdlib ``ThreadingHTTPServer`` (one daemon thread per connection, HTTP/1.1 keep-alive, every
response with a Content-Length) reads each request (size caps, chunked bodies, gzip / zstd) and
hands it to :class:`~tinker_lite.local.http.app.App`; a refused body is drained or the connection
closed.
"""

from __future__ import annotations

import http.server
import logging
import socket
import threading
import time
import urllib.parse
from typing import Any

from tinker_lite.local.http.app import App
from tinker_lite.local.http.responses import (
    Response,
    decompress,
    http_error,
    too_large,
)
from tinker_lite.local.refusals import InvalidRequest, RequestRefused

__all__ = ["ThreadingServer"]

log = logging.getLogger("tinker_lite.local")

# A refused request's unread body: up to this size it is read and dropped (the connection stays
# open); past it the connection closes after a drain of at most _LINGER_S / _LINGER_BYTES.
_DISCARD_BYTES = 1 << 20
_LINGER_S = 2.0
_LINGER_BYTES = 64 << 20


def _shutdown(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _stats_key(path: str) -> str:
    if path.startswith("/_local/download/"):
        return "/_local/download"
    return path


class ThreadingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: App) -> None:
        self.app = app
        # open connections and the threads serving them (one each)
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._conn_lock = threading.Lock()
        super().__init__(address, _RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve a new connection on its own daemon thread, remembered until it ends."""
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        with self._conn_lock:
            self._connections[request] = thread
        thread.start()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self._connections.pop(request, None)

    def stop(self, timeout: float) -> None:
        """Stop accepting, end every open connection and wait (up to ``timeout``) for its thread."""
        self.shutdown()  # serve_forever has returned: no connection is accepted after this
        self.server_close()
        with self._conn_lock:
            connections = list(self._connections.items())
        for conn, _ in connections:
            _shutdown(conn)
        deadline = time.monotonic() + timeout
        for _, thread in connections:
            thread.join(max(0.0, deadline - time.monotonic()))

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("local server: connection error from %s", client_address, exc_info=True)


class _RequestHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tinker-lite-local"
    sys_version = ""
    disable_nagle_algorithm = True
    server: ThreadingServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("local server: " + format, *args)

    def _read_body(self, limit: int) -> bytes:
        """The request body as sent, at most ``limit`` bytes (413 before reading past it)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            total = 0
            while True:
                line = self.rfile.readline(65537)
                try:
                    size = int(line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    raise InvalidRequest("Invalid chunk size") from None
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if size < 0 or total > limit:
                    raise too_large(limit)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(chunks)
        length = self._content_length()
        if length is None:
            return b""
        if length < 0 or length > limit:
            raise too_large(limit)
        body = self.rfile.read(length)
        if len(body) != length:
            raise ConnectionError("client closed the connection mid-body")
        return body

    def _content_length(self) -> int | None:
        length_text = self.headers.get("Content-Length")
        if not length_text:
            return None
        try:
            return int(length_text)
        except ValueError:
            raise InvalidRequest("Invalid Content-Length") from None

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue``: a request refused on its headers gets no 100 (no body)."""
        headers: Any = self.headers  # an http.client.HTTPMessage: case-insensitive .get()
        gate = self.server.app.refuse_before_body(
            self.command, urllib.parse.urlsplit(self.path).path, headers
        )
        if gate is not None:
            return True  # _dispatch answers the refusal without reading the body
        return super().handle_expect_100()

    def _refuse_unread(self, response: Response, path: str, started: float) -> None:
        """Answer a request whose body was not read: discard a small body, else close.

        A body of up to ``_DISCARD_BYTES`` is read into a small buffer and dropped, so the
        connection stays usable. Past that (or chunked), the answer carries ``Connection:
        close``; the server stops writing and drains what the client still sends for a moment,
        never holding it, so the client reads the answer instead of a reset connection.
        """
        length: int | None = None
        if not self.headers.get("Transfer-Encoding"):
            try:
                length = self._content_length() or 0  # no Content-Length: no body
            except InvalidRequest:
                length = None
        if length is not None and 0 <= length <= _DISCARD_BYTES and self._discard(length):
            self._send(response, path, started)
            return
        self.close_connection = True
        self._send(response, path, started)
        self._linger()

    def _discard(self, length: int) -> bool:
        remaining = length
        try:
            while remaining > 0:
                chunk = self.rfile.read(min(remaining, 65536))
                if not chunk:
                    return False
                remaining -= len(chunk)
        except OSError:
            return False
        return True

    def _linger(self) -> None:
        try:
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + _LINGER_S
            drained = 0
            while drained < _LINGER_BYTES:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.connection.settimeout(left)
                chunk = self.connection.recv(65536)
                if not chunk:
                    break
                drained += len(chunk)
        except OSError:
            pass

    def _dispatch(self) -> None:
        app = self.server.app
        started = time.perf_counter()
        method = self.command
        split = urllib.parse.urlsplit(self.path)
        path = split.path
        headers: Any = self.headers  # an http.client.HTTPMessage: case-insensitive .get()
        app.state.count_request(_stats_key(path), headers.get("X-Local-Client"))
        if app.faults.decide("connect", method, path, headers).rule is not None:
            app.state.count_status(_stats_key(path), 0)
            self._drop()
            return
        refused = app.refuse_before_body(method, path, headers)
        if refused is not None:
            self._refuse_unread(refused, path, started)
            return
        limit = app.max_body_bytes
        try:
            body = self._read_body(limit)
        except RequestRefused as e:
            self._refuse_unread(http_error(e.status, e.detail), path, started)
            return
        except (ConnectionError, OSError, ValueError):
            self.close_connection = True
            return
        try:
            body = decompress(body, self.headers.get("Content-Encoding"), limit)
        except RequestRefused as e:
            self._send(http_error(e.status, e.detail), path, started)  # the body was read
            return
        except (ConnectionError, OSError, ValueError):
            self.close_connection = True
            return
        query = urllib.parse.parse_qs(split.query)
        response = app.handle(method, path, query, headers, body)
        if response.drop:
            app.state.count_status(_stats_key(path), 0)
            self._drop()
            return
        if method == "HEAD":
            response.content_length = len(response.body)
            response.body = b""
        self._send(response, path, started)

    # every method goes through the same path (BaseHTTPRequestHandler calls do_<METHOD>)
    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _dispatch

    def _drop(self) -> None:
        self.close_connection = True
        _shutdown(self.connection)

    def _send(self, response: Response, path: str, started: float) -> None:
        status = response.status
        self.server.app.state.count_status(_stats_key(path), status)
        reason = (
            http.HTTPStatus(status).phrase if status in http.HTTPStatus._value2member_map_ else ""
        )
        lines = [
            f"HTTP/1.1 {status} {reason}",
            f"Server: {self.server_version}",
            f"Date: {self.date_time_string()}",
        ]
        if response.content_type is not None:
            lines.append(f"Content-Type: {response.content_type}")
        if status != 204 and not (100 <= status < 200):
            length = response.content_length
            lines.append(f"Content-Length: {len(response.body) if length is None else length}")
        lines.extend(f"{k}: {v}" for k, v in response.headers.items())
        if self.close_connection or response.truncate_at is not None:
            lines.append("Connection: close")
            self.close_connection = True
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        body = response.body
        if response.truncate_at is not None:
            body = body[: int(len(body) * response.truncate_at)]
        try:
            self.wfile.write(head + body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True
            return
        if response.truncate_at is not None:
            self._drop()
        log.debug(
            "local server: %s %s -> %d (%.1f ms)",
            self.command,
            path,
            status,
            (time.perf_counter() - started) * 1000,
        )
