"""Never reached vs lost, quiet shutdown, short tracebacks (docs/protocol.rst §6.7), on fake clocks.

* a poll answered ``try_again`` whose listener then refuses connections fails within the stall
  timeout (+1 s), its re-polls and back-off sleeps included;
* a service this process never had an answer from fails the call after the start-up budget
  (30 s by default) with an error naming the URL and the cause, one WARNING said at once; a
  service that has answered once is ridden out for the stall timeout;
* after ``close()``, an interrupt or an uncaught exception nothing is retried or logged as
  retried, telemetry is sent once and never again to a service that does not answer, and a
  client dropped without ``close()`` logs no telemetry failure;
* an uncaught connection error prints tens of lines, not a chain of internal retries.
"""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.holder import connection_from, requestor_for
from tests.support.paths import REPO
from tests.support.scripted_server import (  # noqa: F401 - fixtures are used by name
    API_KEY,
    FakeClock,
    Hang,
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tests.support.served import served
from tinker_lite import APIConnectionError, APITimeoutError
from tinker_lite._futures.poller import Poll, Poller
from tinker_lite._session.settings import DEFAULT_STARTUP_TIMEOUT, resolve_settings
from tinker_lite._transport.answers import HttpResponse
from tinker_lite.telemetry import Telemetry

RETRIEVE = "/api/v1/retrieve_future"
CONFIG = "/api/v1/client/config"
TRY_AGAIN = b'{"type": "try_again", "request_id": "req-1", "queue_state": "active"}'


def _closed_port_url() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _retry_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "tinker_lite.retry"]


# -- the stall bound covers polls that meet a closed listener ---------------------------------


def test_a_poll_answered_try_again_then_refused_fails_within_the_stall_timeout() -> None:
    clock = FakeClock()
    answered_at: list[float] = []

    def send(poll: Poll) -> HttpResponse:
        if not answered_at:  # the service answers once, then its listener is gone
            answered_at.append(clock())
            return HttpResponse(200, {"Content-Type": "application/json"}, TRY_AGAIN)
        raise APIConnectionError("Connection refused by 127.0.0.1:1 (POST /retrieve_future)")

    poller = Poller(
        send,
        stall_timeout=3.0,
        clock=clock,
        sleep=clock.sleep,
        rand=lambda: 0.0,
        wall_clock=lambda: 1_700_000_000.0,
    )
    try:
        future = poller.poll("req-1", "OptimStep", lambda resp: resp, created_at=clock())
        error = future.exception(timeout=10)
    finally:
        poller.close()
    assert isinstance(error, APITimeoutError), repr(error)
    # Re-polls and their back-off sleeps count: the bound holds within a second.
    assert clock() - answered_at[0] <= 3.0 + 1.0
    assert sum(clock.sleeps) >= 3.0 - 0.1 - 1e-9  # it was ridden out, not given up at once
    assert "Connection refused" in str(error)


# -- start-up budget: never reached vs lost ---------------------------------------------------


def test_the_start_up_budget_is_30_seconds_by_default() -> None:
    settings = resolve_settings(base_url="http://127.0.0.1:9", environ={})
    assert settings.startup_timeout == DEFAULT_STARTUP_TIMEOUT == 30.0
    env = {"TINKER_LITE_STARTUP_TIMEOUT": "12"}
    assert resolve_settings(base_url="http://127.0.0.1:9", environ=env).startup_timeout == 12.0
    assert resolve_settings(base_url="http://127.0.0.1:9", startup_timeout=7).startup_timeout == 7
    # Never more than the stall timeout when only that is given.
    shorter = resolve_settings(base_url="http://127.0.0.1:9", stall_timeout=10, environ={})
    assert shorter.startup_timeout == 10.0


@pytest.mark.parametrize(
    ("base_url", "cause"),
    [
        (_closed_port_url(), "Connection refused by 127.0.0.1:"),
        ("http://tinker.invalid:8000", "Cannot resolve the host name tinker.invalid"),
    ],
)
def test_a_service_never_reached_fails_after_the_start_up_budget_naming_url_and_cause(
    base_url: str,
    cause: str,
    clean_env: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    api, holder = connection_from(
        base_url=base_url,
        api_key=API_KEY,
        telemetry=False,
        lazy=True,
        create_session=False,
        sleep=clock.sleep,
        clock=clock,
        rand=lambda: 0.0,
    )
    started = clock()
    try:
        with pytest.raises(APIConnectionError) as info:
            holder.ensure_started()
    finally:
        holder.close(timeout=5)
    elapsed = clock() - started
    # Before: the stall timeout (300 s) was the start-up budget.
    assert DEFAULT_STARTUP_TIMEOUT - 1.0 <= elapsed <= DEFAULT_STARTUP_TIMEOUT + 1.0, elapsed
    message = str(info.value)
    assert api.base_url in message
    assert cause in message
    assert "TINKER_LITE_STARTUP_TIMEOUT" in message
    assert not isinstance(info.value, APITimeoutError)
    warnings = [r for r in _retry_records(caplog) if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # said at once, once
    assert "client/config" in warnings[0].getMessage()


def test_a_service_that_answered_once_is_ridden_out_for_the_stall_timeout(
    clean_env: None,
) -> None:
    clock = FakeClock()
    with ScriptedServer() as server:
        server.default("POST", CONFIG, Reply(404, {"detail": "no config"}))
        url = server.url
        _, first_holder = connection_from(
            base_url=url, api_key=API_KEY, telemetry=False, lazy=True, create_session=False
        )
        first_holder.ensure_started()  # the service answered this process
        first_holder.close(timeout=5)
    # The same service, gone: a new connection to it rides it out for the stall timeout.
    _, holder = connection_from(
        base_url=url,
        api_key=API_KEY,
        telemetry=False,
        lazy=True,
        create_session=False,
        stall_timeout=120,
        sleep=clock.sleep,
        clock=clock,
        rand=lambda: 0.0,
    )
    started = clock()
    try:
        with pytest.raises(APIConnectionError) as info:
            holder.ensure_started()
    finally:
        holder.close(timeout=5)
    assert 120 - 1.0 <= clock() - started <= 120 + 1.0
    assert "start-up budget" not in str(info.value)


# -- quiet shutdown ---------------------------------------------------------------------------


def test_closing_with_a_poll_in_flight_schedules_and_logs_no_retry(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the poll the close aborted was logged "failed (...); retrying in 0.9 s".
    caplog.set_level(logging.DEBUG, logger="tinker_lite.retry")
    server.on("POST", RETRIEVE, Hang())
    api = requestor_for(server.url)
    poller = Poller(api.retrieve_future, abort=api.abort_polls, stall_timeout=300.0)
    future = poller.poll("req-1", "OptimStep", lambda resp: resp, created_at=0.0)
    server.wait_for(RETRIEVE, 1)
    api.closing.set()  # what SessionHolder.close() does first
    poller.close(timeout=5)
    api.close()
    assert future.done()
    assert _retry_records(caplog) == []
    assert len(server.requests(RETRIEVE)) == 1


def test_a_closing_client_sends_telemetry_once_and_never_again_to_a_service_gone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="tinker_lite")
    clock = FakeClock()
    api = requestor_for(_closed_port_url(), sleep=clock.sleep, clock=clock)
    telemetry = Telemetry(api.send_telemetry, session_id="s", sdk_version="0.38.0", enabled=True)
    telemetry.log_event("one")
    api.closing.set()
    telemetry.close(timeout=5)
    telemetry.log_event("after close")
    telemetry.close(timeout=5)
    api.close()
    # Before: retried three times (0.5 + 1 + 2 s) while the process exited.
    assert clock.sleeps == []
    assert _retry_records(caplog) == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_client_dropped_without_close_logs_no_telemetry_failure(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tinker_lite")
    server.default("POST", CONFIG, Reply(404, {}))
    server.default("POST", "/api/v1/telemetry", Reply(200, {"status": "accepted"}))
    _, holder = connection_from(
        base_url=server.url,
        api_key=API_KEY,
        telemetry=True,
        create_session=False,
        telemetry_flush_interval=3600.0,
    )
    assert holder.telemetry is not None
    holder.telemetry.log_event("queued, never flushed")
    del holder
    gc.collect()
    failures = [r.getMessage() for r in caplog.records if "telemetry" in r.getMessage().lower()]
    assert not [m for m in failures if "Failed to send" in m], failures
    assert server.requests("/api/v1/telemetry") == []  # nothing sent by a collected client


UNCAUGHT_WITH_WORK_QUEUED = textwrap.dedent(
    """
    import sys
    import tinker_lite as tinker
    from tinker_lite import types

    service = tinker.ServiceClient(base_url=sys.argv[1], telemetry=True, stall_timeout=60)
    trainer = service.create_lora_training_client("tinker-lite/tiny-64", rank=4)
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3, 4]),
        loss_fn_inputs={"target_tokens": [2, 3, 4, 5], "weights": [1.0] * 4},
    )
    futures = [trainer.forward_backward([datum], "cross_entropy") for _ in range(3)]
    print("queued", flush=True)
    raise RuntimeError("the script failed with work queued")
    """
)


def test_an_uncaught_exception_with_work_queued_exits_without_retry_lines() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["TINKER_LOG"] = "info"
    # The service holds every poll (long-poll), so polls are in flight when the script fails.
    faults = "path=/api/v1/retrieve_future,request_type=ForwardBackward,action=delay,delay=30"
    with served("--stub-model", "--faults", faults) as url:
        done = subprocess.run(
            [sys.executable, "-c", UNCAUGHT_WITH_WORK_QUEUED, url],
            check=False,
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert "queued" in done.stdout
    assert "RuntimeError: the script failed with work queued" in done.stderr
    assert "retrying in" not in done.stderr, done.stderr
    assert "Failed to send telemetry" not in done.stderr, done.stderr


# -- short tracebacks -------------------------------------------------------------------------

UNCAUGHT_CONNECTION_ERROR = textwrap.dedent(
    """
    import sys
    import tinker_lite as tinker

    service = tinker.ServiceClient(
        base_url=sys.argv[1], api_key="tml-key-for-a-dead-port", startup_timeout=1.0
    )
    service.create_lora_training_client("Qwen/Qwen3-8B", rank=8).result()
    """
)


def test_an_uncaught_connection_error_prints_a_short_traceback() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["TINKER_TELEMETRY"] = "0"
    done = subprocess.run(
        [sys.executable, "-c", UNCAUGHT_CONNECTION_ERROR, _closed_port_url()],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    # Before: about 145 lines of urllib3 and tenacity frames.
    assert len(lines) <= 40, done.stderr
    assert lines[-1].startswith("tinker_lite._errors.APIConnectionError: Connection refused")
    assert "never answered within the start-up budget of 1 s" in lines[-1]
    assert f"{os.sep}tenacity{os.sep}" not in done.stderr  # its frames (a checkout may be named so)
    # The low-level cause is kept, on its own.
    assert "Connection refused" in done.stderr
    assert done.stderr.count("Traceback (most recent call last)") == 1


def test_a_failed_request_keeps_the_low_level_cause_not_the_retries(clean_env: None) -> None:
    clock = FakeClock()
    _, holder = connection_from(
        base_url=_closed_port_url(),
        api_key=API_KEY,
        telemetry=False,
        lazy=True,
        create_session=False,
        startup_timeout=2.0,
        sleep=clock.sleep,
        clock=clock,
    )
    try:
        with pytest.raises(APIConnectionError) as info:
            holder.ensure_started()
    finally:
        holder.close(timeout=5)
    cause = info.value.__cause__
    assert isinstance(cause, Exception)
    assert "Connection refused" in str(cause)
    assert cause.__cause__ is None
    assert cause.__traceback__ is None
    frames = []
    tb = info.value.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert not any(f"{os.sep}tenacity{os.sep}" in f for f in frames), frames
