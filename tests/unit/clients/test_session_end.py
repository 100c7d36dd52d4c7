"""ServiceClient.close(status, detail) and the end of a ``with`` block: the finish request."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.clients import (  # noqa: F401 - fixtures used by name
    API_KEY,
    SESSION,
    FakeTinker,
    joined_threads_fixture,
)
from tests.support.golden import GOLDEN_038_DIR, assert_body_matches, load_golden
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Recorded,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import APIFuture, InvalidInputError, ServiceClient
from tinker_lite.local import LocalServer
from tinker_lite.rest_client import RestClient

FINISH = f"/api/v1/sessions/{SESSION}/finish"
needs_golden = pytest.mark.skipif(
    not GOLDEN_038_DIR.is_dir(), reason="golden-0.38 fixtures not found"
)


def _client(server: ScriptedServer) -> ServiceClient:
    """A ServiceClient whose session has started (reading ``session_id`` starts it)."""
    FakeTinker(server)
    client = ServiceClient(base_url=server.url, api_key=API_KEY, telemetry=False, wire="json")
    assert client.session_id == SESSION
    return client


def test_a_client_that_never_started_a_session_finishes_none(server: ScriptedServer) -> None:
    FakeTinker(server)
    with ServiceClient(base_url=server.url, api_key=API_KEY, telemetry=False) as client:
        RestClient(client).get_server_capabilities().result(timeout=60)
    # docs/protocol.rst §8.1: REST-only use creates no session, so there is none to finish.
    assert server.requests("/api/v1/create_session") == []
    assert server.requests(FINISH) == []


def _check_against_golden(name: str, recorded: Recorded) -> None:
    fixture = load_golden(name, version="0.38")
    assert recorded.method == fixture["method"]
    assert recorded.query == fixture["query"]
    assert_body_matches(fixture, recorded.body)
    # golden-0.38 README: this hand-built body always carries "detail", null when unset.
    assert json.loads(recorded.body) == fixture["body"]
    assert recorded.header("x-sdk-method") == fixture["headers"]["x-sdk-method"]


@needs_golden
def test_close_sends_reason_and_detail_once(
    server: ScriptedServer, joined_threads: Callable[[], list[str]]
) -> None:
    client = _client(server)
    future = client.close("interrupted", detail="stopped by user")
    assert isinstance(future, APIFuture)
    assert future.done()
    assert future.result(timeout=0) is None
    (finish,) = server.requests(FINISH)
    _check_against_golden("flags_service_client_close", finish)
    assert client.closed

    again = client.close("errored", "ignored")
    assert again.result(timeout=0) is None
    assert len(server.requests(FINISH)) == 1
    assert [t for t in joined_threads() if t.startswith("tinker-lite")] == []


@needs_golden
def test_close_without_arguments_is_a_success(server: ScriptedServer) -> None:
    client = _client(server)
    client.close()
    (finish,) = server.requests(FINISH)
    _check_against_golden("service_client_close", finish)


@needs_golden
def test_with_block_that_ends_normally_sends_success(server: ScriptedServer) -> None:
    with _client(server) as client:
        assert client.session_id == SESSION
    (finish,) = server.requests(FINISH)
    _check_against_golden("service_client_close", finish)


@pytest.mark.parametrize(
    ("error", "reason"),
    [(ValueError("boom"), "errored"), (KeyboardInterrupt(), "interrupted")],
)
def test_with_block_that_raises_sends_its_reason(
    server: ScriptedServer, error: BaseException, reason: str
) -> None:
    with pytest.raises(type(error)), _client(server):
        raise error
    (finish,) = server.requests(FINISH)
    assert finish.json() == {"reason": {"type": reason}, "detail": None}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"status": "failed"}, "status"),
        ({"status": "Success"}, "status"),
        ({"status": None}, "status"),
        ({"status": "errored", "detail": 3}, "detail"),
    ],
)
def test_close_rejects_bad_arguments_and_stays_open(
    server: ScriptedServer, kwargs: dict[str, Any], field: str
) -> None:
    client = _client(server)
    try:
        with pytest.raises(InvalidInputError) as info:
            client.close(**kwargs)
        assert info.value.field == field
        assert not client.closed
        assert server.requests(FINISH) == []
    finally:
        client.close()
    assert len(server.requests(FINISH)) == 1


def _interrupt_inside_with(url: str, opened: list[str | None]) -> None:
    with ServiceClient(base_url=url, telemetry=False) as client:
        opened.append(client.session_id)
        raise KeyboardInterrupt


def test_local_server_sees_each_reason(
    clean_env: None, caplog: pytest.LogCaptureFixture, joined_threads: Callable[[], list[str]]
) -> None:
    caplog.set_level(logging.DEBUG, logger="tinker_lite.local")
    with LocalServer() as url:
        client = ServiceClient(base_url=url, telemetry=False)
        session_id = client.session_id
        assert client.close("errored", "bad data").result(timeout=30) is None

        opened: list[str | None] = []
        with pytest.raises(KeyboardInterrupt):
            _interrupt_inside_with(url, opened)
        (interrupted_id,) = opened

        with ServiceClient(base_url=url, telemetry=False) as c3:
            success_id = c3.session_id
            RestClient(c3).get_server_capabilities().result(timeout=60)
    messages = [r.getMessage() for r in caplog.records if r.name == "tinker_lite.local"]
    assert f"session {session_id} finished: errored" in messages
    assert f"session {interrupted_id} finished: interrupted" in messages
    assert f"session {success_id} finished: success" in messages
    assert [t for t in joined_threads() if t.startswith("tinker-lite")] == []


def test_local_server_counts_the_session_as_finished(clean_env: None) -> None:
    local = LocalServer()
    with local as url:
        client = ServiceClient(base_url=url, telemetry=False)
        session_id = client.session_id
        assert local.stats()["active_sessions"] == 1
        client.close("success")
        stats = local.stats()
        assert stats["active_sessions"] == 0
        assert stats["requests"][f"/api/v1/sessions/{session_id}/finish"] == 1
