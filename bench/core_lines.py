"""Lines of the client core (the package without ``local/``, ``cli/``, ``types/``), by kind.

``python bench/core_lines.py [--by doc|code|total]`` prints the totals, the ratio against the
official SDK's equivalent when its venv exists (``bench/setup_official.sh``), and the largest
modules by the chosen kind.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "tinker_lite"
KINDS = ("total", "blank", "comment", "doc", "code")


def count(path: pathlib.Path) -> dict[str, int]:
    """Physical lines of one module, split into blank, comment, docstring and code lines."""
    source = path.read_text()
    doc: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str) and first:
                doc.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines = source.splitlines()
    kinds = dict.fromkeys(KINDS, 0)
    kinds["total"] = len(lines)
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if number in doc:
            kinds["doc"] += 1
        elif not text:
            kinds["blank"] += 1
        else:
            kinds["comment" if text.startswith("#") else "code"] += 1
    return kinds


def official_lines() -> int | None:
    """The official SDK's lines without ``types/`` and ``cli/``, from the benchmark venv."""
    venv = pathlib.Path.home() / ".cache/tinker-lite-bench/official-venv/lib"
    for package in sorted(venv.glob("python*/site-packages/tinker")):
        files = package.rglob("*.py")
        kept = [p for p in files if p.relative_to(package).parts[0] not in ("types", "cli")]
        return sum(len(p.read_text().splitlines()) for p in kept)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--by", choices=KINDS, default="total", help="sort modules by this kind")
    parser.add_argument("--top", type=int, default=25, help="how many modules to list")
    args = parser.parse_args()
    per = {
        str(p.relative_to(ROOT.parent)): count(p)
        for p in sorted(ROOT.rglob("*.py"))
        if p.relative_to(ROOT).parts[0] not in ("local", "cli", "types")
    }
    totals = {kind: sum(c[kind] for c in per.values()) for kind in KINDS}
    print("client core:", ", ".join(f"{kind} {totals[kind]}" for kind in KINDS))
    official = official_lines()
    if official:
        ratio = totals["total"] / official
        print(f"official 0.38 equivalent: {official} lines; ratio {ratio:.2f}x")
    for name, kinds in sorted(per.items(), key=lambda item: -item[1][args.by])[: args.top]:
        print(f"{kinds[args.by]:6d} {kinds['total']:6d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
