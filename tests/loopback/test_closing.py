"""What happens to queued work when a ServiceClient closes, end to end against the local server.

Leaving ``with`` normally (or ``close()``) finishes what was queued; ``close(wait=False)``, an
exception or KeyboardInterrupt leaving the block, and Ctrl-C during the wait drop it with one
WARNING naming each request; a frozen service cannot hold the close beyond the stall timeout;
a script that never closes gets the interpreter-exit behaviour (checked in a child process).

Where a test needs requests still queued at a given moment, it parks the client's submit thread
on an event (``gate``) that the log line under test releases, so nothing depends on timing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

from tests.support.paths import REPO
from tinker_lite import (
    APIFuture,
    APITimeoutError,
    ClientClosedError,
    InvalidInputError,
    RestClient,
    ServiceClient,
    TrainingClient,
    types,
)
from tinker_lite._context import exit_timeout
from tinker_lite._futures import pending as _pending
from tinker_lite._futures.pending import PendingRegistry, describe_requests
from tinker_lite.local import LocalServer

REPO_DIR = REPO
BASE_MODEL = "tinker-lite/tiny-64"
STEPS = 20
CHILD_TIMEOUT_S = 120.0  # a hung child fails the test instead of hanging the run


@pytest.fixture
def server() -> Iterator[LocalServer]:
    local = LocalServer(faults="")
    local.start()
    try:
        yield local
    finally:
        local.stop()


def _client(server: LocalServer, **options: Any) -> ServiceClient:
    return ServiceClient(base_url=server.base_url, telemetry=False, **options)


def _batch() -> list[types.Datum]:
    tokens = np.array([5, 6, 7, 8], dtype=np.int64)
    return [
        types.Datum(
            model_input=types.ModelInput.from_ints([1, 2, 3, 4]),
            loss_fn_inputs={"target_tokens": types.TensorData.from_numpy(tokens)},
        )
    ]


def _queue_steps(trainer: TrainingClient, steps: int = STEPS) -> list[Future[Any]]:
    """``steps`` forward_backward + optim_step pairs (seq_ids 1..2*steps), none awaited."""
    futures: list[Future[Any]] = []
    for _ in range(steps):
        futures.append(trainer.forward_backward(_batch(), "cross_entropy"))
        futures.append(trainer.optim_step(types.AdamParams(learning_rate=1e-3)))
    return futures


class _Watch(logging.Handler):
    """Keeps tinker_lite.context's records; sets ``gate`` on the first one containing ``text``."""

    def __init__(self, text: str, *, interrupt_on: str | None = None) -> None:
        super().__init__(logging.DEBUG)
        self.text = text
        self.interrupt_on = interrupt_on
        self.gate = threading.Event()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        message = record.getMessage()
        if self.text in message:
            self.gate.set()
        if self.interrupt_on is not None and self.interrupt_on in message:
            self.interrupt_on = None
            raise KeyboardInterrupt  # Ctrl-C arriving while close() waits

    def messages(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]


@contextlib.contextmanager
def _watch(text: str, *, interrupt_on: str | None = None) -> Iterator[_Watch]:
    logger = logging.getLogger("tinker_lite.context")
    handler = _Watch(text, interrupt_on=interrupt_on)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        handler.gate.set()  # never leave a parked thread behind


def _park(trainer: TrainingClient, watch: _Watch) -> None:
    """Hold the trainer's submit thread until ``watch`` sees its text (so the queue stays put)."""
    trainer._queue.executor.submit(watch.gate.wait, 60)


def _odd_even(steps: int) -> tuple[str, str]:
    odd = ",".join(str(n) for n in range(1, 2 * steps, 2))
    even = ",".join(str(n) for n in range(2, 2 * steps + 1, 2))
    return odd, even


def _checkpoint_paths(server: LocalServer, model_id: str) -> list[str]:
    with _client(server) as reader:
        listed = RestClient(reader).list_checkpoints(model_id).result(timeout=30)
    return [c.tinker_path for c in listed.checkpoints]


def _finish_reasons(caplog: pytest.LogCaptureFixture) -> list[str]:
    found = []
    for record in caplog.records:
        match = re.fullmatch(r"session \S+ finished: (\w+)", record.getMessage())
        if record.name == "tinker_lite.local" and match:
            found.append(match.group(1))
    return found


# -- leaving the block normally ------------------------------------------------------------------


def test_the_cron_script_gets_its_checkpoint(server: LocalServer) -> None:
    with _client(server) as client:
        trainer = client.create_lora_training_client(BASE_MODEL, rank=8).result()
        futures = _queue_steps(trainer)
        saved = trainer.save_state("x")
    # Nothing was awaited inside the block: leaving it finished every request.
    for future in [*futures, saved]:
        assert future.done()
        assert future.exception(timeout=0) is None
    path = saved.result(timeout=0).path
    assert path == f"tinker://{trainer.model_id}/weights/x"
    assert path in _checkpoint_paths(server, trainer.model_id)


def test_a_normal_close_logs_what_it_waits_for_once(server: LocalServer) -> None:
    with _watch("waiting for") as watch:
        with _client(server) as client:
            trainer = client.create_lora_training_client(BASE_MODEL, rank=8).result()
            _park(trainer, watch)
            futures = _queue_steps(trainer)
            saved = trainer.save_state("x")
    odd, even = _odd_even(STEPS)
    assert watch.messages(logging.INFO) == [
        f"Closing: waiting for 41 queued requests (training run {trainer.model_id}: "
        f"forward_backward seq {odd}, optim_step seq {even}, save_state seq 41).",
        "Closing: the 41 queued requests completed.",
    ]
    assert watch.messages(logging.WARNING) == []
    assert all(f.exception(timeout=0) is None for f in [*futures, saved])
    assert saved.result(timeout=0).path in _checkpoint_paths(server, trainer.model_id)


def test_close_without_with_also_finishes_samples_and_rest_calls(server: LocalServer) -> None:
    client = _client(server)
    trainer = client.create_lora_training_client(BASE_MODEL, rank=8).result()
    sampler = client.create_sampling_client(base_model=BASE_MODEL).result()
    futures = _queue_steps(trainer, 3)
    saved = trainer.save_weights_for_sampler("s")
    samples = [
        sampler.sample(types.ModelInput.from_ints([1, 2, 3]), 1, types.SamplingParams(max_tokens=4))
        for _ in range(5)
    ]
    runs = RestClient(client).list_training_runs()
    assert client.close().result(timeout=0) is None
    for future in [*futures, saved, *samples, runs]:
        assert future.exception(timeout=0) is None
    assert all(len(s.result(timeout=0).sequences) == 1 for s in samples)
    with pytest.raises(ClientClosedError):
        trainer.optim_step(types.AdamParams(learning_rate=1e-3))


# -- dropping: close(wait=False), an exception, KeyboardInterrupt ---------------------------------


def test_close_wait_false_drops_the_queue_with_one_warning(server: LocalServer) -> None:
    with _watch("dropped") as watch:
        client = _client(server)
        trainer = client.create_lora_training_client(BASE_MODEL, rank=8).result()
        _park(trainer, watch)
        futures = [trainer.forward_backward(_batch(), "cross_entropy") for _ in range(STEPS)]
        saved = trainer.save_state("x")
        client.close(wait=False)
    assert watch.messages(logging.WARNING) == [
        "ServiceClient.close(wait=False): dropped 21 queued requests that were never sent "
        f"(training run {trainer.model_id}: forward_backward seq 1..20, save_state seq 21)."
    ]
    assert watch.messages(logging.INFO) == []  # it did not wait
    queued: list[APIFuture[Any]] = [*futures, saved]
    for seq_id, future in enumerate(queued, start=1):
        with pytest.raises(ClientClosedError, match=rf"\(seq_id {seq_id}\) was not sent"):
            future.result(timeout=0)
    requests = server.stats()["requests"]
    assert requests.get("/api/v1/forward_backward", 0) == 0
    assert requests.get("/api/v1/save_weights", 0) == 0
    assert _checkpoint_paths(server, trainer.model_id) == []


@pytest.mark.parametrize(
    ("error", "reason"), [(RuntimeError("boom"), "errored"), (KeyboardInterrupt(), "interrupted")]
)
def test_an_exception_leaving_the_block_drops_the_queue(
    server: LocalServer,
    caplog: pytest.LogCaptureFixture,
    error: BaseException,
    reason: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="tinker_lite.local")
    name = type(error).__name__
    made: dict[str, Any] = {}

    def script(watch: _Watch) -> None:
        prompt = types.ModelInput.from_ints([1, 2, 3])
        with _client(server, sample_workers=1) as client:
            made["trainer"] = trainer = client.create_lora_training_client(
                BASE_MODEL, rank=8
            ).result()
            sampler = client.create_sampling_client(base_model=BASE_MODEL).result()
            _park(trainer, watch)
            client._context.sample_pool().submit(watch.gate.wait, 60)
            made["futures"] = [
                *_queue_steps(trainer, 2),
                trainer.save_state("x"),
                *(sampler.sample(prompt, 1, types.SamplingParams(max_tokens=4)) for _ in "abc"),
            ]
            raise error

    with _watch("dropped") as watch, pytest.raises(type(error)):
        script(watch)
    trainer = made["trainer"]
    assert watch.messages(logging.WARNING) == [
        f"{name} left the 'with ServiceClient' block: dropped 8 queued requests that were never "
        f"sent (training run {trainer.model_id}: forward_backward seq 1,3, optim_step seq 2,4, "
        "save_state seq 5; 3 sample requests)."
    ]
    for future in made["futures"]:
        with pytest.raises(ClientClosedError, match="was not sent"):
            future.result(timeout=0)
    assert server.stats()["samples_submitted"] == 0
    assert _finish_reasons(caplog) == [reason]


def test_ctrl_c_while_closing_drops_the_rest_and_reraises(
    server: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tinker_lite.local")
    made: dict[str, Any] = {}

    def script(watch: _Watch) -> None:
        with _client(server) as client:
            made["trainer"] = trainer = client.create_lora_training_client(
                BASE_MODEL, rank=8
            ).result()
            _park(trainer, watch)
            made["futures"] = _queue_steps(trainer, 2)

    with _watch("dropped", interrupt_on="waiting for") as watch, pytest.raises(KeyboardInterrupt):
        script(watch)
    trainer, futures = made["trainer"], made["futures"]
    assert watch.messages(logging.WARNING) == [
        "Closing: interrupted (KeyboardInterrupt) while waiting for queued requests: dropped 4 "
        f"queued requests that were never sent (training run {trainer.model_id}: "
        "forward_backward seq 1,3, optim_step seq 2,4)."
    ]
    for future in futures:
        with pytest.raises(ClientClosedError):
            future.result(timeout=0)
    assert _finish_reasons(caplog) == ["interrupted"]


# -- a frozen service ----------------------------------------------------------------------------


def _named_seq_ids(messages: list[str]) -> set[int]:
    """Every forward_backward seq_id the messages name, as ``seq 1..3`` or ``(seq_id 2)``."""
    found: set[int] = set()
    for message in messages:
        found.update(int(n) for n in re.findall(r"forward_backward \(seq_id (\d+)\)", message))
        for listed in re.findall(r"forward_backward seq ([\d.,]+)", message):
            for part in listed.strip(",.").split(","):
                low, _, high = part.partition("..")
                found.update(range(int(low), int(high or low) + 1))
    return found


@pytest.mark.parametrize(
    "fault",
    [
        # The service answers "not ready" for ever: no request's own stall timeout fires.
        "path=/api/v1/retrieve_future,request_type=ForwardBackward,action=try_again",
        # The service stops answering polls at all: each request's stall timeout fires.
        "path=/api/v1/retrieve_future,request_type=ForwardBackward,delay=2",
    ],
    ids=["not-ready-forever", "silent"],
)
def test_a_frozen_service_cannot_hold_the_close_beyond_the_stall_timeout(
    server: LocalServer, fault: str
) -> None:
    with _watch("never matches") as watch:
        with _client(server, stall_timeout=1.0) as client:
            trainer = client.create_lora_training_client(BASE_MODEL, rank=8).result()
            server.set_faults(fault)
            futures = [trainer.forward_backward(_batch(), "cross_entropy") for _ in range(3)]
    # It ended; every request failed (none silently), and a WARNING names each one.
    for future in futures:
        assert isinstance(future.exception(timeout=0), ClientClosedError | APITimeoutError)
    warnings = watch.messages(logging.WARNING)
    assert warnings, watch.messages(logging.INFO)
    assert _named_seq_ids(warnings) == {1, 2, 3}
    if "try_again" in fault:
        (warning,) = warnings
        assert warning.startswith(
            "Closing: no queued request completed within the stall timeout (1 s):"
        )
        assert "they may still complete on the service" in warning
    else:
        # Each request's own stall timeout fired: the WARNING names each failure.
        assert any("failed while closing" in w and "APITimeoutError" in w for w in warnings)
    assert not any(m.endswith("queued requests completed.") for m in watch.messages(logging.INFO))


# -- a script that never closes: interpreter exit ------------------------------------------------

CHILD = textwrap.dedent(
    """
    import logging, sys, threading
    import numpy as np
    from tinker_lite import ServiceClient, types

    base_url, ending, release_on = sys.argv[1:4]
    gate = threading.Event()

    class Release(logging.Handler):
        def emit(self, record):
            if release_on in record.getMessage():
                gate.set()

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("tinker_lite.context").addHandler(Release())
    client = ServiceClient(base_url=base_url, telemetry=False)
    trainer = client.create_lora_training_client("tinker-lite/tiny-64", rank=8).result()
    print(trainer.model_id, flush=True)
    trainer._queue.executor.submit(gate.wait, 60)  # the queue stays put until the exit hook logs
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3, 4]),
        loss_fn_inputs={"target_tokens": types.TensorData.from_numpy(np.array([5, 6, 7, 8]))},
    )
    futures = [trainer.forward_backward([datum], "cross_entropy") for _ in range(20)]
    saved = trainer.save_state("x")
    if ending == "raise":
        raise RuntimeError("the script failed")
    if ending == "interrupt":
        raise KeyboardInterrupt
    # ending == "end": the script just ends, the client still open
    """
)


def _run_child(
    server: LocalServer, ending: str, release_on: str, **env: str
) -> subprocess.CompletedProcess[str]:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER")}
    child_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", CHILD, server.base_url, ending, release_on],
        cwd=REPO_DIR,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )


def _context_lines(stderr: str, level: str) -> list[str]:
    prefix = f"{level} tinker_lite.context: "
    return [line[len(prefix) :] for line in stderr.splitlines() if line.startswith(prefix)]


def test_a_script_that_never_closes_finishes_its_queue_at_exit(server: LocalServer) -> None:
    child = _run_child(server, "end", "waiting up to")
    assert child.returncode == 0, child.stderr
    model_id = child.stdout.strip()
    assert _context_lines(child.stderr, "INFO") == [
        "At interpreter exit (the ServiceClient was not closed): waiting up to 60 s for 21 queued "
        f"requests (training run {model_id}: forward_backward seq 1..20, save_state seq 21).",
        "At interpreter exit (the ServiceClient was not closed): the 21 queued requests completed.",
    ]
    assert _context_lines(child.stderr, "WARNING") == []
    assert f"tinker://{model_id}/weights/x" in _checkpoint_paths(server, model_id)


@pytest.mark.parametrize(
    "case",
    [
        ("raise", {}, "At interpreter exit after an uncaught RuntimeError", "errored"),
        ("interrupt", {}, "At interpreter exit after an uncaught KeyboardInterrupt", "interrupted"),
        (
            "end",
            {"TINKER_LITE_EXIT_TIMEOUT": "0"},
            "At interpreter exit (the ServiceClient was not closed): gave up after 0 s "
            "(the exit budget)",
            "success",
        ),
    ],
    ids=["uncaught-error", "uncaught-ctrl-c", "exit-timeout-0"],
)
def test_at_exit_an_uncaught_error_or_no_budget_drops_the_queue_with_a_warning(
    server: LocalServer,
    caplog: pytest.LogCaptureFixture,
    case: tuple[str, dict[str, str], str, str],
) -> None:
    ending, env, why, reason = case
    caplog.set_level(logging.DEBUG, logger="tinker_lite.local")
    child = _run_child(server, ending, "dropped", **env)
    assert (child.returncode == 0) == (ending == "end"), child.stderr
    model_id = child.stdout.strip()
    assert _context_lines(child.stderr, "WARNING") == [
        f"{why}: dropped 21 queued requests that were never sent (training run {model_id}: "
        "forward_backward seq 1..20, save_state seq 21)."
    ]
    assert server.stats()["requests"].get("/api/v1/forward_backward", 0) == 0
    assert _checkpoint_paths(server, model_id) == []
    assert _finish_reasons(caplog) == [reason]


# -- pieces --------------------------------------------------------------------------------------


def test_requests_are_named_exactly_and_compactly() -> None:
    registry = PendingRegistry()
    made = []
    for kind, seq_id in [("forward_backward", n) for n in (3, 4, 5, 7)] + [("save_state", 8)]:
        made.append(
            registry.track(
                kind, Future(), owner="training run m", seq_id=seq_id, on_drop=lambda e: None
            )
        )
    made += [registry.track("sample", Future(), on_drop=lambda e: None) for _ in range(2)]
    assert describe_requests(made) == (
        "training run m: forward_backward seq 3..5,7, save_state seq 8; 2 sample requests"
    )


def test_close_checks_wait_and_the_exit_timeout_setting(server: LocalServer) -> None:
    client = _client(server)
    with pytest.raises(InvalidInputError, match="wait"):
        client.close(wait="no")  # type: ignore[arg-type]
    client.close(wait=False)
    assert exit_timeout({}) == 60.0
    assert exit_timeout({"TINKER_LITE_EXIT_TIMEOUT": "2.5"}) == 2.5
    assert exit_timeout({"TINKER_LITE_EXIT_TIMEOUT": "-1"}) == 60.0


def test_a_long_drain_reports_progress_then_gives_up_without_progress(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_pending, "PROGRESS_LOG_INTERVAL", 0.02)
    monkeypatch.setattr(_pending, "_STALL_GRACE_S", 0.0)
    caplog.set_level(logging.INFO, logger="tinker_lite.context")
    registry = PendingRegistry()
    stuck: Future[Any] = Future()
    registry.track(
        "save_state", stuck, owner="training run m", seq_id=7, on_drop=stuck.set_exception
    )
    stopped = registry.drain(stall_timeout=0.2)
    assert stopped == "Closing: no queued request completed within the stall timeout (0.2 s)"
    first, *progress = [r.getMessage() for r in caplog.records]
    assert first == "Closing: waiting for 1 queued request (training run m: save_state seq 7)."
    assert progress
    for line in progress:
        assert re.fullmatch(
            r"Closing: still waiting for 1 of 1 queued requests after \d+ s "
            r"\(training run m: save_state seq 7\)\.",
            line,
        )
    registry.cancel(stopped)
    with pytest.raises(ClientClosedError, match=r"save_state \(seq_id 7\) was not sent"):
        stuck.result(timeout=0)
    assert caplog.records[-1].getMessage() == (
        f"{stopped}: dropped 1 queued request that was never sent "
        "(training run m: save_state seq 7)."
    )
