"""Rollouts on Ray (examples/rl_ray.py): throughput with 1, 2 and 4 workers against one process.

Also the client's CPU per sample in a worker, and a worker's memory with tinker_lite and with the
official SDK::

    python bench/bench_ray.py [--quick]

Throughput (figure R1): the example's ``RolloutWorker`` and ``run_step``, each round handing
every worker the pickled SamplingClient (a new copy per round, as each step of the example
does) and ``PROBLEMS`` problems x ``GROUP`` answers split among the workers, against the local
server in its instant stub-model mode (its own process). "one process" runs the same
``rollout`` on a plain instance in the driver. Two loads: sampling only (samples/s) and with the
example's CPU-bound grading of every answer (environment steps/s). A warm-up round (each worker
connects once) is not timed. The client CPU per sample is the workers' ``time.process_time()``
over the sampling phase of the sampling-only rounds. The local cluster has 4 logical CPUs so 4
actors fit; the machine may have fewer cores (the table says how many).

Memory (figure R2), in the same cluster and run: a worker that unpickles the SamplingClient
each round and samples, the same code for both clients (``SamplingWorker``), then its
``VmRSS``/``VmHWM``/threads from ``/proc``; an idle Ray worker of the same interpreter is the
floor, so "above idle" is what the client adds. The official SDK runs in its own virtualenv
with the same Ray (``$TINKER_OFFICIAL_RAY_VENV``, default
``~/.cache/tinker-lite-bench/official-ray-venv``: ``tinker==0.38.0`` and this Ray version,
created on first use; the benchmarks' official venv is left as it is) through Ray's
``py_executable``; its pickled client comes from an official driver process. The example's
``RolloutWorker`` (tinker_lite, with its tokenizer and grading) is listed too.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib.util
import os
import pickle
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import _common as c

MODEL = "tinker-lite/tiny-64"
PROBLEMS = 32
GROUP = 4
MAX_TOKENS = 8
GRADE_WORK = 100_000  # grader iterations per answer (about 5 ms of CPU here)
WORKER_COUNTS = (1, 2, 4)
FLAGS = {"sample_join_sampling_session": True}
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}

# Run with the official virtualenv's python: an official SamplingClient, pickled, on stdout;
# the process (and its session) lives until stdin closes.
OFFICIAL_DRIVER = """
import base64, pickle, sys, tinker
service = tinker.ServiceClient(base_url=sys.argv[1])
sampler = service.create_sampling_client(base_model=sys.argv[2])
sampler = sampler.result() if callable(getattr(sampler, "result", None)) else sampler
print(base64.b64encode(pickle.dumps(sampler)).decode(), flush=True)
sys.stdin.read()
"""


def proc_figures(pid: int) -> dict[str, int]:
    """``VmRSS``, ``VmHWM`` (kB) and ``Threads`` of a process on this machine."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
    return out


class IdleWorker:
    """A Ray worker that imports no client: the floor of a worker's memory."""

    def pid(self) -> int:
        """This worker's process id."""
        return os.getpid()


class SamplingWorker:
    """Unpickles the SamplingClient each round and samples, with either client (same code)."""

    def __init__(self, sdk: str) -> None:
        self.sdk = importlib.import_module(sdk)

    def pid(self) -> int:
        """This worker's process id."""
        return os.getpid()

    def run(self, blob: bytes, prompts: list[list[int]], group: int, rounds: int) -> dict[str, Any]:
        """``rounds`` rounds of every prompt, ``group`` answers each; CPU seconds and samples."""
        types = self.sdk.types
        samples = 0
        cpu = time.process_time()
        for r in range(rounds):
            sampler = pickle.loads(blob)
            params = types.SamplingParams(max_tokens=MAX_TOKENS, temperature=1.0, seed=r)
            futures = [
                sampler.sample(
                    prompt=types.ModelInput.from_ints(p), num_samples=group, sampling_params=params
                )
                for p in prompts
            ]
            samples += sum(len(f.result().sequences) for f in futures)
        return {"cpu_s": time.process_time() - cpu, "samples": samples}


def load_example() -> ModuleType:
    """examples/rl_ray.py as a module (pickled by value into the workers, as in the tests)."""
    spec = importlib.util.spec_from_file_location("bench_rl_ray", c.REPO_DIR / "examples/rl_ray.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def official_ray_python(ray_version: str, notes: list[str]) -> str | None:
    """The python of a venv with the official SDK and this Ray version (created when missing)."""
    venv = Path(
        os.environ.get("TINKER_OFFICIAL_RAY_VENV")
        or Path.home() / ".cache" / "tinker-lite-bench" / "official-ray-venv"
    )
    python = venv / "bin" / "python"
    stamp = venv / f".tinker-{c.OFFICIAL_VERSION}-ray-{ray_version}"
    if stamp.exists():
        return str(python)
    pins = [f"tinker=={c.OFFICIAL_VERSION}", f"ray=={ray_version}"]
    print(f"  setting up {venv} ({', '.join(pins)}) for the official worker ...", flush=True)
    try:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *pins], check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        notes.append(f"official worker not measured: could not install {pins} ({e})")
        return None
    stamp.touch()
    return str(python)


@contextlib.contextmanager
def official_pickle(python: str, base_url: str) -> Iterator[bytes]:
    """A SamplingClient pickled by the official SDK (its driver process kept alive meanwhile)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINKER_", "PYTHON"))}
    env["TINKER_API_KEY"] = c.BENCH_API_KEY
    argv = [python, "-c", OFFICIAL_DRIVER, base_url, MODEL]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env) as proc:
        assert proc.stdout is not None
        assert proc.stdin is not None
        line = proc.stdout.readline()
        if not line.strip():
            raise RuntimeError(f"the official driver printed no client (exit {proc.wait()})")
        try:
            yield base64.b64decode(line)
        finally:
            proc.stdin.close()


def throughput(
    ray: Any, example: Any, sampler: Any, prompts: list[list[int]], rounds: int
) -> dict[str, Any]:
    """Samples/s and CPU per sample of each configuration, for each load (one run)."""
    items = [(i, (10 + i, 20 + i), p) for i, p in enumerate(prompts)]
    out: dict[str, Any] = {}
    for load, work in (("sample", 0), ("grade", GRADE_WORK)):
        plain = example.RolloutWorker(work)
        plain.rollout(sampler, items, GROUP, MAX_TOKENS, 0)
        cpu = 0.0
        start = time.perf_counter()
        for r in range(rounds):
            cpu += plain.rollout(sampler, items, GROUP, MAX_TOKENS, r)["cpu_sample_s"]
        wall = time.perf_counter() - start
        samples = rounds * len(items) * GROUP
        out[f"{load}/0"] = {"per_s": samples / wall, "cpu_per_sample_s": cpu / samples}
        actor = ray.remote(num_cpus=1)(example.RolloutWorker)
        for n in WORKER_COUNTS:
            workers = [actor.remote(work) for _ in range(n)]
            shards = [items[w::n] for w in range(n)]
            example.run_step(workers, sampler, shards, GROUP, MAX_TOKENS, 0)  # connect
            cpu = 0.0
            start = time.perf_counter()
            for r in range(rounds):
                results, _ = example.run_step(workers, sampler, shards, GROUP, MAX_TOKENS, r)
                cpu += sum(result["cpu_sample_s"] for result in results)
            wall = time.perf_counter() - start
            out[f"{load}/{n}"] = {"per_s": samples / wall, "cpu_per_sample_s": cpu / samples}
            if load == "sample" and n == WORKER_COUNTS[-1]:
                out["rollout_worker"] = proc_figures(ray.get(workers[0].pid.remote()))
            for worker in workers:
                ray.kill(worker)
    return out


def memory(
    ray: Any,
    blobs: dict[str, bytes],
    pythons: dict[str, str],
    prompts: list[list[int]],
    rounds: int,
) -> dict[str, Any]:
    """Each client's SamplingWorker and an idle worker of its interpreter (one run)."""
    out: dict[str, Any] = {}
    for client, blob in blobs.items():
        options = (
            {"runtime_env": {"py_executable": pythons[client]}} if client == c.OFFICIAL else {}
        )
        idle = ray.remote(num_cpus=1)(IdleWorker).options(**options).remote()
        out[f"{client}/idle"] = proc_figures(ray.get(idle.pid.remote()))
        ray.kill(idle)
        sdk = "tinker" if client == c.OFFICIAL else "tinker_lite"
        worker = ray.remote(num_cpus=1)(SamplingWorker).options(**options).remote(sdk)
        ray.get(worker.run.remote(blob, prompts, GROUP, 1))  # connects once
        measured = ray.get(worker.run.remote(blob, prompts, GROUP, rounds))
        figures = proc_figures(ray.get(worker.pid.remote()))
        out[client] = {**figures, "cpu_per_sample_s": measured["cpu_s"] / measured["samples"]}
        ray.kill(worker)
    return out


def median(runs: list[dict[str, Any]], *path: str) -> float | None:
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            values.append(float(value))
    return statistics.median(values) if values else None


def spread(runs: list[dict[str, Any]], fmt: Any, *path: str) -> str:
    values = [median([run], *path) for run in runs]
    found = [v for v in values if v is not None]
    if not found:
        return "-"
    middle = fmt(statistics.median(found))
    return middle if len(found) == 1 else f"{middle} ({fmt(min(found))}..{fmt(max(found))})"


def above_idle(
    runs: list[dict[str, Any]], key: str, idle_runs: list[dict[str, Any]], idle_key: str
) -> float | None:
    """Median over runs of a worker's VmRSS less the idle worker's of the same run."""
    values = [
        run[key]["VmRSS"] - idle[idle_key]["VmRSS"]
        for run, idle in zip(runs, idle_runs, strict=True)
        if key in run and idle_key in idle
    ]
    return statistics.median(values) if values else None


def fmt_rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}/s"


def run(quick: bool) -> dict[str, Any]:
    """Start the server and a local Ray cluster; measure; print and write results."""
    notes: list[str] = []
    try:
        for name, value in RAY_ENV.items():
            os.environ.setdefault(name, value)
        import ray
    except ImportError:
        print("  ray is not installed: pip install 'tinker-lite[ray]' (or make test-ray) first")
        return {}
    c.ensure_worktree_importable()
    import tinker_lite as tinker

    runs, rounds = (1, 2) if quick else (3, 5)
    load = os.getloadavg()
    example = load_example()
    pythons = {c.LITE: sys.executable}
    official = official_ray_python(ray.__version__, notes)
    if official is not None:
        pythons[c.OFFICIAL] = official
    for name in [n for n in os.environ if n.startswith("TINKER_")]:
        del os.environ[name]
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    through: list[dict[str, Any]] = []
    mem: list[dict[str, Any]] = []
    try:
        with (
            c.local_server(stub_model=True, config=FLAGS) as base_url,
            tinker.ServiceClient(base_url=base_url) as service,
        ):
            sampler = service.create_sampling_client(base_model=MODEL).result()
            tokenizer = sampler.get_tokenizer()
            prompts = [example.prompt_tokens(tokenizer, (10 + i, 20 + i)) for i in range(PROBLEMS)]
            with contextlib.ExitStack() as stack:
                blobs = {c.LITE: pickle.dumps(sampler)}
                if official is not None:
                    blobs[c.OFFICIAL] = stack.enter_context(official_pickle(official, base_url))
                for _ in range(runs):
                    through.append(throughput(ray, example, sampler, prompts, rounds))
                    mem.append(memory(ray, blobs, pythons, prompts, rounds))
    finally:
        ray.shutdown()

    cores = os.cpu_count()
    columns = ["one process", *(f"Ray, {n} worker{'s' * (n > 1)}" for n in WORKER_COUNTS)]
    counts = (0, *WORKER_COUNTS)
    rows = [
        [label, *(spread(through, fmt, f"{load}/{n}", key) for n in counts)]
        for label, fmt, load, key in (
            ("samples/s (sampling only)", fmt_rate, "sample", "per_s"),
            ("env steps/s (sampling + grading)", fmt_rate, "grade", "per_s"),
            ("client CPU per sample (in the worker)", c.fmt_time, "sample", "cpu_per_sample_s"),
        )
    ]
    speedups = [
        ["env steps/s vs one process", "1x"]
        + [
            c.fmt_ratio(
                c.ratio(median(through, f"grade/{n}", "per_s"), median(through, "grade/0", "per_s"))
            )
            for n in WORKER_COUNTS
        ]
    ]
    c.print_table(
        f"Figure R1: rollouts of {PROBLEMS} problems x {GROUP} answers ({MAX_TOKENS} tokens, stub "
        f"model) per round, {rounds} rounds; median of {runs} runs (min..max); {cores} cores, "
        "4 logical Ray CPUs",
        ["", *columns],
        rows + speedups,
    )
    mem_rows = []
    for client, label in ((c.LITE, "tinker_lite"), (c.OFFICIAL, f"official {c.OFFICIAL_VERSION}")):
        if not any(client in m for m in mem):
            continue
        mem_rows.append(
            [
                f"{label}: SamplingWorker",
                spread(mem, c.fmt_kib, client, "VmRSS"),
                spread(mem, c.fmt_kib, f"{client}/idle", "VmRSS"),
                c.fmt_kib(above_idle(mem, client, mem, f"{client}/idle")),
                spread(mem, c.fmt_kib, client, "VmHWM"),
                spread(mem, c.fmt_count, client, "Threads"),
                spread(mem, c.fmt_count, f"{client}/idle", "Threads"),
                spread(mem, c.fmt_time, client, "cpu_per_sample_s"),
            ]
        )
    mem_rows.append(
        [
            "tinker_lite: the example's RolloutWorker",
            spread(through, c.fmt_kib, "rollout_worker", "VmRSS"),
            spread(mem, c.fmt_kib, f"{c.LITE}/idle", "VmRSS"),
            c.fmt_kib(above_idle(through, "rollout_worker", mem, f"{c.LITE}/idle")),
            spread(through, c.fmt_kib, "rollout_worker", "VmHWM"),
            spread(through, c.fmt_count, "rollout_worker", "Threads"),
            spread(mem, c.fmt_count, f"{c.LITE}/idle", "Threads"),
            "-",
        ]
    )
    c.print_table(
        "Figure R2: one Ray worker after sampling (same cluster, same run); RSS above an idle Ray "
        "worker of the same interpreter",
        ["worker", "VmRSS", "idle worker", "above idle", "VmHWM", "threads", "idle", "CPU/sample"],
        mem_rows,
    )
    if official is not None and mem:
        memory_ratio = c.ratio(
            above_idle(mem, c.LITE, mem, f"{c.LITE}/idle"),
            above_idle(mem, c.OFFICIAL, mem, f"{c.OFFICIAL}/idle"),
        )
        cpu_ratio = c.ratio(
            median(mem, c.LITE, "cpu_per_sample_s"), median(mem, c.OFFICIAL, "cpu_per_sample_s")
        )
        notes.append(
            f"lite / official: memory above idle {c.fmt_ratio(memory_ratio)}, CPU per sample "
            f"{c.fmt_ratio(cpu_ratio)}"
        )
    notes.append(
        f"ray {ray.__version__}; load average at the start {load}, at the end {os.getloadavg()}"
    )
    c.print_notes(notes)
    summary = {
        client: {
            "above_idle_kib": above_idle(mem, client, mem, f"{client}/idle"),
            "cpu_per_sample_s": median(mem, client, "cpu_per_sample_s"),
        }
        for client in (c.LITE, c.OFFICIAL)
        if any(client in m for m in mem)
    }
    speedup = {
        str(n): c.ratio(median(through, f"grade/{n}", "per_s"), median(through, "grade/0", "per_s"))
        for n in WORKER_COUNTS
    }
    data = {
        "runs": runs,
        "rounds": rounds,
        "throughput": through,
        "memory": mem,
        "summary": summary,
        "speedup": speedup,
        "notes": notes,
    }
    c.write_results("ray", data)
    return data


def main(argv: list[str] | None = None) -> int:
    """Run the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    run(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
