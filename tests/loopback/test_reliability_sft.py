"""Reliability matrix, workload (a): an SFT loop rides through injected faults unchanged.

Every row runs the pipelined SFT loop of :func:`tests.support.reliability.run_sft` against a
fresh local server with one fault spec and asserts: the same losses, logprobs and checkpoint as
the fault-free baseline; every training request applied exactly once, in seq_id order (the
server's counters); every fault rule fired; no client thread left after ``close()``.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.reliability import (
    FastSleep,
    HeartbeatDriver,
    SftResult,
    assert_applied_once_in_order,
    assert_no_new_client_threads,
    make_client,
    record,
    run_sft,
    start_server,
    stopwatch,
)
from tinker_lite.local import LocalServer

WORKLOAD = "a: SFT"


@pytest.fixture(scope="module")
def baseline() -> Iterator[SftResult]:
    """The fault-free run every row is compared with."""
    server = start_server()
    try:
        with make_client(server.base_url) as service:
            yield run_sft(service)
    finally:
        server.stop()


@dataclass(frozen=True)
class Row:
    """One fault row: its fault spec and what else to configure or check."""

    id: str
    fault: str
    spec: str
    server: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)
    log: str | None = None  # a regex the WARNING logs must match (the wait says why)


ROWS = [
    Row(
        "a1",
        "5xx bursts on submits (create_model, forward_backward, optim_step, save_state)",
        "path=/api/v1/create_model,status=503,count=2;"
        "path=/api/v1/forward_backward,status=503,every=2,count=6;"
        "path=/api/v1/optim_step,status=500,count=3;"
        "path=/api/v1/save_weights,status=502,count=2",
    ),
    Row(
        "a2",
        "5xx burst on retrieve_future",
        "path=/api/v1/retrieve_future,status=503,every=2,count=20",
    ),
    Row(
        "a3",
        "try_again for many polls (queue_state=active)",
        "path=/api/v1/retrieve_future,action=try_again,queue_state=active,count=60",
    ),
    Row(
        "a4",
        "408 for many polls (queue_state=paused_capacity)",
        "path=/api/v1/retrieve_future,action=try_again,status=408,"
        "queue_state=paused_capacity,request_type=ForwardBackward,count=60",
        log=r"Training for \S+ is paused\. Reason: Tinker backend is running short on capacity",
    ),
    Row(
        "a5",
        "try_again for many polls (queue_state=paused_rate_limit, with a reason)",
        "path=/api/v1/retrieve_future,action=try_again,queue_state=paused_rate_limit,"
        "reason=too many concurrent runs,request_type=OptimStep,count=60",
        log=r"Training for \S+ is paused\. Reason: too many concurrent runs\.",
    ),
    Row(
        "a6",
        "connections dropped before the request is received (submits)",
        "path=/api/v1/create_model,action=drop_before,count=1;"
        "path=/api/v1/forward_backward,action=drop_before,every=3,count=4;"
        "path=/api/v1/optim_step,action=drop_before,count=2",
    ),
    Row(
        "a7",
        "connections dropped after the request is received (submits are applied, then re-sent)",
        "path=/api/v1/create_model,action=drop_after,count=1;"
        "path=/api/v1/forward_backward,action=drop_after,every=3,count=4;"
        "path=/api/v1/optim_step,action=drop_after,count=2;"
        "path=/api/v1/save_weights,action=drop_after,count=1",
    ),
    Row(
        "a8",
        "connections dropped before and after the request is received (polls)",
        "path=/api/v1/retrieve_future,action=drop_before,every=4,count=5;"
        "path=/api/v1/retrieve_future,action=drop_after,every=5,count=5",
    ),
    Row(
        "a9",
        "responses delayed past the read timeout (0.5 s)",
        "path=/api/v1/forward_backward,delay=1.0,count=1;"
        "path=/api/v1/optim_step,delay=1.0,count=1;"
        "path=/api/v1/retrieve_future,delay=1.0,every=7,count=2",
        server={"long_poll_s": 0.1},
        client={"read_timeout": 0.5},
    ),
    Row(
        "a10",
        "truncated bodies (submit answers and results)",
        "path=/api/v1/forward_backward,action=truncate,count=2;"
        "path=/api/v1/optim_step,action=truncate,count=1;"
        "path=/api/v1/retrieve_future,action=truncate,every=3,count=6",
    ),
]


def _check_row(
    server: LocalServer, result: SftResult, baseline: SftResult, threads: set[threading.Thread]
) -> None:
    assert_no_new_client_threads(threads)
    assert result.same_results_as(baseline), (result.losses, baseline.losses)
    assert_applied_once_in_order(server, result.model_id, result.expected_applied)
    stats = server.stats()
    assert stats["futures"]["pending"] == 0
    unfired = [rule["rule"] for rule in stats["faults"] if not rule["fired"]]
    assert unfired == [], f"fault rules that never fired: {unfired}"


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.id)
def test_sft_under_faults(row: Row, baseline: SftResult, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    server = start_server(row.spec, **row.server)
    threads = set(threading.enumerate())
    try:
        with stopwatch() as elapsed:
            with make_client(server.base_url, **row.client) as service:
                result = run_sft(service)
            seconds = elapsed()
        _check_row(server, result, baseline, threads)
        if row.log is not None:
            assert any(re.search(row.log, r.getMessage()) for r in caplog.records), [
                r.getMessage() for r in caplog.records
            ]
    finally:
        server.stop()
    record(row.id, fault=row.fault, workload=WORKLOAD, result="same results", seconds=seconds)


def test_heartbeat_failing_for_three_minutes(
    baseline: SftResult, caplog: pytest.LogCaptureFixture
) -> None:
    """a11: the heartbeat endpoint fails for 3 minutes of (fake) time; training is unaffected."""
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    server = start_server("path=/api/v1/session_heartbeat,status=503")
    threads = set(threading.enumerate())
    driver = HeartbeatDriver()
    try:
        with stopwatch() as elapsed:
            service = make_client(server.base_url, clock=driver.clock, heartbeat_wait=driver.wait)
            try:
                assert service.session_id is not None  # the heartbeat starts with the session
                assert driver.wait_until_waiting()
                for _ in range(9):  # 90 s of failing heartbeats
                    assert driver.tick()
                result = run_sft(service)
                for _ in range(9):  # 180 s
                    assert driver.tick()
                warnings = [
                    r.getMessage()
                    for r in caplog.records
                    if "Session heartbeat failed" in r.getMessage()
                ]
                assert warnings, "no warning after 3 minutes of failing heartbeats"
                seconds_failing = [
                    float(m.group(1))
                    for m in (re.search(r"failed for (\d+) seconds", w) for w in warnings)
                    if m
                ]
                assert max(seconds_failing) >= 170, warnings
                assert all(s >= 120 for s in seconds_failing), warnings
                assert all(str(service.session_id) in w for w in warnings)
                server.set_faults("")  # the endpoint recovers: heartbeats succeed again
                assert driver.tick()
                answered = server.stats()["responses"]["/api/v1/session_heartbeat"]
                assert answered == {"200": 1, "503": 18}
            finally:
                driver.finish()
                service.close()
            seconds = elapsed()
        _check_row(server, result, baseline, threads)
    finally:
        server.stop()
    record(
        "a11",
        fault="heartbeat endpoint failing for 3 minutes (fake clock)",
        workload=WORKLOAD,
        result="same results; warned after 120 s",
        seconds=seconds,
    )


def test_server_restarted_mid_run(baseline: SftResult) -> None:
    """a12: the listener goes away mid-run (connections refused) and comes back, state intact."""
    server = start_server()
    threads = set(threading.enumerate())
    sleep = FastSleep()
    resumed = threading.Event()
    backed_off = threading.Event()
    refused_retries = 8

    def after_submit(step: int) -> None:
        if step != 3:
            return
        server.pause_listening()
        seen = sleep.calls

        def resume() -> None:
            # Down until the client has backed off several times (it is being refused).
            if sleep.wait_calls(seen + refused_retries):
                backed_off.set()
            server.resume_listening()
            resumed.set()

        threading.Thread(target=resume, name="test-resume-listening", daemon=True).start()

    try:
        with stopwatch() as elapsed:
            with make_client(server.base_url, sleep=sleep) as service:
                result = run_sft(service, after_submit=after_submit)
            seconds = elapsed()
        assert resumed.is_set()
        assert backed_off.is_set(), "the client never backed off while the server was down"
        _check_row(server, result, baseline, threads)
    finally:
        server.stop()
    record(
        "a12",
        fault="server restarted mid-run (connections refused for a while)",
        workload=WORKLOAD,
        result="same results",
        seconds=seconds,
    )
