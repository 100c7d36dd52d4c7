"""Run a script written for the official SDK (``import tinker``) on tinker_lite, unchanged.

Usage::

    python -m tinker_lite.as_tinker script.py [args...]
    python -m tinker_lite.as_tinker -m package.module [args...]

The script runs as ``__main__``, as plain ``python`` would run it, with an import hook that
makes ``tinker`` and its public modules resolve to tinker_lite (:func:`install` in code; the
modules covered and the version reported: docs/as_tinker.rst). Not covered: any other official
module fails to import with an :class:`ImportError` that names it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import re
import runpy
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from tinker_lite._version import WIRE_SDK_VERSION

__all__ = ["ALIASES", "TinkerAliasFinder", "install", "main", "uninstall"]

ALIASES: dict[str, str] = {
    "tinker": "tinker_lite",
    "tinker.types": "tinker_lite.types",
    "tinker._exceptions": "tinker_lite._errors",
    "tinker._version": "tinker_lite",
    "tinker.lib.public_interfaces": "tinker_lite",
    "tinker.lib.public_interfaces.service_client": "tinker_lite.service_client",
    "tinker.lib.public_interfaces.training_client": "tinker_lite.training_client",
    "tinker.lib.public_interfaces.sampling_client": "tinker_lite.sampling_client",
    "tinker.lib.public_interfaces.rest_client": "tinker_lite.rest_client",
    "tinker.lib.public_interfaces.api_future": "tinker_lite._futures.future",
}
"""Official module name -> the tinker_lite module that stands in for it."""

# Official packages with no counterpart of their own that must import to reach covered modules.
_BRIDGES = frozenset({"tinker.lib"})
# The official modules that say which release they are (``__version__``, ``__title__``).
_VERSIONED = frozenset({"tinker", "tinker._version"})

_USAGE = "usage: python -m tinker_lite.as_tinker (script.py | -m module) [args...]"


def _target(fullname: str) -> str | None:
    """The tinker_lite module standing in for the official module ``fullname``, if any."""
    if fullname in ALIASES:
        return ALIASES[fullname]
    if fullname.startswith("tinker.types."):
        exact = "tinker_lite.types." + fullname.removeprefix("tinker.types.")
        try:
            found = importlib.util.find_spec(exact)
        except ImportError:
            found = None
        return exact if found is not None else "tinker_lite.types"
    return None


class _StandIn(ModuleType):
    """An official module name with a tinker_lite module's attributes; a module of its own, so
    importing official submodules through it changes nothing of tinker_lite's modules."""

    def __init__(self, name: str, target: ModuleType) -> None:
        super().__init__(name, target.__doc__)
        self.__stand_in_for__ = target
        self.__path__: list[str] = []  # a package: its official submodules import through it

    def __getattr__(self, attr: str) -> object:
        target = self.__dict__.get("__stand_in_for__")
        if target is None:  # half-built: nothing to forward to (repr must not recurse)
            raise AttributeError(attr)
        return getattr(target, attr)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self.__stand_in_for__)) | set(self.__dict__))


class _AliasLoader(importlib.abc.Loader):
    """Creates the stand-in of an official module (an empty one for a bridge package)."""

    def __init__(self, target: str | None) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        if self.target is None:  # a bridge package: empty, only leads to covered submodules
            bridge = ModuleType(spec.name, "Path to official modules that tinker_lite covers.")
            bridge.__path__ = []
            return bridge
        stand_in = _StandIn(spec.name, importlib.import_module(self.target))
        if spec.name in _VERSIONED:
            # The official release whose API is provided, not tinker_lite's own version.
            vars(stand_in).update(__version__=WIRE_SDK_VERSION, __title__="tinker")
        return stand_in

    def exec_module(self, module: ModuleType) -> None:
        del module  # the tinker_lite module behind it is already initialised


class _TinkerDistribution(importlib.metadata.Distribution):
    """The ``tinker`` distribution's metadata: the official release whose API is provided."""

    def read_text(self, filename: str) -> str | None:
        if filename in ("METADATA", "PKG-INFO"):
            return (
                "Metadata-Version: 2.1\n"
                "Name: tinker\n"
                f"Version: {WIRE_SDK_VERSION}\n"
                "Summary: The official tinker SDK's API, provided by tinker_lite\n"
            )
        return None

    def locate_file(self, path: Any) -> Path:
        return Path(__file__).parent / str(path)


class TinkerAliasFinder(importlib.abc.MetaPathFinder):
    """Resolves ``tinker`` and its covered submodules to tinker_lite (see the module docstring)."""

    def find_distributions(
        self, context: importlib.metadata.DistributionFinder.Context | None = None
    ) -> Iterator[importlib.metadata.Distribution]:
        """``importlib.metadata`` asking for ``tinker`` finds :class:`_TinkerDistribution`."""
        name = getattr(context, "name", None)
        if name is None or re.sub(r"[-_.]+", "-", name).lower() == "tinker":
            yield _TinkerDistribution()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        del path, target
        if fullname != "tinker" and not fullname.startswith("tinker."):
            return None
        if fullname in _BRIDGES:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(None), is_package=True)
        stand_in = _target(fullname)
        if stand_in is None:
            raise ModuleNotFoundError(
                f"{fullname!r} is a module of the official tinker SDK that tinker_lite does not "
                f"provide; covered: {', '.join(sorted(ALIASES))} and tinker.types.<module> "
                "(see python -m tinker_lite.as_tinker --help)",
                name=fullname,
            )
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(stand_in), is_package=True)


def install() -> None:
    """Make ``import tinker`` (and covered submodules) resolve to tinker_lite from now on."""
    if any(isinstance(finder, TinkerAliasFinder) for finder in sys.meta_path):
        return
    for name in [n for n in sys.modules if n == "tinker" or n.startswith("tinker.")]:
        del sys.modules[name]  # an official SDK imported earlier must not answer later imports
    sys.meta_path.insert(0, TinkerAliasFinder())


def uninstall() -> None:
    """Undo :func:`install`: forget the hook and the ``tinker`` modules it resolved."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, TinkerAliasFinder)]
    for name in [n for n in sys.modules if n == "tinker" or n.startswith("tinker.")]:
        del sys.modules[name]


def main(argv: Sequence[str] | None = None) -> int:
    """Run a script or module (``-m``) with the hook installed; return its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        stream = sys.stdout if args else sys.stderr
        print(_USAGE, file=stream)
        if args:
            print(__doc__, file=stream)
        return 0 if args else 2
    install()
    if args[0] == "-m":
        if len(args) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        sys.argv = args[1:]  # sys.path[0] is already the working directory, as for python -m
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return 0
    script = args[0]
    if not os.path.exists(script):
        print(f"tinker_lite.as_tinker: can't open file {script!r}", file=sys.stderr)
        return 2
    sys.argv = args
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as python script.py sets it
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
