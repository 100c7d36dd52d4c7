"""``tinker-lite billing ...``: hourly usage and current checkpoint storage of your organization.

JSON output keeps the service's nested shape (each usage row's ``event_info`` object, the
``sessions`` side table); tables and CSV files flatten ``event_info`` into the row, one column
per field, in the order the rows first name them. CSV cells of absent values are empty.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tinker_lite.cli._context import Context
from tinker_lite.cli._exit import EXIT_OK, PROG
from tinker_lite.cli._output import iso, to_jsonable
from tinker_lite.cli._parser import add_group, leaf

if TYPE_CHECKING:
    from tinker_lite.admin_client import AdminClient

__all__ = ["cmd_billing_checkpoint_storage", "cmd_billing_usage", "register"]


def _admin(ctx: Context) -> AdminClient:
    from tinker_lite.admin_client import AdminClient

    return AdminClient(ctx.rest())


def _flat(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with their ``event_info`` object's fields moved into the row."""
    flat = []
    for row in rows:
        info = row.get("event_info")
        if isinstance(info, dict):
            row = {**{k: v for k, v in row.items() if k != "event_info"}, **info}
        flat.append(row)
    return flat


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    return list(columns)


def _print_rows(ctx: Context, rows: Sequence[dict[str, Any]], empty: str) -> None:
    columns = _columns(rows)
    ctx.output.table(
        [c.upper() for c in columns], [[row.get(c) for c in columns] for row in rows], empty
    )


def _write_csv(ctx: Context, rows: Sequence[dict[str, Any]], path: str) -> None:
    """Write ``rows`` as CSV to ``path`` (``-``: stdout)."""

    def write(out: Any) -> None:
        writer = csv.DictWriter(out, fieldnames=_columns(rows), restval="")
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)

    if path == "-":
        write(ctx.output.out)
        return
    with open(path, "w", newline="", encoding="utf-8") as f:
        write(f)
    ctx.output.note(f"wrote {len(rows)} row(s) to {path}")


def cmd_billing_usage(ctx: Context) -> int:
    """Hourly billing usage rows between two UTC hours (at most 14 days apart)."""
    args = ctx.args
    usage = ctx.wait(_admin(ctx).get_billing_usage(args.starting_on, args.ending_before))
    rows: list[dict[str, Any]] = to_jsonable(list(usage.data))
    sessions = to_jsonable(dict(usage.sessions))
    if args.sessions_csv is not None:
        session_rows = [
            {"session_id": sid, "user_metadata": _metadata_cell(s["user_metadata"])}
            for sid, s in sessions.items()
        ]
        _write_csv(ctx, session_rows, args.sessions_csv)
    if args.csv is not None:
        _write_csv(ctx, _flat(rows), args.csv)
    if args.csv is not None or args.sessions_csv is not None:
        return EXIT_OK
    if ctx.output.json:
        through = usage.cost_data_through
        ctx.output.document(
            {
                "data": rows,
                "sessions": sessions,
                "cost_data_through": iso(through) if through is not None else None,
            }
        )
        return EXIT_OK
    _print_rows(ctx, _flat(rows), empty="No billing usage in this window.")
    return EXIT_OK


def _metadata_cell(metadata: dict[str, str] | None) -> str | None:
    return None if metadata is None else json.dumps(metadata)


def cmd_billing_checkpoint_storage(ctx: Context) -> int:
    """Checkpoint storage in use now, per project and owner, and its projected monthly cost."""
    args = ctx.args
    usage = ctx.wait(_admin(ctx).get_current_checkpoint_storage_usage(args.project_id))
    rate = usage.effective_rate_usd_per_gigabyte_month
    data: list[dict[str, Any]] = to_jsonable(list(usage.data))
    rows = [{"effective_rate_usd_per_gigabyte_month": rate, **row} for row in data]
    if args.csv is not None:
        _write_csv(ctx, rows, args.csv)
        return EXIT_OK
    if ctx.output.json:
        ctx.output.document({"effective_rate_usd_per_gigabyte_month": rate, "data": data})
        return EXIT_OK
    _print_rows(ctx, rows, empty="No checkpoint storage in use.")
    return EXIT_OK


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``billing`` group to the parser."""
    group = add_group(
        commands,
        "billing",
        "billing usage and checkpoint storage",
        "Billing usage of your organization (needs billing view access).",
    )
    sub = leaf(
        group,
        "usage",
        cmd_billing_usage,
        "hourly usage rows between two UTC hours, with estimated costs (not invoice amounts)",
        common=common,
        examples=[
            f"{PROG} billing usage 2026-07-13T00:00:00Z 2026-07-14T00:00:00Z",
            f"{PROG} billing usage 2026-07-13T00:00:00Z 2026-07-14T00:00:00Z --csv usage.csv",
            f"{PROG} --format json billing usage 2026-07-13T00:00:00Z 2026-07-14T00:00:00Z",
        ],
    )
    sub.add_argument("starting_on", metavar="STARTING_ON", help="RFC 3339 time on a UTC hour")
    sub.add_argument(
        "ending_before", metavar="ENDING_BEFORE", help="RFC 3339 time on a UTC hour (excluded)"
    )
    sub.add_argument(
        "--csv", metavar="PATH", help="write the rows as CSV to PATH instead ('-': stdout)"
    )
    sub.add_argument(
        "--sessions-csv",
        metavar="PATH",
        help="also write the sessions (session_id, user_metadata) as CSV to PATH ('-': stdout)",
    )
    sub = leaf(
        group,
        "checkpoint-storage",
        cmd_billing_checkpoint_storage,
        "checkpoint storage in use now and its projected monthly cost",
        common=common,
        examples=[
            f"{PROG} billing checkpoint-storage",
            f"{PROG} billing checkpoint-storage --project-id PROJECT --format json",
        ],
    )
    sub.add_argument("--project-id", metavar="PROJECT_ID", help="only this project")
    sub.add_argument(
        "--csv", metavar="PATH", help="write the rows as CSV to PATH instead ('-': stdout)"
    )
