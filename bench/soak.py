"""Soak tinker_lite for minutes under random faults against ``tinker-lite local serve``.

A realistic mix runs against the local server in a subprocess, whose fault injection draws random
faults from a plan seeded by ``--seed`` (the same seed gives the same plan):

* two training loops (``forward_backward`` + ``optim_step`` pipelined, ``save_state`` every few
  steps, sampler weights now and then); a loop whose step fails with a typed error resumes from
  its last saved state in a new training run, as a script would;
* waves of a few hundred ``sample()`` calls in flight at once, each wave with its own
  ServiceClient, closed afterwards (every third wave with ``close(wait=False)``, samples still
  in flight);
* REST listings now and then, and a checkpoint download (``tinker-lite checkpoint download``);
* once per run, the server process killed (SIGKILL) and restarted on the same data dir and port.

Faults drawn (each a rule of the server's fault spec, see :mod:`tinker_lite.local`): connections
dropped before / after a request, truncated bodies, 5xx bursts, 429 with each Retry-After form
(``retry-after-ms``, seconds, IMF-fixdate), ``try_again`` and 408 with each queue state, slow
answers, expired futures (410), and faults on archive downloads.

It checks, and exits 1 when one breaks:

* every training request either applied exactly once and in order (the server's ledger, kept
  across the restart) or failed to its caller with a typed error: never applied twice, never
  lost silently, never applied without a caller;
* every sample, REST call and download answered or failed with a typed error (a
  ``tinker_lite.TinkerError``; for the download, a non-zero exit with no traceback);
* no ``result(timeout=T)`` returning later than T + 1 s, no ``close()`` longer than its bound;
* no request received from a client after its ``close()`` returned (the server counts requests
  per ``X-Local-Client`` header; each client sends its own tag);
* no client thread left once every client is closed, no internal error logged by the server.

Reading the output (progress lines every 30 s, then tables):

* "Faults injected, by kind": counted from the server's log, one line per injected fault
  (``429:retry-after-ms`` is a 429 with that header, ``try_again-408:paused_capacity`` a poll
  answered 408 with that queue state, ``expire`` a poll answered 410, ``delay`` a slow answer).
* "Training requests (as their callers saw them)": each request's outcome in the training loops:
  ``ok`` or the typed error it raised (a ``RequestFailedError`` after the restart is a request
  the killed server had accepted but not run; a 410 is an expired future).
* "... against the server's ledger": each request matched with the server's record of its
  ``seq_id``: "ok to the caller, applied once" is the rule; a typed failure may come with the
  request applied (its answer was lost: e.g. a 410 on its poll), not applied, or lost in the
  restart. Anything else is a broken invariant, listed under "Invariants" with examples.
* "Server restart": when it was killed, how many of loop b's pipelined requests were in flight
  (it pipelines 10 steps just before the kill), how many the server had accepted but not run,
  what the new server restored (sessions, models, sampling sessions).
* "Resources": RSS and threads of this process (every client) and of the server, every 5 s and
  between sampling waves, with the least-squares slope per minute after a warm-up. The server
  keeps results for an hour and every usage record, so its RSS grows by design.

Exit status: 0 every invariant held, 1 one broke, 2 the soak itself failed (e.g. the server never
started). ``--keep`` keeps the work dir (server and client logs, the data dir); it is kept anyway
when the soak fails. The client's log (retries, warnings) goes to ``client.log`` there, not to
the console.

    make soak                                   # 5 minutes, seed 1
    .venv/bin/python bench/soak.py --minutes 10 --seed 2
    .venv/bin/python bench/soak.py --minutes 1 --no-restart --fault-rate 0.5
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _common as c

c.ensure_worktree_importable()

import numpy as np  # noqa: E402 (after the work tree is made importable)

import tinker_lite as tinker  # noqa: E402
from tinker_lite.local.http.faults import fault_plan  # noqa: E402

API_KEY = "tml-soak-local"
BASE_MODEL = "tinker-lite/tiny-64"
LORA_RANK = 8
TAG_HEADER = "X-Local-Client"
BOUND_SLACK_S = 1.0  # docs/protocol.rst §6.6: a bound is never overshot by more than a second
LATE_SLACK_S = 0.25  # a request the server reads this long after close() returned was sent after
QUIET_S = 3.0  # how long a closed client is watched for late requests
AFTER_CLOSE_S = 10.0  # a future left pending by close(wait=False) must fail within this
BURST_STEPS = 10  # steps loop b pipelines (without waiting) just before the server is killed
SOAK_THREAD_PREFIX = "soak-"

# Each rule fires with ``probability * --fault-rate`` on the requests it matches; the rules are
# evaluated in this order and the first firing one wins (delays add up).
FAULT_MENU: list[tuple[float, str]] = [
    (0.003, "path=/api/v1/*,action=drop_before"),
    (0.003, "path=/api/v1/*,action=drop_after"),
    (0.003, "path=/api/v1/*,action=truncate"),
    (0.0015, "path=/api/v1/*,status=503,burst=4"),
    (0.001, "path=/api/v1/*,status=502,burst=3"),
    (0.001, "path=/api/v1/*,status=500,burst=2"),
    (0.008, "path=/api/v1/asample,status=429,retry_after_ms=250"),
    (0.005, "path=/api/v1/asample,status=429,retry_after=1"),
    (0.004, "path=/api/v1/asample,status=429,retry_after_date=1"),
    (0.01, "path=/api/v1/forward_backward,status=429,retry_after_ms=400"),
    (0.01, "path=/api/v1/optim_step,status=429,retry_after=1"),
    (0.05, "path=/api/v1/save_weights,status=429,retry_after_date=1"),
    (0.002, "path=/api/v1/*,method=POST,status=408,queue_state=active"),
    (0.002, "path=/api/v1/*,method=POST,status=408,queue_state=paused_capacity"),
    (0.002, "path=/api/v1/*,method=POST,status=408,queue_state=paused_rate_limit"),
    (0.01, "path=/api/v1/retrieve_future,action=try_again,queue_state=active"),
    (0.005, "path=/api/v1/retrieve_future,action=try_again,queue_state=paused_capacity"),
    (
        0.005,
        "path=/api/v1/retrieve_future,action=try_again,queue_state=paused_rate_limit,"
        "reason=soak: rate limited",
    ),
    (0.005, "path=/api/v1/retrieve_future,action=try_again,status=408,queue_state=active"),
    (
        0.005,
        "path=/api/v1/retrieve_future,action=try_again,status=408,queue_state=paused_capacity",
    ),
    (
        0.005,
        "path=/api/v1/retrieve_future,action=try_again,status=408,queue_state=paused_rate_limit",
    ),
    (0.01, "path=/api/v1/retrieve_future,action=expire,request_type=Sample"),
    (0.002, "path=/api/v1/retrieve_future,action=expire"),
    (0.15, "path=/_local/download/*,action=truncate"),
    (0.1, "path=/_local/download/*,action=drop_before"),
    (0.1, "path=/_local/download/*,status=503"),
    (0.01, "path=/api/v1/*,delay=0.4"),
    (0.002, "path=/api/v1/*,delay=2.5"),
]


def fault_spec(seed: int, incarnation: int, rate: float) -> str:
    """The server's fault spec for one server process of the run (the restart draws anew)."""
    rules = []
    for probability, body in FAULT_MENU:
        p = min(1.0, probability * rate)
        if p > 0:
            rules.append(f"{body},probability={p:.6g},seed={seed * 100 + incarnation}")
    return ";".join(rules)


def plan_digest(spec: str) -> str:
    """A fingerprint of the spec's fault plan (which of each rule's first 10,000 matches fire)."""
    plan = fault_plan(spec, 10_000)
    return hashlib.sha256(json.dumps(plan).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- records


@dataclasses.dataclass
class Op:
    """One training request as its caller saw it."""

    loop: str
    model_id: str | None
    seq_id: int
    kind: str
    outcome: str = "pending"  # ok | typed | untyped
    error: str | None = None
    request_id: str | None = None


def error_name(exc: BaseException) -> str:
    """``ClassName`` of an error, with its HTTP status when it has one."""
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}" + (f" {status}" if status else "")


def is_typed(exc: BaseException) -> bool:
    """Whether an error is one a caller can handle by type: tinker_lite's own."""
    return isinstance(exc, tinker.TinkerError)


class Violations:
    """The broken invariants, by name, with up to 5 examples each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: collections.Counter[str] = collections.Counter()
        self.examples: dict[str, list[str]] = collections.defaultdict(list)

    def add(self, name: str, detail: str) -> None:
        with self._lock:
            self.counts[name] += 1
            if len(self.examples[name]) < 5:
                self.examples[name].append(detail)


# --------------------------------------------------------------------------- the server


class Server:
    """``tinker-lite local serve`` in a subprocess: started, killed, restarted on the same dir."""

    def __init__(self, data_dir: Path, log_path: Path) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.base_url = ""
        self.incarnation = -1
        self.faults: list[collections.Counter[str]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 (closed in stop())

    @staticmethod
    def command() -> list[str]:
        script = Path(sys.executable).with_name("tinker-lite")
        if script.exists():
            return [str(script)]
        return [sys.executable, "-m", "tinker_lite.cli"]

    def start(self, spec: str, *, attempts: int = 20) -> None:
        """Start a server process on ``self.port`` (0 the first time) and wait for its URL."""
        self.incarnation += 1
        self.faults.append(collections.Counter())
        argv = [
            *self.command(),
            "local",
            "serve",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--api-key",
            API_KEY,
            "--log-level",
            "INFO",
            "--faults",
            spec,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER")}
        env["PYTHONUNBUFFERED"] = "1"
        for attempt in range(attempts):
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=str(c.REPO_DIR),
            )
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line.startswith("http://"):
                self.proc, self.base_url = proc, line
                self.port = int(line.rsplit(":", 1)[1])
                incarnation = self.incarnation
                threading.Thread(
                    target=self._read_log,
                    args=(proc, incarnation),
                    name=f"{SOAK_THREAD_PREFIX}server-log-{incarnation}",
                    daemon=True,
                ).start()
                return
            _, err = proc.communicate(timeout=30)
            if proc.returncode == 3 and attempt + 1 < attempts:  # the port is not free yet
                time.sleep(0.5)
                continue
            raise RuntimeError(f"the local server did not start (exit {proc.returncode}):\n{err}")

    _FAULT_LINE = re.compile(r"injected fault (\S+) on (\S+) (\S+) \(rule ")

    def _read_log(self, proc: subprocess.Popen[str], incarnation: int) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            match = self._FAULT_LINE.search(line)
            with self._lock:
                if match:
                    kind, path = match.group(1), match.group(3)
                    if path.startswith("/_local/download/"):
                        kind += " (download)"
                    self.faults[incarnation][kind] += 1
                    continue
                self._log.write(f"[server {incarnation}] {line}")
                if " ERROR " in line or line.startswith("Traceback"):
                    self.errors.append(line.strip())

    def kill(self) -> None:
        """SIGKILL the server process (nothing it has not written survives)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int | None:
        """SIGTERM the server and wait for it; return its exit status (None: had to be killed)."""
        code: int | None = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                code = self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        elif self.proc is not None:
            code = self.proc.returncode
        with self._lock:
            self._log.close()
        return code

    def status(self) -> dict[str, int]:
        """VmRSS (kB) and Threads of the server process now."""
        return proc_status(self.proc.pid) if self.proc is not None else {}

    def stats(self, timeout: float = 60.0) -> dict[str, Any]:
        """``GET /_local/stats`` (the control plane is never faulted); retried while it restarts."""
        deadline = time.monotonic() + timeout
        while True:
            request = urllib.request.Request(
                self.base_url + "/_local/stats", headers={"X-API-Key": API_KEY}
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    stats: dict[str, Any] = json.loads(response.read())
                    return stats
            except (OSError, urllib.error.URLError, ValueError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS (kB) and Threads of a process, from /proc."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "Threads"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


# --------------------------------------------------------------------------- the run


class Soak:
    """One soak run: the server, the workloads, the checks."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.duration = args.minutes * 60.0
        self.rng = random.Random(args.seed)
        self.server = Server(workdir / "data", workdir / "server.log")
        self.violations = Violations()
        self.stop = threading.Event()
        self.started = 0.0
        self._lock = threading.Lock()
        self.ops: list[Op] = []
        self.models: dict[str, str] = {}  # model_id -> loop
        self.creations: collections.Counter[str] = collections.Counter()
        self.samples: collections.Counter[str] = collections.Counter()
        self.rest: collections.Counter[str] = collections.Counter()
        self.downloads: collections.Counter[str] = collections.Counter()
        self.closes: list[dict[str, Any]] = []
        self.waves = 0
        self.checkpoints = 0
        self.max_wait: dict[str, float] = collections.defaultdict(float)
        self.sampler_path: str | None = None
        self.in_flight = 0  # training requests submitted and not yet answered
        self.burst_wanted = threading.Event()  # the restart asks loop b for a pipelined burst
        self.burst_sent = threading.Event()
        self.resources: list[tuple[float, dict[str, int], dict[str, int]]] = []
        self.floors: list[tuple[float, dict[str, int], dict[str, int]]] = []
        self.load: list[float] = []  # the 1-minute load average at each resource sample
        self.restart: dict[str, Any] = {}
        self.soak_errors: list[str] = []

    # -- helpers --------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def service(self, tag: str) -> tinker.ServiceClient:
        """A ServiceClient of its own, tagged so the server counts its requests apart."""
        return tinker.ServiceClient(
            base_url=self.server.base_url,
            api_key=API_KEY,
            default_headers={TAG_HEADER: tag},
            stall_timeout=self.args.stall_timeout,
        )

    def wait(self, future: Any, what: str, bound: float | None = None) -> tuple[str, Any]:
        """``future.result(timeout)``: ("ok", result), or ("typed" / "untyped", error).

        Checks the bound: the call returns within its timeout plus a second.
        """
        bound = self.args.result_timeout if bound is None else bound
        started = time.monotonic()
        try:
            outcome: tuple[str, Any] = ("ok", future.result(timeout=bound))
        except Exception as exc:
            outcome = ("typed" if is_typed(exc) else "untyped", exc)
        waited = time.monotonic() - started
        with self._lock:
            self.max_wait[what] = max(self.max_wait[what], waited)
        if waited > bound + BOUND_SLACK_S:
            self.violations.add(
                "future outlived its bound",
                f"{what}: result(timeout={bound:g}) returned after {waited:.1f} s",
            )
        if outcome[0] == "untyped":
            exc = outcome[1]
            self.violations.add(
                "untyped error", f"{what}: {type(exc).__module__}.{type(exc).__name__}: {exc}"
            )
        return outcome

    def close_and_watch(self, service: tinker.ServiceClient, tag: str, *, wait: bool) -> None:
        """Close a client (bounded), then check the server gets nothing more from it."""
        incarnation = self.server.incarnation
        started = time.monotonic()
        try:
            if wait:
                service.close()
            else:
                service.close(wait=False)
        except Exception as exc:
            self.violations.add("close() raised", f"{tag}: {error_name(exc)}: {exc}")
        took = time.monotonic() - started
        closed_at = time.time()
        bound = (self.args.stall_timeout if wait else 0.0) + 15.0
        if took > bound:
            self.violations.add("close() outlived its bound", f"{tag}: {took:.1f} s > {bound:g} s")
        try:
            first = self.server.stats()["clients"].get(tag, {})
            time.sleep(QUIET_S)
            last = self.server.stats()["clients"].get(tag, {})
        except OSError as exc:
            self.soak_errors.append(f"stats unavailable after closing {tag}: {exc}")
            return
        check: dict[str, Any] = {"tag": tag, "wait": wait, "close_s": round(took, 2)}
        if self.server.incarnation != incarnation or not first:
            check["checked"] = False  # the server restarted meanwhile: its counters restarted
        else:
            check["checked"] = True
            later = last.get("requests", 0) - first.get("requests", 0)
            late_by = last.get("last_request_at", 0.0) - closed_at
            check["late_requests"] = later + (1 if late_by > LATE_SLACK_S and not later else 0)
            if check["late_requests"]:
                self.violations.add(
                    "request sent after close()",
                    f"{tag}: {later} request(s) in the {QUIET_S:g} s after close() returned; "
                    f"the last one {late_by:+.2f} s after it",
                )
        with self._lock:
            self.closes.append(check)

    def pause(self, seconds: float) -> None:
        self.stop.wait(seconds)

    # -- training -------------------------------------------------------------------------------

    def _batch(self, rng: random.Random) -> list[tinker.types.Datum]:
        batch = []
        for _ in range(4):
            tokens = [rng.randrange(1, 250) for _ in range(24)]
            batch.append(
                tinker.types.Datum(
                    model_input=tinker.types.ModelInput.from_ints(tokens[:-1]),
                    loss_fn_inputs={"target_tokens": np.array(tokens[1:], dtype=np.int64)},
                )
            )
        return batch

    def _record(self, op: Op, outcome: tuple[str, Any], future: Any = None) -> None:
        op.outcome = outcome[0]
        if outcome[0] != "ok":
            op.error = error_name(outcome[1])
        if future is not None:
            op.request_id = getattr(future, "request_id", None)
        with self._lock:
            self.ops.append(op)

    def _create(
        self, service: tinker.ServiceClient, loop: str, seed: int, state: str | None
    ) -> Any:
        """A new training run: from the last saved state (with optimizer), else from scratch."""
        kind = "create_via_load" if state else "create_model"
        started = time.monotonic()
        try:
            if state:
                trainer = service.create_training_client_from_state_with_optimizer(state).result()
            else:
                trainer = service.create_lora_training_client(
                    BASE_MODEL, rank=LORA_RANK, seed=seed
                ).result()
        except Exception as exc:
            with self._lock:
                self.creations[f"failed: {error_name(exc)}"] += 1
            if not is_typed(exc):
                self.violations.add("untyped error", f"{loop} {kind}: {error_name(exc)}: {exc}")
            took = time.monotonic() - started
            bound = self.args.stall_timeout + 30.0
            if took > bound:
                self.violations.add(
                    "future outlived its bound", f"{loop} {kind} blocked {took:.0f} s"
                )
            return None
        with self._lock:
            self.creations["resumed from a saved state" if state else "created"] += 1
            self.models[trainer.model_id] = loop
            self.ops.append(Op(loop, trainer.model_id, 0, kind, "ok"))
        return trainer

    def training_loop(self, loop: str, seed: int) -> None:
        tag = f"train-{loop}"
        service = self.service(tag)
        rng = random.Random(seed)
        trainer: Any = None
        state: str | None = None
        seq = step = 0
        try:
            while not self.stop.is_set():
                if trainer is None:
                    trainer = self._create(service, loop, seed, state)
                    if trainer is None:
                        self.pause(1.0)
                        continue
                    seq = 0
                model_id = trainer.model_id
                # loop b pipelines BURST_STEPS steps once, for the server to be killed meanwhile
                burst = loop == "b" and self.burst_wanted.is_set() and not self.burst_sent.is_set()
                steps = BURST_STEPS if burst else 1
                adam = tinker.types.AdamParams(learning_rate=1e-3)
                submitted: list[tuple[Op, Any]] = []
                for _ in range(steps):
                    for kind, method, call_args in (
                        (
                            "forward_backward",
                            trainer.forward_backward,
                            (self._batch(rng), "cross_entropy"),
                        ),
                        ("optim_step", trainer.optim_step, (adam,)),
                    ):
                        seq += 1
                        op = Op(loop, model_id, seq, kind)
                        try:
                            submitted.append((op, method(*call_args)))
                        except Exception as exc:
                            self._record(op, ("typed" if is_typed(exc) else "untyped", exc))
                if burst:
                    self.burst_sent.set()
                failed = len(submitted) < 2 * steps
                with self._lock:
                    self.in_flight += len(submitted)
                for op, future in submitted:
                    outcome = self.wait(future, f"{loop} {op.kind}")
                    self._record(op, outcome, future)
                    with self._lock:
                        self.in_flight -= 1
                    failed = failed or outcome[0] != "ok"
                step += 1
                saves: list[tuple[str, Callable[[str], Any], str]] = []
                if not failed and step % self.args.save_every == 0:
                    saves.append(("save_weights", trainer.save_state, f"{loop}-step-{step}"))
                if not failed and loop == "a" and step % (3 * self.args.save_every) == 0:
                    saves.append(
                        (
                            "save_weights_for_sampler",
                            trainer.save_weights_for_sampler,
                            f"sampler-{step}",
                        )
                    )
                for kind, save, name in saves:
                    seq += 1
                    op = Op(loop, model_id, seq, kind)
                    try:
                        future = save(name)
                    except Exception as exc:
                        self._record(op, ("typed" if is_typed(exc) else "untyped", exc))
                        failed = True
                        break
                    outcome = self.wait(future, f"{loop} {kind}")
                    self._record(op, outcome, future)
                    if outcome[0] != "ok":
                        failed = True
                        break
                    with self._lock:
                        self.checkpoints += 1
                    if kind == "save_weights":
                        state = outcome[1].path
                    else:
                        self.sampler_path = outcome[1].path
                if failed:
                    trainer = None  # a step failed: carry on from the last saved state
                self.pause(self.args.step_interval)
        except Exception as exc:  # a bug of the soak itself
            self.soak_errors.append(f"training loop {loop}: {error_name(exc)}: {exc}")
            self.stop.set()
        finally:
            self.close_and_watch(service, tag, wait=True)

    # -- sampling -------------------------------------------------------------------------------

    def sampling_waves(self) -> None:
        rng = random.Random(self.args.seed + 7)
        wave = 0
        try:
            while not self.stop.is_set():
                wave += 1
                tag = f"wave-{wave}"
                early = wave % 3 == 0
                service = self.service(tag)
                path = self.sampler_path if wave % 2 == 0 else None
                try:
                    if path is not None:
                        sampler = service.create_sampling_client(model_path=path).result()
                    else:
                        sampler = service.create_sampling_client(base_model=BASE_MODEL).result()
                except Exception as exc:
                    with self._lock:
                        self.samples[f"sampler not created: {error_name(exc)}"] += 1
                    if not is_typed(exc):
                        self.violations.add("untyped error", f"{tag}: {error_name(exc)}: {exc}")
                    self.close_and_watch(service, tag, wait=True)
                    self.pause(1.0)
                    continue
                futures = []
                for index in range(self.args.fanout):
                    prompt = [rng.randrange(1, 250) for _ in range(rng.randrange(4, 12))]
                    params = tinker.types.SamplingParams(
                        max_tokens=8, seed=wave * 10_000 + index, temperature=1.0
                    )
                    try:
                        futures.append(
                            sampler.sample(tinker.types.ModelInput.from_ints(prompt), 1, params)
                        )
                    except Exception as exc:
                        self._count_sample(("typed" if is_typed(exc) else "untyped", exc), tag)
                if early:
                    # close while samples are in flight: what is left must fail, typed, at once
                    half = len(futures) // 2
                    for future in futures[:half]:
                        self._count_sample(self.wait(future, "sample"), tag)
                    self.close_and_watch(service, tag, wait=False)
                    for future in futures[half:]:
                        outcome = self.wait(future, "sample after close", AFTER_CLOSE_S)
                        if isinstance(outcome[1], tinker.FutureTimeoutError):
                            self.violations.add(
                                "future outlived its bound",
                                f"{tag}: a sample still pending {AFTER_CLOSE_S:g} s after "
                                "close(wait=False) returned",
                            )
                        self._count_sample(outcome, tag)
                else:
                    for future in futures:
                        self._count_sample(self.wait(future, "sample"), tag)
                    self.close_and_watch(service, tag, wait=True)
                with self._lock:
                    self.waves = wave
                    self.floors.append((self.elapsed(), proc_status(), self.server.status()))
                self.pause(self.args.wave_pause)
        except Exception as exc:
            self.soak_errors.append(f"sampling waves: {error_name(exc)}: {exc}")
            self.stop.set()

    def _count_sample(self, outcome: tuple[str, Any], tag: str) -> None:
        if outcome[0] == "ok":
            sequences = outcome[1].sequences
            if len(sequences) != 1 or not 0 < len(sequences[0].tokens) <= 8:
                self.violations.add("malformed sample", f"{tag}: {outcome[1]!r}")
            key = "answered"
        else:
            key = f"failed: {error_name(outcome[1])}"
        with self._lock:
            self.samples[key] += 1

    # -- REST and downloads ---------------------------------------------------------------------

    def rest_and_downloads(self) -> None:
        tag = "rest"
        service = self.service(tag)
        round_ = 0
        try:
            rest = tinker.RestClient(service)
            while not self.stop.is_set():
                round_ += 1
                with self._lock:
                    model_ids = list(self.models)
                calls: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
                    ("list_training_runs", rest.list_training_runs, ()),
                    ("list_user_checkpoints", rest.list_user_checkpoints, ()),
                ]
                if model_ids:
                    calls += [
                        ("get_training_run", rest.get_training_run, (model_ids[-1],)),
                        ("list_checkpoints", rest.list_checkpoints, (model_ids[-1],)),
                    ]
                for name, call, call_args in calls:
                    try:
                        outcome = self.wait(call(*call_args), f"rest {name}")
                    except Exception as exc:
                        outcome = ("typed" if is_typed(exc) else "untyped", exc)
                    key = "answered" if outcome[0] == "ok" else f"failed: {error_name(outcome[1])}"
                    with self._lock:
                        self.rest[key] += 1
                if round_ % 3 == 0 and self.sampler_path is not None:
                    self.download(self.sampler_path)
                self.pause(self.args.rest_interval)
        except Exception as exc:
            self.soak_errors.append(f"REST: {error_name(exc)}: {exc}")
            self.stop.set()
        finally:
            self.close_and_watch(service, tag, wait=True)

    def download(self, path: str) -> None:
        """``tinker-lite checkpoint download PATH --extract DIR`` in a child process."""
        target = self.workdir / "download"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        argv = [
            *Server.command(),
            "checkpoint",
            "download",
            path,
            "-o",
            str(target / "archive.tar.gz"),
            "--extract",
            str(target / "files"),
            "--force",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER")}
        env.update(TINKER_BASE_URL=self.server.base_url, TINKER_API_KEY=API_KEY)
        bound = 120.0
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, env=env, timeout=bound, check=False
            )
        except subprocess.TimeoutExpired:
            self.violations.add("download outlived its bound", f"{path}: > {bound:g} s")
            return
        files = {p.name for p in (target / "files").glob("*")}
        if proc.returncode == 0:
            wanted = {"adapter_model.safetensors", "adapter_config.json"}
            key = "downloaded" if wanted <= files else "downloaded, files missing"
            if key != "downloaded":
                self.violations.add("download incomplete", f"{path}: got {sorted(files)}")
        else:
            key = f"failed: exit {proc.returncode}"
            if "Traceback" in proc.stderr:
                self.violations.add("untyped error", f"download {path}: {proc.stderr[-600:]}")
        with self._lock:
            self.downloads[key] += 1

    # -- monitor and restart --------------------------------------------------------------------

    def monitor(self) -> None:
        while True:
            sample = (self.elapsed(), proc_status(), self.server.status())
            with self._lock:
                self.resources.append(sample)
                self.load.append(os.getloadavg()[0])
            if self.stop.wait(self.args.sample_every):
                return

    def restart_server(self, at: float) -> None:
        try:
            self._restart_server(at)
        except Exception as exc:  # the soak cannot go on without its server
            self.soak_errors.append(f"restart: {error_name(exc)}: {exc}")
            self.stop.set()

    def _restart_server(self, at: float) -> None:
        if self.stop.wait(at):
            return
        before = self.server.stats()
        downtime = self.rng.uniform(1.0, 4.0)
        # kill while loop b's burst of pipelined steps is on its way: some applied, some
        # queued on the server (lost in the kill), some not yet sent (sent to the next server)
        self.burst_wanted.set()
        self.burst_sent.wait(30.0)
        time.sleep(self.rng.uniform(0.05, 0.3))
        self.restart = {"at_s": round(self.elapsed(), 1), "in_flight": self.in_flight}
        self.server.kill()
        self.stop.wait(downtime)
        self.server.start(fault_spec(self.args.seed, 1, self.args.fault_rate))
        self.restart["down_s"] = round(self.elapsed() - self.restart["at_s"], 1)
        after = self.server.stats()
        self.restart["restored"] = after.get("restored", {})
        self.restart["models_before"] = len(before["models"])
        self.restart["models_after"] = len(after["models"])
        self.restart["sessions_before"] = before["sessions"]
        self.restart["sessions_after"] = after["sessions"]
        self.log(
            f"server killed at {self.restart['at_s']:.0f} s and restarted "
            f"({self.restart['down_s']:.1f} s down): restored {self.restart['restored']}"
        )

    def log(self, text: str) -> None:
        if not self.args.quiet:
            print(f"[{self.elapsed():6.0f} s] {text}", flush=True)

    def progress(self) -> None:
        while not self.stop.wait(30.0):
            with self._lock:
                ops = collections.Counter(op.outcome for op in self.ops)
                samples = sum(self.samples.values())
            faults = sum(sum(f.values()) for f in self.server.faults)
            self.log(
                f"training requests {dict(ops)}, samples {samples} ({self.waves} waves), "
                f"faults injected {faults}"
            )

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        args = self.args
        self.started = time.monotonic()
        load_before = os.getloadavg()
        self.server.start(fault_spec(args.seed, 0, args.fault_rate))
        self.log(f"server {self.server.base_url} (data dir {self.server.data_dir})")
        baseline_threads = {t.name for t in threading.enumerate()}
        threads = [
            threading.Thread(target=self.training_loop, args=("a", args.seed), name="soak-train-a"),
            threading.Thread(
                target=self.training_loop, args=("b", args.seed + 1), name="soak-train-b"
            ),
            threading.Thread(target=self.sampling_waves, name="soak-sampling"),
            threading.Thread(target=self.rest_and_downloads, name="soak-rest"),
        ]
        helpers = [threading.Thread(target=self.monitor, name="soak-monitor", daemon=True)]
        helpers.append(threading.Thread(target=self.progress, name="soak-progress", daemon=True))
        if args.restart:
            at = self.duration * self.rng.uniform(0.35, 0.65)
            helpers.append(
                threading.Thread(target=self.restart_server, args=(at,), name="soak-restart")
            )
        for thread in [*threads, *helpers]:
            thread.start()
        self.stop.wait(self.duration)
        self.stop.set()
        self.log("stopping: waiting for the workloads to finish their step and close")
        for thread in [*threads, *helpers]:
            thread.join(args.result_timeout + args.stall_timeout + 60.0)
            if thread.is_alive():
                self.soak_errors.append(f"{thread.name} did not finish")
        self.check_threads(baseline_threads)
        stats = self.server.stats()
        self.check_ledger(stats)
        exit_code = self.server.stop()
        if exit_code != 0:
            self.violations.add("server exit", f"the server exited with {exit_code} on SIGTERM")
        if self.server.errors:
            for line in self.server.errors[:5]:
                self.violations.add("server internal error", line)
        return {"load_before": load_before, "load_after": os.getloadavg(), "stats": stats}

    # -- checks ---------------------------------------------------------------------------------

    def check_threads(self, baseline: set[str]) -> None:
        """Once every client is closed, only the soak's own threads may be left."""
        deadline = time.monotonic() + 10.0
        while True:
            left = [
                t.name
                for t in threading.enumerate()
                if t.name not in baseline and not t.name.startswith(SOAK_THREAD_PREFIX)
            ]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if left:
            self.violations.add("client thread left after close()", ", ".join(sorted(left)))

    def check_ledger(self, stats: dict[str, Any]) -> None:
        """Every training request: applied once, in order, or failed to its caller, typed."""
        ledgers = stats["models"]
        by_model: dict[str, list[Op]] = collections.defaultdict(list)
        for op in self.ops:
            if op.model_id is not None:
                by_model[op.model_id].append(op)
        self.ledger_summary: collections.Counter[str] = collections.Counter()
        for model_id, model in ledgers.items():
            applied = model["applied"]
            seqs = [a["seq_id"] for a in applied]
            dupes = [s for s, n in collections.Counter(seqs).items() if n > 1]
            if dupes:
                self.violations.add("applied twice", f"{model_id}: seq_ids {dupes}")
            ok_seqs = [a["seq_id"] for a in applied if a["ok"]]
            if ok_seqs != sorted(ok_seqs):
                self.violations.add("applied out of order", f"{model_id}: {ok_seqs}")
            if model_id not in self.models:
                self.ledger_summary["requests of runs whose creation failed to its caller"] += len(
                    applied
                )
                continue
            by_seq = {a["seq_id"]: a for a in applied}
            known = set()
            for op in by_model[model_id]:
                known.add(op.seq_id)
                entry = by_seq.get(op.seq_id)
                if op.outcome == "ok":
                    if entry is None:
                        self.violations.add(
                            "lost silently",
                            f"{op.loop} {model_id} seq {op.seq_id} {op.kind}: ok to its caller, "
                            "never applied",
                        )
                    elif not entry["ok"]:
                        self.violations.add(
                            "lost silently",
                            f"{model_id} seq {op.seq_id} {op.kind}: ok to its caller, failed on "
                            "the server",
                        )
                    elif entry["kind"] != op.kind or (
                        op.request_id and entry["request_id"] != op.request_id
                    ):
                        self.violations.add(
                            "ledger mismatch",
                            f"{model_id} seq {op.seq_id}: the caller's {op.kind} "
                            f"{op.request_id}, applied {entry['kind']} {entry['request_id']}",
                        )
                    else:
                        self.ledger_summary["ok to the caller, applied once"] += 1
                elif op.outcome == "typed":
                    if entry is None:
                        what = "failed to the caller (typed), not applied"
                    elif entry.get("lost_in_restart"):
                        what = "failed to the caller (typed), lost in the restart"
                    elif entry["ok"]:
                        what = "failed to the caller (typed), applied (its answer was lost)"
                    else:
                        what = "failed to the caller (typed), failed on the server"
                    self.ledger_summary[what] += 1
                else:
                    self.ledger_summary["failed to the caller, untyped"] += 1
            unknown = sorted(set(by_seq) - known - {None})
            if unknown:
                self.violations.add(
                    "applied without a caller", f"{model_id}: seq_ids {unknown[:10]}"
                )


# --------------------------------------------------------------------------- report


def slope_per_minute(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, per minute."""
    if len(points) < 3:
        return None
    t = np.array([p[0] for p in points])
    v = np.array([p[1] for p in points])
    if float(t.max() - t.min()) < 1.0:
        return None
    return float(np.polyfit(t, v, 1)[0] * 60.0)


def resource_rows(samples: list[tuple[float, dict[str, int], dict[str, int]]]) -> list[list[str]]:
    rows = []
    warm = [s for s in samples if s[0] >= min(60.0, samples[-1][0] / 5)] if samples else []
    for who, index in (("client", 1), ("server", 2)):
        for key, unit, scale in (("VmRSS", "MiB", 1 / 1024), ("Threads", "", 1.0)):
            values = [(s[0], s[index][key] * scale) for s in warm if key in s[index]]
            if not values:
                continue
            slope = slope_per_minute(values)
            label = f"{who} {'RSS' if key == 'VmRSS' else 'threads'}"
            fmt = "{:.1f}" if unit else "{:.0f}"
            rows.append(
                [
                    label + (f" ({unit})" if unit else ""),
                    fmt.format(values[0][1]),
                    fmt.format(values[-1][1]),
                    fmt.format(max(v for _, v in values)),
                    "n/a" if slope is None else f"{slope:+.2f}",
                ]
            )
    return rows


def report(soak: Soak, result: dict[str, Any]) -> dict[str, Any]:
    args = soak.args
    kinds = sorted({k for f in soak.server.faults for k in f})
    servers = soak.server.faults
    headers = (
        ["kind", "before restart", "after restart", "total"]
        if len(servers) > 1
        else [
            "kind",
            "injected",
        ]
    )
    fault_rows = []
    for kind in [*kinds, "total"]:
        counts = [sum(f.values()) if kind == "total" else f[kind] for f in servers]
        fault_rows.append([kind, *counts, sum(counts)] if len(servers) > 1 else [kind, *counts])
    c.print_table("Faults injected, by kind (the server's log)", headers, fault_rows)

    ops = collections.Counter(
        (op.kind, op.outcome if op.outcome == "ok" else f"{op.outcome}: {op.error}")
        for op in soak.ops
    )
    c.print_table(
        "Training requests (as their callers saw them)",
        ["request", "outcome", "count"],
        [[kind, outcome, n] for (kind, outcome), n in sorted(ops.items())],
    )
    c.print_table(
        "Training requests against the server's ledger",
        ["what", "count"],
        sorted(soak.ledger_summary.items()),
    )
    c.print_table(
        "Other workloads",
        ["workload", "outcome", "count"],
        [["training runs", k, n] for k, n in sorted(soak.creations.items())]
        + [["samples", k, n] for k, n in sorted(soak.samples.items())]
        + [["REST calls", k, n] for k, n in sorted(soak.rest.items())]
        + [["downloads", k, n] for k, n in sorted(soak.downloads.items())],
    )
    if soak.restart:
        r = soak.restart
        c.print_table(
            "Server restart (SIGKILL, same data dir and port)",
            ["what", "value"],
            [
                ["killed at", f"{r['at_s']:.0f} s"],
                ["training requests in flight then", r.get("in_flight")],
                ["requests lost (accepted, not run)", r.get("restored", {}).get("lost_requests")],
                ["back after", f"{r.get('down_s', 0):.1f} s"],
                ["restored", json.dumps(r.get("restored", {}))],
                ["models before / after", f"{r.get('models_before')} / {r.get('models_after')}"],
                [
                    "sessions before / after",
                    f"{r.get('sessions_before')} / {r.get('sessions_after')}",
                ],
            ],
        )
    checked = [cl for cl in soak.closes if cl["checked"]]
    c.print_table(
        f"Resources every {args.sample_every:g} s (after a warm-up; slope by least squares)",
        ["what", "start", "end", "max", "slope / min"],
        resource_rows(soak.resources),
    )
    c.print_table(
        "Resources between sampling waves (each wave's client closed: the floor a leak raises)",
        ["what", "start", "end", "max", "slope / min"],
        resource_rows(soak.floors),
    )
    waits = {k: round(v, 1) for k, v in sorted(soak.max_wait.items())}
    invariants = [
        (
            "training: applied once, in order, or failed typed",
            [
                "applied twice",
                "applied out of order",
                "lost silently",
                "ledger mismatch",
                "applied without a caller",
            ],
        ),
        (
            "every call answered or failed with a typed error",
            ["untyped error", "malformed sample", "download incomplete"],
        ),
        (
            "no future outlived its bound",
            [
                "future outlived its bound",
                "close() outlived its bound",
                "download outlived its bound",
            ],
        ),
        ("no request after close()", ["request sent after close()", "close() raised"]),
        ("no client thread left after close()", ["client thread left after close()"]),
        ("server: no internal error, clean exit", ["server internal error", "server exit"]),
    ]
    rows = []
    for label, names in invariants:
        broken = sum(soak.violations.counts[n] for n in names)
        rows.append([label, "held" if not broken else f"BROKEN ({broken})"])
    c.print_table("Invariants", ["invariant", "result"], rows)
    for name, examples in soak.violations.examples.items():
        print(f"\n{name}:")
        for example in examples:
            print(f"  - {example}")
    print(
        f"\ncloses checked for late requests: {len(checked)} of {len(soak.closes)}"
        f" (the others overlapped the restart); longest result() waits: {waits}"
    )
    load = result["load_before"], result["load_after"]
    mean_load = sum(soak.load) / len(soak.load) if soak.load else float("nan")
    print(
        f"load average (1/5/15 min) before: {'/'.join(f'{x:.2f}' for x in load[0])}, "
        f"after: {'/'.join(f'{x:.2f}' for x in load[1])}; 1-min load during the run: "
        f"mean {mean_load:.2f}, max {max(soak.load, default=float('nan')):.2f}; "
        f"{os.cpu_count()} CPUs"
    )
    print(f"server log: {soak.server.log_path}; client log: {soak.workdir / 'client.log'}")
    if soak.soak_errors:
        print("\nsoak errors (the soak itself failed):")
        for error in soak.soak_errors:
            print(f"  - {error}")
    return {
        "seed": args.seed,
        "minutes": args.minutes,
        "fault_rate": args.fault_rate,
        "faults": [dict(f) for f in soak.server.faults],
        "training": {f"{k[0]} {k[1]}": n for k, n in ops.items()},
        "ledger": dict(soak.ledger_summary),
        "samples": dict(soak.samples),
        "rest": dict(soak.rest),
        "downloads": dict(soak.downloads),
        "restart": soak.restart,
        "resources": resource_rows(soak.resources),
        "resources_between_waves": resource_rows(soak.floors),
        "invariants": dict(rows),
        "violations": {k: soak.violations.examples[k] for k in soak.violations.counts},
        "load": load,
        "load_during": {"mean": mean_load, "max": max(soak.load, default=None)},
        "soak_errors": soak.soak_errors,
    }


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/soak.py",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--minutes", type=float, default=5.0, help="how long (default 5)")
    parser.add_argument(
        "--seed", type=int, default=1, help="seed of the fault plan and the workloads (default 1)"
    )
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=1.0,
        help="multiply every fault probability by this (default 1; 0 = no faults)",
    )
    parser.add_argument(
        "--no-restart", dest="restart", action="store_false", help="do not kill the server"
    )
    parser.add_argument(
        "--fanout", type=int, default=300, help="samples in flight per wave (default 300)"
    )
    parser.add_argument(
        "--stall-timeout", type=float, default=60.0, help="the clients' stall timeout (default 60)"
    )
    parser.add_argument(
        "--result-timeout",
        type=float,
        default=150.0,
        help="timeout of every result() call, the bound checked (default 150)",
    )
    parser.add_argument(
        "--save-every", type=int, default=10, help="steps between save_state (default 10)"
    )
    parser.add_argument(
        "--step-interval",
        type=float,
        default=0.3,
        help="pause between training steps, s (default 0.3)",
    )
    parser.add_argument(
        "--wave-pause", type=float, default=2.0, help="pause between sampling waves, s (default 2)"
    )
    parser.add_argument(
        "--rest-interval",
        type=float,
        default=10.0,
        help="pause between REST rounds, s (default 10)",
    )
    parser.add_argument(
        "--sample-every", type=float, default=5.0, help="resource sampling period, s (default 5)"
    )
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (data, logs)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--print-plan", action="store_true", help="print the fault spec of each server and exit"
    )
    return parser.parse_args(argv)


@contextlib.contextmanager
def client_logging(path: Path) -> Iterator[None]:
    """tinker_lite's log (retries, warnings) goes to a file, not the console."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    specs = [fault_spec(args.seed, i, args.fault_rate) for i in range(2 if args.restart else 1)]
    if args.print_plan:
        for i, spec in enumerate(specs):
            print(f"# server {i}: fault plan {plan_digest(spec)}")
            print(spec.replace(";", "\n"))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="tinker-lite-soak-"))
    print(
        f"soak: {args.minutes:g} min, seed {args.seed}, fault rate {args.fault_rate:g}, "
        f"restart {'once' if args.restart else 'never'}, fan-out {args.fanout}; "
        f"load average {'/'.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
    )
    print(
        "fault plans: "
        + ", ".join(f"server {i} {plan_digest(spec)}" for i, spec in enumerate(specs))
        + " (same seed, same plan; --print-plan shows the rules)"
    )
    soak = Soak(args, workdir)
    code = 2
    try:
        with client_logging(workdir / "client.log"):
            result = soak.run()
        summary = report(soak, result)
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=2, default=str))
        broken = sum(soak.violations.counts.values())
        code = 2 if soak.soak_errors else 1 if broken else 0
        print(f"\nsoak: {'PASSED' if code == 0 else 'FAILED'} (exit {code})")
    except Exception as exc:
        print(f"soak: the soak itself failed: {error_name(exc)}: {exc}", file=sys.stderr)
        soak.server.stop()
        code = 2
    finally:
        if args.keep or code != 0:
            print(f"work dir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
