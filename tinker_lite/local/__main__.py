"""``python -m tinker_lite.local serve ...``: run the offline Tinker server in the foreground."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tinker_lite.local._faults import FaultSpecError, parse_fault_spec
from tinker_lite.local.server import FAULTS_ENV, serve

__all__ = ["build_parser", "main"]


def build_parser(prog: str = "python -m tinker_lite.local") -> argparse.ArgumentParser:
    """The argument parser of the ``serve`` command (also used by ``tinker-lite local``)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Offline Tinker-compatible server backed by a tiny numpy model."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="serve the Tinker HTTP API until SIGINT/SIGTERM")
    run.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    run.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = any free)")
    run.add_argument("--data-dir", help="keep checkpoints here (default: a temporary directory)")
    run.add_argument("--api-key", help="require this X-API-Key on every request")
    run.add_argument("--jwt", action="store_true", help="enable JWT exchange (auth/token)")
    run.add_argument(
        "--faults", help=f"fault injection spec (default: ${FAULTS_ENV}); see the package docs"
    )
    run.add_argument("--stub-model", action="store_true", help="instant model for benchmarks")
    run.add_argument(
        "--result-ttl", type=float, default=3600.0, help="seconds results are kept (then 410)"
    )
    run.add_argument(
        "--long-poll", type=float, default=1.0, help="retrieve_future long-poll seconds"
    )
    run.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the server; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.faults is not None:
        try:
            parse_fault_spec(args.faults)
        except FaultSpecError as e:
            parser.error(str(e))

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
        )
    except OSError as e:
        print(f"error: cannot serve on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
