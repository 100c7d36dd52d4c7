"""Figure 3: sampling fan-out.

1,000 ``sample()`` calls (num_samples=1, max_tokens=1), at most 400 in flight, against the local
server in its instant stub-model mode (``--stub-model``), so the client's own costs dominate:
wall time and client CPU (user + sys of the client process, getrusage RUSAGE_SELF) of the
fan-out, peak RSS (VmHWM) and peak OS thread count of the client process. The server runs in its
own process; each client in a child process of its own (this script with ``--child`` for
tinker_lite, official_driver.py ``sampling`` for the official SDK), in alternation.

    python bench/bench_sampling.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import _common as c

METRICS = [
    ("wall time of the fan-out", "run.wall_s", c.fmt_time),
    ("client CPU (user + sys)", "run.cpu_s", c.fmt_time),
    ("  of which user", "run.cpu_user_s", c.fmt_time),
    ("  of which sys", "run.cpu_sys_s", c.fmt_time),
    ("peak RSS (VmHWM)", "vm_hwm_kib", c.fmt_kib),
    ("peak OS threads", "peak_threads", c.fmt_count),
    ("setup: client + session (wall)", "setup.wall_s", c.fmt_time),
    ("process CPU incl. import + setup", "process_cpu_s", c.fmt_time),
]


def run(quick: bool) -> dict[str, Any]:
    """Start a stub-model server, run both clients' children; print and write results."""
    runs = 1 if quick else 3
    n = 300 if quick else 1000
    concurrency = 100 if quick else 400
    notes: list[str] = []
    with c.local_server(stub_model=True) as base_url:
        options = c.client_argv(base_url=base_url, n=n, concurrency=concurrency)
        official_argv = c.official_child_argv("sampling", *options)
        if official_argv is None:
            notes.append(c.official_missing_note())
        reports, failures = c.run_pairs(
            runs, c.lite_child_argv("bench_sampling.py", *options), official_argv
        )
    rows, stats, ratios = c.compare_table(reports, METRICS)
    for client, failure in failures.items():
        notes.append(f"{client} failed: {failure['error']}")
    for client, client_reports in reports.items():
        bad = sum(int(r.get("bad_results", 0)) for r in client_reports)
        if bad:
            notes.append(f"{client}: {bad} results did not have exactly one token")
    notes.append("ratio column = official / tinker_lite (higher is better for tinker_lite)")
    goals = []
    cpu_r = ratios.get("run.cpu_s")
    wall_r = ratios.get("run.wall_s")
    if cpu_r is not None and wall_r is not None:
        met = cpu_r >= 2.0 and wall_r >= 1.0
        goals.append(
            c.goal_line(
                "sampling client CPU <= 0.5x of the official SDK's at equal or better wall time",
                met,
                f"CPU tinker_lite / official = {1 / cpu_r:.2f}x, "
                f"wall tinker_lite / official = {1 / wall_r:.2f}x",
            )
        )
    else:
        goals.append(c.goal_line("sampling fan-out", None, "no comparison in this run"))
    c.print_table(
        f"Figure 3: sampling fan-out, {n} sample() calls at concurrency {concurrency}, "
        f"stub model; median of {runs} runs (min..max)",
        ["metric", "tinker_lite", f"official {c.OFFICIAL_VERSION}", "official / lite"],
        rows,
    )
    c.print_notes(notes)
    c.print_goals(goals)
    data = {
        "runs": runs,
        "n": n,
        "concurrency": concurrency,
        "stats": stats,
        "ratios": ratios,
        "failures": failures,
        "goals": goals,
        "notes": notes,
    }
    c.write_results("sampling", data)
    return data


def main(argv: list[str] | None = None) -> int:
    """Run the figure, or tinker_lite's child with --child."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    c.client_args(parser)
    args = parser.parse_args(argv)
    c.ensure_worktree_importable()
    if args.child:
        return c.run_client_command("tinker_lite", c.sampling_workload, args)
    run(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
