"""``tinker-lite local serve``: the offline Tinker-compatible server."""

from __future__ import annotations

import argparse
from typing import Any

from tinker_lite.cli._context import Context
from tinker_lite.cli._exit import EXIT_USAGE
from tinker_lite.cli._parser import Parser

__all__ = ["cmd_local_serve", "register"]


def cmd_local_serve(ctx: Context) -> int:
    """Run the offline server; the arguments go to ``python -m tinker_lite.local serve``."""
    from tinker_lite.local import __main__ as local_main

    rest: list[str] = list(ctx.args.server_args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    try:
        # Its usage, help and errors name the command that was typed.
        code = local_main.main(["serve", *rest], prog="tinker-lite local")
    except SystemExit as exc:  # the server's own argument parser: --help (0) or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return int(code or 0)


def register(commands: Any) -> None:
    """Add the ``local`` group to the parser (``serve`` hands its arguments to the server)."""
    local = commands.add_parser(
        "local",
        help="the offline local server",
        description="Local server.",
        epilog="examples:\n"
        "  tinker-lite local serve                   # http://127.0.0.1:8000\n"
        "  tinker-lite local serve --port 8080 --data-dir ./tinker-data\n"
        "  tinker-lite local serve --help            # the server's own options",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    local_cmds = local.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=Parser)
    local_cmds.required = True
    sub = local_cmds.add_parser(
        "serve",
        help="run the offline Tinker-compatible server",
        description="Run the offline Tinker-compatible server; options are those of "
        "`python -m tinker_lite.local serve` (see `tinker-lite local serve --help`).",
        add_help=False,
    )
    # Everything after `serve` is left unparsed here and handed to the server (see main).
    sub.set_defaults(handler=cmd_local_serve, server_args=[])
