"""TINKER_LOG=debug|info is honoured when tinker_lite is imported; quiet by default."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from tests.support.paths import REPO
from tinker_lite import _logging

PROBE = """
import logging, sys
{before}
import tinker_lite
log = logging.getLogger("tinker_lite.probe")
log.debug("debug-line")
log.info("info-line")
print(logging.getLogger("tinker_lite").level, len(logging.getLogger().handlers))
"""


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "TINKER_LOG"}
    environ.update(env)
    environ["PYTHONPATH"] = str(REPO) + os.pathsep + environ.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=environ,
        cwd=REPO,
        check=False,
        timeout=120,
    )


def test_quiet_by_default() -> None:
    result = _python(PROBE.format(before=""))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "0"]  # no level set, no handler added
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("value", "level", "shown", "hidden"),
    [
        ("debug", logging.DEBUG, ["debug-line", "info-line"], []),
        ("info", logging.INFO, ["info-line"], ["debug-line"]),
        ("DEBUG ", logging.DEBUG, ["debug-line"], []),
    ],
)
def test_tinker_log_sets_the_level_and_a_stderr_handler(
    value: str, level: int, shown: list[str], hidden: list[str]
) -> None:
    result = _python(PROBE.format(before=""), TINKER_LOG=value)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(level), "1"]
    for text in shown:
        assert f"tinker_lite.probe: {text}" in result.stderr
    for text in hidden:
        assert text not in result.stderr


def test_an_application_logging_setup_is_kept() -> None:
    before = "logging.basicConfig(stream=sys.stdout, format='app %(message)s')"
    result = _python(PROBE.format(before=before), TINKER_LOG="debug")
    assert result.returncode == 0, result.stderr
    assert "app debug-line" in result.stdout
    assert result.stdout.split()[-2:] == [str(logging.DEBUG), "1"]  # no second handler
    assert result.stderr == ""


def test_unknown_values_change_nothing() -> None:
    assert _logging.level_from_env({"TINKER_LOG": "verbose"}) is None
    assert _logging.level_from_env({}) is None
    assert _logging.level_from_env({"TINKER_LOG": "Info"}) == logging.INFO


def test_cli_logs_each_request_once_with_tinker_log_debug() -> None:
    code = "from tinker_lite.cli import main; raise SystemExit(main())"
    argv = ["--base-url", "local://", "session", "list"]
    result = _python(
        code.replace("main()", f"main({argv!r})"), TINKER_LOG="debug", TINKER_TELEMETRY="0"
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "GET /api/v1/sessions" in line]
    assert len([line for line in lines if "tinker_lite.http" in line]) == 1, result.stderr
    quiet = _python(code.replace("main()", f"main({argv!r})"), TINKER_TELEMETRY="0")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""


WARNING_PROBE = """
import logging
{before}
import tinker_lite
logging.getLogger("tinker_lite.probe").info("info-line")
logging.getLogger("tinker_lite.probe").warning("warning-line")
"""


def test_warnings_reach_stderr_when_the_application_configured_no_logging() -> None:
    # A retry the caller cannot see (docs/protocol.rst §6.6) or work dropped at exit is never
    # silent.
    result = _python(WARNING_PROBE.format(before=""))
    assert result.returncode == 0, result.stderr
    assert result.stderr == "WARNING tinker_lite.probe: warning-line\n"


def test_warnings_are_not_printed_twice_once_the_application_configures_logging() -> None:
    result = _python(WARNING_PROBE.format(before="logging.basicConfig(format='%(message)s')"))
    assert result.returncode == 0, result.stderr
    assert result.stderr == "warning-line\n"
