"""The layering of STYLE.md, checked with ``ast`` over the modules present in the package.

* ``types`` imports only the standard library, attrs, numpy and ``tinker_lite._errors``;
* ``_wire`` never imports HTTP code;
* nothing under ``tinker_lite/local`` imports a client or transport module;
* client modules are imported only by ``__init__``, ``cli`` and other client modules;
* ``import tinker_lite`` does not load torch, transformers, pydantic, httpx or asyncio.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tinker_lite"

CLIENT_MODULES = frozenset(
    {
        "tinker_lite.service_client",
        "tinker_lite.training_client",
        "tinker_lite.sampling_client",
        "tinker_lite.rest_client",
        "tinker_lite._chunking",
        "tinker_lite.tokenizer",
        # Batch validation composes the chunking plan: it belongs to the client layer.
        "tinker_lite._validate",
    }
)
TRANSPORT_MODULES = frozenset(
    {
        "tinker_lite._http",
        "tinker_lite._retry",
        "tinker_lite._futures",
        "tinker_lite._session",
        "tinker_lite.telemetry",
    }
)
HTTP_LIBRARIES = frozenset({"requests", "urllib3", "httpx", "http", "aiohttp", "tenacity"})
HEAVY_OR_FORBIDDEN = ("torch", "transformers", "pydantic", "httpx", "asyncio")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module a file imports (at any depth: lazy imports inside functions count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = (
        _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    )
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            # `from tinker_lite import types` imports the submodule.
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _package_files() -> dict[str, set[str]]:
    return {_module_name(path): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _is_stdlib(name: str) -> bool:
    return _top(name) in sys.stdlib_module_names or name == "__future__"


def _internal(imported: set[str]) -> set[str]:
    known = set(_package_files())
    return {
        name for name in imported if name in known or name in CLIENT_MODULES | TRANSPORT_MODULES
    }


def test_types_imports_only_stdlib_attrs_numpy_and_errors() -> None:
    imported = _imports(PACKAGE / "types.py")
    allowed_internal = {"tinker_lite._errors"}
    bad = sorted(
        name
        for name in imported
        if not _is_stdlib(name)
        and _top(name) not in {"attrs", "numpy"}
        and name not in allowed_internal
        and not name.startswith("tinker_lite._errors.")
        and name != "torch"
    )
    assert not bad, f"types.py imports {bad}"
    # torch only inside TensorData.to_torch, never at module level.
    assert _lazy_only(PACKAGE / "types.py", "torch")


def _lazy_only(path: Path, module: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Import) and any(a.name == module for a in node.names):
            return False
    return True


def test_wire_never_imports_http_code() -> None:
    imported = _imports(PACKAGE / "_wire.py")
    bad = sorted(
        name
        for name in imported
        if _top(name) in HTTP_LIBRARIES or name in CLIENT_MODULES | TRANSPORT_MODULES
    )
    assert not bad, f"_wire.py imports {bad}"


def test_local_never_imports_clients_or_transport() -> None:
    for module, imported in _package_files().items():
        if not module.startswith("tinker_lite.local"):
            continue
        bad = sorted(_internal(imported) & (CLIENT_MODULES | TRANSPORT_MODULES))
        bad += sorted(name for name in imported if name == "tinker_lite.cli")
        assert not bad, f"{module} imports {bad}"


def test_clients_are_imported_only_by_init_cli_and_clients() -> None:
    allowed = CLIENT_MODULES | {"tinker_lite", "tinker_lite.cli"}
    for module, imported in _package_files().items():
        if module in allowed:
            continue
        bad = sorted(_internal(imported) & CLIENT_MODULES)
        assert not bad, f"{module} imports client modules {bad}"


def test_transport_never_imports_clients_or_local() -> None:
    for module in TRANSPORT_MODULES:
        path = PACKAGE / f"{module.rsplit('.', 1)[1]}.py"
        if not path.exists():
            continue
        imported = _imports(path)
        bad = sorted(
            name
            for name in imported
            if name in CLIENT_MODULES or name.startswith("tinker_lite.local")
        )
        assert not bad, f"{module} imports {bad}"


def test_import_graph_parser_resolves_relative_imports(tmp_path: Path) -> None:
    assert "tinker_lite._errors" in _imports(PACKAGE / "types.py")
    assert _module_name(PACKAGE / "local" / "x.py") == "tinker_lite.local.x"


def _run(code: str) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    "statement",
    ["import tinker_lite", "import tinker_lite.types", "import tinker_lite._wire"],
)
def test_import_does_not_load_heavy_modules(statement: str) -> None:
    code = (
        f"import sys\n{statement}\n"
        f"print(','.join(m for m in {HEAVY_OR_FORBIDDEN!r} if m in sys.modules))\n"
    )
    assert _run(code).strip() == ""
