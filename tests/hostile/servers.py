"""Small misbehaving HTTP/1.1 servers on 127.0.0.1, one per case, written on raw sockets.

A :class:`HostileServer` reads each request (line, headers, ``Content-Length`` body), records it,
and hands the connected socket to the case's ``answer(request, sock)``, which writes whatever it
likes: endless chunks, a byte a second, a bomb, a redirect. ``close()`` really closes the
listener *and* every accepted connection, so the next connection is refused.
"""

from __future__ import annotations

import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["HostileServer", "Request", "peak_traced", "reply"]


@dataclass
class Request:
    """One request as the server read it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    port: int
    raw_header_names: list[str] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


Answer = Callable[[Request, socket.socket], None]


def reply(
    sock: socket.socket, status: int, body: bytes = b"", headers: dict[str, str] | None = None
) -> None:
    """Write one complete answer with a ``Content-Length``."""
    lines = [f"HTTP/1.1 {status} X"]
    fields = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    fields.update(headers or {})
    lines += [f"{name}: {value}" for name, value in fields.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)


class HostileServer:
    """A loopback server whose answers are written by ``answer`` (default: 404 to all)."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer: Answer = answer or (lambda request, sock: reply(sock, 404, b"{}"))
        self.requests: list[Request] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="hostile-server", daemon=True)
        self._thread.start()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def paths(self) -> list[str]:
        with self._lock:
            return [f"{r.method} {r.path}" for r in self.requests]

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._connections.append(conn)
            threading.Thread(
                target=self._serve, args=(conn,), name="hostile-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        try:
            while not self._closed.is_set():
                line = reader.readline(65536)
                if not line:
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                names: list[str] = []
                while True:
                    header = reader.readline(65536).decode("latin-1").rstrip("\r\n")
                    if not header:
                        break
                    name, _, value = header.partition(":")
                    headers[name.strip().lower()] = value.strip()
                    names.append(name.strip())
                body = reader.read(int(headers.get("content-length", "0")))
                request = Request(method, path, headers, body, self.port, names)
                with self._lock:
                    self.requests.append(request)
                self.answer(request, conn)
        except (OSError, ValueError):
            return
        finally:
            reader.close()
            conn.close()

    def close(self) -> None:
        """Close the listener and every connection: from now on connections are refused."""
        self._closed.set()
        self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


def trickle(sock: socket.socket, data: bytes, every: float, stop: threading.Event) -> None:
    """Send ``data`` one byte every ``every`` seconds (until ``stop``)."""
    for i in range(len(data)):
        if stop.wait(every):
            return
        try:
            sock.sendall(data[i : i + 1])
        except OSError:
            return


@contextmanager
def peak_traced() -> Iterator[Callable[[], int]]:
    """Trace Python allocations; the callable gives the peak so far, in bytes."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        yield lambda: tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def elapsed_since(start: float) -> float:
    return time.monotonic() - start
