"""The endpoint table is the one place paths live, and every row is sound.

Each row names models that exist in ``types`` and, where it has one, an SDK method that exists
on its client; every path the golden-0.38 captures show matches a row; no module of the client
side (``local/`` aside) writes an ``/api/v1`` path of its own.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.support.golden import GOLDEN_038_DIR
from tests.support.paths import REPO
from tinker_lite import AdminClient, InvalidInputError, RestClient, types
from tinker_lite._api import endpoints
from tinker_lite._api.endpoints import Endpoint

ROWS = {name: row for name, row in vars(endpoints).items() if isinstance(row, Endpoint)}
PATHS = {name: value for name, value in vars(endpoints).items() if name.endswith("_PATH")}


def test_rows_name_models_and_methods_that_exist() -> None:
    clients = {"RestClient": RestClient, "AdminClient": AdminClient}
    assert len(ROWS) >= 30
    for name, row in ROWS.items():
        if row.response is not None:
            assert isinstance(getattr(types, row.response), type), name
            assert row.response_type is getattr(types, row.response)
        if row.request_type is not None:
            assert isinstance(row.request_model, type), name
        if row.sdk_method is not None:
            client, method = row.sdk_method.split(".")
            assert callable(getattr(clients[client], method)), name


def test_every_path_sent_in_the_golden_captures_is_a_row() -> None:
    if not GOLDEN_038_DIR.is_dir():
        pytest.skip("golden-0.38 fixtures not found")
    patterns = [
        re.compile("^" + re.sub(r"\\\{(\w+)\\\}", "[^/]+(/[^/]+)?", re.escape(row.path)) + "$")
        for row in ROWS.values()
    ] + [re.compile("^" + re.escape(path) + "$") for path in PATHS.values()]
    sent = set()
    for fixture in GOLDEN_038_DIR.glob("*.json"):
        sent |= set(re.findall(r'"path": *"(/api/v1/[^"]*)"', fixture.read_text()))
    assert len(sent) > 20
    unknown = sorted(p for p in sent if not any(pattern.match(p) for pattern in patterns))
    assert unknown == []


def _path_literals(tree: ast.AST) -> list[tuple[int, str]]:
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    literals = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "/api/v1" in node.value
        and id(node) not in docstrings
    ]
    # f"{API}/..." builds a path too.
    built = [
        (node.lineno, ast.unparse(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        and any(
            isinstance(part, ast.FormattedValue)
            and isinstance(part.value, ast.Name)
            and part.value.id == "API"
            for part in node.values
        )
    ]
    return literals + built


def test_paths_live_in_the_endpoint_table_only() -> None:
    package = REPO / "tinker_lite"
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.parts[0] == "local" or relative == relative.parent / "endpoints.py":
            continue
        for line, value in _path_literals(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"{relative}:{line}: {value!r}")
    assert found == []


def test_a_path_is_built_from_encoded_segments() -> None:
    row = endpoints.SET_CHECKPOINT_TTL
    path = row.url_path(training_run_id="run 1", checkpoint_id="weights/a?b")
    assert path == "/api/v1/training_runs/run%201/checkpoints/weights/a%3Fb/ttl"
    with pytest.raises(InvalidInputError) as caught:
        row.url_path(training_run_id="run", checkpoint_id="weights/..")
    assert caught.value.field == "checkpoint_id"
