"""Figure 3: sampling fan-out, and how its cost grows with the number of requests in flight.

``n`` ``sample()`` calls (num_samples=1, max_tokens=1) issued at once from one thread (all
``n`` in flight), then every result awaited, against the local server in its instant
stub-model mode (``--stub-model``), so the client's own costs dominate: wall time and client
CPU (user + sys of the client process, getrusage RUSAGE_SELF) of the fan-out, peak RSS (VmHWM)
and how far it rose above the RSS after setup, and the peak OS thread count. ``n`` is 1,000,
5,000 and 10,000. The server runs in its own process; each client in a child process of its
own (this script with ``--child`` for tinker_lite, official_driver.py ``sampling`` for the
official SDK), in alternation.

A second server answers ``client/config`` with ``sample_use_retrieve_futures: true``, the mode
in which the official SDK polls all of a session's samples with one batch poller
(``/api/v1/retrieve_futures``); it is measured when the local server serves that endpoint.

    python bench/bench_sampling.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from typing import Any

import _common as c

POINTS = (1000, 5000, 10000)
QUICK_POINTS = (200, 500, 1000)
RETRIEVE_FUTURES = {"sample_use_retrieve_futures": True}

METRICS = [
    ("wall time of the fan-out", "run.wall_s", c.fmt_time),
    ("client CPU (user + sys)", "run.cpu_s", c.fmt_time),
    ("peak RSS (VmHWM)", "vm_hwm_kib", c.fmt_kib),
    ("peak OS threads", "peak_threads", c.fmt_count),
]


def serves_retrieve_futures(base_url: str) -> bool:
    """Whether the server has ``POST /api/v1/retrieve_futures`` (anything but 404/405)."""
    request = urllib.request.Request(
        base_url.rstrip("/") + "/api/v1/retrieve_futures",
        data=b"{}",
        headers={"Content-Type": "application/json", "X-API-Key": c.BENCH_API_KEY},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code not in (404, 405)
    except OSError:
        return False


def measure(base_url: str, points: tuple[int, ...], runs: int) -> dict[int, Any]:
    """Run both clients at each fan-out size; ``runs`` alternations at the first, one after."""
    out: dict[int, Any] = {}
    for i, n in enumerate(points):
        options = c.client_argv(base_url=base_url, n=n, concurrency=n)
        reports, failures = c.run_pairs(
            runs if i == 0 else 1,
            c.lite_child_argv("bench_sampling.py", *options),
            c.official_child_argv("sampling", *options),
        )
        out[n] = {"reports": reports, "failures": failures}
    return out


def point_rows(n: int, point: dict[str, Any]) -> tuple[list[list[str]], dict[str, Any]]:
    """Rows of the main table for one fan-out size, and its stats and ratios."""
    rows, stats, ratios = c.compare_table(point["reports"], METRICS)
    for row in rows:
        row[0] = f"{n:,}: {row[0]}"
    return rows, {"stats": stats, "ratios": ratios}


def scaling_rows(points: dict[int, Any]) -> tuple[list[list[str]], dict[str, Any]]:
    """Rows of CPU and RSS growth per 1,000 samples (and peak threads) at each size."""
    rows = []
    data: dict[str, Any] = {}
    for n, point in points.items():
        cells: list[str] = [f"{n:,}"]
        entry: dict[str, Any] = {}
        for client in (c.LITE, c.OFFICIAL):
            reports = point["reports"].get(client, [])
            cpu = c.per_unit(c.median_of(reports, "run.cpu_s"), n / 1000)
            growth = [g for g in (c.growth_kib(r) for r in reports) if g is not None]
            rss = c.per_unit(sorted(growth)[len(growth) // 2] if growth else None, n / 1000)
            threads = c.median_of(reports, "peak_threads")
            entry[client] = {"cpu_s_per_1000": cpu, "rss_kib_per_1000": rss, "threads": threads}
            cells += [c.fmt_time(cpu), c.fmt_kib(rss), c.fmt_count(threads)]
        data[str(n)] = entry
        rows.append(cells)
    return rows, data


SCALING_HEADERS = [
    "in flight",
    "lite CPU/1k",
    "lite RSS/1k",
    "lite threads",
    "official CPU/1k",
    "official RSS/1k",
    "official threads",
]


def run(quick: bool) -> dict[str, Any]:
    """Start stub-model servers, run both clients' children; print and write results."""
    runs = 1 if quick else 3
    points = QUICK_POINTS if quick else POINTS
    notes: list[str] = []
    if c.official_python() is None:
        notes.append(c.official_missing_note())
    with c.local_server(stub_model=True) as base_url:
        measured = measure(base_url, points, runs)
    rows: list[list[str]] = []
    per_point: dict[str, Any] = {}
    for n, point in measured.items():
        point_table, per_point[str(n)] = point_rows(n, point)
        rows += point_table
        for client, failure in point["failures"].items():
            notes.append(f"{n:,}: {client} failed: {failure['error']}")
        for client, client_reports in point["reports"].items():
            bad = sum(int(r.get("bad_results", 0)) for r in client_reports)
            if bad:
                notes.append(f"{n:,}: {client}: {bad} results did not have exactly one token")
    c.print_table(
        f"Figure 3: sampling fan-out, n sample() calls all in flight, stub model; "
        f"median of {runs} runs at {points[0]:,}, one run above (min..max)",
        ["n: metric", "tinker_lite", f"official {c.OFFICIAL_VERSION}", "lite / official"],
        rows,
    )
    scaling, scaling_data = scaling_rows(measured)
    c.print_table(
        "Figure 3b: cost per 1,000 samples as the fan-out grows (RSS = peak above RSS after setup)",
        SCALING_HEADERS,
        scaling,
    )

    retrieve: dict[str, Any] = {"measured": False}
    retrieve_points = (points[0], points[-1])
    with c.local_server(stub_model=True, config=RETRIEVE_FUTURES) as base_url:
        if serves_retrieve_futures(base_url):
            retrieve_measured = measure(base_url, retrieve_points, 1)
            retrieve_rows, retrieve_data = scaling_rows(retrieve_measured)
            retrieve = {"measured": True, "scaling": retrieve_data}
            c.print_table(
                "Figure 3c: with sample_use_retrieve_futures (one batch poller per session)",
                SCALING_HEADERS,
                retrieve_rows,
            )
        else:
            notes.append(
                "sample_use_retrieve_futures not measured: the local server has no "
                "/api/v1/retrieve_futures endpoint"
            )
    notes.append("lite / official below 1: tinker_lite uses less (time, CPU, memory, threads)")
    goals = []
    for n in (points[0], points[-1]):
        ratios = per_point[str(n)]["ratios"]
        goals += [
            c.ratio_goal(f"fan-out {n:,}: client CPU", ratios.get("run.cpu_s"), 0.5, "CPU"),
            c.ratio_goal(f"fan-out {n:,}: wall", ratios.get("run.wall_s"), 1.0, "wall"),
            c.ratio_goal(f"fan-out {n:,}: peak RSS", ratios.get("vm_hwm_kib"), 0.5, "VmHWM"),
        ]
    c.print_notes(notes)
    c.print_goals(goals)
    data = {
        "runs": runs,
        "points": list(points),
        "per_point": per_point,
        "scaling": scaling_data,
        "retrieve_futures": retrieve,
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
