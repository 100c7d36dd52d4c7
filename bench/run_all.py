"""Run the benchmark figures (``make bench``), print each table and a goal summary.

    python bench/run_all.py                  # every comparison figure; rewrites README's table
    python bench/run_all.py --quick          # fast smoke run (fewer repetitions, smaller loads)
    python bench/run_all.py import sampling  # only the named figures
    python bench/run_all.py --all            # also the project's other bench_*.py scripts
    python bench/run_all.py --list

Results go to bench/results/<figure>.json; a full run (not --quick) then rewrites the README's
benchmark table from them (bench/readme_table.py). Figures that compare with the official SDK
need ``bash bench/setup_official.sh`` first; without it they print tinker_lite's figures alone.
The project's other bench/bench_*.py scripts (tinker_lite alone) run as their own processes,
with ``--quick`` when they accept it, when named or with ``--all``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import _common as c
import bench_encoding
import bench_floor
import bench_import
import bench_latency
import bench_sampling
import bench_training
import readme_table

FIGURES: dict[str, tuple[str, Callable[[bool], Any]]] = {
    "size": ("1a installed size of the dependency tree", bench_import.run_size),
    "import": ("1b import time and peak RSS", bench_import.run_import),
    "first_use": ("1c import + first use of ServiceClient and Datum", bench_import.run_first_use),
    "encoding": ("2 request encoding / result decoding", bench_encoding.run),
    "sampling": ("3 sampling fan-out", bench_sampling.run),
    "training": ("4 training loop", bench_training.run),
    "latency": ("5 future latency", bench_latency.run),
    "floor": ("7 the requests floor of figures 3 and 4", bench_floor.run),
}

OWN_SCRIPTS = {
    "_common.py",
    "official_driver.py",
    "run_all.py",
    *(f"bench_{m}.py" for m in ("import", "encoding", "sampling", "training", "latency", "floor")),
}


def other_scripts() -> dict[str, str]:
    """Return the project's other bench_*.py scripts by figure name (bench_proto.py -> proto)."""
    out = {}
    for path in sorted(c.BENCH_DIR.glob("bench_*.py")):
        if path.name not in OWN_SCRIPTS:
            out[path.stem.removeprefix("bench_")] = str(path)
    return out


def run_script(path: str, quick: bool) -> int:
    """Run another bench script in its own process, passing --quick when it knows the flag."""
    argv = [sys.executable, path]
    if quick and "--quick" in c.Path(path).read_text(encoding="utf-8"):
        argv.append("--quick")
    return subprocess.run(argv, cwd=str(c.REPO_DIR), check=False).returncode


def summary(goals: list[dict[str, Any]]) -> None:
    """Print the goal verdicts of the figures run now."""
    rows = [[g["goal"], g["verdict"], g["detail"]] for g in goals]
    if rows:
        c.print_table("Goals", ["goal", "verdict", "measured"], rows)


def main(argv: list[str] | None = None) -> int:
    """Run the selected figures (all by default); return non-zero if a figure crashed."""
    others = other_scripts()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("figures", nargs="*", help="figure names (see --list); default: all")
    parser.add_argument("--quick", action="store_true", help="fast smoke run")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    parser.add_argument("--all", action="store_true", help="also run the other bench scripts")
    parser.add_argument("--no-readme", action="store_true", help="leave README.rst as it is")
    args = parser.parse_args(argv)
    c.ensure_worktree_importable()
    if args.list:
        for name, (label, _) in FIGURES.items():
            print(f"{name:13s} {label}")
        for name, path in others.items():
            print(f"{name:13s} {c.Path(path).name} (own script)")
        return 0
    selected = args.figures or [*FIGURES, *(others if args.all else [])]
    unknown = [f for f in selected if f not in FIGURES and f not in others]
    if unknown:
        parser.error(f"unknown figure(s): {', '.join(unknown)}; see --list")
    if c.official_python() is None:
        print(c.official_missing_note())
    else:
        print(f"official SDK: tinker=={c.OFFICIAL_VERSION} in {c.official_venv()}")
    print(f"machine: {c.machine_info()}")
    crashed = []
    goals: list[dict[str, Any]] = []
    for name in selected:
        t0 = time.perf_counter()
        try:
            if name in FIGURES:
                data = FIGURES[name][1](args.quick)
                goals.extend(data.get("goals", []) if isinstance(data, dict) else [])
            elif run_script(others[name], args.quick) != 0:
                crashed.append(name)
        except Exception as exc:  # a crashed figure must not hide the others
            crashed.append(name)
            print(f"\nfigure {name} crashed: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"  ({name}: {time.perf_counter() - t0:.0f} s)")
    summary(goals)
    if not args.quick and not args.no_readme:
        readme_table.update_readme()
    if crashed:
        print(f"\ncrashed: {', '.join(crashed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
