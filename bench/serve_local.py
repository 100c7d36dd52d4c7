"""Serve the embedded local server with overridden ``client/config`` fields (for the benchmarks).

Same as ``python -m tinker_lite.local serve``, plus ``--config JSON``: fields of the
``client/config`` answer to override, e.g. ``{"sample_use_retrieve_futures": true}``. Prints
the base URL on its first line; stops on SIGINT/SIGTERM.

    python bench/serve_local.py --stub-model --config '{"sample_use_retrieve_futures": true}'
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

import _common as c


def main(argv: list[str] | None = None) -> int:
    """Parse the options and serve until signalled."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stub-model", action="store_true")
    parser.add_argument("--config", default="{}", help="client/config fields to override (JSON)")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    c.ensure_worktree_importable()
    from tinker_lite.local.server import serve

    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.WARNING))
    serve(
        "127.0.0.1",
        args.port,
        stub_model=args.stub_model,
        ready=lambda url: print(url, flush=True),
        config_overrides=json.loads(args.config),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
