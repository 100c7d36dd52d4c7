"""``tinker-lite model list``: the base models the credential in use may train or sample."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tinker_lite.cli._context import Context
from tinker_lite.cli._exit import EXIT_NOT_FOUND, EXIT_OK, PROG, CLIError
from tinker_lite.cli._parser import add_group, leaf

if TYPE_CHECKING:
    from tinker_lite import types

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
    # Columns the service's answer says nothing about (null for every model) are left out, and
    # a note says so, rather than a column of dashes.
    columns: list[tuple[str, Callable[[types.SupportedModel], object]]] = [
        ("MODEL", lambda m: m.model_name),
        ("MAX CONTEXT", lambda m: m.max_context_length),
        ("TRAINABLE", lambda m: _yes_no(m.trainable)),
        ("SAMPLEABLE", lambda m: _yes_no(m.sampleable)),
    ]
    said = [any(cell(m) is not None for m in models) for _, cell in columns]
    said[0] = True  # the name column always shows
    shown = [column for column, keep in zip(columns, said, strict=True) if keep]
    unsaid = [title.lower() for (title, _), keep in zip(columns, said, strict=True) if not keep]
    ctx.output.table(
        [title for title, _ in shown],
        [[cell(m) for _, cell in shown] for m in models],
        empty="No models.",
    )
    if models and unsaid:
        ctx.output.note(f"The service does not say which models are {' or '.join(unsaid)}.")
    return EXIT_OK


def _yes_no(value: bool | None) -> str | None:
    return None if value is None else ("yes" if value else "no")


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
