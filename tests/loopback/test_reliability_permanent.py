"""Reliability matrix, permanent faults: a typed error naming the request, within its bound.

Where a fault never clears, the workload must end with a typed tinker_lite exception that names
the request (path or request id) and arrives within the documented bound: the 5-minute submit
budget plus one HTTP retry round for submits (docs/protocol.rst §6.3), the stall timeout for futures
(docs/protocol.rst §6.6), at once for an expired training future (docs/protocol.rst §5.3). Retry
budgets run on a :class:`~tests.support.reliability.VirtualClock`, so minutes of back-off take
milliseconds; the recorded time is the client's clock. Every pending future of the workload is
resolved (none hangs), the server applied what it received exactly once, and no client thread is
left after ``close()``.

The second half runs scenarios in a child process that lets the typed error escape uncaught,
without closing its client, while other requests are still retrying: the process must exit on
its own, promptly.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.reliability import (
    BASE_MODEL,
    LORA_RANK,
    LORA_SEED,
    READY_MARKER,
    REPO_DIR,
    SUBMIT_BOUND_S,
    SUBMIT_BUDGET_S,
    VirtualClock,
    applied_seq_ids,
    assert_applied_once_in_order,
    assert_no_new_client_threads,
    check_child_report,
    make_client,
    record,
    setup_rest,
    sft_batch,
    start_server,
)
from tinker_lite import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    InternalServerError,
    PromiseExpiredError,
    types,
)
from tinker_lite._futures.future import FutureTimeoutError
from tinker_lite._transport.download import download
from tinker_lite.local import LocalServer
from tinker_lite.rest_client import RestClient
from tinker_lite.service_client import ServiceClient

# How long a future that is not expected to hang may take to resolve in these tests.
PROMPT_S = 10.0


@contextmanager
def scenario(spec: str = "", **server_options: Any) -> Iterator[tuple[LocalServer, set[Any]]]:
    """A fresh server with ``spec``; yields it and the threads alive before the client."""
    server = start_server(spec, **server_options)
    try:
        yield server, set(threading.enumerate())
    finally:
        server.stop()


class Timer:
    """Wall and client-clock time from :meth:`start` to :meth:`stop`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.wall = 0.0
        self.client = 0.0
        self._wall0 = 0.0
        self._client0 = 0.0

    def start(self) -> None:
        self._wall0 = time.monotonic()
        self._client0 = self._clock()

    def stop(self) -> None:
        self.wall = time.monotonic() - self._wall0
        self.client = self._clock() - self._client0


def _record(
    row: str, fault: str, workload: str, *, error: BaseException, timer: Timer, bound: float
) -> None:
    record(
        row,
        fault=fault,
        workload=workload,
        result=f"{type(error).__name__} (permanent)",
        seconds=timer.client,
        wall_seconds=round(timer.wall, 3),
        bound_seconds=bound,
        permanent=True,
    )


def _trainer(service: ServiceClient) -> Any:
    return service.create_lora_training_client(BASE_MODEL, rank=LORA_RANK, seed=LORA_SEED).result()


def test_submit_5xx_forever() -> None:
    """p1: forward_backward answers 503 forever: InternalServerError naming the request."""
    clock = VirtualClock()
    with scenario("path=/api/v1/forward_backward,status=503") as (server, threads):
        with make_client(server.base_url, sleep=clock.sleep, clock=clock) as service:
            trainer = _trainer(service)
            timer = Timer(clock)
            timer.start()
            fb = trainer.forward_backward(sft_batch(0), "cross_entropy")
            optim = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
            with pytest.raises(InternalServerError) as caught:
                fb.result(timeout=PROMPT_S * 3)
            timer.stop()
            # The optim_step queued behind it must not wait forever for the missing seq_id.
            with pytest.raises(APIError) as behind:
                optim.result(timeout=PROMPT_S)
        error = caught.value
        assert error.status_code == 503
        assert "POST /api/v1/forward_backward" in str(error)
        assert SUBMIT_BUDGET_S - 35 <= timer.client <= SUBMIT_BOUND_S
        assert not isinstance(behind.value, FutureTimeoutError), "optim_step hung"
        # The chunk sent first (golden-0.38: the first chunk goes out last) names the gap.
        assert re.search(r"seq_id [12] \(POST /api/v1/forward_backward\)", str(behind.value))
        assert applied_seq_ids(server, trainer.model_id) == [0]
        assert_no_new_client_threads(threads)
    _record(
        "p1",
        "5xx forever on forward_backward submits",
        "a: SFT",
        error=error,
        timer=timer,
        bound=SUBMIT_BOUND_S,
    )


def test_connection_refused_forever() -> None:
    """p2: the server goes away mid-run for good: APIConnectionError naming the request."""
    clock = VirtualClock()
    with scenario() as (server, threads):
        with make_client(server.base_url, sleep=clock.sleep, clock=clock) as service:
            trainer = _trainer(service)
            trainer.forward_backward(sft_batch(0), "cross_entropy").result(timeout=PROMPT_S)
            server.pause_listening()
            timer = Timer(clock)
            timer.start()
            optim = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
            with pytest.raises(APIConnectionError) as caught:
                optim.result(timeout=PROMPT_S * 3)
            timer.stop()
        error = caught.value
        assert "Connection refused" in str(error)
        assert "POST /api/v1/optim_step" in str(error)
        assert SUBMIT_BUDGET_S - 35 <= timer.client <= SUBMIT_BOUND_S
        assert applied_seq_ids(server, trainer.model_id) == [0, 1, 2, 3]
        assert_no_new_client_threads(threads)
    _record(
        "p2",
        "connection refused forever (server gone mid-run)",
        "a: SFT",
        error=error,
        timer=timer,
        bound=SUBMIT_BOUND_S,
    )


def test_connection_refused_at_start() -> None:
    """p3: nothing listens when the client starts: APIConnectionError naming client/config."""
    clock = VirtualClock()
    # Until the service has answered once, client/config is retried for startup_timeout.
    startup = 30.0
    bound = startup + 1.0
    with scenario() as (server, threads):
        server.pause_listening()
        timer = Timer(clock)
        # docs/protocol.rst §8.1: nothing is sent until first use; the training client starts the
        # session.
        service = make_client(
            server.base_url, sleep=clock.sleep, clock=clock, startup_timeout=startup
        )
        timer.start()
        with pytest.raises(APIConnectionError) as caught:
            service.create_lora_training_client(BASE_MODEL, rank=LORA_RANK).result()
        timer.stop()
        service.close()
        error = caught.value
        assert "Connection refused" in str(error)
        assert "/api/v1/client/config" in str(error)
        assert startup <= timer.client <= bound
        assert_no_new_client_threads(threads)
    _record(
        "p3",
        "connection refused forever (server down at start)",
        "a: SFT",
        error=error,
        timer=timer,
        bound=bound,
    )


def test_stalled_future_5xx_forever() -> None:
    """p4: every poll of a result answers 503: APITimeoutError after the stall timeout."""
    stall = 1.0
    with scenario("path=/api/v1/retrieve_future,status=503,request_type=ForwardBackward") as (
        server,
        threads,
    ):
        with make_client(server.base_url, stall_timeout=stall) as service:
            trainer = _trainer(service)
            timer = Timer()
            timer.start()
            fb = trainer.forward_backward(sft_batch(0), "cross_entropy")
            optim = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
            with pytest.raises(APITimeoutError) as caught:
                fb.result(timeout=PROMPT_S)
            timer.stop()
            assert not isinstance(caught.value, FutureTimeoutError)
            assert optim.result(timeout=PROMPT_S).metrics is None  # unaffected
        error = caught.value
        assert error.request_id is not None
        assert error.request_id in str(error)
        assert "(ForwardBackward)" in str(error)
        assert "stall timeout 1s" in str(error)
        assert stall <= timer.client <= stall + 1.0
        assert_applied_once_in_order(server, trainer.model_id, 5)
        assert_no_new_client_threads(threads)
    # docs/protocol.rst §6.6: the stall timeout, plus at most the poll in flight then (>= 1 s).
    _record(
        "p4",
        "5xx forever on retrieve_future (stalled future)",
        "a: SFT",
        error=error,
        timer=timer,
        bound=stall + 1.0,
    )


def test_stalled_future_delayed_forever() -> None:
    """p5: every poll of a result answers after the read timeout: APITimeoutError."""
    stall, read = 1.5, 0.3
    spec = "path=/api/v1/retrieve_future,delay=3.0,request_type=OptimStep"
    with scenario(spec, long_poll_s=0.1) as (server, threads):
        with make_client(server.base_url, stall_timeout=stall, read_timeout=read) as service:
            trainer = _trainer(service)
            fb = trainer.forward_backward(sft_batch(0), "cross_entropy")
            timer = Timer()
            timer.start()
            optim = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
            with pytest.raises(APITimeoutError) as caught:
                optim.result(timeout=PROMPT_S)
            timer.stop()
            assert fb.result(timeout=PROMPT_S).loss_fn_outputs
        error = caught.value
        assert not isinstance(error, FutureTimeoutError)
        assert error.request_id is not None
        assert error.request_id in str(error)
        assert "(OptimStep)" in str(error)
        assert "timed out" in str(error)
        assert stall <= timer.client <= stall + read + 1.0
        assert_applied_once_in_order(server, trainer.model_id, 5)
        assert_no_new_client_threads(threads)
    _record(
        "p5",
        "responses delayed past the read timeout forever",
        "a: SFT",
        error=error,
        timer=timer,
        bound=stall + read,
    )


def test_training_future_expired() -> None:
    """p6: 410 on a training future: PromiseExpiredError naming it, at once, not re-sent."""
    spec = "path=/api/v1/retrieve_future,action=expire,request_type=OptimStep,count=1"
    with scenario(spec) as (server, threads):
        with make_client(server.base_url) as service:
            trainer = _trainer(service)
            timer = Timer()
            timer.start()
            fb = trainer.forward_backward(sft_batch(0), "cross_entropy")
            optim = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
            with pytest.raises(PromiseExpiredError) as caught:
                optim.result(timeout=PROMPT_S)
            timer.stop()
            assert fb.result(timeout=PROMPT_S).loss_fn_outputs
            # The client stays usable: the next step runs (seq_ids stay contiguous).
            trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result(timeout=PROMPT_S)
        error = caught.value
        assert error.status_code == 410
        assert error.request_id is not None
        assert f"request {error.request_id}" in str(error)
        assert "(OptimStep)" in str(error)
        assert "not re-sent" in str(error)
        assert timer.client <= 2.0
        # Applied once (the service ran it; only its result was lost), nothing re-sent.
        assert_applied_once_in_order(server, trainer.model_id, 6)
        assert server.stats()["requests"]["/api/v1/optim_step"] == 2
        assert_no_new_client_threads(threads)
    _record("p6", "410 on a training future", "a: SFT", error=error, timer=timer, bound=2.0)


def test_sample_future_expired_forever() -> None:
    """p7: 410 on every poll of a sample: re-submitted 10 times, then PromiseExpiredError."""
    calls = 3
    with scenario("path=/api/v1/retrieve_future,action=expire,request_type=Sample") as (
        server,
        threads,
    ):
        with make_client(server.base_url) as service:
            sampler = service.create_sampling_client(base_model=BASE_MODEL).result()
            timer = Timer()
            timer.start()
            futures = [
                sampler.sample(
                    types.ModelInput.from_ints([1, 2, 3]),
                    1,
                    types.SamplingParams(max_tokens=2, seed=index),
                )
                for index in range(calls)
            ]
            errors = []
            for future in futures:
                with pytest.raises(PromiseExpiredError) as caught:
                    future.result(timeout=PROMPT_S)
                errors.append(caught.value)
            timer.stop()
        for error in errors:
            assert error.request_id is not None
            assert f"request {error.request_id}" in str(error)
            assert "(Sample)" in str(error)
            assert "after 10 re-submissions" in str(error)
        assert server.stats()["samples_submitted"] == calls * 11
        assert timer.client <= 5.0
        assert_no_new_client_threads(threads)
    _record(
        "p7", "410 forever on a sample future", "b: RL", error=errors[0], timer=timer, bound=5.0
    )


def test_sample_submit_5xx_forever() -> None:
    """p8: asample answers 503 forever: InternalServerError naming the request."""
    clock = VirtualClock()
    with scenario("path=/api/v1/asample,status=503") as (server, threads):
        with make_client(server.base_url, sleep=clock.sleep, clock=clock) as service:
            sampler = service.create_sampling_client(base_model=BASE_MODEL).result()
            timer = Timer(clock)
            timer.start()
            future = sampler.sample(
                types.ModelInput.from_ints([1, 2, 3]), 1, types.SamplingParams(max_tokens=2)
            )
            with pytest.raises(InternalServerError) as caught:
                future.result(timeout=PROMPT_S * 3)
            timer.stop()
        error = caught.value
        assert "POST /api/v1/asample" in str(error)
        assert SUBMIT_BUDGET_S - 35 <= timer.client <= SUBMIT_BOUND_S
        assert server.stats()["samples_submitted"] == 0
        assert_no_new_client_threads(threads)
    _record(
        "p8",
        "5xx forever on sample submits",
        "b: RL",
        error=error,
        timer=timer,
        bound=SUBMIT_BOUND_S,
    )


def test_rest_5xx_forever() -> None:
    """p9: a REST listing answers 500 forever: InternalServerError naming the request."""
    clock = VirtualClock()
    with scenario("path=/api/v1/training_runs,status=500") as (server, threads):
        with make_client(server.base_url, sleep=clock.sleep, clock=clock) as service:
            rest = RestClient(service)
            timer = Timer(clock)
            timer.start()
            with pytest.raises(InternalServerError) as caught:
                rest.list_training_runs().result(timeout=PROMPT_S * 3)
            timer.stop()
        error = caught.value
        assert "GET /api/v1/training_runs" in str(error)
        assert SUBMIT_BUDGET_S - 35 <= timer.client <= SUBMIT_BOUND_S
        assert_no_new_client_threads(threads)
    _record(
        "p9",
        "5xx forever on REST",
        "c: REST + download",
        error=error,
        timer=timer,
        bound=SUBMIT_BOUND_S,
    )


def test_download_5xx_forever(tmp_path: Path) -> None:
    """p10: the archive URL answers 503 forever: InternalServerError naming the download."""
    clock = VirtualClock()
    # 8 attempts; back-off 1, 2, 4, 8, 16, 30, 30 s between them.
    bound = 1 + 2 + 4 + 8 + 16 + 30 + 30 + 8 * 1.0  # + the 8 round trips
    with scenario() as (server, threads):
        with make_client(server.base_url) as service:
            setup = setup_rest(service)
            rest = RestClient(service)
            url = rest.get_checkpoint_archive_url(setup.model_id, "sampler_weights/final")
            archive_url = url.result(timeout=PROMPT_S).url
        server.set_faults("path=/_local/download/*,status=503")
        dest = tmp_path / "final.tar.gz"
        timer = Timer(clock)
        timer.start()
        with pytest.raises(InternalServerError) as caught:
            download(archive_url, dest, sleep=clock.sleep)
        timer.stop()
        error = caught.value
        assert "final.tar.gz" in str(error)
        assert "503" in str(error)
        assert "after 8 attempts" in str(error)
        assert not dest.exists()
        assert timer.client <= bound
        assert_no_new_client_threads(threads)
    _record(
        "p10",
        "5xx forever on the checkpoint download",
        "c: REST + download",
        error=error,
        timer=timer,
        bound=bound,
    )


# ---------------------------------------------------------------------------------------------
# The process exits promptly after an unrecoverable error

# From the typed error to the end of the process (atexit closes the client); and in all.
EXIT_AFTER_ERROR_S = 5.0
CHILD_TOTAL_S = 20.0

CHILD_CODE = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from tests.support.reliability import child_main; child_main()"
)


@dataclass(frozen=True)
class ExitRow:
    """A scenario of :func:`tests.support.reliability.child_main` and what must come out."""

    id: str
    fault: str
    scenario: str
    spec: str
    error: str  # the typed error's class name
    names: str  # text the error message must contain
    env: dict[str, str] = field(default_factory=dict)


EXIT_ROWS = [
    ExitRow(
        "x1",
        "410 on a training future while 20 samples keep retrying (asample 503 forever)",
        "expired_while_sampling",
        "path=/api/v1/retrieve_future,action=expire,request_type=OptimStep,count=1;"
        "path=/api/v1/asample,status=503",
        "PromiseExpiredError",
        "(OptimStep)",
    ),
    ExitRow(
        "x2",
        "stalled future (retrieve_future 503 forever, TINKER_LITE_STALL_TIMEOUT=1)",
        "stalled",
        "path=/api/v1/retrieve_future,status=503,request_type=ForwardBackward",
        "APITimeoutError",
        "(ForwardBackward)",
        env={"TINKER_LITE_STALL_TIMEOUT": "1"},
    ),
    ExitRow(
        "x3",
        "5xx forever on forward_backward submits",
        "submit_503_forever",
        "path=/api/v1/forward_backward,status=503",
        "InternalServerError",
        "POST /api/v1/forward_backward",
    ),
    ExitRow(
        "x4",
        "connection refused forever (server gone mid-run)",
        "refused_forever",
        "",
        "APIConnectionError",
        "POST /api/v1/forward_backward",
    ),
]


def _child_env(row: ExitRow, base_url: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TINKER_", "CLOUDFLARE_"))
    }
    env.update(row.env)
    env["TINKER_BASE_URL"] = base_url
    env["TINKER_TELEMETRY"] = "0"
    env["TL_CHILD_SCENARIO"] = row.scenario
    return env


@pytest.mark.parametrize("row", EXIT_ROWS, ids=lambda row: row.id)
def test_process_exits_promptly_after_the_error(row: ExitRow) -> None:
    with scenario(row.spec) as (server, _):
        started = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD_CODE, str(REPO_DIR)],
            cwd=REPO_DIR,
            env=_child_env(row, server.base_url),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None
        assert child.stdout is not None
        try:
            line = child.stdout.readline()
            if row.scenario == "refused_forever":
                assert line.strip() == READY_MARKER, line
                server.pause_listening()
                child.stdin.write("go\n")
                child.stdin.flush()
                line = child.stdout.readline()
            errored = time.monotonic()
            out, err = child.communicate(timeout=CHILD_TOTAL_S)
        except BaseException:
            child.kill()
            child.communicate()
            raise
        exited = time.monotonic()
    report = check_child_report(line)
    assert child.returncode not in (0, None), (child.returncode, out, err)
    assert report["type"] == row.error, report
    assert row.names in report["message"], report
    # The error escaped uncaught: its traceback ends the child's stderr.
    assert f"{row.error}: " in err.strip().splitlines()[-1], err[-2000:]
    assert exited - errored <= EXIT_AFTER_ERROR_S, f"exit took {exited - errored:.1f}s"
    assert exited - started <= CHILD_TOTAL_S
    record(
        row.id,
        fault=row.fault,
        workload="process exit",
        result=f"{row.error}; exit {child.returncode} {exited - errored:.2f}s after it",
        seconds=float(report["client_seconds"]),
        wall_seconds=round(exited - started, 3),
        exit_after_error_seconds=round(exited - errored, 3),
        permanent=True,
    )
