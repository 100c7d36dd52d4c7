"""What a failing or puzzling command says: one line per failure, a hint that fits the cause,
usage errors of the command that was typed, and answers that agree with each other."""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.scripted_server import Reply, ScriptedServer
from tinker_lite import InvalidInputError
from tinker_lite._session.settings import resolve_settings
from tinker_lite._transport.retry import RetryNotice, announce_retry
from tinker_lite.cli import EXIT_AUTH, EXIT_CONNECTION, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, main
from tinker_lite.cli._main import LONG_RETRY_S, _quiet_short_retries
from tinker_lite.cli._output import Output
from tinker_lite.local import LocalServer

RETRY_LOGGER = "tinker_lite.retry"


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("TINKER_", "CLOUDFLARE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))  # no stored login
    monkeypatch.setenv("TINKER_TELEMETRY", "0")


@pytest.fixture(scope="module")
def keyless_url() -> Iterator[str]:
    with LocalServer() as base_url:
        yield base_url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- one line per failure --------------------------------------------------------------------


def test_an_unreachable_service_is_one_line_with_no_retry_warning(tmp_path: Path) -> None:
    """In a real process (stderr as a user sees it): the error line, and no WARNING before it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    env.update(HOME=str(tmp_path), TINKER_API_KEY="tml-k", TINKER_TELEMETRY="0")
    url = f"http://127.0.0.1:{_closed_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "tinker_lite.cli", "--base-url", url, "run", "list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == EXIT_CONNECTION
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"tinker-lite: error: Connection refused by {url[7:]}")
    assert "retrying" not in done.stderr


def test_a_slow_command_that_fails_prints_only_its_error_line(
    capsys: pytest.CaptureFixture[str], keyless_url: str
) -> None:
    code, out, err = run(capsys, "--base-url", keyless_url, "session", "export-trace", "nope")
    assert code == EXIT_NOT_FOUND
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("tinker-lite: error: GET /api/v1/sessions/nope/trace_export failed")


def test_a_wait_is_announced_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal, log = Terminal(), io.StringIO()
    Output("table", io.StringIO(), terminal).waiting("Exporting...")
    Output("table", io.StringIO(), log).waiting("Exporting...")
    assert terminal.getvalue() == "Exporting...\n"
    assert log.getvalue() == ""


def test_the_retry_warning_shows_with_debug_or_tinker_log(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG, logger="tinker_lite")
    url = f"http://127.0.0.1:{_closed_port()}"
    argv = ["--base-url", url, "run", "list", "--startup-timeout", "0.5"]
    monkeypatch.setenv("TINKER_API_KEY", "tml-k")
    assert main(argv) == EXIT_CONNECTION
    warned = [r for r in caplog.records if r.name == RETRY_LOGGER and r.levelno == logging.WARNING]
    assert warned == []
    capsys.readouterr()
    caplog.clear()
    assert main([*argv, "--debug"]) == EXIT_CONNECTION
    warned = [r for r in caplog.records if r.name == RETRY_LOGGER and r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert "retrying in" in warned[0].getMessage()
    capsys.readouterr()
    caplog.clear()
    monkeypatch.setattr("tinker_lite._logging.configured_level", logging.INFO)  # TINKER_LOG=info
    assert main(argv) == EXIT_CONNECTION
    assert [r for r in caplog.records if r.name == RETRY_LOGGER and r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    ("delay", "until_s", "shown"),
    [
        (0.4, 5.0, False),  # the default start-up budget: the error line follows soon
        (0.4, LONG_RETRY_S + 20, True),  # a long budget: say why nothing happens
        (LONG_RETRY_S + 5, 8.0, True),  # a long Retry-After
        (0.4, None, True),  # no time bound
    ],
)
def test_a_retry_warning_is_kept_when_its_wait_is_long(
    caplog: pytest.LogCaptureFixture, delay: float, until_s: float | None, shown: bool
) -> None:
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    with _quiet_short_retries(enabled=True):
        announce_retry(
            "GET /api/v1/training_runs",
            "HTTP 503",
            delay=delay,
            until_s=until_s,
            wall_now=0.0,
            invisible=True,
            notice=RetryNotice(),
        )
    assert bool([r for r in caplog.records if r.name == RETRY_LOGGER]) is shown


def test_no_unencrypted_warning_when_there_is_no_key_to_send(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    url = "http://10.1.2.3:8124"
    with pytest.raises(InvalidInputError, match="no API key"):
        resolve_settings(base_url=url, environ={"HOME": str(tmp_path)})
    assert not [r for r in caplog.records if "unencrypted" in r.getMessage()]
    resolve_settings(base_url=url, api_key="k", environ={})  # with a key it still warns
    assert [r for r in caplog.records if "unencrypted" in r.getMessage()]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:99999", "the port must be a number from 0 to 65535"),
        ("http://", "names no host"),
        ("ftp://example.com", "must be an http:// or https:// URL"),
    ],
)
def test_a_malformed_base_url_is_a_usage_error_naming_it(
    capsys: pytest.CaptureFixture[str], url: str, problem: str
) -> None:
    code, out, err = run(capsys, "--base-url", url, "run", "list")
    assert code == EXIT_USAGE
    assert out == ""
    assert err.startswith(f"tinker-lite: error: base_url: {problem}")
    assert len(err.splitlines()) == 1


# -- hints that fit the cause ----------------------------------------------------------------


@pytest.mark.parametrize("argv", [["run", "list"], ["run", "info", "nope"]])
def test_a_base_url_with_a_stray_path_says_so(
    capsys: pytest.CaptureFixture[str], keyless_url: str, argv: list[str]
) -> None:
    code, out, err = run(capsys, "--base-url", f"{keyless_url}/v1", *argv)
    assert code == EXIT_NOT_FOUND
    assert out == ""
    assert len(err.splitlines()) == 1
    assert ". The base URL's path /v1 looks wrong" in err
    assert f"e.g. {keyless_url}." in err
    assert "Check the id" not in err


def test_a_missing_run_at_the_right_url_still_says_check_the_id(
    capsys: pytest.CaptureFixture[str], keyless_url: str
) -> None:
    code, _, err = run(capsys, "--base-url", keyless_url, "run", "info", "nope")
    assert code == EXIT_NOT_FOUND
    assert err.rstrip().endswith("Check the id or tinker:// path.")
    assert "base URL" not in err


def test_check_names_a_base_url_with_a_stray_path(
    capsys: pytest.CaptureFixture[str], keyless_url: str
) -> None:
    _, out, _ = run(capsys, "--base-url", f"{keyless_url}/v1", "check")
    server = next(line for line in out.splitlines() if line.startswith("Server:"))
    assert "healthz HTTP 404" in server
    assert "the base URL's path /v1 looks wrong" in server


# -- usage errors and help of `local serve` --------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["--port", "-5"], "--port"),
        (["--port", "70000"], "--port"),
        (["--port", "http"], "--port"),
        (["--faults", "garbage"], "--faults"),
    ],
)
def test_bad_local_serve_arguments_are_its_own_usage_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], argument: str
) -> None:
    code, out, err = run(capsys, "local", "serve", *argv)
    assert code == EXIT_USAGE
    assert out == ""
    assert err.startswith("usage: tinker-lite local serve ")
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert errors[0].startswith(f"tinker-lite local serve: error: argument {argument}: ")
    assert "Traceback" not in err


def test_local_serve_help_has_a_description_and_ends_with_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "local", "serve", "--help")
    assert code == EXIT_OK
    assert "Serve the Tinker HTTP API on this machine" in out
    examples = out.rstrip().split("\nexamples:\n")[-1].splitlines()
    assert examples
    assert all(line.strip().startswith("tinker-lite local serve") for line in examples)


# -- answers that agree ----------------------------------------------------------------------


def test_check_and_auth_status_agree_on_a_keyless_server(
    capsys: pytest.CaptureFixture[str], keyless_url: str
) -> None:
    code, out, _ = run(capsys, "--base-url", keyless_url, "check")
    assert code == EXIT_OK
    assert "Auth:        not needed" in out
    code, out, err = run(capsys, "--base-url", keyless_url, "auth", "status")
    assert code == EXIT_OK, err
    assert out.splitlines()[0].startswith("Credentials available: no")
    assert "Tinker accessible: yes (this service needs no API key)" in out
    assert err == ""
    code, out, _ = run(capsys, "--base-url", keyless_url, "--format", "json", "auth", "status")
    assert code == EXIT_OK
    assert json.loads(out)["credentials_available"] is False
    assert json.loads(out)["accessible"] is True


def test_check_and_auth_status_agree_on_a_server_that_needs_a_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with LocalServer(api_key="tml-needed") as url:
        code, out, _ = run(capsys, "--base-url", url, "check")
        assert code == EXIT_AUTH
        assert "API key required" in out
        code, out, err = run(capsys, "--base-url", url, "auth", "status")
        assert code == EXIT_AUTH
        assert "Tinker accessible" not in out
        assert err.startswith("tinker-lite: error: no credential found")


def test_whoami_on_a_server_without_jwt_is_a_documented_answer(
    capsys: pytest.CaptureFixture[str], keyless_url: str
) -> None:
    code, out, err = run(capsys, "--base-url", keyless_url, "auth", "whoami")
    assert code == EXIT_NOT_FOUND
    assert out == ""
    assert err == (
        f"tinker-lite: error: no identity to show: the service at {keyless_url} does not issue "
        "tokens (JWT auth is off), and only a token names the user and organization; "
        "`tinker-lite auth status` says whether the credential is accepted\n"
    )


def test_model_list_shows_what_the_local_server_knows(
    capsys: pytest.CaptureFixture[str], keyless_url: str
) -> None:
    code, out, err = run(capsys, "--base-url", keyless_url, "model", "list", "tiny")
    assert code == EXIT_OK
    header, row = (line.split() for line in out.splitlines())
    assert header == ["MODEL", "MAX", "CONTEXT", "TRAINABLE", "SAMPLEABLE"]
    assert row == ["tinker-lite/tiny-64", "512", "yes", "yes"]
    assert err == ""
    code, out, _ = run(capsys, "--base-url", keyless_url, "-f", "json", "model", "list", "tiny")
    (model,) = json.loads(out)["models"]
    assert model["trainable"] is True
    assert model["sampleable"] is True


def test_model_list_leaves_out_what_the_service_does_not_say(
    capsys: pytest.CaptureFixture[str],
) -> None:
    models = [
        {"model_name": "org/a", "max_context_length": 4096},
        {"model_name": "org/b", "max_context_length": 8192, "trainable": False},
    ]
    with ScriptedServer() as server:
        server.default("POST", "/api/v1/client/config", Reply(200, {}))
        server.default(
            "GET", "/api/v1/get_server_capabilities", Reply(200, {"supported_models": models})
        )
        code, out, err = run(capsys, "--base-url", server.url, "model", "list")
    assert code == EXIT_OK
    rows = [line.split() for line in out.splitlines()]
    assert rows == [
        ["MODEL", "MAX", "CONTEXT", "TRAINABLE"],
        ["org/a", "4096", "-"],
        ["org/b", "8192", "no"],
    ]
    assert err == "The service does not say which models are sampleable.\n"
