"""The ``tinker-lite`` command: training runs, checkpoints, sessions, the local server, checks.

Every listing and info command prints a table by default and one JSON document with
``--format json``. Expected failures print a single ``tinker-lite: error: ...`` line on stderr
and exit with a documented code (:data:`EXIT_CODES`); a traceback is shown only with ``--debug``
or ``TINKER_LOG=debug``. The API key is never printed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime as _dt
import enum
import json
import logging
import os
import platform
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, TypeVar

import attrs

from tinker_lite._errors import (
    APIConnectionError,
    APIResponseValidationError,
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    RequestErrorCategory,
    RequestFailedError,
    TinkerError,
    UnprocessableEntityError,
    WireFormatError,
)
from tinker_lite._version import WIRE_SDK_VERSION, __version__

if TYPE_CHECKING:
    from tinker_lite import types
    from tinker_lite.rest_client import RestClient
    from tinker_lite.service_client import ServiceClient

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
    "build_parser",
    "exit_code_for",
    "main",
]

PROG = "tinker-lite"

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_NOT_FOUND = 4
EXIT_CONFLICT = 5
EXIT_CONNECTION = 6
EXIT_SERVICE = 7
EXIT_INTERRUPTED = 130

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_ERROR: "unexpected error",
    EXIT_USAGE: "usage error (bad arguments or a request the service rejected as invalid)",
    EXIT_AUTH: "authentication or permission error (missing or rejected API key)",
    EXIT_NOT_FOUND: "not found (run, checkpoint, session)",
    EXIT_CONFLICT: "conflict (already public/private, file exists)",
    EXIT_CONNECTION: "connection error or timeout",
    EXIT_SERVICE: "service error (5xx, failed request, unexpected response)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}
"""Exit codes of ``tinker-lite`` and what they mean."""

DEFAULT_BASE_URL = "https://tinker.thinkingmachines.dev/services/tinker-prod"
DEFAULT_TIMEOUT_S = 60.0
# Extra wait for a future whose retries are bounded by --timeout (see Context.wait).
_WAIT_GRACE_S = 1.0
LOCAL_URL = "local://"

T = TypeVar("T")

_logger = logging.getLogger("tinker_lite.cli")
_sleep: Callable[[float], None] = time.sleep  # replaced in tests: downloads never really wait


class CLIError(Exception):
    """An expected failure of a command: a one-line message and an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


# --------------------------------------------------------------------------------------------
# Errors -> exit codes and messages


def exit_code_for(exc: BaseException) -> int:
    """Map an exception to the exit code ``tinker-lite`` (and scripts built like it) uses.

    See :data:`EXIT_CODES`. Scripts and cron jobs can reuse it to exit consistently.
    """
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, CLIError):
        return exc.exit_code
    if isinstance(exc, AuthenticationError | PermissionDeniedError):
        return EXIT_AUTH
    if isinstance(exc, InvalidInputError) and exc.field in ("api_key", "TINKER_API_KEY"):
        return EXIT_AUTH  # no usable API key: an authentication problem, not a bad argument
    if isinstance(exc, NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(exc, ConflictError):
        return EXIT_CONFLICT
    if isinstance(exc, BadRequestError | UnprocessableEntityError | InvalidInputError):
        return EXIT_USAGE
    if isinstance(exc, APIConnectionError | TimeoutError | concurrent.futures.TimeoutError):
        return EXIT_CONNECTION
    if isinstance(exc, RequestFailedError):
        return EXIT_USAGE if exc.category == RequestErrorCategory.USER else EXIT_SERVICE
    if isinstance(exc, APIStatusError | APIResponseValidationError | WireFormatError):
        return EXIT_SERVICE
    if isinstance(exc, FileExistsError):
        return EXIT_CONFLICT
    if isinstance(exc, FileNotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(exc, PermissionError):
        return EXIT_AUTH
    if _is_download_error(exc):
        return EXIT_SERVICE
    return EXIT_ERROR


def _is_download_error(exc: BaseException) -> bool:
    module = sys.modules.get("tinker_lite._download")
    return module is not None and isinstance(exc, module.DownloadError)


def _is_expected(exc: BaseException) -> bool:
    expected = (CLIError, TinkerError, OSError, TimeoutError, concurrent.futures.TimeoutError)
    return isinstance(exc, expected)


def _error_message(exc: BaseException) -> str:
    if isinstance(exc, CLIError):
        return exc.message
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, AuthenticationError):
        return f"authentication failed: {text} (check TINKER_API_KEY)"
    if isinstance(exc, PermissionDeniedError):
        return f"permission denied: {text}"
    if isinstance(exc, NotFoundError):
        return f"not found: {text}"
    if isinstance(exc, ConflictError):
        return f"conflict: {text}"
    if isinstance(exc, APIConnectionError):
        return f"cannot reach the service: {text}"
    if isinstance(exc, TimeoutError | concurrent.futures.TimeoutError):
        return f"timed out: {text}"
    if isinstance(exc, RequestFailedError):
        return f"request {exc.request_id} failed ({exc.category}): {text}"
    if not _is_expected(exc):
        return f"unexpected {type(exc).__name__}: {text} (rerun with --debug for a traceback)"
    return text


# --------------------------------------------------------------------------------------------
# Output


def to_jsonable(value: Any) -> Any:
    """Convert API objects (attrs classes, datetimes, enums) to JSON-ready builtins."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, _dt.datetime):
        return _iso(value)
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if attrs.has(type(value)):
        return {
            field.name: to_jsonable(getattr(value, field.name))
            for field in attrs.fields(type(value))
            if not field.name.startswith("_")
        }
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _iso(moment: _dt.datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    text = moment.astimezone(_dt.timezone.utc).isoformat(timespec="seconds")
    return text.replace("+00:00", "Z")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, _dt.datetime):
        return _iso(value)
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v) for v in value) if value else "-"
    return str(value)


def _size_cell(size: int | None) -> str:
    from tinker_lite._progress import format_bytes

    return "-" if size is None else format_bytes(size)


class Output:
    """Writes command results as tables/records (``table``) or one JSON document (``json``)."""

    def __init__(self, fmt: str, out: TextIO, err: TextIO) -> None:
        self.format = fmt
        self.out = out
        self.err = err

    @property
    def json(self) -> bool:
        """Whether results are printed as JSON."""
        return self.format == "json"

    def document(self, doc: Any) -> None:
        """Print one JSON document."""
        self.out.write(json.dumps(to_jsonable(doc), indent=2, sort_keys=False) + "\n")

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[Any]], empty: str) -> None:
        """Print rows as aligned columns under ``headers`` (or ``empty`` when there are none)."""
        cells = [[_cell(v) for v in row] for row in rows]
        if not cells:
            self.out.write(empty + "\n")
            return
        widths = [len(h) for h in headers]
        for row in cells:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        lines = [headers, *cells]
        for line in lines:
            text = "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True))
            self.out.write(text.rstrip() + "\n")

    def record(self, pairs: Sequence[tuple[str, Any]]) -> None:
        """Print ``label: value`` lines, labels aligned."""
        width = max((len(label) for label, _ in pairs), default=0)
        for label, value in pairs:
            self.out.write(f"{(label + ':').ljust(width + 1)} {_cell(value)}\n")

    def line(self, text: str) -> None:
        """Print one line of human-readable text (table format only)."""
        self.out.write(text + "\n")

    def note(self, text: str) -> None:
        """Print a remark on stderr (kept out of the JSON on stdout)."""
        self.err.write(text + "\n")


# --------------------------------------------------------------------------------------------
# Command context


class Context:
    """Parsed arguments, output, and the clients a command needs (created on first use)."""

    def __init__(self, args: argparse.Namespace, output: Output) -> None:
        self.args = args
        self.output = output
        self.timeout: float = float(getattr(args, "timeout", None) or DEFAULT_TIMEOUT_S)
        self._service: ServiceClient | None = None
        self._rest: RestClient | None = None

    @property
    def base_url(self) -> str | None:
        """``--base-url``, else ``TINKER_BASE_URL`` (left to the client), else the default."""
        value = getattr(self.args, "base_url", None)
        return str(value) if value else None

    def service(self) -> ServiceClient:
        """The ServiceClient for this command (closed when the command ends)."""
        if self._service is None:
            from tinker_lite._retry import RetryPolicy
            from tinker_lite.service_client import ServiceClient

            # The commands only use the REST API: no session (and no heartbeat) is opened.
            # --timeout bounds every request with its retries, the start-up ones included, so
            # an unreachable service is reported (with its real error) within that time.
            self._service = ServiceClient(
                base_url=self.base_url,
                _session_options={
                    "create_session": False,
                    "retry_policy": RetryPolicy(budget_s=self.timeout),
                },
            )
        return self._service

    def rest(self) -> RestClient:
        """The RestClient for this command."""
        if self._rest is None:
            self._rest = self.service().create_rest_client()
        return self._rest

    def wait(self, future: concurrent.futures.Future[T]) -> T:
        """Wait for an API future with the command's timeout.

        The request's retries end within the timeout; the short grace lets its own error
        (e.g. connection refused) arrive rather than a bare "timed out waiting".
        """
        return future.result(timeout=self.timeout + _WAIT_GRACE_S)

    def close(self) -> None:
        """Close the clients."""
        service, self._service, self._rest = self._service, None, None
        if service is not None:
            service.close()


def _parse_path(path: str) -> types.ParsedCheckpointTinkerPath:
    from tinker_lite.types import ParsedCheckpointTinkerPath

    return ParsedCheckpointTinkerPath.from_tinker_path(path)


# --------------------------------------------------------------------------------------------
# version / check


def cmd_version(ctx: Context) -> int:
    """Print the version of tinker-lite."""
    info = {
        "version": __version__,
        "wire_sdk_version": os.environ.get("TINKER_LITE_SDK_VERSION") or WIRE_SDK_VERSION,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }
    if ctx.output.json:
        ctx.output.document(info)
    else:
        ctx.output.line(f"{PROG} {__version__}")
        ctx.output.record(
            [
                ("wire", f"official SDK {info['wire_sdk_version']}"),
                ("python", info["python"]),
                ("platform", info["platform"]),
            ]
        )
    return EXIT_OK


def _env_flag(name: str, default: str) -> str:
    value = os.environ.get(name)
    return f"{value} (from {name})" if value is not None else f"{default} (default)"


def cmd_check(ctx: Context) -> int:
    """Report the configuration, the service's reachability and its client-config flags."""
    from tinker_lite._journal import ENV_VAR as JOURNAL_ENV
    from tinker_lite._progress import ENV_VAR as PROGRESS_ENV

    if ctx.base_url is not None:
        base_url, source = ctx.base_url, "--base-url"
    elif os.environ.get("TINKER_BASE_URL"):
        base_url, source = os.environ["TINKER_BASE_URL"], "TINKER_BASE_URL"
    else:
        base_url, source = DEFAULT_BASE_URL, "default"
    key_set = bool(os.environ.get("TINKER_API_KEY"))
    report: dict[str, Any] = {
        "version": __version__,
        "base_url": base_url,
        "base_url_source": source,
        "api_key": "set (from TINKER_API_KEY)" if key_set else "not set",
        "api_key_set": key_set,
        "cloudflare_access": bool(os.environ.get("CLOUDFLARE_ACCESS_CLIENT_ID")),
        "journal": os.environ.get(JOURNAL_ENV) or None,
        "progress": _env_flag(PROGRESS_ENV, "auto"),
        "telemetry": _env_flag("TINKER_TELEMETRY", "1"),
        "log": _env_flag("TINKER_LOG", "warning"),
        "project_id": os.environ.get("TINKER_PROJECT_ID") or None,
    }
    if base_url.startswith(LOCAL_URL):
        from tinker_lite.local import LocalServer

        with LocalServer() as local_url:
            probe = _probe_service(local_url, api_key=None, timeout=ctx.timeout)
        probe["server"] = "local (in-process server started for this check)"
    else:
        probe = _probe_service(
            base_url, api_key=os.environ.get("TINKER_API_KEY") or None, timeout=ctx.timeout
        )
    report.update(probe)
    code = EXIT_OK
    if not report["reachable"]:
        code = EXIT_CONNECTION
    elif report["auth"] == "API key required" or report["auth"].startswith("rejected"):
        code = EXIT_AUTH
    elif report["auth"] not in ("ok", "not needed"):
        code = EXIT_SERVICE  # reachable, but its answers did not tell whether the key works
    if ctx.output.json:
        report["exit_code"] = code
        ctx.output.document(report)
        return code
    ctx.output.record(
        [
            ("tinker-lite", f"{__version__} (Python {platform.python_version()})"),
            ("Base URL", f"{base_url} (from {source})"),
            ("API key", report["api_key"]),
            ("Server", report["server"]),
            ("Auth", report["auth"]),
            ("Models", report.get("models") or None),
            ("Journal", report["journal"] or f"off (set {JOURNAL_ENV} to turn on)"),
            ("Progress", report["progress"]),
            ("Telemetry", report["telemetry"]),
            ("Log level", report["log"]),
        ]
    )
    flags = report.get("client_config")
    if isinstance(flags, dict):
        ctx.output.line("Client config:")
        for name, value in flags.items():
            ctx.output.line(f"  {name} = {json.dumps(value)}")
    else:
        ctx.output.line("Client config: not offered by the server (built-in defaults apply)")
    return code


def _probe_service(base_url: str, *, api_key: str | None, timeout: float) -> dict[str, Any]:
    """Ask the service for health, client config, capabilities and an authenticated listing."""
    import requests

    root = base_url.rstrip("/") + "/api/v1/"
    headers = {"User-Agent": f"tinker-lite/{__version__}"}
    if api_key:
        headers["X-API-Key"] = api_key
    for name in ("CLOUDFLARE_ACCESS_CLIENT_ID", "CLOUDFLARE_ACCESS_CLIENT_SECRET"):
        if os.environ.get(name):
            header = "CF-Access-Client-Id" if name.endswith("_ID") else "CF-Access-Client-Secret"
            headers[header] = os.environ[name]
    result: dict[str, Any] = {"reachable": False, "auth": "unknown"}
    limit = (min(timeout, 10.0), min(timeout, 30.0))
    with requests.Session() as http:
        started = time.monotonic()
        try:
            resp = http.get(root + "healthz", headers=headers, timeout=limit)
        except requests.RequestException as exc:
            reason = " ".join(str(exc).split())
            result["server"] = f"unreachable ({type(exc).__name__}: {reason})"
            return result
        elapsed_ms = (time.monotonic() - started) * 1000.0
        result["reachable"] = True
        result["server"] = f"reachable (healthz HTTP {resp.status_code} in {elapsed_ms:.0f} ms)"
        try:
            resp = http.post(
                root + "client/config",
                json={"sdk_version": WIRE_SDK_VERSION},
                headers=headers,
                timeout=limit,
            )
            if resp.status_code == 200 and isinstance(resp.json(), dict):
                result["client_config"] = resp.json()
            resp = http.get(root + "get_server_capabilities", headers=headers, timeout=limit)
            if resp.status_code == 200:
                models = resp.json().get("supported_models") or []
                result["models"] = [m.get("model_name") for m in models if isinstance(m, dict)]
            resp = http.get(
                root + "training_runs",
                params={"limit": "1", "offset": "0"},
                headers=headers,
                timeout=limit,
            )
        except (requests.RequestException, ValueError) as exc:
            result["auth"] = f"unknown ({type(exc).__name__})"
            return result
        if resp.status_code in (401, 403):
            result["auth"] = (
                f"rejected (HTTP {resp.status_code})" if api_key else "API key required"
            )
        elif resp.status_code < 400:
            result["auth"] = "ok" if api_key else "not needed"
        else:
            result["auth"] = f"unknown (HTTP {resp.status_code})"
    return result


# --------------------------------------------------------------------------------------------
# run


def _run_rows(runs: Sequence[types.TrainingRun]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for run in runs:
        last = run.last_checkpoint or run.last_sampler_checkpoint
        rows.append(
            [
                run.training_run_id,
                run.base_model,
                run.lora_rank if run.is_lora else "full",
                run.last_request_time,
                last.tinker_path if last is not None else None,
                "CORRUPTED" if run.corrupted else "",
            ]
        )
    return rows


def cmd_run_list(ctx: Context) -> int:
    """List training runs (a page, or every run with --all)."""
    args = ctx.args
    rest = ctx.rest()
    if args.all:
        runs: list[types.TrainingRun] = []
        offset = 0
        while True:
            page = ctx.wait(rest.list_training_runs(limit=100, offset=offset))
            runs.extend(page.training_runs)
            offset += len(page.training_runs)
            if not page.training_runs or offset >= page.cursor.total_count:
                break
        cursor: dict[str, int] = {"offset": 0, "limit": len(runs), "total_count": len(runs)}
        total = len(runs)
    else:
        page = ctx.wait(rest.list_training_runs(limit=args.limit, offset=args.offset))
        runs = list(page.training_runs)
        cursor = to_jsonable(page.cursor)
        total = page.cursor.total_count
    if ctx.output.json:
        ctx.output.document({"training_runs": runs, "cursor": cursor})
        return EXIT_OK
    ctx.output.table(
        ["RUN ID", "BASE MODEL", "LORA", "LAST REQUEST", "LAST CHECKPOINT", ""],
        _run_rows(runs),
        empty="No training runs.",
    )
    if not args.all and total > args.offset + len(runs):
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


# --------------------------------------------------------------------------------------------
# checkpoint


def _checkpoint_rows(checkpoints: Sequence[types.Checkpoint]) -> list[list[Any]]:
    return [
        [
            c.tinker_path,
            c.checkpoint_type,
            c.time,
            _size_cell(c.size_bytes),
            c.public,
            c.expires_at if c.expires_at is not None else "never",
        ]
        for c in checkpoints
    ]


_CHECKPOINT_HEADERS = ["TINKER PATH", "TYPE", "TIME", "SIZE", "PUBLIC", "EXPIRES"]


class Listing:
    """Checkpoints gathered from the service, and whether the listing is known to be complete."""

    def __init__(self, checkpoints: list[types.Checkpoint], complete: bool, reason: str) -> None:
        self.checkpoints = checkpoints
        self.complete = complete
        self.reason = reason


def list_all_checkpoints(
    rest: RestClient,
    wait: Callable[[Any], Any],
    *,
    run_id: str | None = None,
    page_size: int = 100,
) -> Listing:
    """Every checkpoint of one run, or of the user (paging until the cursor's total is reached).

    The listing is marked incomplete when the pages do not add up to the cursor's total (the
    set changed while paging), a page repeats a checkpoint, or a cursor is missing where one is
    needed to know the end.
    """
    if run_id is not None:
        page = wait(rest.list_checkpoints(run_id))
        items = list(page.checkpoints)
        cursor = page.cursor
        if cursor is not None and cursor.total_count > len(items):
            return Listing(
                items, False, f"the run listing returned {len(items)} of {cursor.total_count}"
            )
        return Listing(items, True, "")
    items = []
    seen: set[str] = set()
    offset = 0
    while True:
        page = wait(rest.list_user_checkpoints(limit=page_size, offset=offset))
        batch = list(page.checkpoints)
        for checkpoint in batch:
            if checkpoint.tinker_path in seen:
                return Listing(items, False, "a checkpoint appeared twice while paging")
            seen.add(checkpoint.tinker_path)
        items.extend(batch)
        offset += len(batch)
        cursor = page.cursor
        if cursor is None:
            if len(batch) >= page_size:
                return Listing(items, False, "the service sent a full page without a cursor")
            return Listing(items, True, "")
        if not batch or offset >= cursor.total_count:
            if len(items) != cursor.total_count:
                return Listing(
                    items,
                    False,
                    f"got {len(items)} checkpoints but the service counts {cursor.total_count}",
                )
            return Listing(items, True, "")


def cmd_checkpoint_list(ctx: Context) -> int:
    """List the checkpoints of one run (--run) or of the user."""
    args = ctx.args
    rest = ctx.rest()
    cursor: Any = None
    if args.run is not None:
        page = ctx.wait(rest.list_checkpoints(args.run))
        checkpoints = list(page.checkpoints)
        cursor = page.cursor
    elif args.all:
        listing = list_all_checkpoints(rest, ctx.wait)
        if not listing.complete:
            ctx.output.note(f"warning: the listing may be incomplete: {listing.reason}")
        checkpoints = listing.checkpoints
        cursor = {"offset": 0, "limit": len(checkpoints), "total_count": len(checkpoints)}
    else:
        page = ctx.wait(rest.list_user_checkpoints(limit=args.limit, offset=args.offset))
        checkpoints = list(page.checkpoints)
        cursor = page.cursor
    if ctx.output.json:
        ctx.output.document({"checkpoints": checkpoints, "cursor": cursor})
        return EXIT_OK
    ctx.output.table(_CHECKPOINT_HEADERS, _checkpoint_rows(checkpoints), empty="No checkpoints.")
    if (
        args.run is None
        and not args.all
        and cursor is not None
        and cursor.total_count > args.offset + len(checkpoints)
    ):
        ctx.output.note(
            f"showing {len(checkpoints)} of {cursor.total_count} checkpoints "
            "(use --offset/--limit, or --all)"
        )
    return EXIT_OK


def _find_checkpoint(ctx: Context, path: str) -> types.Checkpoint:
    parsed = _parse_path(path)
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
        ctx.output.document({"checkpoint": checkpoint, "weights_info": weights})
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
            ("Size", _size_cell(checkpoint.size_bytes)),
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
    # WIRE.md §3.11: a redundant (un)publish answers 409, which the client retries for
    # minutes (§5); the listing says at once whether there is anything to do.
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


def cmd_checkpoint_set_ttl(ctx: Context) -> int:
    """Set or remove a checkpoint's time to live."""
    path = _parse_path(ctx.args.path).tinker_path
    ttl: int | None = ctx.args.ttl
    ctx.wait(ctx.rest().set_checkpoint_ttl_from_tinker_path(path, ttl))
    message = f"{path} never expires now" if ttl is None else f"{path} expires in {ttl} s from now"
    _report_change(ctx, {"tinker_path": path, "ttl_seconds": ttl}, message)
    return EXIT_OK


_DELETE_ERRORS = (TinkerError, TimeoutError, concurrent.futures.TimeoutError)


def _delete_failed(
    ctx: Context, failed: list[dict[str, str]], path: str, exc: BaseException
) -> int:
    """Record a checkpoint that could not be deleted (on stderr too); return its exit code."""
    message = _error_message(exc)
    failed.append({"tinker_path": path, "error": message})
    if not ctx.output.json:
        ctx.output.note(f"{PROG}: error: {path}: {message}")
    return exit_code_for(exc)


def cmd_checkpoint_delete(ctx: Context) -> int:
    """Delete one or more checkpoints (each is attempted; the first failure sets the exit code)."""
    paths = [_parse_path(p).tinker_path for p in ctx.args.paths]
    deleted: list[str] = []
    failed: list[dict[str, str]] = []
    code = EXIT_OK
    for path in paths:
        try:
            ctx.wait(ctx.rest().delete_checkpoint_from_tinker_path(path))
        except _DELETE_ERRORS as exc:
            failure = _delete_failed(ctx, failed, path, exc)
            code = code or failure
            continue
        deleted.append(path)
        if not ctx.output.json:
            ctx.output.line(f"deleted {path}")
    if ctx.output.json:
        ctx.output.document({"deleted": deleted, "failed": failed})
    return code


def default_archive_name(parsed: types.ParsedCheckpointTinkerPath) -> str:
    """A file name for a checkpoint's archive: ``<run>-<kind>-<name>.tar.gz``, filesystem-safe."""
    kind, _, name = parsed.checkpoint_id.partition("/")
    raw = f"{parsed.training_run_id}-{kind}-{name}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", raw) + ".tar.gz"


def cmd_checkpoint_download(ctx: Context) -> int:
    """Download a checkpoint's archive (resumable), and optionally extract it."""
    from tinker_lite._download import download, extract_archive
    from tinker_lite._progress import Progress, progress_mode

    args = ctx.args
    parsed = _parse_path(args.path)
    dest = Path(args.output) if args.output else Path(default_archive_name(parsed))
    if dest.is_dir():
        dest = dest / default_archive_name(parsed)
    if dest.exists() and not args.force:
        raise FileExistsError(f"{dest} already exists (use --force to replace it)")
    rest = ctx.rest()

    def fresh_url() -> str:
        response = ctx.wait(rest.get_checkpoint_archive_url_from_tinker_path(parsed.tinker_path))
        return str(response.url)

    url = fresh_url()
    mode = progress_mode(ctx.output.err, non_tty="lines")
    with Progress(desc="download", unit="bytes", stream=ctx.output.err, mode=mode) as progress:
        result = download(
            url, dest, refresh_url=fresh_url, progress=progress, overwrite=args.force, sleep=_sleep
        )
    files: list[str] | None = None
    if args.extract:
        files = extract_archive(result.path, args.extract)
    if ctx.output.json:
        ctx.output.document(
            {
                "tinker_path": parsed.tinker_path,
                "path": str(result.path),
                "size_bytes": result.size,
                "resumed_from": result.resumed_from,
                "attempts": result.attempts,
                "url_refreshes": result.url_refreshes,
                "extracted_to": str(args.extract) if args.extract else None,
                "files": files,
            }
        )
        return EXIT_OK
    resumed = f", resumed at {result.resumed_from} bytes" if result.resumed_from else ""
    ctx.output.line(f"downloaded {result.size} bytes to {result.path}{resumed}")
    if files is not None:
        ctx.output.line(f"extracted {len(files)} files to {args.extract}")
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
        return _parse_path(path).training_run_id
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
    listing = list_all_checkpoints(rest, ctx.wait, run_id=args.run)
    if not listing.complete:
        raise CLIError(
            f"refusing to prune: the checkpoint listing is incomplete ({listing.reason}); "
            "nothing was deleted",
            EXIT_SERVICE,
        )
    delete, keep, public = plan_prune(
        listing.checkpoints, args.keep_last, checkpoint_type=args.type
    )
    deleted: list[str] = []
    failed: list[dict[str, str]] = []
    code = EXIT_OK
    verb = "would delete" if args.dry_run else "deleted"
    for checkpoint in delete:
        path = checkpoint.tinker_path
        if not args.dry_run:
            try:
                ctx.wait(rest.delete_checkpoint_from_tinker_path(path))
            except NotFoundError:
                pass  # already gone (e.g. its TTL ran out meanwhile): nothing left to do
            except _DELETE_ERRORS as exc:
                failure = _delete_failed(ctx, failed, path, exc)
                code = code or failure
                continue
            deleted.append(path)
        if not ctx.output.json:
            ctx.output.line(f"{verb} {path} ({_iso(checkpoint.time)})")
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
        return code
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
    return code


# --------------------------------------------------------------------------------------------
# session


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


# --------------------------------------------------------------------------------------------
# local


def cmd_local_serve(ctx: Context) -> int:
    """Run the offline server; the arguments go to ``python -m tinker_lite.local serve``."""
    from tinker_lite.local import __main__ as local_main

    rest: list[str] = list(ctx.args.server_args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    try:
        code = local_main.main(["serve", *rest])
    except SystemExit as exc:  # the server's own argument parser: --help (0) or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return int(code or 0)


# --------------------------------------------------------------------------------------------
# Parser


_EPILOG = "exit codes:\n" + "\n".join(
    f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES.items()
)
_EPILOG += """

environment:
  TINKER_API_KEY          API key (never printed; `check` only says whether it is set)
  TINKER_BASE_URL         service URL (default: the hosted service; local:// = in-process server)
  TINKER_LOG=debug        debug logging and tracebacks
  TINKER_LITE_PROGRESS=0  no progress bar or progress lines
  TINKER_LITE_JOURNAL     append one JSON line per completed operation to this file
"""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors say ``tinker-lite: error: ...`` and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{PROG}: error: {message}\n")


def _common_options() -> argparse.ArgumentParser:
    # SUPPRESS defaults let the options appear before or after the subcommand.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--format",
        choices=("table", "json"),
        default=argparse.SUPPRESS,
        help="output format (default: table)",
    )
    common.add_argument(
        "--base-url",
        default=argparse.SUPPRESS,
        metavar="URL",
        help="service URL (default: $TINKER_BASE_URL or the hosted service; local:// for an "
        "in-process server)",
    )
    common.add_argument(
        "--timeout",
        type=float,
        default=argparse.SUPPRESS,
        metavar="SECONDS",
        help="how long to wait for each service answer, retries included "
        f"(default: {DEFAULT_TIMEOUT_S:.0f})",
    )
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="debug logging, and a traceback on errors",
    )
    return common


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of ``tinker-lite`` (used by :func:`main` and the docs)."""
    common = _common_options()
    parser = _Parser(
        prog=PROG,
        description="Inspect and manage Tinker training runs, checkpoints and sessions,\n"
        "run the offline local server, and check the configuration.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    def leaf(group: Any, name: str, handler: Callable[[Context], int], help_text: str) -> Any:
        sub = group.add_parser(name, help=help_text, description=help_text, parents=[common])
        sub.set_defaults(handler=handler)
        return sub

    leaf(commands, "version", cmd_version, "print the version")
    leaf(
        commands,
        "check",
        cmd_check,
        "report base URL, API key presence, server reachability and client config flags",
    )

    run = commands.add_parser("run", help="training runs", description="Training runs.")
    run_cmds = run.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser)
    run_cmds.required = True
    sub = leaf(run_cmds, "list", cmd_run_list, "list training runs")
    sub.add_argument("--limit", type=_positive_int, default=20, help="page size (default: 20)")
    sub.add_argument("--offset", type=_non_negative_int, default=0, help="page start")
    sub.add_argument("--all", action="store_true", help="list every run (pages through all)")
    sub = leaf(run_cmds, "info", cmd_run_info, "show one training run")
    sub.add_argument(
        "run", metavar="RUN", help="run id, or a tinker:// path of one of its checkpoints"
    )

    ckpt = commands.add_parser(
        "checkpoint", help="checkpoints", description="Checkpoints (tinker:// paths)."
    )
    ckpt_cmds = ckpt.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser)
    ckpt_cmds.required = True
    sub = leaf(ckpt_cmds, "list", cmd_checkpoint_list, "list checkpoints (one run, or all yours)")
    sub.add_argument("--run", metavar="RUN_ID", help="only this run's checkpoints")
    sub.add_argument("--limit", type=_positive_int, default=100, help="page size (default: 100)")
    sub.add_argument("--offset", type=_non_negative_int, default=0, help="page start")
    sub.add_argument("--all", action="store_true", help="list every checkpoint (pages through all)")
    sub = leaf(ckpt_cmds, "info", cmd_checkpoint_info, "show one checkpoint and its weights info")
    sub.add_argument("path", metavar="TINKER_PATH")
    sub = leaf(ckpt_cmds, "publish", cmd_checkpoint_publish, "make a checkpoint public")
    sub.add_argument("path", metavar="TINKER_PATH")
    sub = leaf(ckpt_cmds, "unpublish", cmd_checkpoint_unpublish, "make a checkpoint private")
    sub.add_argument("path", metavar="TINKER_PATH")
    sub = leaf(ckpt_cmds, "set-ttl", cmd_checkpoint_set_ttl, "set or remove a checkpoint's TTL")
    sub.add_argument("path", metavar="TINKER_PATH")
    sub.add_argument(
        "ttl",
        metavar="TTL",
        type=parse_ttl,
        help="seconds, or a number with s/m/h/d/w (e.g. 7d); 'never' removes the TTL",
    )
    sub = leaf(ckpt_cmds, "delete", cmd_checkpoint_delete, "delete checkpoints")
    sub.add_argument("paths", metavar="TINKER_PATH", nargs="+")
    sub = leaf(
        ckpt_cmds,
        "download",
        cmd_checkpoint_download,
        "download a checkpoint archive (resumable; a .part file is resumed)",
    )
    sub.add_argument("path", metavar="TINKER_PATH")
    sub.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="archive file or directory (default: <run>-<kind>-<name>.tar.gz here)",
    )
    sub.add_argument("--extract", metavar="DIR", help="also extract the archive into DIR")
    sub.add_argument("--force", action="store_true", help="replace an existing archive file")
    sub = leaf(
        ckpt_cmds,
        "prune",
        cmd_checkpoint_prune,
        "delete all but the newest N checkpoints per run and type",
    )
    sub.add_argument(
        "--keep-last", type=_positive_int, required=True, metavar="N", help="how many to keep"
    )
    sub.add_argument("--run", metavar="RUN_ID", help="only this run (default: all your runs)")
    sub.add_argument(
        "--type", choices=("training", "sampler"), help="only this checkpoint type (default: both)"
    )
    sub.add_argument("--dry-run", action="store_true", help="print what would be deleted")

    sess = commands.add_parser("session", help="sessions", description="Sessions.")
    sess_cmds = sess.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser)
    sess_cmds.required = True
    sub = leaf(sess_cmds, "list", cmd_session_list, "list sessions")
    sub.add_argument("--limit", type=_positive_int, default=20, help="page size (default: 20)")
    sub.add_argument("--offset", type=_non_negative_int, default=0, help="page start")
    sub = leaf(sess_cmds, "info", cmd_session_info, "show one session's runs and samplers")
    sub.add_argument("session", metavar="SESSION_ID")

    local = commands.add_parser(
        "local", help="the offline local server", description="Local server."
    )
    local_cmds = local.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser)
    local_cmds.required = True
    sub = local_cmds.add_parser(
        "serve",
        help="run the offline Tinker-compatible server",
        description="Run the offline Tinker-compatible server; options are those of "
        "`python -m tinker_lite.local serve` (see `tinker-lite local serve -- --help`).",
        add_help=False,
    )
    # Everything after `serve` is left unparsed here and handed to the server (see main).
    sub.set_defaults(handler=cmd_local_serve, server_args=[])
    return parser


# --------------------------------------------------------------------------------------------
# Entry point


def _debug_requested(args: argparse.Namespace | None) -> bool:
    if args is not None and getattr(args, "debug", False):
        return True
    return os.environ.get("TINKER_LOG", "").strip().lower() == "debug"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tinker-lite`` with ``argv`` (default: the process arguments); return the exit code."""
    stdout, stderr = sys.stdout, sys.stderr
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(list(argv) if argv is not None else None)
        if getattr(args, "handler", None) is cmd_local_serve:
            args.server_args = extras
        elif extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    debug = _debug_requested(args)
    output = Output(getattr(args, "format", "table"), stdout, stderr)
    ctx = Context(args, output)
    handler: Callable[[Context], int] = args.handler
    with _debug_logging(stderr, enabled=debug):
        try:
            try:
                return handler(ctx)
            finally:
                ctx.close()
        except KeyboardInterrupt:
            stderr.write(f"{PROG}: interrupted\n")
            return EXIT_INTERRUPTED
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly.
            return EXIT_OK
        except Exception as exc:
            if debug:
                traceback.print_exception(exc, file=stderr)
            stderr.write(f"{PROG}: error: {_error_message(exc)}\n")
            return exit_code_for(exc)


@contextlib.contextmanager
def _debug_logging(stream: TextIO, *, enabled: bool) -> Iterator[None]:
    """Send tinker_lite's debug log to ``stream`` while a command runs (``--debug``)."""
    if not enabled:
        yield
        return
    package_logger = logging.getLogger("tinker_lite")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    previous = package_logger.level
    package_logger.addHandler(handler)
    package_logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        package_logger.removeHandler(handler)
        package_logger.setLevel(previous)


if __name__ == "__main__":
    sys.exit(main())
