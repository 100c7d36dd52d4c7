"""Workloads, clocks, checks and the result log of the reliability tests.

Each reliability row runs one of three deterministic workloads against a fresh
:class:`~tinker_lite.local.LocalServer` (real loopback HTTP, the real tiny model) with faults
injected, and compares what it gets with a fault-free run:

* (a) :func:`run_sft`: ``SFT_STEPS`` steps of ``forward_backward`` (split into chunks by the
  server's ``fwdbwd_max_chunk_len``) pipelined with ``optim_step``, then ``save_state``;
* (b) :func:`run_rl`: ``RL_CALLS`` concurrent ``sample()`` calls (``num_samples=4``, one seed
  per call), then ``forward_backward`` with ``importance_sampling`` on part of the samples;
* (c) :func:`run_rest`: REST listings and a checkpoint archive download.

Clients get short retry waits through their private knobs (:class:`FastSleep`, or
:class:`VirtualClock` where a 5-minute retry budget must run out), never through real sleeps
in the tests. :func:`record` appends one JSON line per row to the file named by
``TINKER_LITE_RELIABILITY_LOG`` (bench/bench_reliability.py reads it).

The module also runs as the child process of the process-exit rows: ``python -c "from
tests.support.reliability import child_main; child_main()"``.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tests.support.clients import service_with
from tests.support.paths import REPO
from tinker_lite import types
from tinker_lite._transport.download import download, extract_archive
from tinker_lite._transport.http import Timeout
from tinker_lite.local import LocalServer
from tinker_lite.rest_client import RestClient
from tinker_lite.service_client import ServiceClient

__all__ = [
    "BASE_MODEL",
    "CHUNK_LEN",
    "LAYER_A_BACKOFF_S",
    "LOG_ENV",
    "LORA_RANK",
    "LORA_SEED",
    "READY_MARKER",
    "REPO_DIR",
    "RESULT_TIMEOUT",
    "RL_CALLS",
    "SFT_STEPS",
    "SUBMIT_BOUND_S",
    "SUBMIT_BUDGET_S",
    "FastSleep",
    "HeartbeatDriver",
    "RestResult",
    "RestSetup",
    "RlResult",
    "SftResult",
    "ThreadMonitor",
    "VirtualClock",
    "applied_seq_ids",
    "assert_applied_once_in_order",
    "assert_no_new_client_threads",
    "check_child_report",
    "child_main",
    "client_threads",
    "fast_options",
    "is_server_thread",
    "make_client",
    "record",
    "rl_prompt",
    "run_rest",
    "run_rl",
    "run_sft",
    "setup_rest",
    "sft_batch",
    "start_server",
    "stopwatch",
]

REPO_DIR = REPO
LOG_ENV = "TINKER_LITE_RELIABILITY_LOG"

BASE_MODEL = "tinker-lite/tiny-64"
LORA_SEED = 1234
LORA_RANK = 8
CHUNK_LEN = 4  # the server's fwdbwd_max_chunk_len: a 10-datum batch becomes 3 requests
SFT_STEPS = 10
SFT_BATCH = 10
RL_CALLS = 200
RL_NUM_SAMPLES = 4
RL_MAX_TOKENS = 8
RL_TRAIN_PROMPTS = 25  # prompts whose samples feed the importance_sampling step
RESULT_TIMEOUT = 60.0  # a hung row fails with FutureTimeoutError, well before pytest's timeout

# docs/protocol.rst §6.3: a submit is retried for up to 5 minutes, both retry layers together
# (the last attempt's timeouts are cut to what is left); one HTTP retry round alone backs off
# at most 0.5+1+2+4+8+10*5 = 65.5 s.
SUBMIT_BUDGET_S = 300.0
LAYER_A_BACKOFF_S = 65.5
SUBMIT_BOUND_S = SUBMIT_BUDGET_S + 1.0


# ---------------------------------------------------------------------------------------------
# Clocks and sleeps


class FastSleep:
    """An injected sleep that really waits ``scale`` times the delay asked (at most ``cap``).

    Counts every call, so a test can wait until a client has retried N times.
    """

    def __init__(self, scale: float = 0.02, cap: float = 0.25) -> None:
        self.scale = scale
        self.cap = cap
        self.asked: list[float] = []
        self._cond = threading.Condition()
        self._wake = threading.Event()

    def __call__(self, seconds: float) -> None:
        with self._cond:
            self.asked.append(seconds)
            self._cond.notify_all()
        self._wake.wait(max(0.0, min(seconds * self.scale, self.cap)))

    @property
    def calls(self) -> int:
        """Sleeps taken so far."""
        with self._cond:
            return len(self.asked)

    def wait_calls(self, count: int, timeout: float = 30.0) -> bool:
        """Block until at least ``count`` sleeps were taken; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.asked) >= count, timeout)

    def wake(self) -> None:
        """End every sleep at once (used before closing)."""
        self._wake.set()


class VirtualClock:
    """A monotonic clock that runs ahead by every delay slept through :meth:`sleep`.

    Retry budgets measured with it run out after their nominal number of seconds of back-off
    while only a few milliseconds pass for real. Use it where one request at a time retries.
    """

    def __init__(self, real_fraction: float = 0.0, real_cap: float = 0.005) -> None:
        self._lock = threading.Lock()
        self._offset = 0.0
        self._real_fraction = real_fraction
        self._real_cap = real_cap
        self._wake = threading.Event()

    def __call__(self) -> float:
        with self._lock:
            return time.monotonic() + self._offset

    def sleep(self, seconds: float) -> None:
        """Advance the clock by ``seconds``; really wait a tiny fraction of it."""
        with self._lock:
            self._offset += max(0.0, seconds)
        self._wake.wait(min(self._real_cap, max(0.0, seconds) * self._real_fraction))


class HeartbeatDriver:
    """Drives the heartbeat thread by hand on a fake clock (no real waiting).

    Pass :meth:`clock` and :meth:`wait` as the holder's ``clock`` and ``heartbeat_wait``. Each
    :meth:`tick` lets one heartbeat run after advancing the clock by the interval, and returns
    once the heartbeat thread waits again (its beat is done). :meth:`finish` ends the thread.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._offset = 0.0
        self._granted = 0
        self._waits = 0
        self._done = False

    def clock(self) -> float:
        """Real monotonic time plus every interval ticked so far."""
        with self._cond:
            return time.monotonic() + self._offset

    def wait(self, seconds: float) -> bool:
        """The heartbeat's wait: blocks until a tick (False) or :meth:`finish` (True: stop)."""
        with self._cond:
            self._waits += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._granted > 0 or self._done)
            if self._done:
                return True
            self._granted -= 1
            self._offset += seconds
            return False

    def wait_until_waiting(self, timeout: float = 10.0) -> bool:
        """Block until the heartbeat thread has entered its first wait."""
        with self._cond:
            return self._cond.wait_for(lambda: self._waits > 0, timeout)

    def tick(self, timeout: float = 10.0) -> bool:
        """Let one heartbeat run; True once it is done (the thread waits again)."""
        with self._cond:
            before = self._waits
            self._granted += 1
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._waits > before or self._done, timeout)

    def finish(self) -> None:
        """Make the heartbeat thread stop at its next wait."""
        with self._cond:
            self._done = True
            self._cond.notify_all()


# ---------------------------------------------------------------------------------------------
# Server and client


def start_server(faults: str = "", **options: Any) -> LocalServer:
    """Start a local server with the chunk limit of the workloads; faults may be set later."""
    overrides = {"fwdbwd_max_chunk_len": CHUNK_LEN}
    overrides.update(options.pop("config_overrides", {}))
    server = LocalServer(faults=faults, config_overrides=overrides, **options)
    server.start()
    return server


def fast_options(
    *,
    sleep: Callable[[float], object] | None = None,
    clock: Callable[[], float] | None = None,
    read_timeout: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Session-holder options with short retry waits (and short HTTP timeouts when asked)."""
    options: dict[str, Any] = {"sleep": sleep if sleep is not None else FastSleep()}
    if clock is not None:
        options["clock"] = clock
    if read_timeout is not None:
        options["request_timeout"] = Timeout(connect=2.0, read=read_timeout)
        options["poll_timeout"] = Timeout(connect=2.0, read=read_timeout)
    options.update(extra)
    return options


def make_client(base_url: str, *, telemetry: bool = False, **options: Any) -> ServiceClient:
    """A ServiceClient on ``base_url`` with :func:`fast_options` (``options`` go into them)."""
    api_key = options.pop("api_key", None)
    stall_timeout = options.pop("stall_timeout", None)
    startup_timeout = options.pop("startup_timeout", None)
    return service_with(
        fast_options(**options),
        api_key=api_key,
        base_url=base_url,
        telemetry=telemetry,
        stall_timeout=stall_timeout,
        startup_timeout=startup_timeout,
    )


# ---------------------------------------------------------------------------------------------
# Threads

_SERVER_THREAD_PREFIXES = (
    "tinker-lite-local-server",
    "tinker-lite-local-sample",
    "tinker-lite-model-",
)


def is_server_thread(thread: threading.Thread) -> bool:
    """Whether a thread belongs to an in-process LocalServer (not to a client)."""
    name = thread.name
    return name.startswith(_SERVER_THREAD_PREFIXES) or "process_request_thread" in name


def client_threads(baseline: set[threading.Thread]) -> list[threading.Thread]:
    """Live threads started since ``baseline`` that are not the local server's."""
    return [
        t
        for t in threading.enumerate()
        if t not in baseline and not is_server_thread(t) and t.is_alive()
    ]


def assert_no_new_client_threads(baseline: set[threading.Thread], timeout: float = 5.0) -> None:
    """Assert every client thread started since ``baseline`` has ended (joined with a deadline)."""
    deadline = time.monotonic() + timeout
    for thread in client_threads(baseline):
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in client_threads(baseline)]
    assert left == [], f"threads still running after close(): {left}"


class ThreadMonitor:
    """Samples the thread count from a background thread; ``peak_*`` after :meth:`stop`."""

    def __init__(self, baseline: set[threading.Thread], interval: float = 0.002) -> None:
        self._baseline = baseline
        self._interval = interval
        self._stop = threading.Event()
        self.peak_total = 0
        self.peak_client = 0
        self._thread = threading.Thread(target=self._run, name="reliability-monitor", daemon=True)

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            threads = threading.enumerate()
            self.peak_total = max(self.peak_total, len(threads))
            own = sum(
                1
                for t in threads
                if t not in self._baseline and t is not me and not is_server_thread(t)
            )
            self.peak_client = max(self.peak_client, own)
            if self._stop.wait(self._interval):
                return

    def __enter__(self) -> ThreadMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# ---------------------------------------------------------------------------------------------
# Server-side checks


def applied_seq_ids(server: LocalServer, model_id: str) -> list[int | None]:
    """The seq_ids the server applied to ``model_id``, in execution order."""
    applied = server.stats()["models"][model_id]["applied"]
    return [entry["seq_id"] for entry in applied]


def assert_applied_once_in_order(server: LocalServer, model_id: str, expected: int) -> None:
    """Every training request of ``model_id`` ran once, in seq_id order: 0, 1, ..., expected-1."""
    model = server.stats()["models"][model_id]
    seq_ids = [entry["seq_id"] for entry in model["applied"]]
    assert seq_ids == list(range(expected)), f"applied seq_ids of {model_id}: {seq_ids}"
    failed = [entry for entry in model["applied"] if not entry["ok"]]
    assert failed == [], f"training requests that failed on the server: {failed}"
    waiting = model["waiting_seq_ids"]
    assert waiting == [], f"requests held by the server for a missing seq_id: {waiting}"


# ---------------------------------------------------------------------------------------------
# Workload (a): SFT


def _tokens(seed: int, length: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.integers(1, 250, size=length)]


def sft_batch(step: int) -> list[types.Datum]:
    """The deterministic cross-entropy batch of one SFT step."""
    batch = []
    for index in range(SFT_BATCH):
        tokens = _tokens(1000 * step + index, 20 + index)
        batch.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1]),
                loss_fn_inputs={"target_tokens": tokens[1:]},
            )
        )
    return batch


@dataclass
class SftResult:
    """What workload (a) produced: per-step losses and logprobs, the saved state's name."""

    model_id: str
    losses: list[float] = field(default_factory=list)
    logprobs: list[np.ndarray[Any, Any]] = field(default_factory=list)
    optim_metrics: list[dict[str, float] | None] = field(default_factory=list)
    saved: str = ""

    def same_results_as(self, other: SftResult) -> bool:
        """Equal losses, logprobs, optimizer metrics and checkpoint name."""
        return (
            self.losses == other.losses
            and len(self.logprobs) == len(other.logprobs)
            and all(
                np.array_equal(a, b) for a, b in zip(self.logprobs, other.logprobs, strict=True)
            )
            and self.optim_metrics == other.optim_metrics
            and self.saved == other.saved
        )

    @property
    def expected_applied(self) -> int:
        """create_model + (chunks + optim_step) per step + save_state."""
        return 1 + len(self.losses) * (_chunks(SFT_BATCH) + 1) + (1 if self.saved else 0)


def _chunks(n_datums: int) -> int:
    return -(-n_datums // CHUNK_LEN)


def run_sft(
    service: ServiceClient,
    *,
    steps: int = SFT_STEPS,
    after_submit: Callable[[int], None] | None = None,
    out: SftResult | None = None,
) -> SftResult:
    """Workload (a). ``after_submit(step)`` runs once a step's two requests are queued.

    Pass ``out`` to keep what was done so far when a step raises.
    """
    trainer = service.create_lora_training_client(
        BASE_MODEL, rank=LORA_RANK, seed=LORA_SEED
    ).result()
    result = out if out is not None else SftResult(model_id=trainer.model_id)
    result.model_id = trainer.model_id
    for step in range(steps):
        fb = trainer.forward_backward(sft_batch(step), "cross_entropy")
        optim = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
        if after_submit is not None:
            after_submit(step)
        output = fb.result(timeout=RESULT_TIMEOUT)
        stepped = optim.result(timeout=RESULT_TIMEOUT)
        result.losses.append(output.metrics["loss:sum"])
        result.logprobs.append(
            np.concatenate([o["logprobs"].to_numpy() for o in output.loss_fn_outputs])
        )
        result.optim_metrics.append(stepped.metrics)
    path = trainer.save_state("final").result(timeout=RESULT_TIMEOUT).path
    result.saved = path.removeprefix(f"tinker://{trainer.model_id}/")
    return result


# ---------------------------------------------------------------------------------------------
# Workload (b): RL


def rl_prompt(index: int) -> list[int]:
    """The prompt of sample call ``index``."""
    return _tokens(50_000 + index, 6 + index % 5)


@dataclass
class RlResult:
    """What workload (b) produced."""

    model_id: str
    # (call index, sampled tokens, their logprobs) for every sequence of every call
    samples: collections.Counter[tuple[int, tuple[int, ...], tuple[float, ...]]]
    calls: int
    train_loss: float
    train_logprobs: np.ndarray[Any, Any]

    def same_results_as(self, other: RlResult) -> bool:
        """Same multiset of samples per call and the same training step."""
        return (
            self.samples == other.samples
            and self.calls == other.calls
            and self.train_loss == other.train_loss
            and np.array_equal(self.train_logprobs, other.train_logprobs)
        )

    @property
    def expected_applied(self) -> int:
        """create_model + the sampler snapshot + the importance_sampling chunks."""
        return 2 + _chunks(RL_TRAIN_PROMPTS * RL_NUM_SAMPLES)


def _rl_datums(responses: list[types.SampleResponse]) -> list[types.Datum]:
    datums = []
    for index, response in enumerate(responses[:RL_TRAIN_PROMPTS]):
        prompt = rl_prompt(index)
        rewards = [float(len(set(seq.tokens))) for seq in response.sequences]
        mean = sum(rewards) / len(rewards)
        for seq, reward in zip(response.sequences, rewards, strict=True):
            tokens = prompt + list(seq.tokens)
            pad = len(prompt) - 1
            datums.append(
                types.Datum(
                    model_input=types.ModelInput.from_ints(tokens[:-1]),
                    loss_fn_inputs={
                        "target_tokens": tokens[1:],
                        "logprobs": [0.0] * pad + [float(x) for x in seq.logprobs or []],
                        "advantages": [0.0] * pad + [reward - mean] * len(seq.tokens),
                    },
                )
            )
    return datums


def run_rl(
    service: ServiceClient,
    *,
    calls: int = RL_CALLS,
    after_submit: Callable[[], None] | None = None,
) -> RlResult:
    """Workload (b). ``after_submit()`` runs once every sample() call has returned its future."""
    trainer = service.create_lora_training_client(
        BASE_MODEL, rank=LORA_RANK, seed=LORA_SEED
    ).result()
    sampler = trainer.save_weights_and_get_sampling_client().result()
    futures = [
        sampler.sample(
            types.ModelInput.from_ints(rl_prompt(index)),
            RL_NUM_SAMPLES,
            types.SamplingParams(max_tokens=RL_MAX_TOKENS, seed=7_000 + index, temperature=1.0),
        )
        for index in range(calls)
    ]
    if after_submit is not None:
        after_submit()
    responses = [future.result(timeout=RESULT_TIMEOUT) for future in futures]
    samples: collections.Counter[tuple[int, tuple[int, ...], tuple[float, ...]]] = (
        collections.Counter()
    )
    for index, response in enumerate(responses):
        assert len(response.sequences) == RL_NUM_SAMPLES, (index, response)
        for seq in response.sequences:
            samples[(index, tuple(seq.tokens), tuple(seq.logprobs or ()))] += 1
    output = trainer.forward_backward(_rl_datums(responses), "importance_sampling").result(
        timeout=RESULT_TIMEOUT
    )
    return RlResult(
        model_id=trainer.model_id,
        samples=samples,
        calls=len(responses),
        train_loss=output.metrics["loss:sum"],
        train_logprobs=np.concatenate([o["logprobs"].to_numpy() for o in output.loss_fn_outputs]),
    )


# ---------------------------------------------------------------------------------------------
# Workload (c): REST listings and a checkpoint download


@dataclass(frozen=True)
class RestSetup:
    """The training run whose checkpoints workload (c) lists and downloads."""

    model_id: str
    applied: int


def setup_rest(service: ServiceClient) -> RestSetup:
    """Train two steps, save a state and sampler weights (run before faults are installed)."""
    trainer = service.create_lora_training_client(
        BASE_MODEL, rank=LORA_RANK, seed=LORA_SEED
    ).result()
    for step in range(2):
        trainer.forward_backward(sft_batch(step)[:CHUNK_LEN], "cross_entropy")
        trainer.optim_step(types.AdamParams(learning_rate=1e-2))
    trainer.save_state("ckpt").result(timeout=RESULT_TIMEOUT)
    trainer.save_weights_for_sampler("final").result(timeout=RESULT_TIMEOUT)
    return RestSetup(model_id=trainer.model_id, applied=1 + 2 * 2 + 2)


@dataclass
class RestResult:
    """What workload (c) read, with the run id replaced by ``<run>``."""

    runs: list[tuple[Any, ...]]
    run: tuple[Any, ...]
    checkpoints: list[tuple[Any, ...]]
    user_checkpoints: list[tuple[Any, ...]]
    archive: dict[str, str]
    download_attempts: int = 0

    def same_results_as(self, other: RestResult) -> bool:
        """Same listings and the same archive members (by content hash)."""
        return (
            self.runs == other.runs
            and self.run == other.run
            and self.checkpoints == other.checkpoints
            and self.user_checkpoints == other.user_checkpoints
            and self.archive == other.archive
        )


def _run_view(run: types.TrainingRun, model_id: str) -> tuple[Any, ...]:
    return (
        run.training_run_id.replace(model_id, "<run>"),
        run.base_model,
        run.is_lora,
        run.lora_rank,
        None if run.last_checkpoint is None else run.last_checkpoint.checkpoint_id,
    )


def _checkpoint_view(ckpt: types.Checkpoint, model_id: str) -> tuple[Any, ...]:
    return (
        ckpt.checkpoint_id,
        ckpt.checkpoint_type,
        ckpt.tinker_path.replace(model_id, "<run>"),
        ckpt.public,
    )


def run_rest(
    service: ServiceClient, setup: RestSetup, dest_dir: Path, *, sleep: Callable[[float], None]
) -> RestResult:
    """Workload (c): list runs and checkpoints, then download and unpack the sampler weights."""
    rest = RestClient(service)
    model_id = setup.model_id
    runs = rest.list_training_runs().result(timeout=RESULT_TIMEOUT)
    run = rest.get_training_run(model_id).result(timeout=RESULT_TIMEOUT)
    checkpoints = rest.list_checkpoints(model_id).result(timeout=RESULT_TIMEOUT)
    user_checkpoints = rest.list_user_checkpoints().result(timeout=RESULT_TIMEOUT)

    def archive_url() -> str:
        answer = rest.get_checkpoint_archive_url(model_id, "sampler_weights/final")
        return answer.result(timeout=RESULT_TIMEOUT).url

    archive = dest_dir / "final.tar.gz"
    downloaded = download(archive_url(), archive, refresh_url=archive_url, sleep=sleep)
    members = {}
    target = dest_dir / "final"
    for name in extract_archive(archive, target):
        path = target / name
        if path.is_file():
            members[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return RestResult(
        runs=sorted(_run_view(r, model_id) for r in runs.training_runs),
        run=_run_view(run, model_id),
        checkpoints=sorted(_checkpoint_view(c, model_id) for c in checkpoints.checkpoints),
        user_checkpoints=sorted(
            _checkpoint_view(c, model_id) for c in user_checkpoints.checkpoints
        ),
        archive=members,
        download_attempts=downloaded.attempts,
    )


# ---------------------------------------------------------------------------------------------
# The result log read by bench/bench_reliability.py


def record(
    row: str, *, fault: str, workload: str, result: str, seconds: float, **extra: Any
) -> None:
    """Append one row's outcome to ``$TINKER_LITE_RELIABILITY_LOG`` (when set)."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    # PYTEST_CURRENT_TEST: "tests/loopback/test_x.py::test_name[param] (call)"
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    entry = {
        "test": current.split("::")[-1].rsplit(" ", 1)[0],
        "row": row,
        "fault": fault,
        "workload": workload,
        "result": result,
        "seconds": round(seconds, 3),
        **extra,
    }
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")


@contextlib.contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """``with stopwatch() as elapsed: ...``; ``elapsed()`` is the wall time so far."""
    started = time.monotonic()
    yield lambda: time.monotonic() - started


# ---------------------------------------------------------------------------------------------
# The child process of the process-exit rows

ERROR_MARKER = "TYPED-ERROR "
READY_MARKER = "CHILD-READY"


def _child_report(error: BaseException, started: float, clock: Callable[[], float]) -> None:
    report = {
        "type": type(error).__name__,
        "message": str(error),
        "request_id": getattr(error, "request_id", None),
        "client_seconds": clock() - started,
    }
    print(ERROR_MARKER + json.dumps(report), flush=True)


def child_main() -> None:
    """Run one process-exit scenario (``TL_CHILD_SCENARIO``) and let its typed error escape.

    The error is reported on stdout first (``TYPED-ERROR {json}``), then re-raised uncaught:
    the process must exit on its own, promptly, even with requests still retrying in the
    background. The client is deliberately not closed.
    """
    logging.basicConfig(level=logging.WARNING)
    scenario = os.environ["TL_CHILD_SCENARIO"]
    base_url = os.environ["TINKER_BASE_URL"]
    clock: Callable[[], float] = time.monotonic
    options: dict[str, Any] = {}
    if scenario in ("submit_503_forever", "refused_forever"):
        virtual = VirtualClock()
        clock = virtual
        options = {"sleep": virtual.sleep, "clock": virtual}
    # The stall timeout comes from TINKER_LITE_STALL_TIMEOUT when the test sets it.
    service = service_with(options, base_url=base_url, telemetry=False)
    trainer = service.create_lora_training_client(
        BASE_MODEL, rank=LORA_RANK, seed=LORA_SEED
    ).result()
    pending: list[Any] = []
    if scenario == "expired_while_sampling":
        # Samples keep retrying (asample answers 503) while the training step fails for good.
        sampler = service.create_sampling_client(base_model=BASE_MODEL).result()
        params = types.SamplingParams(max_tokens=4, seed=1)
        prompt = types.ModelInput.from_ints([1, 2, 3])
        pending = [sampler.sample(prompt, 1, params) for _ in range(20)]
    if scenario == "refused_forever":
        print(READY_MARKER, flush=True)
        sys.stdin.readline()  # the test stops the server's listener, then says go
    started = clock()
    try:
        trainer.forward_backward(sft_batch(0), "cross_entropy").result()
        trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        raise AssertionError("the scenario's fault did not fire")
    except Exception as error:
        _child_report(error, started, clock)
        del pending
        raise


def check_child_report(line: str) -> Mapping[str, Any]:
    """Parse the child's ``TYPED-ERROR`` line."""
    assert line.startswith(ERROR_MARKER), line
    report: Mapping[str, Any] = json.loads(line[len(ERROR_MARKER) :])
    return report
