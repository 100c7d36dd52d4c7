"""The ``tinker-lite`` command: the official ``tinker`` command's commands (credentials, runs,
checkpoints, sessions, models, billing) and more (the local server, checks, pruning).

Every listing and info command prints a table by default and one JSON document with
``--format json`` (with the official CLI's keys for its commands). Expected failures print a
single ``tinker-lite: error: ...`` line on stderr (what failed, where, what to try) and exit with
a documented code (:data:`EXIT_CODES`); a traceback is shown only with ``--debug`` or
``TINKER_LOG=debug``. The API key is never printed.

One module per command group (``check``, ``auth``, ``run``, ``checkpoint`` with ``hub`` for
``push-hf``, ``session``, ``model``, ``billing``, ``local``); the client is a standalone
:class:`~tinker_lite.RestClient` whose start-up budget (``--startup-timeout``) makes an
unreachable service fail within seconds.
"""

from __future__ import annotations

from tinker_lite.cli._context import Context
from tinker_lite.cli._exit import (
    EXIT_AUTH,
    EXIT_CODES,
    EXIT_CONFLICT,
    EXIT_CONNECTION,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_SERVICE,
    EXIT_USAGE,
    CLIError,
    exit_code_for,
)
from tinker_lite.cli._main import build_parser, main
from tinker_lite.cli._output import to_jsonable
from tinker_lite.cli.checkpoint import list_all_checkpoints, parse_ttl, plan_prune

__all__ = [
    "EXIT_AUTH",
    "EXIT_CODES",
    "EXIT_CONFLICT",
    "EXIT_CONNECTION",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_SERVICE",
    "EXIT_USAGE",
    "CLIError",
    "Context",
    "build_parser",
    "exit_code_for",
    "list_all_checkpoints",
    "main",
    "parse_ttl",
    "plan_prune",
    "to_jsonable",
]
