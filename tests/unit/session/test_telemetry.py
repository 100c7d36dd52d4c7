"""Telemetry tests: event shapes, batching, queue cap, flushing, the off switch, no secrets."""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.holder import requestor_for
from tests.support.scripted_server import (  # noqa: F401 - fixtures are used by name
    API_KEY,
    FakeClock,
    Hang,
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite._api import Requestor
from tinker_lite._errors import (
    BadRequestError,
    InternalServerError,
    InvalidInputError,
    RequestErrorCategory,
    RequestFailedError,
)
from tinker_lite._transport.http import register_secret
from tinker_lite.telemetry import PROCESS_UUID, Telemetry, is_telemetry_enabled, is_user_error

PATH = "/api/v1/telemetry"
FIXED = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.fixture
def api(server: ScriptedServer) -> Iterator[Requestor]:
    server.default("POST", PATH, Reply(200, {"status": "accepted"}))
    requestor = requestor_for(server.url, sleep=lambda s: None)
    yield requestor
    requestor.close()


@pytest.fixture
def make_telemetry(api: Requestor) -> Iterator[Callable[..., Telemetry]]:
    made: list[Telemetry] = []

    def make(**kwargs: Any) -> Telemetry:
        options: dict[str, Any] = {
            "session_id": "sess-1",
            "sdk_version": "0.38.0",
            "enabled": True,
            "flush_interval": 60.0,
            "now": lambda: FIXED,
        }
        options.update(kwargs)
        telemetry = Telemetry(api.send_telemetry, **options)
        made.append(telemetry)
        return telemetry

    yield make
    for telemetry in made:
        telemetry.close(timeout=0.5)
    api.close()  # aborts a send still in flight, as SessionHolder.close does
    for telemetry in made:
        assert telemetry.join(5)


def events(server: ScriptedServer) -> list[dict[str, Any]]:
    return [e for r in server.requests(PATH) for e in r.json()["events"]]


def test_session_events_have_the_golden_shapes(
    server: ScriptedServer, make_telemetry: Callable[..., Telemetry]
) -> None:
    clock = FakeClock()
    telemetry = make_telemetry(clock=clock)
    telemetry.session_start()
    clock.advance(3723.000005)
    telemetry.session_end()
    telemetry.session_end()  # once only
    assert telemetry.flush(timeout=10)
    (request,) = server.requests(PATH)
    body = request.json()
    assert list(body) == ["events", "platform", "sdk_version", "session_id", "process_uuid"]
    assert body["sdk_version"] == "0.38.0"
    assert body["session_id"] == "sess-1"
    assert body["process_uuid"] == PROCESS_UUID
    assert UUID.match(PROCESS_UUID)
    assert request.header("x-stainless-read-timeout") == "5"
    start, end = body["events"]
    assert list(start) == ["event", "event_id", "event_session_index", "severity", "timestamp"]
    assert start["event"] == "SESSION_START"
    assert start["event_session_index"] == 0
    assert start["timestamp"] == "2025-01-02T03:04:05Z"
    assert UUID.match(start["event_id"])
    assert list(end) == [
        "duration",
        "event",
        "event_id",
        "event_session_index",
        "severity",
        "timestamp",
    ]
    assert end["duration"] == "1:02:03.000005"
    assert end["event_session_index"] == 1


def test_errors_become_user_error_or_unhandled_exception_events(
    server: ScriptedServer, make_telemetry: Callable[..., Telemetry]
) -> None:
    telemetry = make_telemetry()
    telemetry.log_exception(
        RequestFailedError("bad tokens", request_id="r", category=RequestErrorCategory.USER)
    )
    telemetry.log_exception(BadRequestError("nope", status_code=400, body={"detail": "x"}))
    try:
        raise RuntimeError("boom")
    except RuntimeError as e:
        telemetry.log_exception(e)
    telemetry.log_exception(InternalServerError("down", status_code=503))
    telemetry.log_event("custom", {"n": 1, "skip": None, "f": float("nan")})
    assert telemetry.flush(timeout=10)
    user1, user2, unhandled, server_err, custom = events(server)
    assert user1["event"] == "GENERIC_EVENT"
    assert user1["event_name"] == "user_error"
    assert user1["severity"] == "WARNING"
    assert user1["event_data"] == {"error_type": "RequestFailedError", "message": "bad tokens"}
    assert user2["event_data"] == {
        "error_type": "BadRequestError",
        "message": "nope",
        "status_code": 400,
        "body": {"detail": "x"},
    }
    assert list(unhandled)[:3] == ["error_message", "error_type", "event"]
    assert unhandled["event"] == "UNHANDLED_EXCEPTION"
    assert unhandled["severity"] == "ERROR"
    assert unhandled["error_type"] == "RuntimeError"
    assert unhandled["error_message"] == "boom"
    assert "Traceback" in unhandled["traceback"]
    assert server_err["event"] == "UNHANDLED_EXCEPTION"
    assert "traceback" not in server_err
    assert custom["event_data"] == {"n": 1, "f": "nan"}
    assert [e["event_session_index"] for e in events(server)] == [0, 1, 2, 3, 4]


def test_user_error_classification() -> None:
    assert is_user_error(InvalidInputError("f", "bad"))
    assert not is_user_error(BadRequestError("x", status_code=408))
    assert not is_user_error(BadRequestError("x", status_code=429))
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = BadRequestError("x", status_code=422)
    assert is_user_error(wrapped)
    assert not is_user_error(RequestFailedError("x", request_id="r"))


def test_batches_hold_at_most_100_events(
    server: ScriptedServer, make_telemetry: Callable[..., Telemetry]
) -> None:
    telemetry = make_telemetry()
    for i in range(250):
        telemetry.log_event("e", {"i": i})
    assert telemetry.flush(timeout=10)
    sizes = [len(r.json()["events"]) for r in server.requests(PATH)]
    assert sizes == [100, 100, 50]
    assert [e["event_data"]["i"] for e in events(server)] == list(range(250))


def test_queue_cap_drops_new_events_and_says_so_once(
    server: ScriptedServer,
    make_telemetry: Callable[..., Telemetry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    telemetry = make_telemetry(max_queue=10)
    with caplog.at_level(logging.WARNING, logger="tinker_lite.telemetry"):
        for i in range(15):
            telemetry.log_event("e", {"i": i})
    assert telemetry.flush(timeout=10)
    assert [e["event_data"]["i"] for e in events(server)] == list(range(10))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ["Telemetry queue full, dropping events"]


def test_periodic_flush_without_being_asked(
    server: ScriptedServer, make_telemetry: Callable[..., Telemetry]
) -> None:
    telemetry = make_telemetry(flush_interval=0.02)
    telemetry.log_event("tick")
    server.wait_for(PATH, 1)
    assert events(server)[0]["event_name"] == "tick"


def test_fatal_errors_flush_at_once_with_a_bounded_wait(
    server: ScriptedServer, make_telemetry: Callable[..., Telemetry]
) -> None:
    telemetry = make_telemetry(fatal_flush_timeout=10.0)
    telemetry.log_exception(RuntimeError("fatal"), fatal=True)
    assert len(server.requests(PATH)) == 1  # sent before log_exception returned

    server.on("POST", PATH, Hang())
    slow = make_telemetry(fatal_flush_timeout=0.1)
    started = time.monotonic()
    slow.log_exception(RuntimeError("fatal"), fatal=True)
    assert time.monotonic() - started < 5


def test_send_failures_are_logged_once_and_dropped(
    server: ScriptedServer,
    make_telemetry: Callable[..., Telemetry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.default("POST", PATH, Reply(503))
    telemetry = make_telemetry()
    with caplog.at_level(logging.WARNING, logger="tinker_lite.telemetry"):
        telemetry.log_event("a")
        assert telemetry.flush(timeout=10)
        telemetry.log_event("b")
        assert telemetry.flush(timeout=10)
    assert len(server.requests(PATH)) == 8  # 2 batches x (1 + 3 retries)
    assert len([r for r in caplog.records if "Failed to send telemetry" in r.getMessage()]) == 1


def test_off_switch(api: Requestor, server: ScriptedServer) -> None:
    assert not is_telemetry_enabled({"TINKER_TELEMETRY": "0"})
    assert not is_telemetry_enabled({"TINKER_TELEMETRY": "off"})
    assert is_telemetry_enabled({"TINKER_TELEMETRY": "YES"})
    assert is_telemetry_enabled({})
    telemetry = Telemetry(api.send_telemetry, session_id="s", sdk_version="0.38.0", enabled=False)
    telemetry.session_start()
    telemetry.log_event("x")
    telemetry.log_exception(RuntimeError("x"), fatal=True)
    assert telemetry.flush(timeout=1)
    telemetry.close()
    assert server.requests(PATH) == []


def test_env_switch_is_read_by_default(
    api: Requestor, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    telemetry = Telemetry(api.send_telemetry, session_id="s", sdk_version="0.38.0")
    assert not telemetry.enabled


def test_sessionless_batches(
    server: ScriptedServer, make_telemetry: Callable[..., Telemetry]
) -> None:
    telemetry = make_telemetry(session_id=None)
    telemetry.session_start()
    telemetry.log_event("rest")
    assert telemetry.flush(timeout=10)
    body = server.requests(PATH)[0].json()
    assert body["session_id"].startswith("sessionless-")
    assert [e["event"] for e in body["events"]] == ["GENERIC_EVENT"]


def test_never_sends_the_api_key(
    server: ScriptedServer, make_telemetry: Callable[..., Telemetry]
) -> None:
    register_secret(API_KEY)
    telemetry = make_telemetry()
    telemetry.log_exception(RuntimeError(f"failed with key {API_KEY}"))
    telemetry.log_event("e", {"note": f"k={API_KEY}"})
    assert telemetry.flush(timeout=10)
    body = server.requests(PATH)[0].body
    assert API_KEY.encode() not in body
    assert b"***" in body
