"""Frictions a new user meets first: plain-http warnings for local servers, the name the
local server's help gives itself, and the CLI's missing-key message."""

from __future__ import annotations

import logging

import pytest

from tinker_lite._session.settings import resolve_settings
from tinker_lite.cli import main


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]", "127.0.0.1", "localhost"])
def test_a_server_on_this_machine_is_not_reached_unencrypted(
    host: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``tinker-lite local serve --host 0.0.0.0`` prints a URL a client connects to locally."""
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    settings = resolve_settings(base_url=f"http://{host}:8123", environ={})
    assert settings.base_url == f"http://{host}:8123"
    assert not [r for r in caplog.records if "unencrypted" in r.getMessage()]


def test_a_remote_plain_http_service_still_warns(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    resolve_settings(base_url="http://10.1.2.3:8123", api_key="k", environ={})
    assert [r for r in caplog.records if "unencrypted" in r.getMessage()]


def test_local_serve_calls_itself_by_the_name_it_was_run_with(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["local", "serve", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tinker-lite local serve")
    assert "python -m tinker_lite.local" not in out
    assert main(["local", "serve", "--port", "not-a-number"]) == 2
    assert "tinker-lite local serve: error: argument --port" in capsys.readouterr().err


def test_the_cli_says_how_to_give_a_key_in_a_shell(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    monkeypatch.delenv("TINKER_BASE_URL", raising=False)
    code = main(["--base-url", "https://tinker.example", "run", "list"])
    err = capsys.readouterr().err
    assert code == 3  # an authentication problem
    assert "no API key for https://tinker.example" in err
    assert "TINKER_API_KEY" in err
    assert "api_key=" not in err
