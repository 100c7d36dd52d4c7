"""``python -m tinker_lite.local serve``: prints its URL, serves, and stops cleanly on signals."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from tests.support.paths import REPO
from tinker_lite.local.__main__ import build_parser


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TINKER_LITE_LOCAL_FAULTS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tinker_lite.local", "serve", "--port", "0", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        url = lines.get(timeout=30).strip()
    except queue.Empty:
        proc.kill()
        pytest.fail("the server did not print its URL within 30 s")
    return proc, url


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_stops_cleanly_on_signal(sig: signal.Signals, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    proc, url = _start("--api-key", "cli-key", "--data-dir", str(data_dir), "--stub-model")
    try:
        assert url.startswith("http://127.0.0.1:")
        assert requests.get(url + "/api/v1/healthz", timeout=10).json() == {"status": "ok"}
        denied = requests.post(url + "/api/v1/create_session", json={}, timeout=10)
        assert denied.status_code == 401
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0
    assert "cli-key" not in stderr
    assert "stopped" in stderr
    assert data_dir.is_dir()  # an explicit data dir is kept


def test_bad_fault_spec_is_a_usage_error() -> None:
    parser = build_parser()
    args = parser.parse_args(["serve", "--faults", "path=/x,status=200", "--port", "0"])
    assert args.faults == "path=/x,status=200"
    from tinker_lite.local.__main__ import main

    with pytest.raises(SystemExit) as info:
        main(["serve", "--faults", "path=/x,bogus=1"])
    assert info.value.code == 2


def test_context_length_is_checked_as_an_argument() -> None:
    parser = build_parser()
    assert parser.parse_args(["serve", "--context-length", "4096"]).context_length == 4096
    assert parser.parse_args(["serve"]).context_length == 512
    for bad in ("8", "100000", "long"):
        with pytest.raises(SystemExit) as info:
            parser.parse_args(["serve", "--context-length", bad])
        assert info.value.code == 2
