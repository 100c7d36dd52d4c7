"""The local server's lifecycle: start, stop, pause and resume listening, faults and stats.

A threading HTTP server (:mod:`~tinker_lite.local.http.connections`) in front of
:class:`~tinker_lite.local.http.app.App` (routing, auth, fault injection, long-polls) and
:class:`~tinker_lite.local.service.state.ServerState`. :class:`LocalServer` runs it in a
background thread; :func:`serve` runs it in the foreground until SIGINT/SIGTERM.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite.local.http.app import App
from tinker_lite.local.http.connections import ThreadingServer
from tinker_lite.local.http.faults import FaultInjector
from tinker_lite.local.http.responses import (
    MAX_BODY,
)
from tinker_lite.local.model.tiny_lm import (
    CONTEXT_LENGTH,
    MAX_CONTEXT_LENGTH,
    MIN_CONTEXT_LENGTH,
)
from tinker_lite.local.service.identity import JwtIssuer
from tinker_lite.local.service.state import ServerState

__all__ = ["FAULTS_ENV", "LocalServer", "serve"]

log = logging.getLogger("tinker_lite.local")

FAULTS_ENV = "TINKER_LITE_LOCAL_FAULTS"


class LocalServer:
    """An offline Tinker-compatible server on loopback, backed by the tiny numpy model.

    ``with LocalServer() as base_url: ...`` starts it on an ephemeral port in a background thread
    and stops it (removing its temporary data dir) on exit. docs/local.rst gives the
    options, the fault spec grammar and the stats format.
    """

    def __init__(  # noqa: PLR0917 (the documented positional signature)
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        data_dir: str | os.PathLike[str] | None = None,
        api_key: str | None = None,
        faults: str | None = None,
        jwt: bool = False,
        stub_model: bool = False,
        *,
        result_ttl: float = 3600.0,
        long_poll_s: float = 1.0,
        pending_status: int = 200,
        config_overrides: Mapping[str, Any] | None = None,
        sample_workers: int = 4,
        clock: Callable[[], float] | None = None,
        jwt_ttl_s: float = 3600.0,
        archive_ttl_s: float = 900.0,
        models: Sequence[str] = (),
        max_body_bytes: int = MAX_BODY,
        context_length: int = CONTEXT_LENGTH,
    ) -> None:
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")
        if not MIN_CONTEXT_LENGTH <= context_length <= MAX_CONTEXT_LENGTH:
            raise ValueError(
                f"context_length must be in [{MIN_CONTEXT_LENGTH}, {MAX_CONTEXT_LENGTH}], "
                f"got {context_length}"
            )
        if pending_status not in (200, 408):
            raise ValueError("pending_status must be 200 (try_again) or 408")
        if faults is None:
            faults = os.environ.get(FAULTS_ENV)
        self.host = host
        self.port = port
        self.api_key = api_key
        self.jwt = jwt
        self.stub_model = stub_model
        self.result_ttl = result_ttl
        self.long_poll_s = long_poll_s
        self.pending_status = pending_status
        self.sample_workers = sample_workers
        self.jwt_ttl_s = jwt_ttl_s
        self.archive_ttl_s = archive_ttl_s
        self.models = tuple(models)
        self.max_body_bytes = int(max_body_bytes)
        self.context_length = int(context_length)
        self._clock = clock or time.time
        self._faults = FaultInjector(faults)
        self._faults_enabled = faults is not None
        self._given_data_dir = Path(data_dir) if data_dir is not None else None
        self._data_dir: Path | None = None
        self._owns_data_dir = False
        self._config_overrides = dict(config_overrides or {})
        self._httpd: ThreadingServer | None = None
        self._thread: threading.Thread | None = None
        self._app: App | None = None
        self._state: ServerState | None = None
        self._lock = threading.Lock()
        self._paused = False

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the running server."""
        if self._httpd is None:
            raise RuntimeError("LocalServer is not running; call start() first")
        port = self._httpd.server_address[1]
        shown = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        if ":" in shown:
            shown = f"[{shown}]"
        return f"http://{shown}:{port}"

    @property
    def data_dir(self) -> Path:
        """Where checkpoints are stored."""
        if self._data_dir is None:
            raise RuntimeError("LocalServer is not running")
        return self._data_dir

    @property
    def state(self) -> ServerState:
        """The server's state (for tests and tools in the same process)."""
        if self._state is None:
            raise RuntimeError("LocalServer is not running")
        return self._state

    def _client_config(self) -> dict[str, Any]:
        base = types.ClientConfigResponse(
            pjwt_auth_enabled=self.jwt,
            parallel_fwdbwd_chunks=True,
            sample_max_concurrent_requests=400,
            fwdbwd_max_chunk_len=1024,
            fwdbwd_max_chunk_bytes_count=5_000_000,
        )
        config: dict[str, Any] = _wire.to_builtins(base)
        config.update(self._config_overrides)
        if config.get("proto_compress_fwdbwd"):
            from tinker_lite._codec import zstd as _zstd_codec

            if not _zstd_codec.zstd_available():
                # advertising it would make clients send bodies this server answers with 415
                log.warning("proto_compress_fwdbwd not advertised: 'zstandard' is not installed")
                config["proto_compress_fwdbwd"] = False
        return config

    def start(self) -> str:
        """Start serving in a background thread; return the base URL."""
        with self._lock:
            if self._httpd is not None:
                return self.base_url
            if self._given_data_dir is None:
                self._data_dir = Path(tempfile.mkdtemp(prefix="tinker-lite-local-"))
                self._owns_data_dir = True
            else:
                self._data_dir = self._given_data_dir
                self._data_dir.mkdir(parents=True, exist_ok=True)
            self._state = ServerState(
                data_dir=self._data_dir,
                clock=self._clock,
                stub_model=self.stub_model,
                result_ttl=self.result_ttl,
                sample_workers=self.sample_workers,
                models=self.models,
                durable=self._given_data_dir is not None,
                context_length=self.context_length,
            )
            if any(self._state.restored.values()):
                counts = self._state.restored
                log.info(
                    "restored from %s: %d sessions, %d models (%d requests lost in the restart), "
                    "%d sampling sessions",
                    self._data_dir,
                    counts["sessions"],
                    counts["models"],
                    counts["lost_requests"],
                    counts["samplers"],
                )
            self._app = App(
                self._state,
                api_key=self.api_key,
                jwt=JwtIssuer(self.jwt_ttl_s, self._jwt_secret()) if self.jwt else None,
                faults=self._faults,
                faults_enabled=self._faults_enabled,
                long_poll_s=self.long_poll_s,
                pending_status=self.pending_status,
                config=self._client_config(),
                archive_ttl_s=self.archive_ttl_s,
                base_url=lambda: self.base_url,
                max_body_bytes=self.max_body_bytes,
            )
            self._listen(self.port)
        log.info("tinker_lite local server listening on %s", self.base_url)
        return self.base_url

    def _jwt_secret(self) -> bytes | None:
        """With a data dir, the JWT signing secret kept there (tokens outlive a restart)."""
        if self._given_data_dir is None or self._data_dir is None:
            return None
        path = self._data_dir / "jwt.key"
        try:
            return path.read_bytes()
        except FileNotFoundError:
            pass
        secret = secrets.token_bytes(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secret)
        return secret

    def stop(self) -> None:
        """Stop serving, end open connections and polls, remove a temporary data dir."""
        with self._lock:
            httpd, thread, app, state = self._httpd, self._thread, self._app, self._state
            if httpd is None:
                return
            self._httpd = None
            self._thread = None
            self._paused = False
        assert app is not None
        assert state is not None
        app.stopping.set()
        state.close()  # releases waiting polls: they answer 503
        self._stop_listening(httpd, thread)
        if self._owns_data_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
        log.info("tinker_lite local server stopped")

    def pause_listening(self) -> None:
        """Close the listening socket and every open connection, keeping all state.

        Until :meth:`resume_listening`, connecting to the port is refused: what clients see
        while a server restarts, except that models, futures and checkpoints survive.
        """
        with self._lock:
            httpd, thread = self._httpd, self._thread
            if httpd is None:
                raise RuntimeError("LocalServer is not running; call start() first")
            if self._paused:
                return
            self._paused = True
            self._thread = None
        self._stop_listening(httpd, thread)
        log.info("tinker_lite local server paused (connections refused)")

    def resume_listening(self) -> None:
        """Listen again on the same port after :meth:`pause_listening`."""
        with self._lock:
            old, app = self._httpd, self._app
            if old is None or app is None:
                raise RuntimeError("LocalServer is not running; call start() first")
            if not self._paused:
                return
            self._listen(old.server_address[1])
            self._paused = False
        log.info("tinker_lite local server listening again on %s", self.base_url)

    def _listen(self, port: int) -> None:
        """Bind ``port`` and serve it on a background thread (call with the lock held)."""
        assert self._app is not None
        self._httpd = ThreadingServer((self.host, port), self._app)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="tinker-lite-local-server",
            daemon=True,
        )
        self._thread.start()

    @staticmethod
    def _stop_listening(httpd: ThreadingServer, thread: threading.Thread | None) -> None:
        httpd.stop(timeout=5.0)
        if thread is not None:
            thread.join(5.0)

    def set_faults(self, spec: str | None) -> None:
        """Replace the fault rules (None or "" clears them); enables ``/_local/faults``."""
        self._faults.set_spec(spec)
        self._faults_enabled = True
        if self._app is not None:
            self._app.faults_enabled = True

    def stats(self) -> dict[str, Any]:
        """The same JSON document as ``GET /_local/stats``."""
        if self._app is None:
            raise RuntimeError("LocalServer is not running")
        return self._app.stats()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def serve(  # noqa: PLR0917 (mirrors LocalServer)
    host: str = "127.0.0.1",
    port: int = 8000,
    data_dir: str | os.PathLike[str] | None = None,
    api_key: str | None = None,
    faults: str | None = None,
    jwt: bool = False,
    stub_model: bool = False,
    *,
    ready: Callable[[str], None] | None = None,
    **options: Any,
) -> None:
    """Run a server in the foreground until SIGINT or SIGTERM; ``ready`` gets the base URL."""
    server = LocalServer(host, port, data_dir, api_key, faults, jwt, stub_model, **options)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {}
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        base_url = server.start()
        if ready is not None:
            ready(base_url)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
