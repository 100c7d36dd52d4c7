"""``tinker-lite run ...``: list training runs and show one."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tinker_lite.cli._context import Context
from tinker_lite.cli._exit import EXIT_OK
from tinker_lite.cli._parser import add_group, add_paging, leaf

if TYPE_CHECKING:
    from tinker_lite import types

__all__ = ["cmd_run_info", "cmd_run_list", "register"]


def _last_checkpoint(run: types.TrainingRun) -> types.Checkpoint | None:
    return run.last_checkpoint or run.last_sampler_checkpoint


# The official CLI's column names (``--columns``): header and cell of each.
COLUMNS: dict[str, tuple[str, Callable[[types.TrainingRun], Any]]] = {
    "id": ("RUN ID", lambda r: r.training_run_id),
    "model": ("BASE MODEL", lambda r: r.base_model),
    "owner": ("OWNER", lambda r: r.model_owner),
    "lora": ("LORA", lambda r: r.lora_rank if r.is_lora else "full"),
    "updated": ("LAST REQUEST", lambda r: r.last_request_time),
    "status": ("STATUS", lambda r: "CORRUPTED" if r.corrupted else "ok"),
    "checkpoint": (
        "LAST CHECKPOINT",
        lambda r: c.tinker_path if (c := _last_checkpoint(r)) is not None else None,
    ),
    "checkpoint_time": (
        "CHECKPOINT TIME",
        lambda r: c.time if (c := _last_checkpoint(r)) is not None else None,
    ),
}
DEFAULT_COLUMNS = ("id", "model", "lora", "updated", "checkpoint", "status")


def _columns(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in COLUMNS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown column(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(COLUMNS)}"
        )
    return names


def cmd_run_list(ctx: Context) -> int:
    """List training runs (a page, or every run with --all or --limit 0)."""
    args = ctx.args
    rest = ctx.rest()
    every = args.all or args.limit == 0
    if every:
        runs: list[types.TrainingRun] = ctx.call(
            lambda: rest.list_all_training_runs(page_timeout=ctx.page_timeout)
        )
        total = len(runs)
    else:
        page = ctx.wait(rest.list_training_runs(limit=args.limit, offset=args.offset))
        runs = list(page.training_runs)
        total = page.cursor.total_count
    if ctx.output.json:
        ctx.output.document({"runs": runs})
        return EXIT_OK
    columns: list[str] = args.columns or list(DEFAULT_COLUMNS)
    ctx.output.table(
        [COLUMNS[name][0] for name in columns],
        [[COLUMNS[name][1](run) for name in columns] for run in runs],
        empty="No training runs.",
    )
    if not every and total > args.offset + len(runs):
        ctx.output.note(
            f"showing {len(runs)} of {total} runs (use --offset/--limit, or --all for every run)"
        )
    return EXIT_OK


def cmd_run_info(ctx: Context) -> int:
    """Show one training run, by id or by any tinker:// path of it."""
    ref: str = ctx.args.run
    rest = ctx.rest()
    if ref.startswith("tinker://"):
        run = ctx.wait(rest.get_training_run_by_tinker_path(ref))
    else:
        run = ctx.wait(rest.get_training_run(ref))
    if ctx.output.json:
        ctx.output.document(run)
        return EXIT_OK
    ctx.output.record(
        [
            ("Run ID", run.training_run_id),
            ("Base model", run.base_model),
            ("Owner", run.model_owner),
            ("LoRA", f"rank {run.lora_rank}" if run.is_lora else "no (full fine-tuning)"),
            ("Corrupted", run.corrupted),
            ("Last request", run.last_request_time),
            ("Last checkpoint", run.last_checkpoint.tinker_path if run.last_checkpoint else None),
            (
                "Last sampler checkpoint",
                run.last_sampler_checkpoint.tinker_path if run.last_sampler_checkpoint else None,
            ),
            (
                "Metadata",
                [f"{k}={v}" for k, v in sorted((run.user_metadata or {}).items())] or None,
            ),
        ]
    )
    return EXIT_OK


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``run`` group to the parser."""
    runs = add_group(commands, "run", "training runs", "Training runs.")
    sub = leaf(
        runs,
        "list",
        cmd_run_list,
        "list training runs",
        common=common,
        examples=[
            "tinker-lite run list",
            "tinker-lite run list --limit 50 --offset 50",
            "tinker-lite run list --all --format json",
        ],
    )
    add_paging(sub, default_limit=20, every="run")
    sub.add_argument(
        "-c",
        "--columns",
        type=_columns,
        metavar="NAMES",
        help=f"table columns, comma-separated: {', '.join(COLUMNS)} "
        f"(default: {','.join(DEFAULT_COLUMNS)})",
    )
    sub = leaf(
        runs,
        "info",
        cmd_run_info,
        "show one training run",
        common=common,
        examples=[
            "tinker-lite run info 3f2a9c1e-...",
            "tinker-lite run info tinker://3f2a9c1e-.../weights/step-100",
        ],
    )
    sub.add_argument(
        "run", metavar="RUN", help="run id, or a tinker:// path of one of its checkpoints"
    )
