"""Reliability matrix, workload (c): REST listings and a checkpoint download under faults.

A short training run saves a state and sampler weights (no faults yet); then each row installs
its fault spec and runs :func:`tests.support.reliability.run_rest`: list runs and checkpoints,
get the archive URL, download the archive (resuming with ``Range`` after a broken transfer) and
unpack it. Asserts: the same listings and archive contents as the fault-free baseline; the
training requests applied once, in order; every fault rule fired; no client thread left after
``close()``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.reliability import (
    FastSleep,
    RestResult,
    assert_applied_once_in_order,
    assert_no_new_client_threads,
    make_client,
    record,
    run_rest,
    setup_rest,
    start_server,
    stopwatch,
)

WORKLOAD = "c: REST + download"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestResult]:
    """The fault-free run every row is compared with."""
    server = start_server()
    try:
        sleep = FastSleep()
        with make_client(server.base_url, sleep=sleep) as service:
            setup = setup_rest(service)
            yield run_rest(service, setup, tmp_path_factory.mktemp("baseline"), sleep=sleep)
    finally:
        server.stop()


@dataclass(frozen=True)
class Row:
    """One fault row: its fault spec and what else to configure."""

    id: str
    fault: str
    spec: str
    server: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)
    resumed: bool = False  # the download must have needed more than one attempt


ROWS = [
    Row(
        "c1",
        "5xx bursts on REST (runs, checkpoints, archive URL)",
        "path=/api/v1/training_runs*,status=503,every=2,count=4;"
        "path=/api/v1/checkpoints,status=500,count=2;"
        "path=/api/v1/training_runs/*/archive,status=502,count=1",
    ),
    Row(
        "c2",
        "connections dropped and truncated bodies on REST answers",
        "path=/api/v1/training_runs,action=truncate,count=2;"
        "path=/api/v1/checkpoints,action=drop_after,count=2;"
        "path=/api/v1/training_runs/*/checkpoints,action=drop_before,count=2",
    ),
    Row(
        "c3",
        "checkpoint download: 5xx burst, dropped connections, truncated body (resumed)",
        "path=/_local/download/*,status=503,count=2;"
        "path=/_local/download/*,action=drop_before,count=1;"
        "path=/_local/download/*,action=truncate,truncate_at=0.4,count=1;"
        "path=/_local/download/*,action=drop_after,count=1",
        resumed=True,
    ),
    Row(
        "c4",
        "REST responses delayed past the read timeout (0.5 s)",
        "path=/api/v1/training_runs,delay=1.0,count=1;path=/api/v1/checkpoints,delay=1.0,count=1",
        client={"read_timeout": 0.5},
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.id)
def test_rest_under_faults(row: Row, baseline: RestResult, tmp_path: Path) -> None:
    server = start_server(**row.server)
    threads = set(threading.enumerate())
    sleep = FastSleep()
    try:
        with make_client(server.base_url, sleep=sleep, **row.client) as service:
            setup = setup_rest(service)
            server.set_faults(row.spec)
            with stopwatch() as elapsed:
                result = run_rest(service, setup, tmp_path, sleep=sleep)
                seconds = elapsed()
        assert_no_new_client_threads(threads)
        assert result.same_results_as(baseline), (result, baseline)
        if row.resumed:
            assert result.download_attempts > 1
        assert_applied_once_in_order(server, setup.model_id, setup.applied)
        unfired = [rule["rule"] for rule in server.stats()["faults"] if not rule["fired"]]
        assert unfired == [], f"fault rules that never fired: {unfired}"
    finally:
        server.stop()
    record(row.id, fault=row.fault, workload=WORKLOAD, result="same results", seconds=seconds)


def test_rest_server_restarted(baseline: RestResult, tmp_path: Path) -> None:
    """c5: the listener goes away before the listings and comes back, state intact."""
    server = start_server()
    threads = set(threading.enumerate())
    sleep = FastSleep()
    backed_off = threading.Event()
    try:
        with make_client(server.base_url, sleep=sleep) as service:
            setup = setup_rest(service)
            server.pause_listening()
            seen = sleep.calls

            def resume() -> None:
                if sleep.wait_calls(seen + 6):
                    backed_off.set()
                server.resume_listening()

            threading.Thread(target=resume, name="test-resume-listening", daemon=True).start()
            with stopwatch() as elapsed:
                result = run_rest(service, setup, tmp_path, sleep=sleep)
                seconds = elapsed()
        assert backed_off.is_set()
        assert_no_new_client_threads(threads)
        assert result.same_results_as(baseline), (result, baseline)
        assert_applied_once_in_order(server, setup.model_id, setup.applied)
    finally:
        server.stop()
    record(
        "c5",
        fault="server restarted mid-run (connections refused for a while)",
        workload=WORKLOAD,
        result="same results",
        seconds=seconds,
    )
