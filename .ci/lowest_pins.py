"""Print pins for `make test-lowest`, derived from setup.cfg so each floor is declared once.

    python .ci/lowest_pins.py constraints  # name==floor for every runtime dependency and extra
    python .ci/lowest_pins.py test-tools   # the dev extra's test tools (unpinned)
    python .ci/lowest_pins.py check        # the installed versions are the floors (a table)

`constraints` turns each `name>=X` of install_requires and of the fast, zstd and chat extras into
`name==X` (a pip --constraint file). It refuses a runtime requirement without a `>=` floor, and
exits non-zero when the running interpreter is not the oldest Python that python_requires allows.
"""

from __future__ import annotations

import configparser
import re
import sys
from pathlib import Path

SETUP_CFG = Path(__file__).resolve().parent.parent / "setup.cfg"
# Extras whose floors are tested; `ray` has its own target (make test-ray) and `dev` holds tools.
PINNED_EXTRAS = ("fast", "zstd", "chat")
# The dev extra's tools that the test suite does not run (lint, types, docs).
NOT_TEST_TOOLS = {"ruff", "mypy", "sphinx"}
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
FLOOR = re.compile(r">=\s*([^,;\s]+)")


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


def _split(requirement: str) -> tuple[str, str]:
    match = REQUIREMENT.match(requirement)
    if match is None:
        raise SystemExit(f"setup.cfg: cannot read requirement {requirement!r}")
    return match.group(1), match.group(2)


def constraints(cfg: configparser.ConfigParser) -> list[str]:
    floor = re.fullmatch(r">=\s*(\d+)\.(\d+)", cfg["options"]["python_requires"].strip())
    if floor is None:
        raise SystemExit("setup.cfg: python_requires must read `>=X.Y`")
    oldest = (int(floor.group(1)), int(floor.group(2)))
    if sys.version_info[:2] != oldest:
        raise SystemExit(
            f"the floors are tested on Python {oldest[0]}.{oldest[1]} (python_requires), "
            f"not on {sys.version_info[0]}.{sys.version_info[1]}"
        )
    requirements = _lines(cfg["options"]["install_requires"])
    extras = cfg["options.extras_require"]
    for extra in PINNED_EXTRAS:
        requirements += _lines(extras[extra])
    pins: dict[str, str] = {}
    for requirement in requirements:
        name, spec = _split(requirement)
        found = FLOOR.search(spec)
        if found is None:
            raise SystemExit(f"setup.cfg: {requirement!r} declares no `>=` floor")
        pins[name.lower()] = found.group(1)
    return [f"{name}=={version}" for name, version in pins.items()]


def test_tools(cfg: configparser.ConfigParser) -> list[str]:
    tools = []
    for requirement in _lines(cfg["options.extras_require"]["dev"]):
        name, _ = _split(requirement)
        if name.lower() in NOT_TEST_TOOLS or name.lower().startswith("types-"):
            continue
        tools.append(requirement)
    return tools


def _release(version: str) -> tuple[int, ...]:
    parts = [int(part) for part in re.findall(r"\d+", version.split("+", maxsplit=1)[0])[:3]]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def check(cfg: configparser.ConfigParser) -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    lines, wrong = [], []
    for pin in constraints(cfg):
        name, floor = pin.split("==")
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = "missing"
        lines.append(f"{name:<12} floor {floor:<8} installed {installed}")
        if _release(installed) != _release(floor):
            wrong.append(name)
    if wrong:
        raise SystemExit("\n".join(lines) + f"\nnot at their floor: {', '.join(wrong)}")
    return lines


def main(argv: list[str]) -> int:
    cfg = configparser.ConfigParser()
    cfg.read(SETUP_CFG, encoding="utf-8")
    kinds = {"constraints": constraints, "test-tools": test_tools, "check": check}
    if len(argv) != 1 or argv[0] not in kinds:
        print(__doc__, file=sys.stderr)
        return 2
    print("\n".join(kinds[argv[0]](cfg)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
