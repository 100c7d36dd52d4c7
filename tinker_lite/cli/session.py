"""``tinker-lite session ...``: list sessions and show one's training runs and samplers."""

from __future__ import annotations

import argparse
from typing import Any

from tinker_lite.cli._context import Context
from tinker_lite.cli._exit import EXIT_OK
from tinker_lite.cli._output import to_jsonable
from tinker_lite.cli._parser import add_group, add_paging, leaf

__all__ = ["cmd_session_info", "cmd_session_list", "register"]


def cmd_session_list(ctx: Context) -> int:
    """List the user's sessions."""
    args = ctx.args
    page = ctx.wait(ctx.rest().list_sessions(limit=args.limit, offset=args.offset))
    if ctx.output.json:
        ctx.output.document(page)
        return EXIT_OK
    ctx.output.table(["SESSION ID"], [[s] for s in page.sessions], empty="No sessions.")
    return EXIT_OK


def cmd_session_info(ctx: Context) -> int:
    """Show the training runs and samplers of one session."""
    session_id: str = ctx.args.session
    info = ctx.wait(ctx.rest().get_session(session_id))
    if ctx.output.json:
        ctx.output.document({"session_id": session_id, **to_jsonable(info)})
        return EXIT_OK
    ctx.output.record(
        [
            ("Session ID", session_id),
            ("Training runs", list(info.training_run_ids) or None),
            ("Samplers", list(info.sampler_ids) or None),
        ]
    )
    return EXIT_OK


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``session`` group to the parser."""
    sessions = add_group(commands, "session", "sessions", "Sessions.")
    sub = leaf(
        sessions,
        "list",
        cmd_session_list,
        "list sessions",
        common=common,
        examples=["tinker-lite session list", "tinker-lite session list --limit 100 --offset 100"],
    )
    add_paging(sub, default_limit=20)
    sub = leaf(
        sessions,
        "info",
        cmd_session_info,
        "show one session's runs and samplers",
        common=common,
        examples=["tinker-lite session info sess-1234 --format json"],
    )
    sub.add_argument("session", metavar="SESSION_ID")
