"""The official Tinker SDK 0.38 runs every public sync call against ``tinker-lite local serve``.

Opt-in (``make test-official``): runs only with ``TINKER_LITE_OFFICIAL=1`` and the official SDK's
virtualenv present (``TINKER_OFFICIAL_VENV``, default ``~/.cache/tinker-lite-bench/official-venv``;
``make test-official`` creates it from the package index when missing). ``make test`` skips it.

``tests/compat/official_sdk_driver.py`` runs under the official interpreter against two servers
started as subprocesses on loopback (API key, and JWT mode) and reports every call; each server
configuration below must pass every call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

VENV = Path(
    os.environ.get("TINKER_OFFICIAL_VENV")
    or Path.home() / ".cache" / "tinker-lite-bench" / "official-venv"
)
PYTHON = VENV / "bin" / "python"
DRIVER = Path(__file__).with_name("official_sdk_driver.py")
API_KEY = "tml-local-official"

pytestmark = pytest.mark.skipif(
    os.environ.get("TINKER_LITE_OFFICIAL") != "1" or not PYTHON.exists(),
    reason="opt-in: make test-official (needs the official SDK 0.38 venv)",
)

CONFIGS = {
    "defaults": [],
    "flags": [
        "--config",
        "sample_use_retrieve_futures=true",
        "--config",
        "sample_join_sampling_session=true",
        "--config",
        "proto_compress_fwdbwd=true",
    ],
}


@contextmanager
def _serve(*args: str) -> Iterator[str]:
    """``python -m tinker_lite.local serve --port 0 ...`` as a subprocess; yields its URL."""
    command = [sys.executable, "-m", "tinker_lite.local", "serve", "--port", "0", *args]
    proc = subprocess.Popen(
        [*command, "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_official_sdk_runs_every_call(config: str) -> None:
    with ExitStack() as stack:
        url = stack.enter_context(_serve(*CONFIGS[config]))
        jwt_url = stack.enter_context(_serve("--jwt", "--api-key", API_KEY))
        env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
        result = subprocess.run(
            [str(PYTHON), "-W", "ignore", str(DRIVER), url, jwt_url],
            check=False,
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
        )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULTS ")]
    assert lines, result.stderr[-3000:]
    results: dict[str, str] = json.loads(lines[-1][len("RESULTS ") :])
    failed = {name: outcome for name, outcome in results.items() if outcome != "PASS"}
    print(f"\nofficial SDK 0.38, server config {config!r}: {len(results)} calls")
    for name, outcome in results.items():
        print(f"  {outcome.split(':')[0]:4}  {name}")
    assert not failed, failed
    assert result.returncode == 0
    assert len(results) >= 60  # the driver really ran its calls
