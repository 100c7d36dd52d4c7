"""``tinker-lite model list``: the base models the credential in use may train or sample."""

from __future__ import annotations

import argparse
from typing import Any

from tinker_lite.cli._context import Context
from tinker_lite.cli._exit import EXIT_NOT_FOUND, EXIT_OK, PROG, CLIError
from tinker_lite.cli._parser import add_group, leaf

__all__ = ["cmd_model_list", "register"]


def cmd_model_list(ctx: Context) -> int:
    """List the supported models, or those whose name contains SUBSTRING (any case)."""
    substring: str | None = ctx.args.substring
    models = list(ctx.wait(ctx.rest().get_server_capabilities()).supported_models)
    if substring is not None:
        wanted = substring.lower()
        models = [m for m in models if m.model_name is not None and wanted in m.model_name.lower()]
        if not models:
            raise CLIError(
                f"no model name contains {substring!r} (run `{PROG} model list` to see them all)",
                EXIT_NOT_FOUND,
            )
    if ctx.output.json:
        ctx.output.document({"models": models})
        return EXIT_OK
    ctx.output.table(
        ["MODEL", "MAX CONTEXT", "TRAINABLE", "SAMPLEABLE"],
        [[m.model_name, m.max_context_length, m.trainable, m.sampleable] for m in models],
        empty="No models.",
    )
    return EXIT_OK


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``model`` group to the parser."""
    group = add_group(commands, "model", "base models", "The base models you can use.")
    sub = leaf(
        group,
        "list",
        cmd_model_list,
        "list the base models (pass the name as base_model)",
        common=common,
        examples=[f"{PROG} model list", f"{PROG} model list qwen3 --format json"],
    )
    sub.add_argument(
        "substring",
        metavar="SUBSTRING",
        nargs="?",
        help="only the models whose name contains it (any case)",
    )
