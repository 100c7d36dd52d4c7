"""``python -m tinker_lite.local serve ...``: run the offline Tinker server in the foreground.

Exit status: 0 after SIGINT/SIGTERM, 2 for a usage error, :data:`EXIT_PORT_IN_USE` (3) when the
port is taken, 1 when the server cannot start for another reason. ``tinker-lite local serve``
delegates here with its own program name (``main(argv, prog="tinker-lite local")``).
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from tinker_lite.local.http.faults import FaultSpecError, parse_fault_spec
from tinker_lite.local.http.responses import MAX_BODY
from tinker_lite.local.model.tiny_lm import CONTEXT_LENGTH, MAX_CONTEXT_LENGTH, MIN_CONTEXT_LENGTH
from tinker_lite.local.server import FAULTS_ENV, serve

__all__ = ["EXIT_PORT_IN_USE", "EXIT_START_FAILED", "PROG", "build_parser", "main"]

PROG = "python -m tinker_lite.local"
EXIT_START_FAILED = 1
EXIT_PORT_IN_USE = 3


def _config_item(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--config``: VALUE is JSON (true, 2, "x"), else taken as a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def _context_length(text: str) -> int:
    """``--context-length``: tokens, MIN_CONTEXT_LENGTH to MAX_CONTEXT_LENGTH."""
    try:
        length = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens, got {text!r}") from None
    if not MIN_CONTEXT_LENGTH <= length <= MAX_CONTEXT_LENGTH:
        raise argparse.ArgumentTypeError(
            f"must be {MIN_CONTEXT_LENGTH} to {MAX_CONTEXT_LENGTH}, got {length}"
        )
    return length


def _port(text: str) -> int:
    """``--port``: a TCP port number, 0 to 65535 (0: any free port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535 (0: any free port), got {port}")
    return port


def _faults(text: str) -> str:
    """``--faults``: a fault spec, checked here so a bad one is a usage error of ``serve``."""
    try:
        parse_fault_spec(text)
    except FaultSpecError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The argument parser of the ``serve`` command (also used by ``tinker-lite local``)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Offline Tinker-compatible server backed by a tiny numpy model."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "serve",
        help="serve the Tinker HTTP API until SIGINT/SIGTERM",
        description="Serve the Tinker HTTP API on this machine, backed by a tiny numpy model,\n"
        "until SIGINT/SIGTERM. The first line printed is the base URL to use.",
        epilog="examples:\n"
        f"  {prog} serve                       # http://127.0.0.1:8000\n"
        f"  {prog} serve --port 0              # any free port (the URL is printed)\n"
        f"  {prog} serve --port 8080 --data-dir ./tinker-data --api-key tml-local\n"
        f"  {prog} serve --faults 'path=/api/v1/asample,status=429,count=3'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    run.add_argument("--port", type=_port, default=8000, help="port (default 8000; 0 = any free)")
    run.add_argument("--data-dir", help="keep checkpoints here (default: a temporary directory)")
    run.add_argument("--api-key", help="require this X-API-Key on every request")
    run.add_argument("--jwt", action="store_true", help="enable JWT exchange (auth/token)")
    run.add_argument(
        "--faults",
        type=_faults,
        help=f"fault injection spec (default: ${FAULTS_ENV}); see the package docs",
    )
    run.add_argument("--stub-model", action="store_true", help="instant model for benchmarks")
    run.add_argument(
        "--result-ttl", type=float, default=3600.0, help="seconds results are kept (then 410)"
    )
    run.add_argument(
        "--long-poll", type=float, default=1.0, help="retrieve_future long-poll seconds"
    )
    run.add_argument(
        "--config",
        action="append",
        type=_config_item,
        default=[],
        metavar="KEY=VALUE",
        help="override a client/config flag, e.g. sample_use_retrieve_futures=true (repeatable)",
    )
    run.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME",
        help="also serve this base_model name with the tiny model (repeatable; "
        "see also $TINKER_LITE_LOCAL_MODELS)",
    )
    run.add_argument(
        "--max-body-mb",
        type=int,
        default=MAX_BODY >> 20,
        metavar="MIB",
        help=f"refuse (413) request bodies larger than this, as sent or inflated "
        f"(default {MAX_BODY >> 20})",
    )
    run.add_argument(
        "--context-length",
        type=_context_length,
        default=CONTEXT_LENGTH,
        metavar="N",
        help=f"the tiny model's context window in tokens, {MIN_CONTEXT_LENGTH}..."
        f"{MAX_CONTEXT_LENGTH} (default {CONTEXT_LENGTH}; longer prompts cost more time and "
        "memory)",
    )
    run.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Parse ``argv`` and run the server; returns the exit status (see the module docstring)."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )

    def ready(base_url: str) -> None:
        print(base_url, flush=True)

    try:
        serve(
            args.host,
            args.port,
            args.data_dir,
            args.api_key,
            args.faults,
            args.jwt,
            args.stub_model,
            ready=ready,
            result_ttl=args.result_ttl,
            long_poll_s=args.long_poll,
            config_overrides=dict(args.config),
            models=tuple(args.model),
            max_body_bytes=max(1, args.max_body_mb) << 20,
            context_length=args.context_length,
        )
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            print(
                f"{prog}: error: port {args.port} on {args.host} is already in use "
                "(choose another with --port, or --port 0 for any free port)",
                file=sys.stderr,
            )
            return EXIT_PORT_IN_USE
        print(f"{prog}: error: cannot serve on {args.host}:{args.port}: {e}", file=sys.stderr)
        return EXIT_START_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
