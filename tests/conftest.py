"""Shared pytest configuration: no network beyond loopback, hypothesis profiles, shared fixtures."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "fast",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))

SHARED_DIR = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared directory beside the repository (specs and captured wire fixtures)."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"{SHARED_DIR} is not present beside the repository")
    return SHARED_DIR


# ---------------------------------------------------------------------------------------------
# No network beyond loopback

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def _is_loopback_host(host: object) -> bool:
    if host is None or host == "":
        return True  # a passive/any address: binding, not reaching out
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower().rstrip(".") in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _refuse(what: str, host: object) -> OSError:
    return OSError(
        errno.ENETUNREACH, f"tests never reach beyond loopback: {what} {host!r} is blocked"
    )


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse every connection and name lookup of this process beyond loopback.

    ``socket.connect``/``connect_ex`` to a non-loopback address raise ``ENETUNREACH`` and
    ``getaddrinfo`` of a name that is not loopback raises ``gaierror``, as on a machine without a
    network; Unix sockets and everything on 127.0.0.0/8 and ::1 (the local and scripted
    servers) work as usual. Child processes started by a test are not covered: they run without
    this guard.
    """
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def allowed(sock: socket.socket, address: Any) -> bool:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return True
        host = address[0] if isinstance(address, tuple) and address else address
        return _is_loopback_host(host)

    def connect(self: socket.socket, address: Any) -> None:
        if not allowed(self, address):
            raise _refuse("connecting to", address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not allowed(self, address):
            return errno.ENETUNREACH
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_loopback_host(host):
            raise socket.gaierror(
                socket.EAI_NONAME, f"tests never reach beyond loopback: {host!r} is not looked up"
            )
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


# ---------------------------------------------------------------------------------------------
# No stored login


@pytest.fixture(scope="session")
def _empty_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(autouse=True)
def _no_stored_login(monkeypatch: pytest.MonkeyPatch, _empty_home: Path) -> None:
    """Point ``HOME`` at an empty directory and unset ``TINKER_CREDENTIAL_CMD``.

    A client falls back to ``~/.tinker/credentials.json`` (the stored login): the developer's
    own login must not change what a test sees. Tests of the stored login write their own file
    under a ``HOME`` of their own.
    """
    monkeypatch.setenv("HOME", str(_empty_home))
    monkeypatch.delenv("TINKER_CREDENTIAL_CMD", raising=False)


@pytest.fixture(autouse=True)
def _no_service_answered_yet() -> None:
    """Forget which base URLs answered this process (docs/protocol.rst §6.7): this test's server
    may get a port an earlier test's server answered on, and must start with the start-up
    budget, not the stall timeout."""
    requestor = sys.modules.get("tinker_lite._api.requestor")
    if requestor is not None:
        requestor._ANSWERED.clear()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``HOME`` of the test's own (for the stored login, ``~/.tinker/credentials.json``), and
    no credential or service URL from the environment; telemetry off."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    for name in ("TINKER_API_KEY", "TINKER_BASE_URL", "TINKER_CREDENTIAL_CMD", "TINKER_LOG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    return folder


@pytest.fixture
def without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import torch`` fails, as on a machine without it (for the numpy form of custom losses:
    with torch installed ``forward_backward_custom`` hands the loss torch tensors, as 0.38 does).
    """
    monkeypatch.setitem(sys.modules, "torch", None)
