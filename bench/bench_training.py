"""Figure 4: training loop.

20 pipelined steps of ``forward_backward`` (32 datums x 256 tokens, cross_entropy) +
``optim_step`` against the local server in its stub-model mode: step i+1 is submitted before
step i's results are awaited. Wall time and client CPU (user + sys of the client process) of the
20 steps, peak RSS and threads. The data is built once before the clock starts; one warm-up step
is not counted. Each client runs in a child process of its own, in alternation.

    python bench/bench_training.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import _common as c

METRICS = [
    ("wall time of the steps", "run.wall_s", c.fmt_time),
    ("client CPU (user + sys)", "run.cpu_s", c.fmt_time),
    ("  of which user", "run.cpu_user_s", c.fmt_time),
    ("  of which sys", "run.cpu_sys_s", c.fmt_time),
    ("peak RSS (VmHWM)", "vm_hwm_kib", c.fmt_kib),
    ("peak OS threads", "peak_threads", c.fmt_count),
    ("setup: client, model, data, warm-up", "setup.wall_s", c.fmt_time),
]


def run(quick: bool) -> dict[str, Any]:
    """Start a stub-model server, run both clients' children; print and write results."""
    runs = 1 if quick else 3
    steps = 5 if quick else 20
    notes: list[str] = []
    with c.local_server(stub_model=True) as base_url:
        options = c.client_argv(base_url=base_url, steps=steps, datums=32, tokens=256)
        official_argv = c.official_child_argv("training", *options)
        if official_argv is None:
            notes.append(c.official_missing_note())
        reports, failures = c.run_pairs(
            runs, c.lite_child_argv("bench_training.py", *options), official_argv
        )
    rows, stats, ratios = c.compare_table(reports, METRICS)
    for client, failure in failures.items():
        notes.append(f"{client} failed: {failure['error']}")
    notes.append("ratio column = official / tinker_lite (higher is better for tinker_lite)")
    c.print_table(
        f"Figure 4: training loop, {steps} pipelined forward_backward + optim_step steps of "
        f"32 datums x 256 tokens, stub model; median of {runs} runs (min..max)",
        ["metric", "tinker_lite", f"official {c.OFFICIAL_VERSION}", "official / lite"],
        rows,
    )
    c.print_notes(notes)
    data = {
        "runs": runs,
        "steps": steps,
        "stats": stats,
        "ratios": ratios,
        "failures": failures,
        "notes": notes,
    }
    c.write_results("training", data)
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
        return c.run_client_command("tinker_lite", c.training_workload, args)
    run(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
