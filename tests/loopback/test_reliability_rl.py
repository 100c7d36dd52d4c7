"""Reliability matrix, workload (b): 200 concurrent samples and an RL step under faults.

Every row runs :func:`tests.support.reliability.run_rl` (200 ``sample()`` calls with
``num_samples=4``, one seed per call, then ``forward_backward`` with ``importance_sampling``)
against a fresh local server with one fault spec, and asserts: the same multiset of
``(call, tokens, logprobs)`` and the same training result as the fault-free baseline; the
server ran each sample call once (plus one run per 410 re-submission) and applied every
training request once, in seq_id order; every fault rule fired; no client thread is left after
``close()``. The peak thread count of each run is recorded.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.reliability import (
    RL_CALLS,
    FastSleep,
    RlResult,
    ThreadMonitor,
    assert_applied_once_in_order,
    assert_no_new_client_threads,
    make_client,
    record,
    run_rl,
    start_server,
    stopwatch,
)
from tinker_lite.local import LocalServer

WORKLOAD = "b: RL"


@dataclass
class Baseline:
    """The fault-free run and its peak thread counts."""

    result: RlResult
    peak_client_threads: int
    peak_total_threads: int


@pytest.fixture(scope="module")
def baseline() -> Iterator[Baseline]:
    """The fault-free run every row is compared with."""
    server = start_server()
    threads = set(threading.enumerate())
    try:
        with make_client(server.base_url) as service, ThreadMonitor(threads) as monitor:
            result = run_rl(service)
        yield Baseline(result, monitor.peak_client, monitor.peak_total)
    finally:
        server.stop()
    record(
        "b0",
        fault="none (baseline)",
        workload=WORKLOAD,
        result="baseline",
        seconds=0.0,
        peak_client_threads=monitor.peak_client,
        peak_total_threads=monitor.peak_total,
    )


@dataclass(frozen=True)
class Row:
    """One fault row: its fault spec and what else to configure or check."""

    id: str
    fault: str
    spec: str
    server: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)
    log: str | None = None  # a regex the WARNING logs must match (the wait says why)
    resubmits: int = 0  # sample calls the server runs again (410 re-submissions)
    # For 429 storms: a check of every back-off window the clients opened.
    backoff: Callable[[float], bool] | None = None


ROWS = [
    Row(
        "b1",
        "429 storm on asample, Retry-After in milliseconds (retry-after-ms: 30)",
        "path=/api/v1/asample,status=429,retry_after_ms=30,count=60",
        backoff=lambda d: d == pytest.approx(0.03),
    ),
    Row(
        "b2",
        "429 storm on asample, Retry-After in seconds (1)",
        "path=/api/v1/asample,status=429,retry_after=1,count=20",
        backoff=lambda d: d == 1.0,
    ),
    Row(
        "b3",
        "429 storm on asample, Retry-After in float seconds (0.05)",
        "path=/api/v1/asample,status=429,retry_after=0.05,count=60",
        backoff=lambda d: d == pytest.approx(0.05),
    ),
    Row(
        "b4",
        "429 storm on asample, Retry-After as an IMF-fixdate (2 s ahead)",
        "path=/api/v1/asample,status=429,retry_after_date=2,count=20",
        # Whole seconds on the wire: the wait is in (0, 2]; 1.0 exactly is the fallback.
        backoff=lambda d: 0.0 < d <= 2.0 and d != 1.0,
    ),
    Row(
        "b5",
        "5xx burst on sample submits",
        "path=/api/v1/asample,status=502,every=3,count=40",
    ),
    Row(
        "b6",
        "5xx burst on retrieve_future (sample results)",
        "path=/api/v1/retrieve_future,status=503,request_type=Sample,every=4,count=60",
    ),
    Row(
        "b7",
        "410 on sample futures (the client re-submits them)",
        "path=/api/v1/retrieve_future,action=expire,request_type=Sample,every=10,count=10",
        resubmits=10,
    ),
    Row(
        "b8",
        "connections dropped before and after the request is received (sample submits)",
        "path=/api/v1/asample,action=drop_before,every=7,count=10;"
        "path=/api/v1/asample,action=drop_after,every=5,count=10",
    ),
    Row(
        "b9",
        "truncated bodies (sample submits and results)",
        "path=/api/v1/asample,action=truncate,every=9,count=8;"
        "path=/api/v1/retrieve_future,action=truncate,request_type=Sample,every=11,count=10",
    ),
    Row(
        "b10",
        "408 for many polls (queue_state=paused_rate_limit)",
        "path=/api/v1/retrieve_future,action=try_again,status=408,"
        "queue_state=paused_rate_limit,request_type=Sample,count=300",
        log=r"Sampling for \S+ is paused\. Reason: concurrent sampler weights limit hit\.",
    ),
    Row(
        "b11",
        "responses delayed past the read timeout (0.5 s)",
        "path=/api/v1/asample,delay=1.0,every=20,count=5;"
        "path=/api/v1/retrieve_future,delay=1.0,request_type=Sample,every=50,count=3",
        server={"long_poll_s": 0.1},
        client={"read_timeout": 0.5},
    ),
]


def _check_row(
    server: LocalServer,
    result: RlResult,
    baseline: Baseline,
    threads: set[threading.Thread],
    *,
    resubmits: int = 0,
) -> Mapping[str, Any]:
    assert_no_new_client_threads(threads)
    expected = baseline.result
    missing = expected.samples - result.samples
    extra = result.samples - expected.samples
    assert not missing, f"samples lost or changed: {len(missing)}"
    assert not extra, f"samples duplicated or changed: {len(extra)}"
    assert result.same_results_as(expected)
    assert_applied_once_in_order(server, result.model_id, result.expected_applied)
    stats = server.stats()
    # Each sample() call ran once on the server (a 410 re-submission runs it again).
    assert stats["samples_submitted"] == RL_CALLS + resubmits
    assert stats["samples_completed"] == stats["samples_submitted"]
    assert stats["futures"]["pending"] == 0
    unfired = [rule["rule"] for rule in stats["faults"] if not rule["fired"]]
    assert unfired == [], f"fault rules that never fired: {unfired}"
    return stats


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.id)
def test_rl_under_faults(
    row: Row,
    baseline: Baseline,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    server = start_server(row.spec, **row.server)
    threads = set(threading.enumerate())
    windows: list[float] = []
    try:
        with stopwatch() as elapsed:
            with make_client(server.base_url, **row.client) as service:
                gate = service.holder.sample_gate
                hold = gate.hold

                def spy(seconds: float) -> None:
                    hold(seconds)
                    windows.append(seconds)

                monkeypatch.setattr(gate, "hold", spy)
                with ThreadMonitor(threads) as monitor:
                    result = run_rl(service)
            seconds = elapsed()
        _check_row(server, result, baseline, threads, resubmits=row.resubmits)
        if row.backoff is not None:
            assert windows, "no 429 reached the sampling back-off"
            assert all(row.backoff(d) for d in windows), sorted(set(windows))
        if row.log is not None:
            assert any(re.search(row.log, r.getMessage()) for r in caplog.records), [
                r.getMessage() for r in caplog.records
            ]
    finally:
        server.stop()
    record(
        row.id,
        fault=row.fault,
        workload=WORKLOAD,
        result="same results",
        seconds=seconds,
        peak_client_threads=monitor.peak_client,
        peak_total_threads=monitor.peak_total,
    )


def test_server_restarted_while_sampling(baseline: Baseline) -> None:
    """b12: the listener goes away while 200 samples are in flight, then comes back."""
    server = start_server()
    threads = set(threading.enumerate())
    sleep = FastSleep()
    backed_off = threading.Event()

    def after_submit() -> None:
        server.pause_listening()
        seen = sleep.calls

        def resume() -> None:
            if sleep.wait_calls(seen + 20):
                backed_off.set()
            server.resume_listening()

        threading.Thread(target=resume, name="test-resume-listening", daemon=True).start()

    try:
        with stopwatch() as elapsed:
            with make_client(server.base_url, sleep=sleep) as service:
                with ThreadMonitor(threads) as monitor:
                    result = run_rl(service, after_submit=after_submit)
            seconds = elapsed()
        assert backed_off.is_set(), "the clients never backed off while the server was down"
        _check_row(server, result, baseline, threads)
    finally:
        server.stop()
    record(
        "b12",
        fault="server restarted mid-run (connections refused for a while)",
        workload=WORKLOAD,
        result="same results",
        seconds=seconds,
        peak_client_threads=monitor.peak_client,
        peak_total_threads=monitor.peak_total,
    )
