"""Start-up before any session: client config, dynamic config refresh (docs/protocol.rst §8.1)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.decoding import decode_json
from tinker_lite._errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    ClientClosedError,
    NotFoundError,
    TinkerError,
)
from tinker_lite._repr import tolerant_repr
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.failures import is_certificate_error, is_connect_timeout
from tinker_lite._transport.http import Timeout, redact

__all__ = [
    "DYNAMIC_CONFIG_TIMEOUT",
    "DynamicConfig",
    "is_connection_failure",
    "read_client_config",
]

logger = logging.getLogger("tinker_lite.session")

# golden-0.38: a 10 s read timeout, refreshed no faster than every 10 s.
DYNAMIC_CONFIG_TIMEOUT = Timeout(connect=5.0, read=10.0)
MIN_REFRESH_INTERVAL_S = 10.0


def is_connection_failure(error: BaseException) -> bool:
    """A connection that could not be made (refused, DNS, TLS handshake, a connect timeout).

    A rejected certificate is not one: it will not change by waiting.
    """
    if not isinstance(error, APIConnectionError) or isinstance(error, ClientClosedError):
        return False
    if isinstance(error, APITimeoutError) and not is_connect_timeout(error):
        return False
    return not is_certificate_error(error)


def read_client_config(
    fetch: Callable[[], HttpResponse],
) -> tuple[types.ClientConfigResponse, bool]:
    """``client/config``: the flags and whether the service answered (a current service).

    An unusable answer (404, a bad body) gives the built-in defaults; a 401 is raised.
    """
    try:
        resp = fetch()
        data = decode_json(resp, what="client/config")
        config = _wire.structure(data, types.ClientConfigResponse)
    except Exception as e:
        if is_connection_failure(e) or isinstance(e, ClientClosedError):
            raise  # the service never answered: there is nothing to start with
        if not isinstance(e, TinkerError) or isinstance(e, AuthenticationError):
            raise  # as 0.38: a refused credential is said at once, not hidden by defaults
        _log_defaults("client/config", "client config", e)
        return types.ClientConfigResponse(), False
    return config, True


def _log_defaults(path: str, name: str, error: TinkerError) -> None:
    if isinstance(error, NotFoundError):
        logger.debug("The service has no %s; using built-in defaults", path)
    else:
        logger.info(
            "Could not read the service's %s (%s); using built-in defaults",
            name,
            redact(str(error)),
        )


class DynamicConfig:
    """The service's dynamic flags (``client/dynamic_config``), refreshed on their own thread.

    A failed refresh keeps the last values; :attr:`current` may be read from any thread.
    """

    def __init__(
        self,
        fetch: Callable[..., HttpResponse],  # fetch(initial=...)
        *,
        min_interval: float = MIN_REFRESH_INTERVAL_S,
    ) -> None:
        self._fetch = fetch
        self._min_interval = min_interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.current = types.ClientDynamicConfigResponse()

    @tolerant_repr
    def __repr__(self) -> str:
        return f"DynamicConfig(current={self.current!r})"

    def fetch_initial(self) -> None:
        """Read the flags once; 404 or an unusable answer keeps the built-in defaults."""
        try:
            self.current = self._decode(self._fetch(initial=True))
        except ClientClosedError:
            raise
        except TinkerError as e:
            _log_defaults("client/dynamic_config", "dynamic config", e)

    def start(self) -> None:
        """Start the refresh thread (once)."""
        if self._thread is not None or self._stop.is_set():
            return
        self._thread = threading.Thread(
            target=self._run, name="tinker-lite-dynamic-config", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop the refresh thread (idempotent), waiting up to ``timeout`` s for it to end."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(max(self.current.refresh_interval_sec, self._min_interval)):
            try:  # a failed refresh keeps the values
                config = self._decode(self._fetch(initial=False))
            except TinkerError as e:
                logger.debug("Dynamic config refresh failed: %s", redact(str(e)))
                continue
            if config != self.current:
                logger.debug("Dynamic config updated: %s", config)
            self.current = config

    @staticmethod
    def _decode(resp: HttpResponse) -> types.ClientDynamicConfigResponse:
        data = decode_json(resp, what="client/dynamic_config")
        return _wire.structure(data, types.ClientDynamicConfigResponse)
