"""``python -m tinker_lite.local serve`` in a process of its own, for tests that must keep the
server's imports (numpy, the model) out of the client's process."""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from tests.support.paths import REPO

__all__ = ["REPO", "served", "start_served"]


def start_served(
    *args: str,
    startup_timeout: float = 60.0,
    entry: tuple[str, ...] = ("tinker_lite.local", "serve"),
) -> tuple[subprocess.Popen[str], str]:
    """Start the server on a free loopback port with ``args``: (its process, its base URL).

    ``entry`` is the module and command run with ``python -m`` (``("tinker_lite.cli", "local",
    "serve")`` runs it as ``tinker-lite local serve``).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-m", *entry, "--port", "0", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    stdout = proc.stdout
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        url = lines.get(timeout=startup_timeout).strip()
    except queue.Empty:
        proc.kill()
        proc.communicate(timeout=10)
        pytest.fail(f"the local server did not print its URL within {startup_timeout:g} s")
    assert url.startswith("http://127.0.0.1:"), url
    return proc, url


@contextlib.contextmanager
def served(
    *args: str,
    startup_timeout: float = 60.0,
    entry: tuple[str, ...] = ("tinker_lite.local", "serve"),
) -> Iterator[str]:
    """Start the server on a free loopback port with ``args``; yield its base URL; stop it."""
    proc, url = start_served(*args, startup_timeout=startup_timeout, entry=entry)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=20)  # also closes its stdout pipe
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=10)
