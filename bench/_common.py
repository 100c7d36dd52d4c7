"""Shared helpers of the benchmark scripts: process metrics, statistics, tables, results, drivers.

Stdlib only at import time: bench/official_driver.py imports this module from the official SDK's
virtualenv, where tinker_lite is not installed.

Every figure is measured in child processes, one per client, so each client's CPU time
(``resource.getrusage(RUSAGE_SELF)``) and peak RSS (``VmHWM`` of ``/proc/self/status``) are its
own; the local server always runs in another process.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"

OFFICIAL_VERSION = "0.38.0"
# The official SDK checks that a key starts with "tml-"; the local server runs without a key.
BENCH_API_KEY = "tml-local-bench"
# Marker of the one line of a child's stdout that carries its JSON report.
REPORT_MARKER = "BENCH-REPORT "

LITE = "tinker_lite"
OFFICIAL = "official"


def ensure_worktree_importable() -> None:
    """Make ``import tinker_lite`` find the work tree in a benchmark's parent process.

    Not called by official_driver.py, which must never see tinker_lite.
    """
    import importlib.util

    if importlib.util.find_spec("tinker_lite") is None:
        sys.path.insert(0, str(REPO_DIR))


# --------------------------------------------------------------------------- process metrics


def proc_status() -> dict[str, int]:
    """Return the numeric fields of /proc/self/status that the benchmarks use (kB values in kB)."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS", "Threads"):
                    out[key] = int(value.split()[0])
    except OSError:
        # Not Linux: fall back to ru_maxrss (kB on Linux, bytes on macOS).
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out["VmHWM"] = maxrss // 1024 if sys.platform == "darwin" else maxrss
        out["Threads"] = threading.active_count()
    return out


def cpu_times() -> tuple[float, float]:
    """Return (user, sys) CPU seconds of this process so far (getrusage RUSAGE_SELF)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime, ru.ru_stime


class Span:
    """Measure wall time (perf_counter) and this process's CPU time over a ``with`` block."""

    wall: float
    cpu_user: float
    cpu_sys: float

    def __enter__(self) -> Span:
        self._u0, self._s0 = cpu_times()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._t0
        u1, s1 = cpu_times()
        self.cpu_user = u1 - self._u0
        self.cpu_sys = s1 - self._s0

    @property
    def cpu(self) -> float:
        """User + system CPU seconds spent in the block."""
        return self.cpu_user + self.cpu_sys

    def as_dict(self) -> dict[str, float]:
        """Return the figures as a JSON-able dict."""
        return {
            "wall_s": self.wall,
            "cpu_s": self.cpu,
            "cpu_user_s": self.cpu_user,
            "cpu_sys_s": self.cpu_sys,
        }


class ThreadPeak:
    """Track the peak OS thread count of this process (``Threads:`` in /proc/self/status).

    A daemon thread samples every ``interval`` seconds; it counts itself, so both clients'
    figures include the same one extra thread.
    """

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-thread-peak", daemon=True)

    def sample(self) -> None:
        """Take one reading now (also called by the benchmark loops at interesting moments)."""
        n = proc_status().get("Threads", threading.active_count())
        self.peak = max(self.peak, n)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> ThreadPeak:
        self._thread.start()
        self.sample()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample()
        self._stop.set()
        self._thread.join()


def process_report() -> dict[str, Any]:
    """Return whole-process figures of this child: total CPU, peak RSS, threads now."""
    user, system = cpu_times()
    status = proc_status()
    return {
        "process_cpu_s": user + system,
        "vm_hwm_kib": status.get("VmHWM", 0),
        "threads_at_exit": status.get("Threads", 0),
        "python": platform.python_version(),
    }


def emit_report(report: Mapping[str, Any]) -> None:
    """Print a child's JSON report as the marked line its parent looks for."""
    sys.stdout.write(REPORT_MARKER + json.dumps(report, default=_json_default) + "\n")
    sys.stdout.flush()


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


# --------------------------------------------------------------------------- children


def official_venv() -> Path:
    """Return where bench/setup_official.sh installs (or installed) the official SDK."""
    env = os.environ.get("TINKER_OFFICIAL_VENV")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "tinker-lite-bench" / "official-venv"


def official_python() -> str | None:
    """Return the official venv's python when the pinned SDK is installed there, else None."""
    venv = official_venv()
    python = venv / "bin" / "python"
    if python.exists() and (venv / f".tinker-{OFFICIAL_VERSION}-installed").exists():
        return str(python)
    return None


def official_missing_note() -> str:
    """Return the line printed when the official venv is absent."""
    return (
        f"official SDK venv not found at {official_venv()}: printing tinker_lite's figures alone "
        "(run `bash bench/setup_official.sh` to compare)"
    )


_COMPILED: list[bool] = []


def compile_worktree() -> None:
    """Compile the work tree's package once per run, as pip compiles an installed package.

    The bytecode goes to the usual ``__pycache__`` folders (git ignores them); a
    ``PYTHONPYCACHEPREFIX`` would hide the venv's own compiled dependencies from the children.
    """
    if not _COMPILED:
        env = {k: v for k, v in os.environ.items() if k not in _BYTECODE_ENV}
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(REPO_DIR / "tinker_lite")],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        _COMPILED.append(True)


_BYTECODE_ENV = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")


def child_env(*, worktree_on_path: bool, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment for a client child: no inherited Tinker settings, bench key set.

    Only tinker_lite's children get the work tree on their path; the official driver must
    never see tinker_lite.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINKER_", "PYTHON"))}
    env["TINKER_API_KEY"] = BENCH_API_KEY
    if worktree_on_path:
        # The children run from bench/, so the work tree is put on the path explicitly.
        env["PYTHONPATH"] = str(REPO_DIR)
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if worktree_on_path:
        # An installed package has its bytecode compiled (pip does it): so has the work tree.
        compile_worktree()
    if extra:
        env.update(extra)
    return env


def run_child(
    argv: Sequence[str],
    *,
    lite: bool,
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 900.0,
) -> dict[str, Any]:
    """Run a driver process and return its JSON report.

    On failure the report is ``{"ok": False, "error": ..., "stderr_tail": ...}`` so a
    benchmark can print the other client's figures and say what went wrong.
    """
    try:
        proc = subprocess.run(
            list(argv),
            env=child_env(worktree_on_path=lite, extra=extra_env),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(BENCH_DIR),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s", "stderr_tail": _tail(exc)}
    report: dict[str, Any] | None = None
    for line in proc.stdout.splitlines():
        if line.startswith(REPORT_MARKER):
            report = json.loads(line[len(REPORT_MARKER) :])
    if report is None:
        return {
            "ok": False,
            "error": f"exit status {proc.returncode}, no report",
            "stderr_tail": proc.stderr[-3000:],
        }
    report.setdefault("ok", proc.returncode == 0)
    if proc.returncode != 0 and "error" not in report:
        report["error"] = f"exit status {proc.returncode}"
    if not report.get("ok"):
        report["stderr_tail"] = proc.stderr[-3000:]
    return report


def _tail(exc: subprocess.TimeoutExpired) -> str:
    err = exc.stderr
    if isinstance(err, bytes):
        err = err.decode("utf-8", "replace")
    return (err or "")[-3000:]


def lite_child_argv(script: str, *args: str) -> list[str]:
    """Return the argv that runs ``bench/<script> --child ...`` with this interpreter."""
    return [sys.executable, str(BENCH_DIR / script), "--child", *args]


def official_child_argv(command: str, *args: str) -> list[str] | None:
    """Return the argv that runs official_driver.py in the official venv, or None if absent."""
    python = official_python()
    if python is None:
        return None
    return [python, str(BENCH_DIR / "official_driver.py"), command, *args]


# --------------------------------------------------------------------------- local server


@contextlib.contextmanager
def local_server(
    *,
    stub_model: bool = True,
    extra: Sequence[str] = (),
    config: Mapping[str, Any] | None = None,
) -> Iterator[str]:
    """Start ``python -m tinker_lite.local serve --port 0`` in its own process; yield its base URL.

    The server prints the URL it listens on; it runs without an API key so both clients'
    bench key is accepted, and its CPU is never counted for either client. ``config``
    overrides fields of the server's ``client/config`` answer (through bench/serve_local.py).
    """
    argv = [sys.executable, "-u", "-m", "tinker_lite.local", "serve", "--port", "0"]
    argv += ["--log-level", "WARNING"]
    if config:
        argv = [sys.executable, "-u", str(BENCH_DIR / "serve_local.py"), "--port", "0"]
        argv += ["--config", json.dumps(dict(config))]
    if stub_model:
        argv.append("--stub-model")
    argv.extend(extra)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=str(REPO_DIR),
    )
    assert proc.stdout is not None
    base_url = None
    seen: list[str] = []
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        match = re.search(r"https?://[0-9A-Za-z.\-\[\]:]+(:\d+)?\S*", line)
        if match:
            base_url = match.group(0).rstrip("/.,")
            break
    if base_url is None:
        proc.kill()
        proc.wait()
        raise RuntimeError("local server did not print its URL:\n" + "".join(seen[-20:]))
    # Keep draining its output so the server never blocks on a full pipe.
    drain = threading.Thread(target=_drain, args=(proc,), daemon=True)
    drain.start()
    try:
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _drain(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    for _ in proc.stdout:
        pass


# --------------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """Return the q-th percentile (0..100) of values with linear interpolation."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Return median, min, max, relative spread and the samples of repeated measurements."""
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return {"n": 0, "median": math.nan, "min": math.nan, "max": math.nan, "samples": []}
    med = statistics.median(vals)
    return {
        "n": len(vals),
        "median": med,
        "min": min(vals),
        "max": max(vals),
        "spread_pct": (max(vals) - min(vals)) / med * 100.0 if med else 0.0,
        "samples": vals,
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """Return numerator / denominator, or None when either is missing or the divisor is 0."""
    if numerator is None or denominator is None:
        return None
    if math.isnan(numerator) or math.isnan(denominator) or denominator == 0:
        return None
    return numerator / denominator


def time_repeated(fn: Any, *, repeat: int, warmup: int = 1) -> list[float]:
    """Call fn() warmup + repeat times; return the CPU time (user + sys) of each timed call.

    ``time.process_time``: the work timed here is single-threaded, so CPU time is what it
    costs, without the noise of other processes on a shared machine.
    """
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return out


# --------------------------------------------------------------------------- formatting


def fmt_time(seconds: float | None) -> str:
    """Format a duration with a unit that keeps 3 significant digits."""
    if seconds is None or math.isnan(seconds):
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.3g} s" if seconds < 100 else f"{seconds:.0f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def fmt_bytes(n: float | None) -> str:
    """Format a byte count in MiB (or KiB below 1 MiB)."""
    if n is None or math.isnan(n):
        return "-"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / 1024:.0f} KiB"


def fmt_kib(kib: float | None) -> str:
    """Format a /proc size (kB) in MiB."""
    return "-" if kib is None else fmt_bytes(kib * 1024)


def fmt_ratio(r: float | None) -> str:
    """Format a ratio as e.g. ``12.3x``."""
    if r is None or math.isnan(r):
        return "-"
    return f"{r:.3g}x" if r < 100 else f"{r:.0f}x"


def fmt_stat(stat: Mapping[str, Any], fmt: Any = fmt_time) -> str:
    """Format a summarize() result as ``median (min..max)``; the median alone when n == 1."""
    if not stat or not stat.get("n"):
        return "-"
    if stat["n"] == 1:
        return str(fmt(stat["median"]))
    return f"{fmt(stat['median'])} ({fmt(stat['min'])}..{fmt(stat['max'])})"


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a table with aligned columns (first column left-aligned, the rest right-aligned)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        parts = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        return "  ".join(parts).rstrip()

    print()
    print(title)
    print("=" * len(title))
    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))
    sys.stdout.flush()


def print_notes(notes: Sequence[str]) -> None:
    """Print the notes under a table."""
    for note in notes:
        print(f"  note: {note}")
    sys.stdout.flush()


def goal_line(name: str, met: bool | None, detail: str) -> dict[str, Any]:
    """Return a goal verdict (met True/False, or None when it could not be judged)."""
    verdict = "n/a" if met is None else ("MET" if met else "MISSED")
    return {"goal": name, "met": met, "verdict": verdict, "detail": detail}


def print_goals(goals: Sequence[Mapping[str, Any]]) -> None:
    """Print goal verdicts under a table."""
    for g in goals:
        print(f"  goal: {g['goal']}: {g['verdict']} ({g['detail']})")
    sys.stdout.flush()


# --------------------------------------------------------------------------- results


def machine_info() -> dict[str, Any]:
    """Return a description of the machine the figures were taken on."""
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_results(figure: str, data: Mapping[str, Any]) -> Path:
    """Write bench/results/<figure>.json and return its path.

    A ``--quick`` run (every entry point takes the flag) writes to bench/results/quick/
    instead, so the README table (bench/readme_table.py) is only ever made from full runs.
    """
    directory = RESULTS_DIR / "quick" if "--quick" in sys.argv[1:] else RESULTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{figure}.json"
    payload = {"figure": figure, "machine": machine_info(), **data}
    path.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n", encoding="utf-8")
    print(f"  results: {path.relative_to(REPO_DIR)}")
    return path


def failure_text(report: Mapping[str, Any]) -> str:
    """Return a one-paragraph description of a failed child report."""
    msg = str(report.get("error", "failed"))
    tail = str(report.get("stderr_tail") or "").strip().splitlines()
    if tail:
        msg += " | " + " / ".join(tail[-3:])
    return msg


# --------------------------------------------------------------------------- client figures


def run_pairs(
    runs: int,
    lite_argv: Sequence[str],
    official_argv: Sequence[str] | None,
    *,
    timeout: float = 900.0,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, str]]]:
    """Run the two clients' children ``runs`` times in alternation.

    Returns the successful reports per client and, per failed client, its failure text and
    traceback; a client
    that fails once is not run again (its failure is deterministic in practice and retrying
    would only slow the benchmark down).
    """
    reports: dict[str, list[dict[str, Any]]] = {LITE: [], OFFICIAL: []}
    failures: dict[str, dict[str, str]] = {}
    for _ in range(runs):
        plan: list[tuple[str, Sequence[str], bool]] = [(LITE, lite_argv, True)]
        if official_argv is not None:
            plan.append((OFFICIAL, official_argv, False))
        for client, argv, lite in plan:
            if client in failures:
                continue
            report = run_child(argv, lite=lite, timeout=timeout)
            if report.get("ok"):
                reports[client].append(report)
            else:
                failures[client] = {
                    "error": failure_text(report),
                    "traceback": str(report.get("traceback", "")),
                }
    return reports, failures


def dig(report: Mapping[str, Any], path: str) -> Any:
    """Return report["a"]["b"] for path "a.b" (None when missing)."""
    cur: Any = report
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def compare_table(
    reports: Mapping[str, Sequence[Mapping[str, Any]]],
    metrics: Sequence[tuple[str, str, Any]],
) -> tuple[list[list[str]], dict[str, Any], dict[str, float | None]]:
    """Build rows ``label | tinker_lite | official | lite/official`` from child reports.

    ``metrics`` holds (label, report path, formatter). Returns the rows, the per-client stats
    and the ratios tinker_lite / official of the medians (below 1: tinker_lite uses less).
    """
    stats: dict[str, Any] = {LITE: {}, OFFICIAL: {}}
    ratios: dict[str, float | None] = {}
    rows: list[list[str]] = []
    for label, path, fmt in metrics:
        for client in (LITE, OFFICIAL):
            values = [dig(r, path) for r in reports.get(client, [])]
            stats[client][path] = summarize([v for v in values if v is not None])
        lite_med = stats[LITE][path]["median"]
        off_med = stats[OFFICIAL][path]["median"]
        ratios[path] = ratio(lite_med, off_med)
        rows.append(
            [
                label,
                fmt_stat(stats[LITE][path], fmt),
                fmt_stat(stats[OFFICIAL][path], fmt),
                fmt_ratio(ratios[path]),
            ]
        )
    return rows, stats, ratios


def fmt_count(n: float | None) -> str:
    """Format a count."""
    return "-" if n is None or math.isnan(n) else f"{n:.0f}"


# --------------------------------------------------------------------------- client workloads
#
# The same code drives both clients: ``sdk`` is the ``tinker`` module in the official venv and
# ``tinker_lite`` in tinker_lite's children; both expose ServiceClient and ``types`` with the
# official names. Tokens are passed as lists because the official ModelInput.from_ints wants one.


def client_args(parser: Any) -> None:
    """Add the client-workload options to an argparse parser."""
    parser.add_argument("--base-url")
    parser.add_argument("--base-model", default="meta-llama/Llama-3.2-1B")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--datums", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=259)
    parser.add_argument("--case", default="sample")


def client_argv(**options: Any) -> list[str]:
    """Return ``--key value`` arguments for the client-workload options."""
    out: list[str] = []
    for key, value in options.items():
        out += ["--" + key.replace("_", "-"), str(value)]
    return out


PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]


def resolved(client: Any) -> Any:
    """Return the client itself: the official 0.38 ``create_*_client`` return a future of it.

    (Using that future as the client still works there but warns on every call, which would
    slow the official SDK down for no reason.)
    """
    result = getattr(client, "result", None)
    return result() if callable(result) else client


def sampling_workload(sdk: Any, args: Any) -> dict[str, Any]:
    """Figure 3: ``n`` sample() calls (1 sample, 1 token) with at most ``concurrency`` in flight.

    The calls are issued from this one thread, waiting for the oldest future whenever
    ``concurrency`` are outstanding, so every thread counted belongs to the client.
    """
    types = sdk.types
    with Span() as setup:
        service = sdk.ServiceClient(base_url=args.base_url)
        sampler = resolved(service.create_sampling_client(base_model=args.base_model))
        prompt = types.ModelInput.from_ints(PROMPT)
        params = types.SamplingParams(max_tokens=1)
        sampler.sample(prompt=prompt, num_samples=1, sampling_params=params).result()
    rss_base = proc_status().get("VmRSS", 0)
    bad = 0
    with ThreadPeak() as peak, Span() as span:
        inflight: collections.deque[Any] = collections.deque()
        for i in range(args.n):
            if len(inflight) >= args.concurrency:
                bad += _check_sample(inflight.popleft().result())
            inflight.append(sampler.sample(prompt=prompt, num_samples=1, sampling_params=params))
            if i % 50 == 0:
                peak.sample()
        while inflight:
            bad += _check_sample(inflight.popleft().result())
    return {
        "setup": setup.as_dict(),
        "run": span.as_dict(),
        "peak_threads": peak.peak,
        "rss_base_kib": rss_base,
        "bad_results": bad,
        "_close": service,
    }


def _check_sample(result: Any) -> int:
    return 0 if result.sequences and len(result.sequences[0].tokens) == 1 else 1


def training_data(sdk: Any, args: Any) -> list[Any]:
    """Return ``datums`` Datums of ``tokens`` tokens (cross_entropy inputs), seeded."""
    import numpy as np

    types = sdk.types
    rng = np.random.default_rng(2)
    data = []
    for _ in range(args.datums):
        tokens = rng.integers(0, args.vocab, args.tokens + 1, dtype=np.int64)
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1].tolist()),
                loss_fn_inputs={
                    "target_tokens": tokens[1:],
                    "weights": np.ones(args.tokens, dtype=np.float32),
                },
            )
        )
    return data


def training_workload(sdk: Any, args: Any) -> dict[str, Any]:
    """Figure 4: ``steps`` pipelined forward_backward + optim_step steps.

    Step i+1 is submitted before the results of step i are awaited. The data is built once,
    before the clock starts (building is figure 2's subject); one warm-up step is not counted.
    """
    # The data is built with numpy, imported first as a training script does at its top: the
    # per-datum memory is then the client's, and OpenBLAS's worker threads, which spin for a
    # while after numpy loads, are idle again before the clock starts.
    import numpy.random  # noqa: F401

    types = sdk.types
    with Span() as setup:
        service = sdk.ServiceClient(base_url=args.base_url)
        trainer = resolved(service.create_lora_training_client(base_model=args.base_model, rank=8))
        rss_base = proc_status().get("VmRSS", 0)
        data = training_data(sdk, args)
        adam = types.AdamParams(learning_rate=1e-4)
        trainer.forward_backward(data, "cross_entropy").result()
        trainer.optim_step(adam).result()
    with ThreadPeak() as peak, Span() as span:
        previous: tuple[Any, Any] | None = None
        for _ in range(args.steps):
            fb = trainer.forward_backward(data, "cross_entropy")
            opt = trainer.optim_step(adam)
            if previous is not None:
                previous[0].result()
                previous[1].result()
            previous = (fb, opt)
        assert previous is not None
        last = previous[0].result()
        previous[1].result()
    if len(last.loss_fn_outputs) != args.datums:
        raise RuntimeError(f"forward_backward returned {len(last.loss_fn_outputs)} outputs")
    return {
        "setup": setup.as_dict(),
        "run": span.as_dict(),
        "peak_threads": peak.peak,
        "rss_base_kib": rss_base,
        "_close": service,
    }


def run_client_command(sdk_name: str, workload: Any, args: Any) -> int:
    """Import the SDK, run one workload, print its report (a failure is reported, not raised)."""
    import importlib
    import traceback

    client = LITE if sdk_name == "tinker_lite" else OFFICIAL
    try:
        sdk = importlib.import_module(sdk_name)
        report = workload(sdk, args)
    except BaseException as exc:
        emit_report(
            {
                "ok": False,
                "client": client,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-4000:],
                **process_report(),
            }
        )
        return 1
    service = report.pop("_close", None)
    emit_report(
        {
            "ok": True,
            "client": client,
            "version": getattr(sdk, "__version__", "?"),
            **report,
            **process_report(),
        }
    )
    if service is not None:
        with contextlib.suppress(Exception):
            service.close()
    return 0


# --------------------------------------------------------------------------- goals and scaling


def ratio_goal(name: str, value: float | None, limit: float, what: str) -> dict[str, Any]:
    """Return the verdict of ``tinker_lite / official <= limit`` for one measured ratio."""
    met = None if value is None else value <= limit
    return goal_line(f"{name} <= {limit:g}x", met, f"{what} {fmt_ratio(value)}")


def median_of(reports: Sequence[Mapping[str, Any]], path: str) -> float | None:
    """Return the median of ``path`` over child reports (None when no report has it)."""
    values = [float(v) for v in (dig(r, path) for r in reports) if v is not None]
    return statistics.median(values) if values else None


def growth_kib(report: Mapping[str, Any]) -> float | None:
    """Return how far the process's peak RSS rose above its RSS after setup (kB)."""
    base = report.get("rss_base_kib")
    peak = report.get("vm_hwm_kib")
    if not base or not peak:
        return None
    return max(0.0, float(peak) - float(base))


def per_unit(value: float | None, units: float) -> float | None:
    """Return value / units (None when value is missing)."""
    return None if value is None or not units else value / units
