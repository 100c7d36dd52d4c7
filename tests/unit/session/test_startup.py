"""The start-up sequence: client/config, auth/token, client/dynamic_config and its refresh.

docs/protocol.rst §8.1 and golden-0.38: ``client/dynamic_config`` follows ``client/config`` (and
the JWT exchange), with ``{"sdk_version"}``, a 10 s read timeout and no ``x-sdk-*`` headers; it
is read again every ``refresh_interval_sec``; a failed refresh keeps the last values; a service that
does not answer ``client/config`` is not asked for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.support.holder import holder_from
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite._session.holder import SessionHolder

API_KEY = "tml-test-key"
CONFIG = "/api/v1/client/config"
DYNAMIC = "/api/v1/client/dynamic_config"
CREATE = "/api/v1/create_session"


@pytest.fixture
def holders(server: ScriptedServer) -> Iterator[list[SessionHolder]]:
    made: list[SessionHolder] = []
    yield made
    for holder in made:
        holder.close(timeout=5)


def _holder(server: ScriptedServer, made: list[SessionHolder], **kwargs: object) -> SessionHolder:
    holder = holder_from(
        api_key=API_KEY,
        base_url=server.url,
        telemetry=False,
        sleep=lambda s: None,
        sdk_version="0.38.0",
        **kwargs,
    )
    made.append(holder)
    return holder


def test_dynamic_config_is_read_after_client_config_and_refreshed(
    server: ScriptedServer, holders: list[SessionHolder]
) -> None:
    server.default("POST", CONFIG, Reply(200, {}))
    server.default("POST", CREATE, Reply(200, {"session_id": "sess-1"}))
    server.on(
        "POST",
        DYNAMIC,
        Reply(200, {"refresh_interval_sec": 0.01, "sample_cancel_max_batch_size": 8}),
        Reply(503, {"detail": "down"}),
        Reply(200, {"refresh_interval_sec": 0.01, "sample_cancel_max_batch_size": 16}),
    )
    server.default(
        "POST", DYNAMIC, Reply(200, {"refresh_interval_sec": 300.0, "sample_cancel_enabled": True})
    )
    holder = _holder(server, holders, create_session=False, dynamic_config_min_interval=0.01)
    first = server.requests()[:2]
    assert [r.path for r in first] == [CONFIG, DYNAMIC]
    dynamic = first[1]
    assert dynamic.body == b'{"sdk_version":"0.38.0"}'
    assert dynamic.header("x-stainless-read-timeout") == "10"
    assert dynamic.header("x-sdk-method") is None
    assert dynamic.header("x-sdk-version") is None
    # The 503 is not retried (the values are kept); the next refreshes bring 16, then a
    # 300 s pause. close() joins the refresh thread, so its last answer has been applied.
    server.wait_for(DYNAMIC, 4)
    holder.close(timeout=5)
    assert holder.dynamic_config.sample_cancel_enabled is True
    assert holder.dynamic_config.refresh_interval_sec == 300.0
    assert len(server.requests(DYNAMIC)) == 4
    assert not [t for t in threading.enumerate() if t.name == "tinker-lite-dynamic-config"]


def test_a_service_without_client_config_is_not_asked_for_the_dynamic_config(
    server: ScriptedServer, holders: list[SessionHolder]
) -> None:
    server.default("POST", CONFIG, Reply(404, {"detail": "Not Found"}))
    server.default("POST", CREATE, Reply(200, {"session_id": "sess-1"}))
    holder = _holder(server, holders)
    assert holder.session_id == "sess-1"
    assert [r.path for r in server.requests()] == [CONFIG, CREATE]
    assert holder.dynamic_config.refresh_interval_sec == 300.0


def test_a_dynamic_config_404_keeps_the_defaults(
    server: ScriptedServer, holders: list[SessionHolder]
) -> None:
    server.default("POST", CONFIG, Reply(200, {}))
    server.default("POST", DYNAMIC, Reply(404, {"detail": "Not Found"}))
    server.default("POST", CREATE, Reply(200, {"session_id": "sess-1"}))
    holder = _holder(server, holders)
    assert holder.session_id == "sess-1"
    assert [r.path for r in server.requests()] == [CONFIG, DYNAMIC, CREATE]
    assert holder.dynamic_config.sample_cancel_enabled is False
