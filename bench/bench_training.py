"""Figure 4: training loop, and how its cost per datum grows with the batch.

20 pipelined steps of ``forward_backward`` (32 datums x 256 tokens, cross_entropy) +
``optim_step`` against the local server in its stub-model mode: step i+1 is submitted before
step i's results are awaited. Wall time and client CPU (user + sys of the client process) of the
20 steps, peak RSS and threads. The data is built once before the clock starts; one warm-up step
is not counted. Each client runs in a child process of its own, in alternation. The same loop
with 128 datums (10 steps) and 1,024 datums (3 steps) gives the cost per datum.

    python bench/bench_training.py [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

import _common as c

METRICS = [
    ("wall time of the steps", "run.wall_s", c.fmt_time),
    ("client CPU (user + sys)", "run.cpu_s", c.fmt_time),
    ("peak RSS (VmHWM)", "vm_hwm_kib", c.fmt_kib),
    ("peak OS threads", "peak_threads", c.fmt_count),
    ("setup: client, model, data, warm-up", "setup.wall_s", c.fmt_time),
]
# (datums per forward_backward, steps): the goal workload first, then the scaling points.
POINTS = ((32, 20), (128, 10), (1024, 3))
QUICK_POINTS = ((32, 5), (128, 3), (1024, 1))
TOKENS = 256


def run(quick: bool) -> dict[str, Any]:
    """Start a stub-model server, run both clients' children; print and write results."""
    runs = 1 if quick else 3
    points = QUICK_POINTS if quick else POINTS
    notes: list[str] = []
    if c.official_python() is None:
        notes.append(c.official_missing_note())
    measured: dict[tuple[int, int], Any] = {}
    with c.local_server(stub_model=True) as base_url:
        for i, (datums, steps) in enumerate(points):
            options = c.client_argv(base_url=base_url, steps=steps, datums=datums, tokens=TOKENS)
            measured[(datums, steps)] = c.run_pairs(
                runs if i == 0 else 1,
                c.lite_child_argv("bench_training.py", *options),
                c.official_child_argv("training", *options),
            )
    (datums, steps), (reports, _) = next(iter(measured.items()))
    rows, stats, ratios = c.compare_table(reports, METRICS)
    for (n_datums, _), (_, point_failures) in measured.items():
        for client, failure in point_failures.items():
            notes.append(f"{n_datums} datums: {client} failed: {failure['error']}")
    c.print_table(
        f"Figure 4: training loop, {steps} pipelined forward_backward + optim_step steps of "
        f"{datums} datums x {TOKENS} tokens, stub model; median of {runs} runs (min..max)",
        ["metric", "tinker_lite", f"official {c.OFFICIAL_VERSION}", "lite / official"],
        rows,
    )
    scaling_rows = []
    scaling: dict[str, Any] = {}
    for (n_datums, n_steps), (point_reports, _) in measured.items():
        cells = [f"{n_datums:,} x {n_steps}"]
        entry: dict[str, Any] = {}
        for client in (c.LITE, c.OFFICIAL):
            client_reports = point_reports.get(client, [])
            cpu = c.per_unit(c.median_of(client_reports, "run.cpu_s"), n_datums * n_steps)
            growth = [g for g in (c.growth_kib(r) for r in client_reports) if g is not None]
            rss = c.per_unit(sorted(growth)[len(growth) // 2] if growth else None, n_datums)
            entry[client] = {"cpu_s_per_datum": cpu, "rss_kib_per_datum": rss}
            cells += [c.fmt_time(cpu), c.fmt_bytes(None if rss is None else rss * 1024)]
        scaling[str(n_datums)] = entry
        scaling_rows.append(cells)
    c.print_table(
        "Figure 4b: cost per datum as the batch grows (CPU per datum-step; RSS = peak above "
        "RSS before the data was built, per datum)",
        ["datums x steps", "lite CPU", "lite RSS", "official CPU", "official RSS"],
        scaling_rows,
    )
    notes.append("lite / official below 1: tinker_lite uses less (time, CPU, memory, threads)")
    floor = library_floor_kib()
    official_hwm = c.median_of(reports.get(c.OFFICIAL, []), "vm_hwm_kib")
    if floor is not None:
        share = ""
        if official_hwm:
            share = f" = {c.fmt_ratio(floor / official_hwm)} of the official peak"
        notes.append(
            f"floor before any tinker_lite code: {c.fmt_kib(floor)} peak RSS for "
            f"`import {', '.join(FLOOR_MODULES)}` (the workload's numpy, an HTTP stack, the "
            f"model library){share}"
        )
    goals = [
        c.ratio_goal("training loop: client CPU", ratios.get("run.cpu_s"), 0.5, "CPU"),
        c.ratio_goal("training loop: wall", ratios.get("run.wall_s"), 1.0, "wall"),
        c.ratio_goal("training loop: peak RSS", ratios.get("vm_hwm_kib"), 0.5, "VmHWM"),
    ]
    c.print_notes(notes)
    c.print_goals(goals)
    data = {
        "runs": runs,
        "points": [list(p) for p in points],
        "stats": stats,
        "ratios": ratios,
        "scaling": scaling,
        "goals": goals,
        "notes": notes,
    }
    c.write_results("training", data)
    return data


# What the workload itself (numpy data) and the design's libraries (requests, attrs, cattrs) load,
# tinker_lite aside.
FLOOR_MODULES = ("numpy", "numpy.random", "requests", "attrs", "cattrs")


def library_floor_kib() -> float | None:
    """Peak RSS of a fresh interpreter that only imports FLOOR_MODULES (median of 3)."""
    code = f"import {', '.join(FLOOR_MODULES)}; print(open('/proc/self/status').read())"
    values = []
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=c.child_env(worktree_on_path=False),
            check=False,
        )
        for line in proc.stdout.splitlines():
            if line.startswith("VmHWM:"):
                values.append(float(line.split()[1]))
    return sorted(values)[len(values) // 2] if values else None


def main(argv: list[str] | None = None) -> int:
    """Run the figure, or tinker_lite's child with --child."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    c.client_args(parser)
    args = parser.parse_args(argv)
    c.ensure_worktree_importable()
    if args.child:
        return c.run_client_command("tinker_lite", c.training_workload, args)
    run(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
