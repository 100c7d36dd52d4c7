"""Connection failures vs timeouts, retry budgets, and ``tinker-lite --timeout`` on a dead port."""

from __future__ import annotations

import socket
import time

import pytest
import urllib3
import urllib3.connection
import urllib3.exceptions

from tests.support.clients import service_with
from tests.support.holder import requests_over
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    API_KEY,
    FakeClock,
    Hang,
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import APIConnectionError, APITimeoutError, InternalServerError
from tinker_lite._transport.failures import classify_failure
from tinker_lite._transport.http import PoolKind, Timeout, Transport
from tinker_lite._transport.retry import RetryPolicy, cut_timeout
from tinker_lite.cli import EXIT_CONNECTION
from tinker_lite.cli import main as cli_main


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _new_connection_error(cause: OSError) -> urllib3.exceptions.MaxRetryError:
    """What urllib3 2.x raises for a failed connect when the pool may not retry it."""
    pool = urllib3.HTTPConnectionPool("127.0.0.1", 9)
    connection = urllib3.connection.HTTPConnection("127.0.0.1", 9)
    try:
        raise urllib3.exceptions.NewConnectionError(connection, f"Failed: {cause}") from cause
    except urllib3.exceptions.NewConnectionError as new:
        return urllib3.exceptions.MaxRetryError(pool, "/x", reason=new)


# -- classification ---------------------------------------------------------------------------


def test_failed_connects_are_not_timeouts() -> None:
    # urllib3's NewConnectionError subclasses ConnectTimeoutError: the trap this guards against.
    assert issubclass(urllib3.exceptions.NewConnectionError, urllib3.exceptions.TimeoutError)
    assert classify_failure(_new_connection_error(ConnectionRefusedError(111, "refused"))) == (
        "refused"
    )
    assert classify_failure(_new_connection_error(OSError(101, "unreachable"))) == "unreachable"


def test_real_timeouts_are_timeouts_and_broken_connections_are_not() -> None:
    pool = urllib3.HTTPConnectionPool("127.0.0.1", 9)
    read_timeout = urllib3.exceptions.ReadTimeoutError(pool, "/x", "Read timed out.")
    connection = urllib3.connection.HTTPConnection("127.0.0.1", 9)
    connect_timeout = urllib3.exceptions.ConnectTimeoutError(connection, "connect timed out")
    assert classify_failure(connect_timeout) == "timeout"
    assert classify_failure(read_timeout) == "timeout"
    assert classify_failure(urllib3.exceptions.MaxRetryError(pool, "/x", reason=read_timeout)) == (
        "timeout"
    )
    assert classify_failure(TimeoutError("timed out")) == "timeout"
    aborted = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104))
    assert classify_failure(aborted) == "other"
    assert classify_failure(urllib3.exceptions.MaxRetryError(pool, "/x", reason=aborted)) == (
        "other"
    )


def test_a_refused_connection_is_a_connection_error_naming_host_and_port() -> None:
    port = _closed_port()
    transport = Transport(f"http://127.0.0.1:{port}", headers={}, auth=lambda: API_KEY)
    try:
        with pytest.raises(APIConnectionError) as info:
            transport.send(PoolKind.TRAIN, "GET", "/api/v1/healthz", timeout=Timeout(5.0, 5.0))
    finally:
        transport.close()
    assert not isinstance(info.value, APITimeoutError)
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message
    assert "refused" in message.lower()
    assert "timed out" not in message.lower()
    assert API_KEY not in message


def test_a_read_timeout_is_still_a_timeout(server: ScriptedServer) -> None:
    server.on("GET", "/slow", Hang())
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        with pytest.raises(APITimeoutError):
            transport.send(PoolKind.TRAIN, "GET", "/slow", timeout=Timeout(1.0, 0.2))
    finally:
        transport.close()


# -- retry budgets ----------------------------------------------------------------------------


def test_a_retry_budget_stops_before_a_back_off_would_overrun_it(server: ScriptedServer) -> None:
    server.default("GET", "/flaky", Reply(503, {"detail": "busy"}))
    clock = FakeClock()
    with (
        requests_over(
            server.url,
            retry_policy=RetryPolicy(budget_s=2.0, jitter=0.0),
            sleep=clock.sleep,
            clock=clock,
            rand=lambda: 0.0,
        ) as api,
        pytest.raises(InternalServerError),
    ):
        api.call("GET", "/flaky", operation_retries=False)
    # Back-offs 0.5 + 1.0 fit in 2 s; the next (2.0) would end past it.
    assert clock.sleeps == [0.5, 1.0]
    assert len(server.requests("/flaky")) == 3


def test_attempt_timeouts_are_cut_to_the_budget_left() -> None:
    # The attempt's overall deadline (connect, headers and body) is cut too, to a second at least.
    assert cut_timeout(Timeout(5.0, 60.0), 2.5) == Timeout(2.5, 2.5, total=2.5)
    assert cut_timeout(Timeout(1.0, 2.0), 2.5) == Timeout(1.0, 2.0, total=2.5)
    assert cut_timeout(Timeout(1.0, 1.0), 2.5) == Timeout(1.0, 1.0)
    assert cut_timeout(Timeout(5.0, 60.0), 0.25) == Timeout(0.25, 0.25, total=1.0)
    assert cut_timeout(Timeout(5.0, 60.0), 100.0) == Timeout(5.0, 60.0)
    with pytest.raises(ValueError, match="budget_s"):
        RetryPolicy(budget_s=0)
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)


def test_max_retries_bounds_the_http_retries_of_a_service_client(server: ScriptedServer) -> None:
    server.default("POST", "/api/v1/client/config", Reply(404, {"detail": "Not Found"}))
    server.default("POST", "/api/v1/create_session", Reply(503, {"detail": "busy"}))
    clock = FakeClock()
    with pytest.raises(InternalServerError):
        service_with(
            {"sleep": clock.sleep},
            base_url=server.url,
            api_key=API_KEY,
            telemetry=False,
            max_retries=1,
        ).create_sampling_client(base_model="Qwen/Qwen3-8B").result()
    assert len(server.requests("/api/v1/create_session")) == 2


# -- tinker-lite --timeout --------------------------------------------------------------------


def test_cli_timeout_bounds_a_refused_connection(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TINKER_BASE_URL", "TINKER_API_KEY", "TINKER_LITE_JOURNAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    port = _closed_port()
    started = time.monotonic()
    code = cli_main(["run", "list", "--base-url", f"http://127.0.0.1:{port}", "--timeout", "2"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == EXIT_CONNECTION
    assert elapsed < 15, f"took {elapsed:.1f}s"  # a bound on hanging, not a speed test
    assert f"127.0.0.1:{port}" in err
    assert "refused" in err.lower()
