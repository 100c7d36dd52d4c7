"""Figure 1: installed size of the dependency tree, and ``import`` time + peak RSS.

* size: bytes of every file under site-packages of a fresh venv holding only the package and
  its runtime dependencies, less pip/setuptools themselves. tinker_lite is ``pip install .``-ed
  into a temporary venv (plain, then with the ``fast`` extra); the official SDK is measured in
  the venv bench/setup_official.sh made.
* import: ``python -c "import X"`` in fresh processes; wall time taken by the parent with
  perf_counter around subprocess.run, peak RSS read by the child from VmHWM in
  /proc/self/status. The same for ``python -c pass`` gives the interpreter's own share.

    python bench/bench_import.py [size] [import] [--quick]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as c

# Distributions that come with every venv and are not part of a package's dependency tree.
_TOOLING = ("pip", "setuptools", "_distutils_hack", "pkg_resources", "distutils-precedence.pth")


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise RuntimeError(f"no site-packages under {venv}")
    return found[0]


def _is_tooling(name: str) -> bool:
    lowered = name.lower()
    return any(lowered == tool or lowered.startswith((tool + "-", tool + ".")) for tool in _TOOLING)


def tree_size(site: Path) -> dict[str, Any]:
    """Sum file sizes under site-packages, without pip/setuptools; also per top-level entry."""
    per_entry: dict[str, int] = {}
    files = 0
    pycache = 0
    for entry in site.iterdir():
        if _is_tooling(entry.name):
            continue
        size = 0
        if entry.is_file():
            size = entry.stat().st_size
            files += 1
        else:
            for root, _dirs, names in os.walk(entry):
                for name in names:
                    n = os.lstat(os.path.join(root, name)).st_size
                    size += n
                    files += 1
                    if "__pycache__" in root:
                        pycache += n
        per_entry[entry.name] = size
    total = sum(per_entry.values())
    largest = sorted(per_entry.items(), key=lambda kv: -kv[1])[:8]
    return {
        "bytes": total,
        "files": files,
        "pycache_bytes": pycache,
        "distributions": sorted(n for n in per_entry if n.endswith(".dist-info")),
        "largest": dict(largest),
    }


def _pip(python: Path, *args: str) -> None:
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


class FreshLiteVenv:
    """A temporary venv with ``pip install .`` of the work tree (no editable finder, no dev extras).

    Made once per process and shared by the size and import figures; removed at exit.
    """

    _instance: FreshLiteVenv | None = None

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="tl-bench-venv-")
        root = Path(self._tmp.name)
        self.venv = root / "venv"
        self.python = self.venv / "bin" / "python"
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(self.venv)], check=True)
        # Build from a copy so the work tree gets no build/ or egg-info debris.
        self.src = root / "src"
        shutil.copytree(
            c.REPO_DIR,
            self.src,
            ignore=shutil.ignore_patterns(
                ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "results"
            ),
        )
        t0 = time.perf_counter()
        _pip(self.python, str(self.src))
        self.install_s = time.perf_counter() - t0
        self.plain_size = tree_size(_site_packages(self.venv))
        self.fast_size: dict[str, Any] | None = None
        atexit.register(self._tmp.cleanup)

    @classmethod
    def get(cls) -> FreshLiteVenv:
        """Return the process's fresh venv, making it on first use."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def measure_fast(self) -> dict[str, Any]:
        """Add the ``fast`` extra (orjson) and measure again."""
        if self.fast_size is None:
            _pip(self.python, f"{self.src}[fast]")
            self.fast_size = tree_size(_site_packages(self.venv))
        return self.fast_size


def measure_lite_size() -> dict[str, Any]:
    """Measure the fresh venv of the work tree, plain and with the ``fast`` extra."""
    venv = FreshLiteVenv.get()
    plain = dict(venv.plain_size, install_s=venv.install_s)
    return {"plain": plain, "fast": venv.measure_fast()}


def run_size(quick: bool) -> dict[str, Any]:
    """Measure and print the installed sizes; write bench/results/size.json."""
    del quick  # one measurement is exact; nothing to repeat
    notes: list[str] = []
    lite = measure_lite_size()
    official: dict[str, Any] | None = None
    if c.official_python() is not None:
        official = tree_size(_site_packages(c.official_venv()))
        if any(d.lower().startswith("torch-") for d in official["distributions"]):
            notes.append("the official venv holds torch (TINKER_OFFICIAL_WITH_TORCH=1)")
    else:
        notes.append(c.official_missing_note())
    off_bytes = official["bytes"] if official else None
    rows = [
        [
            "tinker_lite (pip install .)",
            c.fmt_bytes(lite["plain"]["bytes"]),
            len(lite["plain"]["distributions"]),
            c.fmt_ratio(c.ratio(off_bytes, lite["plain"]["bytes"])),
        ],
        [
            "tinker_lite[fast] (+ orjson)",
            c.fmt_bytes(lite["fast"]["bytes"]),
            len(lite["fast"]["distributions"]),
            c.fmt_ratio(c.ratio(off_bytes, lite["fast"]["bytes"])),
        ],
    ]
    if official:
        rows.append(
            [
                f"official tinker=={c.OFFICIAL_VERSION}",
                c.fmt_bytes(official["bytes"]),
                len(official["distributions"]),
                "1x",
            ]
        )
    c.print_table(
        "Figure 1a: installed size of the dependency tree (site-packages, less pip/setuptools)",
        ["client", "size", "distributions", "official / this"],
        rows,
    )
    c.print_notes(notes)
    data = {"tinker_lite": lite, "official": official, "notes": notes}
    c.write_results("size", data)
    return data


_STATUS_SNIPPET = "import sys; sys.stdout.write(open('/proc/self/status').read())"


def _one_import(python: str, module: str | None, env: dict[str, str]) -> tuple[float, int]:
    stmt = f"import {module}; " if module else ""
    argv = [python, "-c", stmt + _STATUS_SNIPPET]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed: {proc.stderr[-2000:]}")
    hwm = 0
    for line in proc.stdout.splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
    return wall, hwm


def run_import(quick: bool) -> dict[str, Any]:
    """Time ``import`` in fresh processes, interleaving the clients; write results/import.json."""
    runs = 3 if quick else 10
    notes: list[str] = []
    lite_python = str(FreshLiteVenv.get().python)
    targets: dict[str, tuple[str, str, dict[str, str]]] = {
        c.LITE: (lite_python, "tinker_lite", c.child_env(worktree_on_path=False)),
    }
    official_py = c.official_python()
    if official_py is not None:
        targets[c.OFFICIAL] = (official_py, "tinker", c.child_env(worktree_on_path=False))
    else:
        notes.append(c.official_missing_note())

    samples: dict[str, dict[str, list[float]]] = {
        name: {"wall": [], "hwm": [], "base_wall": [], "base_hwm": []} for name in targets
    }
    for python, module, env in targets.values():
        # Warm the page cache and bytecode once; not counted.
        _one_import(python, module, env)
        _one_import(python, None, env)
    for _ in range(runs):
        for name, (python, module, env) in targets.items():
            wall, hwm = _one_import(python, module, env)
            base_wall, base_hwm = _one_import(python, None, env)
            s = samples[name]
            s["wall"].append(wall)
            s["hwm"].append(hwm)
            s["base_wall"].append(base_wall)
            s["base_hwm"].append(base_hwm)

    stats: dict[str, dict[str, Any]] = {}
    for name, s in samples.items():
        stats[name] = {
            "wall_s": c.summarize(s["wall"]),
            "vm_hwm_kib": c.summarize(s["hwm"]),
            "bare_interpreter_wall_s": c.summarize(s["base_wall"]),
            "bare_interpreter_vm_hwm_kib": c.summarize(s["base_hwm"]),
            "import_only_wall_s": c.summarize(
                [a - b for a, b in zip(s["wall"], s["base_wall"], strict=True)]
            ),
            "import_only_kib": c.summarize(
                [a - b for a, b in zip(s["hwm"], s["base_hwm"], strict=True)]
            ),
        }

    def med(name: str, key: str) -> float | None:
        return stats[name][key]["median"] if name in stats else None

    rows = []
    for name, st in stats.items():
        label = "tinker_lite" if name == c.LITE else f"official tinker=={c.OFFICIAL_VERSION}"
        rows.append(
            [
                label,
                c.fmt_stat(st["wall_s"]),
                c.fmt_stat(st["import_only_wall_s"]),
                c.fmt_stat(st["vm_hwm_kib"], c.fmt_kib),
                c.fmt_stat(st["import_only_kib"], c.fmt_kib),
            ]
        )
    ratios: dict[str, float | None] = {}
    if c.OFFICIAL in stats:
        ratios = {
            "wall": c.ratio(med(c.LITE, "wall_s"), med(c.OFFICIAL, "wall_s")),
            "import_only_wall": c.ratio(
                med(c.LITE, "import_only_wall_s"), med(c.OFFICIAL, "import_only_wall_s")
            ),
            "vm_hwm": c.ratio(med(c.LITE, "vm_hwm_kib"), med(c.OFFICIAL, "vm_hwm_kib")),
            "import_only_rss": c.ratio(
                med(c.LITE, "import_only_kib"), med(c.OFFICIAL, "import_only_kib")
            ),
        }
        rows.append(
            [
                "ratio tinker_lite / official",
                c.fmt_ratio(ratios["wall"]),
                c.fmt_ratio(ratios["import_only_wall"]),
                c.fmt_ratio(ratios["vm_hwm"]),
                c.fmt_ratio(ratios["import_only_rss"]),
            ]
        )
    c.print_table(
        f"Figure 1b: import time and peak RSS (median of {runs} fresh processes, (min..max))",
        ["client", "wall (process)", "import only", "VmHWM", "import adds"],
        rows,
    )
    notes.append(
        "'import only' = process minus `python -c pass` with the same interpreter, "
        "taken in alternation; tinker_lite from a fresh `pip install .` venv"
    )
    notes.append(
        "`import tinker_lite` loads its submodules lazily, so this is a floor; figure 1c "
        "(first_use) measures an import that is used"
    )
    c.print_notes(notes)
    data = {"runs": runs, "stats": stats, "ratios": ratios, "notes": notes}
    c.write_results("import", data)
    return data


# A real first use: the client is made, asks the server something and a Datum is built.
_FIRST_USE = """
import resource, sys, time
import {module} as sdk
service = sdk.ServiceClient(base_url={url!r})
caps = service.get_server_capabilities()
datum = sdk.types.Datum(
    model_input=sdk.types.ModelInput.from_ints([1, 2, 3, 4, 5, 6, 7, 8]),
    loss_fn_inputs={{"target_tokens": [2, 3, 4, 5, 6, 7, 8, 9], "weights": [1.0] * 8}},
)
done = time.perf_counter()
ru = resource.getrusage(resource.RUSAGE_SELF)
assert caps.supported_models and datum.model_input.length == 8
sys.stdout.write(f"FIRST-USE {{done}} {{ru.ru_utime + ru.ru_stime}}\\n")
sys.stdout.write(open("/proc/self/status").read())
sys.stdout.flush()
"""


def _one_first_use(python: str, module: str, url: str, env: dict[str, str]) -> dict[str, float]:
    code = _FIRST_USE.format(module=module, url=url)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"first use of {module} failed: {proc.stderr[-2000:]}")
    out: dict[str, float] = {"process_wall_s": wall}
    for line in proc.stdout.splitlines():
        if line.startswith("FIRST-USE "):
            done, cpu = line.split()[1:3]
            # perf_counter is CLOCK_MONOTONIC on Linux: one clock for parent and child.
            out["wall_s"] = float(done) - t0
            out["cpu_s"] = float(cpu)
        elif line.startswith("VmHWM:"):
            out["vm_hwm_kib"] = float(line.split()[1])
    return out


def run_first_use(quick: bool) -> dict[str, Any]:
    """Time a fresh process's import + first use of ServiceClient and types.Datum."""
    runs = 3 if quick else 10
    notes: list[str] = []
    targets: dict[str, tuple[str, str]] = {c.LITE: (str(FreshLiteVenv.get().python), "tinker_lite")}
    official_py = c.official_python()
    if official_py is not None:
        targets[c.OFFICIAL] = (official_py, "tinker")
    else:
        notes.append(c.official_missing_note())
    env = c.child_env(worktree_on_path=False)
    reports: dict[str, list[dict[str, Any]]] = {c.LITE: [], c.OFFICIAL: []}
    with c.local_server(stub_model=True) as url:
        for python, module in targets.values():
            _one_first_use(python, module, url, env)  # warm the page cache; not counted
        for _ in range(runs):
            for name, (python, module) in targets.items():
                reports[name].append(_one_first_use(python, module, url, env))
    rows, stats, ratios = c.compare_table(
        reports,
        [
            ("start to first use done (wall)", "wall_s", c.fmt_time),
            ("CPU to first use done", "cpu_s", c.fmt_time),
            ("whole process incl. exit (wall)", "process_wall_s", c.fmt_time),
            ("peak RSS (VmHWM)", "vm_hwm_kib", c.fmt_kib),
        ],
    )
    c.print_table(
        f"Figure 1c: fresh process: import + ServiceClient(...).get_server_capabilities() + "
        f"a types.Datum; median of {runs} (min..max)",
        ["metric", "tinker_lite", f"official {c.OFFICIAL_VERSION}", "lite / official"],
        rows,
    )
    notes.append(
        "tinker_lite from a fresh `pip install .` venv; the interpreter's own start-up is "
        "included for both (same CPython)"
    )
    goals = []
    if c.OFFICIAL in targets:
        goals = [
            c.ratio_goal("import + first use: CPU", ratios.get("cpu_s"), 0.5, "CPU"),
            c.ratio_goal("import + first use: wall", ratios.get("wall_s"), 1.0, "wall"),
            c.ratio_goal("import + first use: peak RSS", ratios.get("vm_hwm_kib"), 0.5, "VmHWM"),
        ]
    c.print_notes(notes)
    c.print_goals(goals)
    data = {"runs": runs, "stats": stats, "ratios": ratios, "goals": goals, "notes": notes}
    c.write_results("first_use", data)
    return data


FIGURES = {"size": run_size, "import": run_import, "first_use": run_first_use}


def main(argv: list[str] | None = None) -> None:
    """Run the figures named on the command line (default: both)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("figures", nargs="*", help=f"any of {', '.join(FIGURES)}")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    c.ensure_worktree_importable()
    unknown = set(args.figures) - set(FIGURES)
    if unknown:
        parser.error(f"unknown figure(s): {', '.join(sorted(unknown))}")
    for name in args.figures or list(FIGURES):
        FIGURES[name](args.quick)


if __name__ == "__main__":
    main()
