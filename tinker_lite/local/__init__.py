"""An offline Tinker-compatible HTTP server on loopback, backed by a tiny numpy model.

docs/local.rst is its manual: options, injected faults, restarts, stats.
"""

from __future__ import annotations

from tinker_lite.local.server import LocalServer, serve

__all__ = ["LocalServer", "serve"]
