"""``tinker-lite session ...``: list sessions, show one's runs and samplers, export its trace."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tinker_lite.cli._context import Context
from tinker_lite.cli._exit import EXIT_OK, PROG
from tinker_lite.cli._output import size_cell, to_jsonable
from tinker_lite.cli._parser import add_group, add_paging, leaf

__all__ = ["cmd_session_export_trace", "cmd_session_info", "cmd_session_list", "register"]


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


def cmd_session_export_trace(ctx: Context) -> int:
    """Export a session's timeline as a Perfetto trace: download it, or print its signed URL."""
    from tinker_lite._progress import Progress, progress_mode
    from tinker_lite._transport.download import download

    args = ctx.args
    session_id: str = args.session
    if not ctx.output.json:
        ctx.output.waiting(
            f"Exporting the trace of session {session_id} (this may take a while)..."
        )
    url = ctx.call(lambda: ctx.rest().export_session_trace(session_id).result())
    if args.url_only:
        if ctx.output.json:
            ctx.output.document({"session_id": session_id, "url": url})
        else:
            ctx.output.line(url)  # alone on stdout: usable as "$(... --url-only)"
        return EXIT_OK
    dest = Path(args.output) if args.output else Path.cwd() / f"{session_id}.pftrace"
    dest.parent.mkdir(parents=True, exist_ok=True)
    mode = progress_mode(ctx.output.err, non_tty="lines")
    with Progress(desc="trace", unit="bytes", stream=ctx.output.err, mode=mode) as progress:
        result = download(url, dest, progress=progress, overwrite=True)
    if ctx.output.json:
        doc: dict[str, Any] = {"session_id": session_id, "destination": str(result.path)}
        if result.size:
            doc["file_size_bytes"] = result.size
        ctx.output.document(doc)
        return EXIT_OK
    ctx.output.record(
        [("Session ID", session_id), ("Saved to", result.path), ("Size", size_cell(result.size))]
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
    sub = leaf(
        sessions,
        "export-trace",
        cmd_session_export_trace,
        "export a session's timeline as a Perfetto trace (open it in ui.perfetto.dev)",
        common=common,
        examples=[
            f"{PROG} session export-trace SESSION_ID            # ./SESSION_ID.pftrace",
            f"{PROG} session export-trace SESSION_ID -o run.pftrace",
            f"{PROG} session export-trace SESSION_ID --url-only   # the signed URL (about 1 h)",
        ],
    )
    sub.add_argument("session", metavar="SESSION_ID")
    sub.add_argument(
        "-o", "--output", metavar="PATH", help="where to write it (default: ./SESSION_ID.pftrace)"
    )
    sub.add_argument(
        "--url-only", action="store_true", help="print the signed download URL instead"
    )
