"""Write the README's benchmark table from bench/results/*.json (``make bench`` calls this).

The table goes between the ``.. bench-table-start`` and ``.. bench-table-end`` comment lines of
README.rst; rows whose figure has no results file are left out. It states the machine, the
versions and what is compared, and quotes only what the figures printed.

    python bench/readme_table.py            # rewrite README.rst from the last results
    python bench/readme_table.py --print    # print the table only
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

import _common as c

README = c.REPO_DIR / "README.rst"
START = ".. bench-table-start"
END = ".. bench-table-end"


def load(figure: str) -> dict[str, Any] | None:
    """Return bench/results/<figure>.json, or None when that figure was not run."""
    path = c.RESULTS_DIR / f"{figure}.json"
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _med(stats: Mapping[str, Any] | None, key: str) -> float | None:
    entry = (stats or {}).get(key) or {}
    value = entry.get("median")
    return None if value is None else float(value)


def _cells(
    stats: Mapping[str, Any],
    ratios: Mapping[str, Any],
    keys: list[tuple[str, Callable[[float | None], str]]],
) -> list[str]:
    """Cells ``lite``, ``official``, ``ratio`` for several metrics joined by " / "."""
    lite = " / ".join(fmt(_med(stats.get(c.LITE), key)) for key, fmt in keys)
    official = " / ".join(fmt(_med(stats.get(c.OFFICIAL), key)) for key, fmt in keys)
    ratio = " / ".join(c.fmt_ratio(ratios.get(key)) for key, _ in keys)
    return [lite, official, ratio]


CLIENT_KEYS = [
    ("run.cpu_s", c.fmt_time),
    ("run.wall_s", c.fmt_time),
    ("vm_hwm_kib", c.fmt_kib),
    ("peak_threads", c.fmt_count),
]


def goal_rows() -> list[list[str]]:
    """One row per goal workload: label, tinker_lite, official, ratio."""
    rows: list[list[str]] = []
    first_use = load("first_use")
    if first_use:
        keys = [("cpu_s", c.fmt_time), ("wall_s", c.fmt_time), ("vm_hwm_kib", c.fmt_kib)]
        rows.append(
            [
                "import + first use (``ServiceClient(...).get_server_capabilities()`` and a "
                "``types.Datum``) in a fresh process: CPU / wall / peak RSS",
                *_cells(first_use["stats"], first_use["ratios"], keys),
            ]
        )
    sampling = load("sampling")
    if sampling:
        for n in (sampling["points"][0], sampling["points"][-1]):
            point = sampling["per_point"][str(n)]
            rows.append(
                [
                    f"{n:,} ``sample()`` calls in flight: CPU / wall / peak RSS / threads",
                    *_cells(point["stats"], point["ratios"], CLIENT_KEYS),
                ]
            )
    training = load("training")
    if training:
        datums, steps = training["points"][0]
        rows.append(
            [
                f"{steps} pipelined ``forward_backward`` ({datums} x 256 tokens) + "
                "``optim_step``: CPU / wall / peak RSS / threads",
                *_cells(training["stats"], training["ratios"], CLIENT_KEYS),
            ]
        )
    encoding = load("encoding")
    if encoding:
        keys = [("build_validate_encode_proto", c.fmt_time), ("decode_proto", c.fmt_time)]
        rows.append(
            [
                "build + validate + encode a 128-datum / 500,000-number forward_backward chunk "
                "(protobuf) / decode a 128 x 1,024-logprob result: CPU",
                *_cells(encoding["stats"], encoding["ratios"], keys),
            ]
        )
    latency = load("latency")
    if latency:
        for case, label in (("sample", "sample"), ("forward_backward", "forward_backward")):
            entry = latency["cases"].get(case)
            if not entry:
                continue
            stats = {
                client: {"p50": entry["stats"].get(client, {}).get("per_run_p50")}
                for client in (c.LITE, c.OFFICIAL)
            }
            rows.append(
                [
                    f"result ready to ``result()`` returning, p50 ({label})",
                    *_cells(stats, {"p50": entry.get("ratio_p50")}, [("p50", c.fmt_time)]),
                ]
            )
    ray = load("ray")
    summary = (ray or {}).get("summary", {})
    if c.LITE in summary and c.OFFICIAL in summary:
        keys = [("above_idle_kib", c.fmt_kib), ("cpu_per_sample_s", c.fmt_time)]
        stats = {
            client: {key: {"median": summary[client][key]} for key, _ in keys}
            for client in (c.LITE, c.OFFICIAL)
        }
        ratios = {key: c.ratio(summary[c.LITE][key], summary[c.OFFICIAL][key]) for key, _ in keys}
        rows.append(
            [
                "a Ray worker sampling with an unpickled SamplingClient "
                "(``bench/bench_ray.py``): RSS above an idle worker / client CPU per sample",
                *_cells(stats, ratios, keys),
            ]
        )
    size = load("size")
    if size and size.get("official"):
        lite_bytes = size["tinker_lite"]["plain"]["bytes"]
        off_bytes = size["official"]["bytes"]
        rows.append(
            [
                "installed dependency tree (site-packages)",
                c.fmt_bytes(lite_bytes),
                c.fmt_bytes(off_bytes),
                c.fmt_ratio(c.ratio(lite_bytes, off_bytes)),
            ]
        )
    return rows


def scaling_rows() -> list[list[str]]:
    """How cost grows: per 1,000 samples at each fan-out, per datum at each batch size."""
    rows: list[list[str]] = []
    sampling = load("sampling")
    if sampling:
        retrieve = sampling.get("retrieve_futures") or {}
        scalings = [("", sampling["scaling"])]
        if retrieve.get("measured"):
            scalings.append((" with ``sample_use_retrieve_futures``", retrieve["scaling"]))
        for mode, scaling in scalings:
            rows += _sampling_rows(mode, scaling)
    training = load("training")
    if training:
        for datums, entry in training["scaling"].items():
            rows.append(
                [
                    f"``forward_backward`` of {int(datums):,} datums, per datum",
                    _per_datum(entry.get(c.LITE, {})),
                    _per_datum(entry.get(c.OFFICIAL, {})),
                ]
            )
    return rows


def floor_rows() -> list[list[str]]:
    """Figure 7: each workload's CPU beside its requests' CPU with plain requests."""
    floor = load("floor")
    labels = {
        "training": "training loop (figure 4, 4 requests a step), the floor in one thread",
        "training-threads": "training loop, the floor pipelined on threads (a sender, 4 pollers)",
        "fan-out": "1,000 samples (figure 3, 2 requests each), the floor in one thread",
        "fan-out-threads": "1,000 samples, the floor on 16 threads",
    }
    rows: list[list[str]] = []
    for case, entry in (floor or {}).get("cases", {}).items():
        cpu = entry["cpu_s"]
        rows.append(
            [
                labels.get(case, case),
                c.fmt_time(cpu.get(c.LITE)),
                c.fmt_time(cpu.get("floor")),
                c.fmt_time(cpu.get(c.OFFICIAL)),
                f"{c.fmt_ratio(entry['lite_ratio'])} / {c.fmt_ratio(entry['floor_ratio'])}",
            ]
        )
    return rows


def _sampling_rows(mode: str, scaling: Mapping[str, Any]) -> list[list[str]]:
    """Per 1,000 samples at each fan-out: CPU / RSS / peak threads of each client."""
    rows: list[list[str]] = []
    for n, entry in scaling.items():
        lite, official = entry.get(c.LITE, {}), entry.get(c.OFFICIAL, {})
        rows.append(
            [
                f"{int(n):,} samples in flight{mode}, per 1,000 samples",
                f"{c.fmt_time(lite.get('cpu_s_per_1000'))} / "
                f"{c.fmt_kib(lite.get('rss_kib_per_1000'))} / "
                f"{c.fmt_count(lite.get('threads'))}",
                f"{c.fmt_time(official.get('cpu_s_per_1000'))} / "
                f"{c.fmt_kib(official.get('rss_kib_per_1000'))} / "
                f"{c.fmt_count(official.get('threads'))}",
            ]
        )
    return rows


def _per_datum(side: Mapping[str, Any]) -> str:
    rss = side.get("rss_kib_per_datum")
    return (
        f"{c.fmt_time(side.get('cpu_s_per_datum'))} / "
        f"{c.fmt_bytes(None if rss is None else rss * 1024)} / -"
    )


def _list_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = [".. list-table::", "   :header-rows: 1", ""]
    for row in [headers, *rows]:
        out.append(f"   * - {row[0]}")
        out += [f"     - {cell}" for cell in row[1:]]
    return out


def machine_line() -> str:
    """Describe the machine, the interpreter and the versions from the last results."""
    for figure in ("sampling", "training", "first_use", "encoding", "import"):
        data = load(figure)
        if data:
            m = data["machine"]
            break
    else:
        m = c.machine_info()
    c.ensure_worktree_importable()
    from tinker_lite import __version__

    text = (
        f"Measured by ``make bench`` on {m['time'][:10]}: {m['cpus']} CPU cores, "
        f"{m['platform']}, Python {m['python']}, tinker_lite {__version__} against the "
        f"official SDK ``tinker=={c.OFFICIAL_VERSION}`` (``bench/setup_official.sh``, without "
        "torch). Both clients run in the same run, one process each, in alternation, against "
        "the same local server (a separate process, stub model); medians of repeated runs. "
        "Ratios are tinker_lite / official: below 1, tinker_lite uses less. Absolute figures "
        "move with the machine's load; the ratios, taken in alternation, are steadier."
    )
    return textwrap.fill(text, width=96, break_on_hyphens=False, break_long_words=False)


GOAL_FIGURES = ("first_use", "encoding", "sampling", "training", "latency")


def goals_paragraph() -> str:
    """Say how many of the benchmark's goals the last full run met, and explain any miss."""
    goals: list[dict[str, Any]] = []
    explanations: list[str] = []
    for figure in GOAL_FIGURES:
        data = load(figure)
        if not data:
            continue
        goals += [g for g in data.get("goals", []) if g.get("met") is not None]
        explanations += [
            n.replace("`", "``") for n in data.get("notes", []) if n.startswith("floor before")
        ]
    if not goals:
        return ""
    missed = [g for g in goals if not g["met"]]
    met = len(goals) - len(missed)
    text = f"Goals of ``bench/run_all.py`` met in this run: {met} of {len(goals)}."
    if missed:
        text += " Missed: " + "; ".join(f"{g['goal']} ({g['detail']})" for g in missed) + "."
        if explanations:
            text += " For the training loop's memory: " + "; ".join(explanations) + "."
    return textwrap.fill(text, width=96, break_on_hyphens=False, break_long_words=False)


def render() -> str:
    """Return the generated section (without the markers)."""
    lines = [machine_line(), ""]
    lines += _list_table(
        ["Workload", "tinker_lite", f"official {c.OFFICIAL_VERSION}", "lite / official"],
        goal_rows(),
    )
    scaling = scaling_rows()
    if scaling:
        lines += [
            "",
            "How the cost grows (CPU / RSS above the RSS after setup / peak threads):",
            "",
        ]
        lines += _list_table(["Load", "tinker_lite", f"official {c.OFFICIAL_VERSION}"], scaling)
    floor = floor_rows()
    if floor:
        lines += [
            "",
            "What the same HTTP requests cost sent with a plain ``requests.Session`` and nothing "
            "else (``bench/bench_floor.py``, run by ``make bench``; CPU):",
            "",
        ]
        headers = ["Workload", "tinker_lite", "requests floor", f"official {c.OFFICIAL_VERSION}"]
        lines += _list_table([*headers, "lite / official, floor / official"], floor)
    goals = goals_paragraph()
    if goals:
        lines += ["", goals]
    return "\n".join(lines)


def update_readme() -> bool:
    """Replace the README's generated section; False with no results or no markers."""
    if not goal_rows():
        print("no full-run results in bench/results; README.rst left as it is", file=sys.stderr)
        return False
    text = README.read_text(encoding="utf-8")
    if START not in text or END not in text:
        print(f"README.rst has no {START} / {END} markers; table not written", file=sys.stderr)
        return False
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    note = " (generated by ``make bench`` from bench/results; edits are overwritten)"
    README.write_text(f"{head}{START}{note}\n\n{render()}\n\n{END}{tail}", encoding="utf-8")
    print(f"  README.rst benchmark table rewritten from {c.RESULTS_DIR.relative_to(c.REPO_DIR)}")
    return True


def main(argv: list[str] | None = None) -> int:
    """Rewrite the README table (or print it with --print)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--print", action="store_true", help="print the table, do not write")
    args = parser.parse_args(argv)
    if args.print:
        print(render())
        return 0
    return 0 if update_readme() else 1


if __name__ == "__main__":
    sys.exit(main())
