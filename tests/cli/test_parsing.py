"""The tinker-lite command: parsing, usage errors, exit codes, output helpers (no server)."""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import socket
from collections.abc import Callable

import pytest

from tests.support.paths import REPO
from tinker_lite import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    RequestErrorCategory,
    RequestFailedError,
    __version__,
    cli,
)
from tinker_lite.cli import EXIT_CODES, CLIError, exit_code_for, main, parse_ttl, to_jsonable


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def status_error(cls: Callable[..., Exception], code: int) -> Exception:
    return cls("boom", status_code=code)


def test_version_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "version")
    assert code == 0
    assert out.splitlines()[0] == f"tinker-lite {__version__}"
    assert err == ""
    code, out, _ = run(capsys, "version", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["version"] == __version__
    assert set(doc) == {"version", "wire_sdk_version", "python", "platform"}


def test_global_options_work_before_and_after_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--format", "json", "version")
    assert code == 0
    assert json.loads(out)["version"] == __version__


def test_help_lists_commands_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in ("version", "check", "run", "checkpoint", "session", "local"):
        assert command in out
    assert "exit codes:" in out
    for exit_code, meaning in EXIT_CODES.items():
        assert f"{exit_code:<4} {meaning}" in out
    for name in (
        "TINKER_API_KEY",
        "TINKER_BASE_URL",
        "TINKER_LITE_PROGRESS",
        "TINKER_LITE_JOURNAL",
    ):
        assert name in out


def test_checkpoint_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "checkpoint", "--help")
    assert code == 0
    for sub in ("list", "info", "publish", "unpublish", "set-ttl", "delete", "download", "prune"):
        assert sub in out


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["run"],
        ["run", "list", "--limit", "-1"],
        ["session", "list", "--limit", "0"],
        ["checkpoint", "prune"],
        ["checkpoint", "prune", "--keep-last", "0"],
        ["checkpoint", "set-ttl", "tinker://r/weights/a", "-5"],
        ["checkpoint", "set-ttl", "tinker://r/weights/a", "soon"],
        ["version", "--format", "yaml"],
    ],
)
def test_usage_errors_exit_2_with_one_error_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    errors = [line for line in err.splitlines() if line.startswith("tinker-lite")]
    assert len(errors) == 1
    assert "error:" in errors[0]
    assert "Traceback" not in err


def test_bad_tinker_path_is_a_usage_error_without_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "checkpoint", "publish", "not-a-path")
    assert code == 2
    assert out == ""
    assert err.startswith("tinker-lite: error: ")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("3600", 3600), ("90m", 5400), ("12h", 43200), ("7d", 604800), ("2w", 1209600), ("45s", 45)],
)
def test_parse_ttl_units(text: str, seconds: int) -> None:
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize("text", ["never", "None", "off"])
def test_parse_ttl_never(text: str) -> None:
    assert parse_ttl(text) is None


@pytest.mark.parametrize("text", ["0", "-1", "1y", "", "1.5h"])
def test_parse_ttl_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_ttl(text)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (KeyboardInterrupt(), 130),
        (CLIError("x", 4), 4),
        (status_error(AuthenticationError, 401), 3),
        (status_error(PermissionDeniedError, 403), 3),
        (status_error(NotFoundError, 404), 4),
        (status_error(ConflictError, 409), 5),
        (status_error(BadRequestError, 400), 2),
        (InvalidInputError("tinker_path", "bad"), 2),
        (InvalidInputError("api_key", "no API key for https://x"), 3),
        (APIConnectionError(), 6),
        (APITimeoutError(), 6),
        (concurrent.futures.TimeoutError(), 6),
        (status_error(InternalServerError, 503), 7),
        (RequestFailedError("x", request_id="r", category=RequestErrorCategory.SERVER), 7),
        (RequestFailedError("x", request_id="r", category=RequestErrorCategory.USER), 2),
        (FileExistsError("x"), 5),
        (FileNotFoundError("x"), 4),
        (RuntimeError("x"), 1),
    ],
)
def test_exit_code_for(exc: BaseException, code: int) -> None:
    assert exit_code_for(exc) == code


def test_unexpected_error_prints_one_line_and_traceback_only_with_debug(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(ctx: cli.Context) -> int:
        raise RuntimeError("kaput")

    monkeypatch.setattr(cli.check, "cmd_version", explode)
    monkeypatch.delenv("TINKER_LOG", raising=False)
    code, out, err = run(capsys, "version")
    assert code == 1
    assert out == ""
    assert err.splitlines() == [
        "tinker-lite: error: unexpected RuntimeError: kaput (rerun with --debug for a traceback)"
    ]
    code, _, err = run(capsys, "version", "--debug")
    assert code == 1
    assert "Traceback (most recent call last)" in err
    assert err.rstrip().splitlines()[-1].startswith("tinker-lite: error: unexpected RuntimeError")


def test_keyboard_interrupt_exits_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(ctx: cli.Context) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.check, "cmd_version", interrupted)
    code, _, err = run(capsys, "version")
    assert code == 130
    assert err == "tinker-lite: interrupted\n"


def test_check_unreachable_server_exits_6_and_never_prints_the_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "tml-secret-key-that-must-not-leak"
    monkeypatch.setenv("TINKER_API_KEY", secret)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    code, out, err = run(capsys, "check", "--base-url", url, "--timeout", "5")
    assert code == 6
    assert "API key:" in out
    assert "set (from TINKER_API_KEY)" in out
    assert "unreachable" in out
    assert secret not in out + err
    code, out, err = run(capsys, "check", "--base-url", url, "--format", "json")
    doc = json.loads(out)
    assert code == 6
    assert doc["reachable"] is False
    assert doc["api_key"] == "set (from TINKER_API_KEY)"
    assert doc["exit_code"] == 6
    assert secret not in out + err


@pytest.mark.parametrize(
    ("auth", "code"),
    [
        ("ok", 0),
        ("not needed", 0),
        ("API key required", 3),
        ("rejected (HTTP 403)", 3),
        ("unknown (HTTP 500)", 7),
        ("unknown (JSONDecodeError)", 7),
    ],
)
def test_check_exit_code_follows_the_auth_probe(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, auth: str, code: int
) -> None:
    probe = {"reachable": True, "auth": auth, "server": "reachable (healthz HTTP 200 in 1 ms)"}
    monkeypatch.setattr(cli.check, "probe_service", lambda *args, **kwargs: dict(probe))
    got, out, _ = run(capsys, "check", "--base-url", "https://tinker.example.invalid")
    assert got == code
    assert f"Auth:        {auth}" in out
    got, out, _ = run(capsys, "check", "--base-url", "https://x.invalid", "--format", "json")
    assert (got, json.loads(out)["exit_code"]) == (code, code)


def test_to_jsonable_datetimes_and_nesting() -> None:
    naive = dt.datetime(2025, 1, 2, 3, 4, 5)
    aware = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert to_jsonable({"a": [naive, aware], "b": (1, None)}) == {
        "a": ["2025-01-02T03:04:05Z", "2025-01-02T01:04:05Z"],
        "b": [1, None],
    }


def test_missing_api_key_for_remote_service_exits_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    code, out, err = run(capsys, "run", "list", "--base-url", "https://tinker.example.invalid")
    assert code == 3
    assert out == ""
    assert err.startswith("tinker-lite: error: no API key")
    assert len(err.splitlines()) == 1


DOCS_DIR = REPO / "docs"


def _leaf_commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    names: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                names.extend(_leaf_commands(sub, f"{prefix}{name} "))
    return names or [prefix.strip()]


def test_cli_docs_cover_every_command_and_exit_code() -> None:
    text = (DOCS_DIR / "cli.rst").read_text()
    commands = _leaf_commands(cli.build_parser())
    assert len(commands) == 24
    for command in commands:
        assert f"``tinker-lite {command}" in text, command
    for code, meaning in EXIT_CODES.items():
        assert f"   * - {code}\n     - {meaning}\n" in text


def test_every_command_help_ends_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    leaves = _leaf_commands(cli.build_parser())
    groups = sorted({command.split()[0] for command in leaves})
    for command in ["", *groups, *leaves]:
        code, out, _ = run(capsys, *command.split(), "--help")
        assert code == 0, command
        examples = out.rstrip().split("\nexamples:\n")
        assert len(examples) == 2, f"{command} --help does not end with examples"
        lines = examples[1].splitlines()
        assert lines, command
        assert all("tinker-lite " in line and command in line for line in lines), command


def test_help_documents_the_startup_budget(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "run", "list", "--help")
    assert code == 0
    assert "--startup-timeout SECONDS" in out
    assert "TINKER_LITE_STARTUP_TIMEOUT" in " ".join(out.split())
    code, out, _ = run(capsys, "--help")
    assert "TINKER_LITE_STARTUP_TIMEOUT" in out


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (1, "1 second"),
        (90, "90 seconds"),
        (150, "2 minutes 30 seconds"),
        (3600, "1 hour"),
        (5400, "1 hour 30 minutes"),
        (7200, "2 hours"),
        (86400, "1 day"),
        (604800, "7 days"),
        (90000, "1 day 1 hour"),
        (86460, "about 1 day"),
        (93784, "about 1 day 2 hours"),
    ],
)
def test_ttl_in_words(seconds: int, words: str) -> None:
    assert cli.checkpoint.format_duration(seconds) == words


def test_api_reference_lists_every_public_name() -> None:
    import tinker_lite
    from tinker_lite import types

    text = (DOCS_DIR / "api.rst").read_text()
    missing = [
        name
        for name in tinker_lite.__all__
        if name not in types.__all__
        and name != "__version__"
        and f"tinker_lite.{name}\n" not in text
    ]
    assert not missing, f"docs/api.rst does not document {missing}"


def test_make_quiets_only_the_editable_install_notice() -> None:
    makefile = (DOCS_DIR.parent / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "-e '." in line]
    assert installs, "the Makefile no longer installs the package"
    assert all(line.strip().startswith("$(PIP_INSTALL) ") for line in installs)
    definition = next(line for line in makefile.splitlines() if line.startswith("PIP_INSTALL"))
    assert '-W "ignore:Editable installation:UserWarning"' in definition
    assert "2>/dev/null" not in makefile  # real errors and other warnings still show


def test_check_shows_the_startup_budget_and_timeout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = {"reachable": True, "auth": "ok", "server": "reachable (healthz HTTP 200 in 1 ms)"}
    monkeypatch.setattr(cli.check, "probe_service", lambda *args, **kwargs: dict(probe))
    monkeypatch.setenv("TINKER_LITE_STARTUP_TIMEOUT", "2.5")
    code, out, _ = run(capsys, "check", "--base-url", "https://x.invalid", "--timeout", "30")
    assert code == 0
    assert "Start-up:    2.5 s budget (--startup-timeout)" in out
    assert "Timeout:     30 s per request (--timeout)" in out
    code, out, _ = run(capsys, "check", "--base-url", "https://x.invalid", "--format", "json")
    doc = json.loads(out)
    assert (doc["startup_timeout_s"], doc["timeout_s"]) == (2.5, 60.0)
    monkeypatch.delenv("TINKER_LITE_STARTUP_TIMEOUT")
    code, out, _ = run(capsys, "check", "--base-url", "https://x.invalid", "--format", "json")
    assert json.loads(out)["startup_timeout_s"] == 5.0
