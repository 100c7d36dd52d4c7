"""Figure 5: future latency, from the server marking a result ready to ``result()`` returning.

The local server timestamps every result when it becomes ready (``FutureEntry.ready_perf``,
``time.perf_counter``; also sent as the ``X-Local-Ready-At-Perf`` header). ``perf_counter`` is
CLOCK_MONOTONIC on Linux, one clock for every process of the machine, so the client child's
``perf_counter()`` right after ``result()`` returns can be compared with it directly.

Two cases, each with calls issued one at a time:

* ``sample``: sample() on the stub model, whose result is ready before the client first asks
  for it (the latency holds the submit answer, one retrieve_future round trip and decoding);
* ``forward_backward``: one datum of 64 tokens on the real tiny model, whose result becomes
  ready while the client is already waiting in a long poll.

The server runs in this (parent) process so its futures can be read after each child's run;
the clients run in child processes, in alternation. Calls are paired with the server's
requests in order of creation, each pairing checked (created between submit and return,
ready before return).

    python bench/bench_latency.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import _common as c

CASES = {
    "sample": ("sample() on the stub model (result ready before the first poll)", True),
    "forward_backward": (
        "forward_backward on the tiny model, 1 x 64 tokens (client waiting in a long poll)",
        False,
    ),
}


def latency_workload(sdk: Any, args: Any) -> dict[str, Any]:
    """Issue ``n`` calls of ``args.case`` one at a time; return each call's submit/return times."""
    types = sdk.types
    service = sdk.ServiceClient(base_url=args.base_url)
    if args.case == "sample":
        sampler = c.resolved(service.create_sampling_client(base_model=args.base_model))
        prompt = types.ModelInput.from_ints(c.PROMPT)
        params = types.SamplingParams(max_tokens=1)

        def call() -> Any:
            return sampler.sample(prompt=prompt, num_samples=1, sampling_params=params)

    else:
        trainer = c.resolved(
            service.create_lora_training_client(base_model=args.base_model, rank=8)
        )
        args.datums = 1
        args.tokens = 64
        data = c.training_data(sdk, args)

        def call() -> Any:
            return trainer.forward_backward(data, "cross_entropy")

    for _ in range(args.warmup):
        call().result()
    calls = []
    for _ in range(args.n):
        t_submit = time.perf_counter()
        future = call()
        future.result()
        t_done = time.perf_counter()
        calls.append([t_submit, t_done])
    return {"calls": calls, "_close": service}


# The result types each case's server futures complete with: the local server keeps a sample's
# result as its SampleOutcome (the response plus the 0.38 extras), never as a bare SampleResponse.
_RESULT_TYPES = {
    "Sample": ("SampleOutcome", "SampleResponse"),
    "ForwardBackward": ("ForwardBackwardOutput",),
}


def _server_entries(server: Any, kind: str) -> list[tuple[float, float]]:
    """Return (created_perf, ready_perf) of the server's completed futures of one kind."""
    store = server.state.futures
    # FutureStore has no public listing yet; its entries are read after the run, never during.
    entries = list(getattr(store, "_entries", {}).values())
    out = [
        (e.created_perf, e.ready_perf)
        for e in entries
        if e.done and e.ready_perf is not None and type(e.result).__name__ in _RESULT_TYPES[kind]
    ]
    return sorted(out)


def pair_latencies(
    calls: list[list[float]], entries: list[tuple[float, float]]
) -> tuple[list[float], int]:
    """Pair each call with the server request created during it; return latencies and misses."""
    latencies = []
    misses = 0
    j = 0
    for t_submit, t_done in calls:
        while j < len(entries) and entries[j][0] < t_submit:
            j += 1
        if j < len(entries) and entries[j][0] <= t_done and entries[j][1] <= t_done:
            latencies.append(t_done - entries[j][1])
            j += 1
        else:
            misses += 1
    return latencies, misses


def _run_p50(stat: dict[str, Any]) -> float | None:
    """The median of the runs' p50 (what the table shows), or None."""
    per_run = stat.get("per_run_p50")
    return per_run["median"] if per_run and per_run.get("n") else None


def run(quick: bool) -> dict[str, Any]:
    """Measure both cases for both clients; print the table; write results/latency.json."""
    from tinker_lite.local import LocalServer

    runs = 1 if quick else 3
    n = 30 if quick else 200
    notes: list[str] = []
    have_official = c.official_python() is not None
    if not have_official:
        notes.append(c.official_missing_note())
    results: dict[str, Any] = {}
    rows = []
    goals = []
    for case, (label, stub) in CASES.items():
        per_client: dict[str, dict[str, Any]] = {}
        server = LocalServer(stub_model=stub)
        base_url = server.start()
        try:
            options = c.client_argv(base_url=base_url, n=n, case=case, warmup=3)
            plan = [(c.LITE, c.lite_child_argv("bench_latency.py", *options), True)]
            official_argv = c.official_child_argv("latency", *options)
            if official_argv is not None:
                plan.append((c.OFFICIAL, official_argv, False))
            for _ in range(runs):
                for client, argv, lite in plan:
                    slot = per_client.setdefault(
                        client, {"latencies": [], "p50s": [], "misses": 0, "error": None}
                    )
                    if slot["error"]:
                        continue
                    report = c.run_child(argv, lite=lite)
                    if not report.get("ok"):
                        slot["error"] = c.failure_text(report)
                        slot["traceback"] = report.get("traceback")
                        continue
                    kind = "Sample" if case == "sample" else "ForwardBackward"
                    lat, misses = pair_latencies(report["calls"], _server_entries(server, kind))
                    slot["latencies"].extend(lat)
                    slot["p50s"].append(c.percentile(lat, 50))
                    slot["misses"] += misses
        finally:
            server.stop()
        case_result: dict[str, Any] = {}
        cells: dict[str, list[str]] = {}
        for client in (c.LITE, c.OFFICIAL):
            slot = per_client.get(client)
            if slot is None or (slot["error"] and not slot["latencies"]):
                cells[client] = ["-", "-"]
                if slot is not None:
                    notes.append(f"{client} {case} failed: {slot['error']}")
                continue
            lat = slot["latencies"]
            stat = {
                "n": len(lat),
                "p50_s": c.percentile(lat, 50),
                "p90_s": c.percentile(lat, 90),
                "p99_s": c.percentile(lat, 99),
                "max_s": max(lat) if lat else None,
                "per_run_p50": c.summarize(slot["p50s"]),
                "unpaired_calls": slot["misses"],
            }
            case_result[client] = stat
            cells[client] = [
                c.fmt_stat(stat["per_run_p50"]),
                c.fmt_time(stat["p99_s"]),
            ]
            if slot["misses"]:
                notes.append(f"{client} {case}: {slot['misses']} calls could not be paired")
        lite_stat = case_result.get(c.LITE, {})
        off_stat = case_result.get(c.OFFICIAL, {})
        r50 = c.ratio(_run_p50(lite_stat), _run_p50(off_stat))
        rows.append([label, *cells[c.LITE], *cells[c.OFFICIAL], c.fmt_ratio(r50)])
        results[case] = {"stats": case_result, "ratio_p50": r50}
        p50 = _run_p50(lite_stat)
        goals.append(
            c.goal_line(
                f"future latency overhead p50 <= 2 ms ({case})",
                None if p50 is None else p50 <= 0.002,
                f"tinker_lite p50 {c.fmt_time(p50)}, p99 {c.fmt_time(lite_stat.get('p99_s'))}; "
                f"official p50 {c.fmt_time(_run_p50(off_stat))}",
            )
        )
    c.print_table(
        f"Figure 5: future latency, server ready -> result() returns; {runs} runs x {n} "
        "sequential calls; p50 = median of the runs' p50 (min..max), p99 over all calls",
        ["case", "tinker_lite p50", "p99", "official p50", "p99", "lite / official (p50)"],
        rows,
    )
    c.print_notes(notes)
    c.print_goals(goals)
    data = {"runs": runs, "n": n, "cases": results, "goals": goals, "notes": notes}
    c.write_results("latency", data)
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
        return c.run_client_command("tinker_lite", latency_workload, args)
    run(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
