"""Reliability matrix: fault rows passed, worst-case time to a typed error, peak threads.

Runs the reliability tests (tests/loopback/test_reliability_*.py) in a pytest child process.
Each row drives a real workload (an SFT loop, 200 concurrent samples and an RL step, REST
listings and a checkpoint download) against the offline local server over loopback HTTP with
faults injected, and logs its outcome; this script collects the pytest verdicts and the logged
figures and prints:

* the matrix (row, fault, workload, result, time),
* fault rows passed / total,
* the worst-case time to a typed error for permanent faults, on the client's clock (retry
  budgets run on a virtual clock in the tests: five minutes of back-off take milliseconds), and
  the longest wall time from such an error to the end of the process,
* the peak thread count of the client during workload (b) (threads of the in-process local
  server excluded; the whole process in brackets).

Results go to bench/results/reliability.json.

    python bench/bench_reliability.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import _common as c

TEST_FILES = [
    "tests/loopback/test_reliability_sft.py",
    "tests/loopback/test_reliability_rl.py",
    "tests/loopback/test_reliability_rest.py",
    "tests/loopback/test_reliability_permanent.py",
]
LOG_ENV = "TINKER_LITE_RELIABILITY_LOG"


def run_matrix(timeout: float) -> tuple[dict[str, str], list[dict[str, Any]], float]:
    """Run the tests; return pytest verdicts by test name, the logged rows and the wall time."""
    with tempfile.TemporaryDirectory(prefix="tl-reliability-") as folder:
        log = Path(folder) / "rows.jsonl"
        junit = Path(folder) / "junit.xml"
        env = dict(os.environ, **{LOG_ENV: str(log)})
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             f"--junitxml={junit}", *TEST_FILES],
            cwd=c.REPO_DIR,
            env=env,
            timeout=timeout,
            check=False,
        )  # fmt: skip
        wall = time.monotonic() - started
        verdicts: dict[str, str] = {}
        if junit.exists():
            for case in ET.parse(junit).getroot().iter("testcase"):
                outcome = "passed"
                if case.find("failure") is not None or case.find("error") is not None:
                    outcome = "failed"
                elif case.find("skipped") is not None:
                    outcome = "skipped"
                verdicts[case.get("name", "")] = outcome
        rows = []
        if log.exists():
            rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return verdicts, rows, wall


def _row_verdicts(verdicts: dict[str, str], logged: list[dict[str, Any]]) -> dict[str, str]:
    """Verdicts keyed by matrix row id (a test that failed before logging keeps its name)."""
    row_of_test = {e["test"]: e["row"] for e in logged if e.get("test") and e["row"] != "b0"}
    return {row_of_test.get(name, name): outcome for name, outcome in verdicts.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for the whole run")
    args = parser.parse_args()
    verdicts, logged, wall = run_matrix(args.timeout)
    by_row = _row_verdicts(verdicts, logged)
    entries = {entry["row"]: entry for entry in logged}

    table = []
    for row_id in sorted(set(by_row) | set(entries) - {"b0"}, key=_sort_key):
        entry = entries.get(row_id, {})
        outcome = by_row.get(row_id, "not run")
        result = entry.get("result", "-") if outcome == "passed" else outcome.upper()
        table.append(
            [
                row_id,
                entry.get("fault", "-"),
                entry.get("workload", "-"),
                result,
                c.fmt_time(entry["seconds"]) if "seconds" in entry else "-",
            ]
        )
    c.print_table(
        "Reliability matrix (time: the row's workload; client clock for permanent faults)",
        ["row", "fault", "workload", "result", "time"],
        table,
    )

    rows_total = len(by_row)
    rows_passed = sum(1 for outcome in by_row.values() if outcome == "passed")
    permanent = [e for e in logged if e.get("permanent") and e["row"].startswith("p")]
    exits = [e for e in logged if e["row"].startswith("x")]
    worst = max(permanent, key=lambda e: e["seconds"], default=None)
    worst_exit = max((e.get("exit_after_error_seconds", 0.0) for e in exits), default=None)
    rl = [e for e in logged if e.get("workload", "").startswith("b") and "peak_client_threads" in e]
    baseline = entries.get("b0", {})
    peak_client = max((e["peak_client_threads"] for e in rl), default=None)
    peak_total = max((e["peak_total_threads"] for e in rl), default=None)

    print()
    print(f"  fault rows passed: {rows_passed} / {rows_total}")
    if worst is not None:
        print(
            f"  worst-case time to a typed error (permanent faults): {c.fmt_time(worst['seconds'])}"
            f" on the client's clock ({worst['row']}: {worst['fault']}; bound"
            f" {c.fmt_time(worst['bound_seconds'])})"
        )
    if worst_exit is not None:
        print(f"  longest exit after an unrecoverable error (child process): {worst_exit:.2f} s")
    if peak_client is not None:
        print(
            f"  peak client threads during workload (b): {baseline.get('peak_client_threads', '-')}"
            f" without faults, {peak_client} with faults (whole process incl. the in-process"
            f" server: {baseline.get('peak_total_threads', '-')} / {peak_total})"
        )
    print(f"  matrix wall time: {wall:.1f} s")
    c.write_results(
        "reliability",
        {
            "rows_passed": rows_passed,
            "rows_total": rows_total,
            "verdicts": by_row,
            "rows": logged,
            "worst_time_to_typed_error_s": worst["seconds"] if worst else None,
            "worst_time_to_typed_error_row": worst["row"] if worst else None,
            "worst_exit_after_error_s": worst_exit,
            "peak_client_threads_b": peak_client,
            "peak_client_threads_b_baseline": baseline.get("peak_client_threads"),
            "peak_total_threads_b": peak_total,
            "wall_s": wall,
        },
    )
    return 0 if rows_passed == rows_total and rows_total else 1


def _sort_key(row_id: str) -> tuple[str, int, str]:
    number = row_id[1:]
    return row_id[0], int(number) if number.isdigit() else 0, row_id


if __name__ == "__main__":
    sys.exit(main())
