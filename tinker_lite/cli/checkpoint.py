"""``tinker-lite checkpoint ...``: list, inspect, publish, expire, delete, download and prune."""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as _dt
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinker_lite._errors import InvalidInputError, NotFoundError, TinkerError
from tinker_lite.cli import hub
from tinker_lite.cli._context import Context, parse_path
from tinker_lite.cli._exit import (
    EXIT_CONFLICT,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_SERVICE,
    EXIT_USAGE,
    PROG,
    CLIError,
    error_message,
    exit_code_for,
)
from tinker_lite.cli._output import iso, size_cell, to_jsonable
from tinker_lite.cli._parser import Handler, add_group, add_paging, leaf, positive_int

if TYPE_CHECKING:
    from tinker_lite import types
    from tinker_lite.rest_client import CheckpointListing, RestClient

__all__ = [
    "cmd_checkpoint_delete",
    "cmd_checkpoint_download",
    "cmd_checkpoint_info",
    "cmd_checkpoint_list",
    "cmd_checkpoint_prune",
    "cmd_checkpoint_publish",
    "cmd_checkpoint_set_ttl",
    "cmd_checkpoint_unpublish",
    "default_archive_name",
    "format_duration",
    "list_all_checkpoints",
    "parse_ttl",
    "plan_prune",
    "register",
]


def _checkpoint_rows(checkpoints: Sequence[types.Checkpoint]) -> list[list[Any]]:
    return [
        [
            c.tinker_path,
            c.checkpoint_type,
            c.time,
            size_cell(c.size_bytes),
            c.public,
            c.expires_at if c.expires_at is not None else "never",
        ]
        for c in checkpoints
    ]


_CHECKPOINT_HEADERS = ["TINKER PATH", "TYPE", "TIME", "SIZE", "PUBLIC", "EXPIRES"]


def list_all_checkpoints(
    rest: RestClient,
    wait: Callable[[Any], Any] | None = None,
    *,
    run_id: str | None = None,
    page_size: int = 100,
    page_timeout: float | None = None,
) -> CheckpointListing:
    """Every checkpoint of one run, or of the user: :meth:`RestClient.list_all_checkpoints`.

    Kept for scripts written against earlier versions; ``wait`` is no longer needed.
    """
    del wait
    return rest.list_all_checkpoints(run_id, page_size=page_size, page_timeout=page_timeout)


def cmd_checkpoint_list(ctx: Context) -> int:
    """List the checkpoints of one run (--run) or of the user."""
    args = ctx.args
    rest = ctx.rest()
    cursor: Any = None
    every = args.all or args.limit == 0
    if args.run is not None:
        page = ctx.wait(rest.list_checkpoints(args.run))
        checkpoints = list(page.checkpoints)
    elif every:
        listing = ctx.call(lambda: rest.list_all_checkpoints(page_timeout=ctx.page_timeout))
        if not listing.complete:
            ctx.output.note(f"warning: the listing may be incomplete: {listing.reason}")
        checkpoints = listing.checkpoints
    else:
        page = ctx.wait(rest.list_user_checkpoints(limit=args.limit, offset=args.offset))
        checkpoints = list(page.checkpoints)
        cursor = page.cursor
    if ctx.output.json:
        # The official CLI's document: the run (when one was asked for) and the checkpoints.
        doc: dict[str, Any] = {"run_id": args.run} if args.run is not None else {}
        doc["checkpoints"] = checkpoints
        ctx.output.document(doc)
        return EXIT_OK
    ctx.output.table(_CHECKPOINT_HEADERS, _checkpoint_rows(checkpoints), empty="No checkpoints.")
    if cursor is not None and cursor.total_count > args.offset + len(checkpoints):
        ctx.output.note(
            f"showing {len(checkpoints)} of {cursor.total_count} checkpoints "
            "(use --offset/--limit, or --all)"
        )
    return EXIT_OK


def _find_checkpoint(ctx: Context, path: str) -> types.Checkpoint:
    parsed = parse_path(path)
    page = ctx.wait(ctx.rest().list_checkpoints(parsed.training_run_id))
    for checkpoint in page.checkpoints:
        if checkpoint.tinker_path == parsed.tinker_path or (
            checkpoint.checkpoint_id == parsed.checkpoint_id
        ):
            return checkpoint
    raise CLIError(f"no checkpoint {parsed.tinker_path}", EXIT_NOT_FOUND)


def cmd_checkpoint_info(ctx: Context) -> int:
    """Show one checkpoint: listing metadata plus the weights' base model and LoRA settings."""
    path: str = ctx.args.path
    checkpoint = _find_checkpoint(ctx, path)
    weights = ctx.wait(ctx.rest().get_weights_info_by_tinker_path(checkpoint.tinker_path))
    if ctx.output.json:
        # The official CLI's document: the checkpoint's fields, then is_lora and lora_rank.
        ctx.output.document(
            {
                **to_jsonable(checkpoint),
                "is_lora": weights.is_lora,
                "lora_rank": weights.lora_rank,
            }
        )
        return EXIT_OK
    lora = (
        f"rank {weights.lora_rank}"
        + "".join(
            f", {name}={'yes' if value else 'no'}"
            for name, value in (
                ("train_unembed", weights.train_unembed),
                ("train_mlp", weights.train_mlp),
                ("train_attn", weights.train_attn),
            )
            if value is not None
        )
        if weights.is_lora
        else "no"
    )
    ctx.output.record(
        [
            ("Tinker path", checkpoint.tinker_path),
            ("Checkpoint ID", checkpoint.checkpoint_id),
            ("Type", checkpoint.checkpoint_type),
            ("Time", checkpoint.time),
            ("Size", size_cell(checkpoint.size_bytes)),
            ("Public", checkpoint.public),
            ("Expires", checkpoint.expires_at if checkpoint.expires_at else "never"),
            ("Base model", weights.base_model),
            ("LoRA", lora),
        ]
    )
    return EXIT_OK


def _report_change(ctx: Context, doc: dict[str, Any], message: str) -> None:
    if ctx.output.json:
        ctx.output.document(doc)
    else:
        ctx.output.line(message)


def _set_public(ctx: Context, public: bool) -> int:
    # docs/protocol.rst §4.7: a redundant (un)publish answers 409, which the client retries
    # twice (docs/protocol.rst §6.2); the listing says at once whether there is anything to do.
    checkpoint = _find_checkpoint(ctx, ctx.args.path)
    path = checkpoint.tinker_path
    if checkpoint.public == public:
        state = "public" if public else "private"
        raise CLIError(f"conflict: {path} is already {state}", EXIT_CONFLICT)
    rest = ctx.rest()
    if public:
        ctx.wait(rest.publish_checkpoint_from_tinker_path(path))
    else:
        ctx.wait(rest.unpublish_checkpoint_from_tinker_path(path))
    verb = "published" if public else "unpublished"
    _report_change(ctx, {"tinker_path": path, "public": public}, f"{verb} {path}")
    return EXIT_OK


def cmd_checkpoint_publish(ctx: Context) -> int:
    """Make a checkpoint public (exit 5 when it already is)."""
    return _set_public(ctx, True)


def cmd_checkpoint_unpublish(ctx: Context) -> int:
    """Make a checkpoint private again (exit 5 when it already is)."""
    return _set_public(ctx, False)


_NOT_GIVEN: Any = object()

_TTL_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_ttl(text: str) -> int | None:
    """Read a TTL such as ``3600``, ``90m``, ``12h``, ``7d``; ``never``/``none`` means no TTL."""
    value = text.strip().lower()
    if value in ("never", "none", "off"):
        return None
    match = re.fullmatch(r"(\d+)\s*([smhdw]?)", value)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"invalid TTL {text!r} (use seconds, or a number with s/m/h/d/w, or 'never')"
        )
    seconds = int(match.group(1)) * _TTL_UNITS.get(match.group(2) or "s", 1)
    if seconds <= 0:
        raise argparse.ArgumentTypeError("the TTL must be positive (or 'never' to remove it)")
    return seconds


_DURATION_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def format_duration(seconds: int) -> str:
    """A duration in words: ``7 days``, ``3 hours``, ``1 day 12 hours``, ``90 seconds``.

    The two largest units are named; when that leaves a remainder out, it says ``about``.
    """
    if seconds < 120:
        return _plural(seconds, "second")
    parts: list[str] = []
    left = seconds
    for unit, size in _DURATION_UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(_plural(count, unit))
        if len(parts) == 2 or (parts and not count):
            break
    return ("about " if left else "") + " ".join(parts)


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}{'' if count == 1 else 's'}"


def cmd_checkpoint_set_ttl(ctx: Context) -> int:
    """Set or remove a checkpoint's time to live."""
    args = ctx.args
    path = parse_path(args.path).tinker_path
    given = [v for v in (args.ttl, args.ttl_option) if v is not _NOT_GIVEN] + (
        [None] if args.remove else []
    )
    if len(given) != 1:
        raise CLIError("give the TTL once: TTL, --ttl SECONDS or --remove", EXIT_USAGE)
    ttl: int | None = given[0]
    ctx.wait(ctx.rest().set_checkpoint_ttl_from_tinker_path(path, ttl))
    message = (
        f"{path} never expires now" if ttl is None else f"{path} expires in {format_duration(ttl)}"
    )
    _report_change(ctx, {"tinker_path": path, "ttl_seconds": ttl}, message)
    return EXIT_OK


_DELETE_ERRORS = (TinkerError, TimeoutError, concurrent.futures.TimeoutError)


class _Deletions:
    """Deletes checkpoints one at a time: a failure is recorded (and noted on stderr), not raised.

    With ``missing_ok`` a checkpoint already gone (e.g. its TTL ran out meanwhile) counts as
    deleted. ``code`` is the exit code of the first failure (EXIT_OK when none failed).
    """

    def __init__(self, ctx: Context, *, missing_ok: bool = False) -> None:
        self.ctx = ctx
        self.missing_ok = missing_ok
        self.deleted: list[str] = []
        self.failed: list[dict[str, str]] = []
        self.code = EXIT_OK

    def delete(self, path: str) -> bool:
        """Delete ``path``; True when it is gone, False when it failed (recorded)."""
        try:
            self.ctx.wait(self.ctx.rest().delete_checkpoint_from_tinker_path(path))
        except _DELETE_ERRORS as exc:
            if not (self.missing_ok and isinstance(exc, NotFoundError)):
                message = error_message(exc)
                self.failed.append({"tinker_path": path, "error": message})
                if not self.ctx.output.json:
                    self.ctx.output.note(f"{PROG}: error: {path}: {message}")
                self.code = self.code or exit_code_for(exc)
                return False
        self.deleted.append(path)
        return True


# The official CLI's --type names, by checkpoint_type.
_TYPE_NAMES = {
    "weights": "training",
    "training": "training",
    "sampler_weights": "sampler",
    "sampler": "sampler",
    "external_weights": "external",
    "external": "external",
}


def _utc_time(text: str) -> _dt.datetime:
    """An argparse type: an ISO 8601 date or time (a date is midnight; no zone means UTC)."""
    try:
        moment = _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 date or time (2024-01-01, 2024-01-01T08:00:00Z), got {text!r}"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=_dt.timezone.utc)


def _run_checkpoints_to_delete(ctx: Context) -> list[types.Checkpoint]:
    """The checkpoints of ``--run-id`` that pass ``--type``, ``--before`` and ``--after``."""
    args = ctx.args
    page = ctx.wait(ctx.rest().list_checkpoints(args.run_id))
    kind = _TYPE_NAMES[args.type] if args.type else None
    return [
        c
        for c in page.checkpoints
        if (kind is None or c.checkpoint_type == kind)
        and (args.before is None or _sort_time(c.time) < args.before.timestamp())
        and (args.after is None or _sort_time(c.time) > args.after.timestamp())
    ]


def cmd_checkpoint_delete(ctx: Context) -> int:
    """Delete checkpoints by path, or a run's (filtered); each is attempted, the first failure
    sets the exit code."""
    args = ctx.args
    if bool(args.paths) == (args.run_id is not None):
        raise CLIError("give either checkpoint paths or --run-id (not both)", EXIT_USAGE)
    if args.run_id is None and (args.type or args.before or args.after):
        raise CLIError("--type, --before and --after need --run-id", EXIT_USAGE)
    if args.run_id is not None:
        checkpoints = _run_checkpoints_to_delete(ctx)
        if not checkpoints:
            ctx.output.note(f"no checkpoints of run {args.run_id} match")
        elif not args.yes:
            # Nothing asks interactively: a run's checkpoints go only when asked for explicitly.
            raise CLIError(
                f"refusing to delete {len(checkpoints)} checkpoint(s) of run {args.run_id} "
                "without --yes (list them with `checkpoint list --run-id`)",
                EXIT_USAGE,
            )
        paths = [c.tinker_path for c in checkpoints]
    else:
        paths = [parse_path(p).tinker_path for p in args.paths]
    deletions = _Deletions(ctx)
    for path in paths:
        if deletions.delete(path) and not ctx.output.json:
            ctx.output.line(f"deleted {path}")
    if ctx.output.json:
        # The official CLI's document.
        ctx.output.document({"deleted_count": len(deletions.deleted), "failed": deletions.failed})
    return deletions.code


def default_archive_name(parsed: types.ParsedCheckpointTinkerPath) -> str:
    """A file name for a checkpoint's archive: ``<run>-<kind>-<name>.tar.gz``, filesystem-safe."""
    from tinker_lite._api.checkpoint_download import default_archive_name as archive_name

    return archive_name(parsed)


def cmd_checkpoint_download(ctx: Context) -> int:
    """Download a checkpoint's archive (resumable), and optionally extract it.

    The download is :meth:`RestClient.download_checkpoint`; ``--extract DIR`` then extracts the
    kept archive with the same safe extraction.
    """
    from tinker_lite._progress import Progress, progress_mode
    from tinker_lite._transport.download import extract_archive
    from tinker_lite.rest_client import DownloadProgress

    args = ctx.args
    parsed = parse_path(args.path)
    dest = Path(args.output) if args.output else Path(default_archive_name(parsed))
    rest = ctx.rest()
    mode = progress_mode(ctx.output.err, non_tty="lines")
    last: list[DownloadProgress] = []
    with Progress(desc="download", unit="bytes", stream=ctx.output.err, mode=mode) as progress:

        def report(state: DownloadProgress) -> None:
            progress.set_total(state.total_bytes)
            progress.reset(state.bytes_done)
            last[:] = [state]

        archive = ctx.call(
            lambda: rest.download_checkpoint(
                parsed.tinker_path, dest, progress=report, overwrite=args.force
            )
        )
    final = last[-1]
    files: list[str] | None = None
    extracted_bytes: int | None = None
    if args.extract:
        files = extract_archive(archive, args.extract)
        root = Path(args.extract)
        extracted_bytes = sum(
            (root / name).stat().st_size for name in files if (root / name).is_file()
        )
    if ctx.output.json:
        ctx.output.document(
            {
                "tinker_path": parsed.tinker_path,
                "path": str(archive),
                "size_bytes": final.bytes_done,
                "resumed_from": final.resumed_from,
                "attempts": final.attempts,
                "url_refreshes": final.url_refreshes,
                "extracted_to": str(args.extract) if args.extract else None,
                "extracted_bytes": extracted_bytes,
                "files": files,
            }
        )
        return EXIT_OK
    resumed = f", resumed at {final.resumed_from} bytes" if final.resumed_from else ""
    # `checkpoint list` shows the files' size, uncompressed: say which size is which.
    ctx.output.line(f"downloaded {final.bytes_done} bytes (compressed) to {archive}{resumed}")
    if files is not None:
        sizes = f"{extracted_bytes} bytes, uncompressed"
        ctx.output.line(f"extracted {len(files)} files ({sizes}) to {args.extract}")
    return EXIT_OK


def plan_prune(
    checkpoints: Sequence[types.Checkpoint],
    keep_last: int,
    *,
    checkpoint_type: str | None = None,
) -> tuple[list[types.Checkpoint], list[types.Checkpoint], list[types.Checkpoint]]:
    """Split checkpoints into (delete, keep, public) for ``prune --keep-last``.

    Per run and checkpoint type, the ``keep_last`` newest are kept and older ones deleted.
    Public checkpoints are never deleted (and do not count toward ``keep_last``), nor are
    checkpoints whose path cannot be parsed or whose type is not selected.
    """
    groups: dict[tuple[str, str], list[types.Checkpoint]] = {}
    keep: list[types.Checkpoint] = []
    public: list[types.Checkpoint] = []
    for checkpoint in checkpoints:
        if checkpoint_type is not None and checkpoint.checkpoint_type != checkpoint_type:
            continue
        if checkpoint.public:
            public.append(checkpoint)
            continue
        run_id = _run_id(checkpoint.tinker_path)
        if run_id is None:
            keep.append(checkpoint)
            continue
        groups.setdefault((run_id, checkpoint.checkpoint_type), []).append(checkpoint)
    delete: list[types.Checkpoint] = []
    for _key, items in sorted(groups.items()):
        items.sort(key=lambda c: (_sort_time(c.time), c.checkpoint_id), reverse=True)
        keep.extend(items[:keep_last])
        delete.extend(items[keep_last:])
    return delete, keep, public


def _run_id(path: str) -> str | None:
    """The training run a checkpoint path belongs to, or None when the path does not parse."""
    try:
        return parse_path(path).training_run_id
    except InvalidInputError:
        return None


def _sort_time(moment: _dt.datetime) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return moment.timestamp()


def cmd_checkpoint_prune(ctx: Context) -> int:
    """Delete all but the newest N checkpoints per run and type; never on a partial listing."""
    args = ctx.args
    rest = ctx.rest()
    listing = ctx.call(lambda: rest.list_all_checkpoints(args.run, page_timeout=ctx.page_timeout))
    if not listing.complete:
        raise CLIError(
            f"refusing to prune: the checkpoint listing is incomplete ({listing.reason}); "
            "nothing was deleted",
            EXIT_SERVICE,
        )
    delete, keep, public = plan_prune(
        listing.checkpoints, args.keep_last, checkpoint_type=args.type
    )
    deletions = _Deletions(ctx, missing_ok=True)
    deleted, failed = deletions.deleted, deletions.failed
    verb = "would delete" if args.dry_run else "deleted"
    for checkpoint in delete:
        path = checkpoint.tinker_path
        if not args.dry_run and not deletions.delete(path):
            continue
        if not ctx.output.json:
            ctx.output.line(f"{verb} {path} ({iso(checkpoint.time)})")
    runs = {_run_id(c.tinker_path) for c in listing.checkpoints} - {None}
    if ctx.output.json:
        ctx.output.document(
            {
                "dry_run": bool(args.dry_run),
                "keep_last": args.keep_last,
                "to_delete": [c.tinker_path for c in delete],
                "deleted": deleted,
                "kept": [c.tinker_path for c in keep],
                "public_kept": [c.tinker_path for c in public],
                "failed": failed,
            }
        )
        return deletions.code
    count = len(delete) if args.dry_run else len(deleted)
    summary = (
        f"{'dry run: ' if args.dry_run else ''}{verb} {count} of {len(listing.checkpoints)} "
        f"checkpoints in {len(runs)} run(s); kept {len(keep)}"
    )
    if public:
        summary += f" (+{len(public)} public, never pruned)"
    if failed:
        summary += f"; {len(failed)} failed"
    ctx.output.line(summary)
    return deletions.code


def _path_leaf(
    group: Any,
    name: str,
    handler: Handler,
    help_text: str,
    *,
    common: argparse.ArgumentParser,
    examples: Sequence[str],
) -> argparse.ArgumentParser:
    """Add a command that takes one checkpoint's ``TINKER_PATH``."""
    sub = leaf(group, name, handler, help_text, common=common, examples=examples)
    sub.add_argument("path", metavar="TINKER_PATH")
    return sub


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``checkpoint`` group to the parser."""
    ckpt = add_group(commands, "checkpoint", "checkpoints", "Checkpoints (tinker:// paths).")
    path = "tinker://RUN_ID/sampler_weights/final"
    sub = leaf(
        ckpt,
        "list",
        cmd_checkpoint_list,
        "list checkpoints (one run, or all yours)",
        common=common,
        examples=[
            "tinker-lite checkpoint list",
            "tinker-lite checkpoint list --run RUN_ID",
            "tinker-lite checkpoint list --all --format json",
        ],
    )
    sub.add_argument("--run", "--run-id", metavar="RUN_ID", help="only this run's checkpoints")
    add_paging(sub, default_limit=100, every="checkpoint")
    for name, handler, help_text in (
        ("info", cmd_checkpoint_info, "show one checkpoint and its weights info"),
        ("publish", cmd_checkpoint_publish, "make a checkpoint public"),
        ("unpublish", cmd_checkpoint_unpublish, "make a checkpoint private"),
    ):
        example = f"tinker-lite checkpoint {name} {path}"
        _path_leaf(ckpt, name, handler, help_text, common=common, examples=[example])
    sub = _path_leaf(
        ckpt,
        "set-ttl",
        cmd_checkpoint_set_ttl,
        "set or remove a checkpoint's TTL",
        common=common,
        examples=[
            f"tinker-lite checkpoint set-ttl {path} 7d      # expires in 7 days",
            f"tinker-lite checkpoint set-ttl {path} 12h",
            f"tinker-lite checkpoint set-ttl {path} never   # keep it",
            f"tinker-lite checkpoint set-ttl {path} --ttl 86400",
            f"tinker-lite checkpoint set-ttl {path} --remove",
        ],
    )
    sub.add_argument(
        "ttl",
        metavar="TTL",
        nargs="?",
        type=parse_ttl,
        default=_NOT_GIVEN,
        help="seconds, or a number with s/m/h/d/w (e.g. 7d); 'never' removes the TTL",
    )
    sub.add_argument(
        "--ttl",
        dest="ttl_option",
        metavar="SECONDS",
        type=parse_ttl,
        default=_NOT_GIVEN,
        help="the TTL as an option (as the official CLI takes it)",
    )
    sub.add_argument("--remove", action="store_true", help="remove the TTL (never expires)")
    sub = leaf(
        ckpt,
        "delete",
        cmd_checkpoint_delete,
        "delete checkpoints",
        common=common,
        examples=[
            f"tinker-lite checkpoint delete {path}",
            "tinker-lite checkpoint delete tinker://RUN_ID/weights/a tinker://RUN_ID/weights/b",
            "tinker-lite checkpoint delete --run-id RUN_ID --type weights --before 2024-06-01 -y",
        ],
    )
    sub.add_argument("paths", metavar="TINKER_PATH", nargs="*")
    sub.add_argument("--run-id", metavar="RUN_ID", help="delete this run's checkpoints")
    sub.add_argument(
        "--type",
        choices=sorted(_TYPE_NAMES),
        help="with --run-id: only this type (weights, sampler_weights, external_weights)",
    )
    sub.add_argument(
        "--before",
        type=_utc_time,
        metavar="WHEN",
        help="with --run-id: only those created before (ISO 8601; UTC unless a zone is given)",
    )
    sub.add_argument(
        "--after", type=_utc_time, metavar="WHEN", help="with --run-id: only those created after"
    )
    sub.add_argument(
        "-y", "--yes", action="store_true", help="confirm deleting a run's checkpoints (--run-id)"
    )
    sub = _path_leaf(
        ckpt,
        "download",
        cmd_checkpoint_download,
        "download a checkpoint archive (resumable; a .part file is resumed)",
        common=common,
        examples=[
            f"tinker-lite checkpoint download {path}",
            f"tinker-lite checkpoint download {path} -o final.tar.gz --extract ./final",
        ],
    )
    sub.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="archive file or directory (default: <run>-<kind>-<name>.tar.gz here)",
    )
    sub.add_argument("--extract", metavar="DIR", help="also extract the archive into DIR")
    sub.add_argument("--force", action="store_true", help="replace an existing archive file")
    hub.register(ckpt, common)
    sub = leaf(
        ckpt,
        "prune",
        cmd_checkpoint_prune,
        "delete all but the newest N checkpoints per run and type",
        common=common,
        examples=[
            "tinker-lite checkpoint prune --keep-last 3 --dry-run",
            "tinker-lite checkpoint prune --keep-last 1 --run RUN_ID --type sampler",
        ],
    )
    sub.add_argument(
        "--keep-last", type=positive_int, required=True, metavar="N", help="how many to keep"
    )
    sub.add_argument("--run", metavar="RUN_ID", help="only this run (default: all your runs)")
    sub.add_argument(
        "--type", choices=("training", "sampler"), help="only this checkpoint type (default: both)"
    )
    sub.add_argument("--dry-run", action="store_true", help="print what would be deleted")
