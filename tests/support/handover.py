"""Local servers for the SamplingClient hand-over tests (worker processes, Ray workers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tinker_lite.local import LocalServer

__all__ = ["FLAGS", "KEY", "MODEL", "keyed_fixture", "server_fixture"]

MODEL = "tinker-lite/tiny-64"
KEY = "tml-driver-key-7d1f"
# As the service configures sampling: a copied client joins the sampling session.
FLAGS = {"sample_join_sampling_session": True}


@pytest.fixture(name="server")
def server_fixture() -> Iterator[LocalServer]:
    """A local server (tiny model) that asks copies to join the sampling session."""
    server = LocalServer(config_overrides=FLAGS)
    server.start()
    yield server
    server.stop()


@pytest.fixture(name="keyed")
def keyed_fixture() -> Iterator[LocalServer]:
    """The same, refusing every request without ``KEY``."""
    server = LocalServer(api_key=KEY, config_overrides=FLAGS)
    server.start()
    yield server
    server.stop()
