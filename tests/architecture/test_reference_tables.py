"""Reference tables in the docs are checked against the one table in code each comes from.

* the environment variables: README.rst and docs/configuration.rst hold the table
  :func:`rst_table` renders from ``tinker_lite._environment``, and every variable the package
  reads is a row;
* the run journal's keys: docs/configuration.rst lists exactly the keys a line may carry;
* the README's command list names every command of ``tinker-lite``'s parser, and only those.

``python -m tests.architecture.test_reference_tables --write`` rewrites the generated tables.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tinker_lite import _environment
from tinker_lite._session.journal import JOURNAL_KEYS, JOURNAL_OPTIONAL_KEYS
from tinker_lite.cli import build_parser

README = REPO / "README.rst"
CONFIGURATION = REPO / "docs" / "configuration.rst"
PACKAGE = REPO / "tinker_lite"
START = ".. environment-table-start"
END = ".. environment-table-end"
# Upper-case TINKER_* strings that are not environment variables.
NOT_VARIABLES = {"TINKER_PATH"}  # a metavar of tinker-lite
_VARIABLE = re.compile(r"(TINKER|CLOUDFLARE)_[A-Z0-9_]+")


def rst_table(*, sphinx: bool) -> str:
    """The table as reST: for the Sphinx docs (``sphinx``: links with ``:doc:``) or README.rst."""
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 30 70",
        "",
        "   * - Variable",
        "     - Effect",
    ]
    for row in _environment.VARIABLES:
        effect = row.effect
        if row.see is not None:
            link = f":doc:`{row.see}`" if sphinx else f"``docs/{row.see}.rst``"
            effect = f"{effect} See {link}."
        lines.append("   * - " + ", ".join(f"``{name}``" for name in row.names))
        lines.extend(
            textwrap.wrap(
                effect,
                100,
                initial_indent="     - ",
                subsequent_indent="       ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(lines) + "\n"


def _generated_tables() -> dict[Path, str]:
    return {README: rst_table(sphinx=False), CONFIGURATION: rst_table(sphinx=True)}


def _region(text: str) -> str:
    """The text between the start marker's line and the end marker."""
    start = text.index(START)
    body_start = text.index("\n", start) + 1
    return text[body_start : text.index(END, body_start)]


def _rewritten(text: str, table: str) -> str:
    start = text.index(START)
    body_start = text.index("\n", start) + 1
    return text[:body_start] + "\n" + table + "\n" + text[text.index(END, body_start) :]


@pytest.mark.parametrize("path", [README, CONFIGURATION], ids=lambda p: p.name)
def test_environment_table_is_generated_from_the_code(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _region(text) == "\n" + _generated_tables()[path] + "\n", (
        f"{path.name}: the environment table is out of date; regenerate it with "
        "`python -m tests.architecture.test_reference_tables --write`"
    )


def _variables_read() -> set[str]:
    """Every TINKER_*/CLOUDFLARE_* string constant in the package's code (docstrings aside)."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and _VARIABLE.fullmatch(node.value)
            ):
                found.add(node.value)
    return found - NOT_VARIABLES


def test_every_variable_the_package_reads_is_a_row() -> None:
    rows = {name for row in _environment.VARIABLES for name in row.names}
    read = _variables_read()
    assert read - rows == set(), "read by tinker_lite but not in tinker_lite/_environment.py"
    assert rows - read == set(), "rows of tinker_lite/_environment.py that nothing reads"


def test_the_clis_help_names_only_variables_of_the_table() -> None:
    rows = {name for row in _environment.VARIABLES for name in row.names}
    help_text = build_parser().format_help()
    environment = help_text.split("\nenvironment:\n", 1)[1].split("\n\n", 1)[0]
    named = {match.group() for match in _VARIABLE.finditer(environment)}
    assert named
    assert named <= rows


def test_the_journal_key_table_lists_every_key_in_order() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    section = text[text.index("The run journal\n") :]
    table = section[section.index(".. list-table::") :]
    keys = re.findall(r"^   \* - ``([a-z_]+)``$", table, flags=re.MULTILINE)
    assert tuple(keys) == JOURNAL_KEYS + JOURNAL_OPTIONAL_KEYS


def _leaf_commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    names: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                names.extend(_leaf_commands(sub, f"{prefix}{name} "))
    return names or [prefix.strip()]


def test_the_readmes_command_list_is_the_parsers() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("Command line\n------------\n") :]
    block = section[section.index(".. code-block:: text") :].split("\n\n", 2)[1]
    listed: set[str] = set()
    for line in block.splitlines():
        words = line.split("#", 1)[0].split()
        assert words[0] == "tinker-lite", line
        group, subs = (words[1], words[2]) if len(words) > 2 else (words[1], "")
        listed.update(f"{group} {sub}".strip() for sub in subs.split("|"))
    assert listed == set(_leaf_commands(build_parser()))


def test_make_docs_is_nitpicky() -> None:
    """Every cross-reference must resolve: ``sphinx-build -n -W`` (docs/conf.py lists what may
    stay unlinked)."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    docs_rule = makefile[makefile.index("\ndocs:") :].split("\n\n", 1)[0]
    assert "sphinx-build -n -W " in docs_rule


def main(argv: list[str]) -> int:
    """``--write``: rewrite the generated tables; otherwise print them."""
    for path, table in _generated_tables().items():
        if "--write" in argv:
            path.write_text(_rewritten(path.read_text(encoding="utf-8"), table), encoding="utf-8")
            print(f"rewrote the environment table of {path.relative_to(REPO)}")
        else:
            print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
