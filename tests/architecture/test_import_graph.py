"""The layering of docs/architecture.rst, checked with ``ast``.

The package is parsed once (module-level cache). Imports inside ``if TYPE_CHECKING:`` are
annotations only; every other import, lazy ones inside functions included, runs. The layers'
modules are read from the tree (``_training/``, ``_rest/``, ``_api/``, ``_transport/``,
``_futures/``, ``_session/``, ``_codec/``, ``_tokenizer/``), so a new module is checked where it
lives.

* the package's top holds at most 10 private modules (the leaves and ``_context``), and no
  module outside ``local/`` is longer than 700 lines;
* no import cycle at run time anywhere in the package (a module importing its own package's
  ``__init__`` aside), and none counting the imports under ``TYPE_CHECKING`` either;
* no client reaches back up to ``service_client`` (the factory on top) at run time;
* client modules (the public clients and their parts in ``_training/`` and ``_rest/``) are
  imported only by ``__init__``, the CLI and other client modules;
* the context, the requestor and sampling's send job (``_sampling``) never import a client; the
  layers below the requestor never import a client, the requestor or the local server; clients
  name nothing of the transport;
* the transport knows no codec (no ``_codec``, no ``types``); the codec imports only ``types``,
  ``_errors`` and ``_secrets`` of the package, and no HTTP library; tenacity is imported by one
  module (``_transport.loops``); the light tokenizer imports only ``_errors`` and ``_repr``;
* ``types`` imports only the standard library, attrs, numpy and ``tinker_lite._errors``;
  ``tinker_lite/local`` imports nothing of the client side but ``types`` and the codec;
* numpy is imported inside the functions that need it, never at module level, outside
  ``tinker_lite/local`` (the server and its numpy model);
* ``import tinker_lite`` does not load torch, transformers, pydantic, httpx or asyncio, and
  neither it nor the codecs load numpy;
* no module imports ray (an optional extra, for examples/rl_ray.py);
* inside ``tinker_lite/local`` imports run one way, ``http`` -> ``protocol`` -> ``service`` ->
  ``storage`` -> ``model`` (annotations included); the layers import of the top modules only
  ``refusals`` (the domain errors); the model imports numpy and the standard library only
  (``tokenizers`` lazily, for stop strings); at most 8 modules sit at local's top, and none of
  local's modules is over 700 lines.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO

PACKAGE = REPO / "tinker_lite"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules_under(*packages: str) -> frozenset[str]:
    """The package's modules in ``packages`` (the sub-packages themselves included)."""
    return frozenset(
        _module_name(path)
        for package in packages
        for path in PACKAGE.joinpath(*package.split(".")[1:]).rglob("*.py")
    )


# The public clients and their parts: the training client's (_training/) and what the REST-only
# clients share (_rest/).
CLIENT_MODULES = frozenset(
    {
        "tinker_lite.service_client",
        "tinker_lite.training_client",
        "tinker_lite.sampling_client",
        "tinker_lite.rest_client",
        "tinker_lite.admin_client",
        "tinker_lite.auth",
        "tinker_lite.tokenizer",
    }
) | _modules_under("tinker_lite._training", "tinker_lite._rest")
# The requestor (endpoints, encodings, service headers) and what all clients of one connection
# share.
CONNECTION_MODULES = frozenset({"tinker_lite._context"}) | _modules_under("tinker_lite._api")
# The layers below the requestor: the transport, futures and polling, the session.
LAYER_MODULES = _modules_under(
    "tinker_lite._transport", "tinker_lite._futures", "tinker_lite._session"
)
TRANSPORT_MODULES = LAYER_MODULES | {"tinker_lite.telemetry"}
CODEC_MODULES = _modules_under("tinker_lite._codec")
TOKENIZER_MODULES = _modules_under("tinker_lite._tokenizer")
# What the light tokenizer may import of the package: leaves that import nothing of it.
TOKENIZER_LEAVES = frozenset({"tinker_lite._errors", "tinker_lite._repr"})
# At most this many private modules at the package's top (``tinker_lite/_*.py``).
MAX_PRIVATE_TOP_LEVEL = 10
# No module outside local/ is longer than this.
MAX_LINES = 700
# The one module that imports tenacity: tenacity stays private, in one module.
TENACITY_MODULE = "tinker_lite._transport.loops"
# What a module under tinker_lite._codec (and the local server) may import of the client side.
CODEC_DEPENDENCIES = frozenset({"tinker_lite", "tinker_lite._errors", "tinker_lite._secrets"})
# Modules the clients build on that are not clients themselves (shared helpers).
CLIENT_IMPORTERS = frozenset({"tinker_lite", "tinker_lite.cli"})
HTTP_LIBRARIES = frozenset({"requests", "urllib3", "httpx", "http", "aiohttp", "tenacity"})
CODECS = frozenset({"tinker_lite._codec.wire", "tinker_lite._codec.proto", "tinker_lite.types"})
HEAVY_OR_FORBIDDEN = ("torch", "transformers", "pydantic", "httpx", "asyncio")


@dataclass(frozen=True)
class Imports:
    """What one module imports: at run time, and in total (``TYPE_CHECKING`` blocks included)."""

    runtime: frozenset[str]
    every: frozenset[str]
    top_level: frozenset[str]


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(path: Path) -> Imports:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    runtime: set[str] = set()
    typing_only: set[str] = set()
    top_level: set[str] = set()

    def names_of(node: ast.Import | ast.ImportFrom) -> set[str]:
        if isinstance(node, ast.Import):
            return {alias.name for alias in node.names}
        if node.level:
            base = package.split(".")
            base = base[: len(base) - node.level + 1]
            module = ".".join([*base, node.module] if node.module else base)
        else:
            module = node.module or ""
        # `from tinker_lite import types` imports the submodule.
        return {module} | {f"{module}.{alias.name}" for alias in node.names}

    def visit(statements: list[ast.stmt], *, annotations_only: bool, depth: int) -> None:
        # Imports are statements: only statement bodies are walked, never expressions.
        for node in statements:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found = names_of(node)
                (typing_only if annotations_only else runtime).update(found)
                if depth == 0 and not annotations_only:
                    top_level.update(found)
                continue
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.body, annotations_only=True, depth=depth)
                visit(node.orelse, annotations_only=annotations_only, depth=depth)
                continue
            nested = depth + isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            bodies: list[list[ast.stmt]] = [
                getattr(node, field, [])
                for field in ("body", "orelse", "finalbody")
                if isinstance(getattr(node, field, None), list)
            ]
            bodies += [handler.body for handler in getattr(node, "handlers", [])]
            bodies += [case.body for case in getattr(node, "cases", [])]
            for body in bodies:
                visit(body, annotations_only=annotations_only, depth=nested)

    visit(tree.body, annotations_only=False, depth=0)
    return Imports(frozenset(runtime), frozenset(runtime | typing_only), frozenset(top_level))


@functools.cache
def _graph() -> dict[str, Imports]:
    """Every module of the package and its imports (parsed once per test session)."""
    return {_module_name(path): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def _internal(imported: frozenset[str]) -> set[str]:
    """The package's own modules among ``imported``."""
    known = set(_graph()) | CLIENT_MODULES | TRANSPORT_MODULES | CONNECTION_MODULES
    return {name for name in imported if name in known}


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _is_stdlib(name: str) -> bool:
    return _top(name) in sys.stdlib_module_names or name == "__future__"


def _in_types(module: str) -> bool:
    return module == "tinker_lite.types" or module.startswith("tinker_lite.types.")


def _cycles(*, annotations: bool) -> list[list[str]]:
    """The package's import cycles (``annotations``: counting ``TYPE_CHECKING`` imports)."""
    graph = {
        module: {
            target
            for target in _internal(imports.every if annotations else imports.runtime)
            # A module importing its own package's __init__ is how packages work.
            if target != module and not module.startswith(target + ".")
        }
        for module, imports in _graph().items()
    }
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                walk(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module)
    return cycles


def test_the_package_has_no_runtime_import_cycle() -> None:
    cycles = _cycles(annotations=False)
    assert not cycles, "runtime import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_import_cycle_even_in_annotations() -> None:
    cycles = list(_cycles(annotations=True))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_top_holds_few_private_modules() -> None:
    private = sorted(p.name for p in PACKAGE.glob("_*.py") if p.name != "__init__.py")
    assert len(private) <= MAX_PRIVATE_TOP_LEVEL, private


def test_no_module_is_too_long() -> None:
    long = {
        path.relative_to(REPO).as_posix(): n
        for path in PACKAGE.rglob("*.py")
        if "local" not in path.relative_to(PACKAGE).parts[:1]
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_light_tokenizer_imports_only_leaves_of_the_package() -> None:
    for module in TOKENIZER_MODULES:
        bad = sorted(_internal(_graph()[module].every) - TOKENIZER_MODULES - TOKENIZER_LEAVES)
        assert not bad, f"{module} imports {bad}"


def test_no_client_reaches_back_up_to_the_service_client() -> None:
    for module, imports in _graph().items():
        if module in CLIENT_MODULES - {"tinker_lite.service_client"}:
            assert "tinker_lite.service_client" not in imports.runtime, module


def test_clients_are_imported_only_by_init_cli_and_clients() -> None:
    for module, imports in _graph().items():
        if (
            module in CLIENT_MODULES
            or module in CLIENT_IMPORTERS
            or module.startswith("tinker_lite.cli.")
        ):
            continue
        bad = sorted(_internal(imports.runtime) & CLIENT_MODULES)
        assert not bad, f"{module} imports client modules {bad}"


def test_context_and_requestor_never_import_clients() -> None:
    for module in CONNECTION_MODULES:
        imports = _graph()[module]
        bad = sorted(_internal(imports.every) & CLIENT_MODULES)
        assert not bad, f"{module} imports {bad}"


def test_the_sample_job_knows_no_client() -> None:
    # Sampling's send job is handed what it needs; it imports no client, not even for annotations.
    modules = _modules_under("tinker_lite._sampling")
    assert "tinker_lite._sampling.job" in modules
    for module in modules:
        bad = sorted(_internal(_graph()[module].every) & CLIENT_MODULES)
        assert not bad, f"{module} imports {bad}"


def test_transport_never_imports_clients_connection_or_local() -> None:
    for module in TRANSPORT_MODULES & set(_graph()):
        bad = sorted(
            name
            for name in _graph()[module].runtime
            if name in CLIENT_MODULES or name.startswith("tinker_lite.local")
        )
        bad += sorted(_internal(_graph()[module].every) & CONNECTION_MODULES)
        assert not bad, f"{module} imports {bad}"


def test_clients_speak_to_the_requestor_not_the_transport() -> None:
    # HTTP details never leak into clients; nothing of the transport is named there.
    below = (
        "tinker_lite._transport",
        "tinker_lite._session.holder",
        "tinker_lite._codec.wire",
    )
    for module in CLIENT_MODULES:
        # Annotations (TYPE_CHECKING imports) may name anything.
        imports = _graph()[module].runtime
        bad = sorted(name for name in imports if name.startswith(below) and name not in below)
        assert not bad, f"{module} imports {bad}"


def test_http_knows_no_codec() -> None:
    imports = _graph()["tinker_lite._transport.http"].every
    bad = sorted(name for name in imports if name in CODECS or _in_types(name))
    assert not bad, f"_http imports {bad}"


def test_the_layers_are_where_the_checks_look_for_them() -> None:
    # The module sets are read from the tree: a renamed layer must not empty them silently.
    assert {"tinker_lite._api.requestor", "tinker_lite._context"} <= CONNECTION_MODULES
    assert {
        "tinker_lite._transport.http",
        "tinker_lite._transport.loops",
        "tinker_lite._futures.poller",
        "tinker_lite._session.holder",
    } <= TRANSPORT_MODULES
    assert {"tinker_lite._codec.wire", "tinker_lite._codec.proto"} <= CODEC_MODULES
    assert {"tinker_lite._training.queue", "tinker_lite._rest.base"} <= CLIENT_MODULES
    assert "tinker_lite._tokenizer.light" in TOKENIZER_MODULES
    assert TENACITY_MODULE in _graph()


def test_the_transport_knows_no_codec() -> None:
    # docs/architecture.rst: the transport moves bytes; the requestor encodes and decodes them.
    for module in _modules_under("tinker_lite._transport"):
        imports = _graph()[module].every
        bad = sorted(
            name
            for name in imports
            if name in CODEC_MODULES or _in_types(name) or name in CONNECTION_MODULES
        )
        assert not bad, f"{module} imports {bad}"


def test_the_codec_imports_only_types_and_errors() -> None:
    # _api -> _codec -> types; annotations may name the response type they read.
    for module in CODEC_MODULES:
        imports = _graph()[module].runtime
        bad = sorted(
            name
            for name in _internal(imports)
            if name not in CODEC_MODULES and name not in CODEC_DEPENDENCIES and not _in_types(name)
        )
        bad += sorted(name for name in imports if _top(name) in HTTP_LIBRARIES)
        assert not bad, f"{module} imports {bad}"


def test_tenacity_is_imported_by_one_module() -> None:
    importers = sorted(
        module
        for module, imports in _graph().items()
        if any(_top(name) == "tenacity" for name in imports.every)
    )
    assert importers == [TENACITY_MODULE]


def test_types_imports_only_stdlib_attrs_numpy_and_errors() -> None:
    for module, imports in _graph().items():
        if not _in_types(module):
            continue
        bad = sorted(
            name
            for name in imports.runtime
            if not _is_stdlib(name)
            and _top(name) not in {"attrs", "numpy"}
            and name != "torch"
            and not _in_types(name)
            and not name.startswith("tinker_lite._errors")
            and name != "tinker_lite"
        )
        assert not bad, f"{module} imports {bad}"
        # torch only inside TensorData.to_torch, never at module level.
        assert "torch" not in imports.top_level, f"{module} imports torch at module level"


def test_numpy_is_imported_lazily_outside_the_local_server() -> None:
    for module, imports in _graph().items():
        if module.startswith("tinker_lite.local"):
            continue
        eager = sorted(name for name in imports.top_level if _top(name) == "numpy")
        assert not eager, f"{module} imports {eager} at module level: import it where it is used"


def test_wire_never_imports_http_code() -> None:
    imports = _graph()["tinker_lite._codec.wire"].every
    bad = sorted(
        name
        for name in imports
        if _top(name) in HTTP_LIBRARIES
        or name in CLIENT_MODULES | TRANSPORT_MODULES | CONNECTION_MODULES
    )
    assert not bad, f"_wire.py imports {bad}"


def test_local_never_imports_clients_or_transport() -> None:
    forbidden = CLIENT_MODULES | TRANSPORT_MODULES | CONNECTION_MODULES
    for module, imports in _graph().items():
        if not module.startswith("tinker_lite.local"):
            continue
        bad = sorted(_internal(imports.every) & forbidden)
        bad += sorted(name for name in imports.every if name.startswith("tinker_lite.cli"))
        # The server shares the models and their codecs with the client side, nothing else.
        bad += sorted(
            name
            for name in _internal(imports.every)
            if not name.startswith("tinker_lite.local")
            and name not in CODEC_MODULES
            and name not in CODEC_DEPENDENCIES
            and not _in_types(name)
        )
        assert not bad, f"{module} imports {bad}"


def test_the_parser_sees_relative_lazy_and_type_checking_imports() -> None:
    assert "tinker_lite._errors" in _graph()["tinker_lite._transport.http"].runtime
    assert _module_name(PACKAGE / "local" / "x.py") == "tinker_lite.local.x"
    context = _graph()["tinker_lite._context"]
    # Imported lazily inside a method: it runs, but not at module level.
    assert "tinker_lite.local" in context.runtime
    assert "tinker_lite.local" not in context.top_level
    api = _graph()["tinker_lite._api.requestor"]
    # Imported under TYPE_CHECKING only: an annotation, not a runtime edge.
    assert "tinker_lite._session.holder" in api.every
    assert "tinker_lite._session.holder" not in api.runtime


def test_the_package_never_imports_ray() -> None:
    # Ray is an optional extra for examples/rl_ray.py; a SamplingClient pickles without it.
    offenders = {
        module: sorted(name for name in imports.every if _top(name) == "ray")
        for module, imports in _graph().items()
    }
    assert {module: names for module, names in offenders.items() if names} == {}


def test_import_does_not_load_heavy_modules() -> None:
    # Cumulative in one interpreter: each import adds to what the previous ones loaded.
    statements = (
        "import tinker_lite",
        "import tinker_lite.types",
        "import tinker_lite._codec.wire",
        "import tinker_lite._codec.proto",
    )
    code = (
        "import sys\n"
        f"for statement in {statements!r}:\n"
        "    exec(statement)\n"
        f"    loaded = [m for m in {(*HEAVY_OR_FORBIDDEN, 'numpy')!r} if m in sys.modules]\n"
        "    print(statement + '|' + ','.join(loaded))\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded = dict(line.split("|") for line in result.stdout.strip().splitlines())
    assert loaded == dict.fromkeys(statements, "")


LOCAL = "tinker_lite.local"
# docs/architecture.rst, "The local server": each layer imports only the layers after it.
LOCAL_LAYERS = ("http", "protocol", "service", "storage", "model")
# The top modules the layers may import: the domain errors (a leaf above the model).
LOCAL_SHARED = frozenset({f"{LOCAL}.refusals"})


def _local_layer(module: str) -> int | None:
    """The rank of ``module``'s layer in LOCAL_LAYERS; None for local's top modules."""
    parts = module.split(".")
    if parts[:2] != ["tinker_lite", "local"] or len(parts) < 3 or parts[2] not in LOCAL_LAYERS:
        return None
    return LOCAL_LAYERS.index(parts[2])


def _local_modules() -> dict[str, Imports]:
    return {m: i for m, i in _graph().items() if m == LOCAL or m.startswith(LOCAL + ".")}


def test_local_layers_import_one_way() -> None:
    modules = _local_modules()
    assert {_local_layer(m) for m in modules} >= set(range(len(LOCAL_LAYERS)))
    for module, imports in modules.items():
        targets = {
            name
            for name in _internal(imports.every)
            if name.startswith(LOCAL + ".") and name != module and name in modules
        }
        rank = _local_layer(module)
        if rank is None:
            if module in LOCAL_SHARED:
                # The domain errors are a leaf: they build on the model's error alone.
                bad = sorted(t for t in targets if _local_layer(t) != LOCAL_LAYERS.index("model"))
                assert not bad, f"{module} imports {bad}"
            continue
        bad = sorted(
            target
            for target in targets
            if target not in LOCAL_SHARED
            and ((layer := _local_layer(target)) is None or layer < rank)
        )
        assert not bad, f"{module} ({LOCAL_LAYERS[rank]}) imports {bad}"


def test_the_local_model_imports_only_numpy_and_the_standard_library() -> None:
    for module, imports in _local_modules().items():
        if _local_layer(module) != LOCAL_LAYERS.index("model"):
            continue
        bad = sorted(
            name
            for name in imports.every
            if not _is_stdlib(name)
            and _top(name) != "numpy"
            and not name.startswith(f"{LOCAL}.model")
            # The tokenizer (stop strings, the shipped files) is loaded where it is used.
            and not (_top(name) == "tokenizers" and name not in imports.top_level)
        )
        assert not bad, f"{module} imports {bad}"


def test_local_keeps_few_modules_at_its_top() -> None:
    top = sorted(path.name for path in (PACKAGE / "local").glob("*.py"))
    assert len(top) <= 8, top
    assert {"__init__.py", "__main__.py", "server.py"} <= set(top)


def test_no_local_module_is_over_700_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (PACKAGE / "local").rglob("*.py")
    }
    assert {name: lines for name, lines in sizes.items() if lines > 700} == {}
