"""``tinker-lite auth ...`` end to end against the local server (LocalServer), with a ``HOME``
of its own for each test."""

from __future__ import annotations

import io
import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tinker_lite.cli import main
from tinker_lite.local import LocalServer

KEY = "tml-cli-login-key-0123456789"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with LocalServer(api_key=KEY, jwt=True) as base_url:
        yield base_url


class Terminal(io.StringIO):
    """A stdin that is, or is not, a terminal."""

    def __init__(self, text: str = "", *, tty: bool) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def call(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    *argv: str,
    stdin: str = "",
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", Terminal(stdin, tty=False))
    code = main([*argv, "--base-url", url])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def credentials(home: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((home / ".tinker" / "credentials.json").read_text())
    return document


def test_login_reads_the_key_from_stdin_checks_it_and_stores_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path, url: str
) -> None:
    code, out, err = call(capsys, monkeypatch, url, "auth", "login", stdin=KEY + "\n")
    assert code == 0
    path = home / ".tinker" / "credentials.json"
    assert out == (
        "Logged in as local@tinker-lite.invalid (tinker-lite-local). Stored API key "
        f"'tinker-lite-local' as the default credential in {path}.\n"
    )
    assert KEY not in out + err
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert credentials(home) == {
        "version": 1,
        "default": "1",
        "keys": {
            "1": {
                "type": "manual",
                "key": KEY,
                "name": "tinker-lite-local",
                "note": "",
                "details": {
                    "org_details": {"name": "tinker-lite-local"},
                    "user_details": {"email": "local@tinker-lite.invalid"},
                },
            }
        },
    }
    # Logged in already: a second login is refused and changes nothing.
    code, out, err = call(capsys, monkeypatch, url, "auth", "login", stdin="tml-other\n")
    assert code == 5
    assert "already logged in with key 'tinker-lite-local'" in err
    assert "auth logout" in err
    assert credentials(home)["keys"]["1"]["key"] == KEY


def test_login_masks_the_key_at_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path, url: str
) -> None:
    prompts: list[str] = []

    def getpass(prompt: str, stream: Any = None) -> str:
        prompts.append(prompt)
        return KEY

    monkeypatch.setattr("sys.stdin", Terminal(tty=True))
    monkeypatch.setattr("getpass.getpass", getpass)
    assert main(["auth", "login", "--base-url", url]) == 0
    assert prompts == ["Paste your API key: "]
    assert KEY not in "".join(capsys.readouterr())
    assert credentials(home)["keys"]["1"]["key"] == KEY


@pytest.mark.parametrize(
    "case",
    [
        ("tml-wrong-key\n", 3, "HTTP 401"),
        ("\n", 2, "no API key was given"),
    ],
)
def test_login_with_a_wrong_or_no_key_stores_nothing(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
    url: str,
    case: tuple[str, int, str],
) -> None:
    given, code, says = case
    got, out, err = call(capsys, monkeypatch, url, "auth", "login", stdin=given)
    assert (got, out) == (code, "")
    assert says in err
    assert "tml-wrong-key" not in err
    assert not (home / ".tinker" / "credentials.json").exists()


def test_logout_removes_the_default_key_and_says_which(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path, url: str
) -> None:
    assert call(capsys, monkeypatch, url, "auth", "login", stdin=KEY)[0] == 0
    code, doc_text, _ = call(capsys, monkeypatch, url, "auth", "logout", "--format", "json")
    path = home / ".tinker" / "credentials.json"
    assert code == 0
    assert json.loads(doc_text) == {
        "key_id": "1",
        "name": "tinker-lite-local",
        "path": str(path),
        "revoked": False,
    }
    assert credentials(home) == {"version": 1, "keys": {}}
    code, _out, err = call(capsys, monkeypatch, url, "auth", "logout")
    assert code == 4
    assert f"no default credential is stored ({path} has no default key)" in err


def test_logout_of_a_generated_key_deletes_it_on_the_service_first(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path, url: str
) -> None:
    path = home / ".tinker" / "credentials.json"
    path.parent.mkdir()
    details = {"org_details": {"name": "o"}, "user_details": {"email": "e@x"}}
    record = {"type": "generated", "key": KEY, "name": "minted", "details": details}
    path.write_text(json.dumps({"version": 1, "default": "5", "keys": {"5": record}}))
    path.chmod(0o600)
    # The local server's key cannot be deleted (403): the local credential goes all the same.
    code, out, err = call(capsys, monkeypatch, url, "auth", "logout")
    assert code == 3
    assert out.startswith("Removed credential 'minted' (key id 5)")
    assert "could not delete its API key on the service" in err
    assert credentials(home)["keys"] == {}


def test_status_says_where_the_credential_comes_from(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path, url: str
) -> None:
    code, out, err = call(capsys, monkeypatch, url, "auth", "status")
    assert code == 3
    assert out == f"Credentials available: no ({home}/.tinker/credentials.json does not exist)\n"
    assert "run `tinker-lite auth login` or set TINKER_API_KEY" in err
    assert call(capsys, monkeypatch, url, "auth", "login", stdin=KEY)[0] == 0
    code, out, _ = call(capsys, monkeypatch, url, "auth", "status")
    assert (code, out) == (
        0,
        f"Credentials available: yes (file: {home}/.tinker/credentials.json, key "
        "'tinker-lite-local')\nTinker accessible: yes\n",
    )
    monkeypatch.setenv("TINKER_API_KEY", "tml-wrong-key")
    code, out, err = call(capsys, monkeypatch, url, "auth", "status", "--format", "json")
    assert code == 3
    assert json.loads(out) == {
        "credentials_available": True,
        "source": "environment",
        "origin": "TINKER_API_KEY",
        "accessible": False,
    }
    assert "HTTP 401" in err
    assert "tml-wrong-key" not in out + err
    monkeypatch.delenv("TINKER_API_KEY")
    monkeypatch.setenv("TINKER_CREDENTIAL_CMD", f"echo {KEY}")
    code, out, _ = call(capsys, monkeypatch, url, "auth", "status")
    assert (code, out.splitlines()) == (
        0,
        [
            "Credentials available: yes (command: TINKER_CREDENTIAL_CMD (run when a client "
            "connects))",
            "Tinker accessible: yes",
        ],
    )
    assert KEY not in out


def test_status_reports_a_broken_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path, url: str
) -> None:
    path = home / ".tinker" / "credentials.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"version": 1, "default": "a", "keys": {"a": KEY}}))
    code, _out, err = call(capsys, monkeypatch, url, "auth", "status")
    assert code == 2
    assert err == (
        f"tinker-lite: error: {path}: does not match the credentials format (version 1): at "
        "keys['a']: expected an object for StoredKey (fix it, or remove it and run "
        "`tinker-lite auth login`)\n"
    )


def test_whoami_shows_the_identity_of_the_stored_credential(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path, url: str
) -> None:
    assert call(capsys, monkeypatch, url, "auth", "login", stdin=KEY)[0] == 0
    code, out, _ = call(capsys, monkeypatch, url, "auth", "whoami", "--format", "json")
    assert code == 0
    assert json.loads(out) == {
        "user_urn": "tml:organization_user:tinker-lite-local",
        "org_urn": "tml:organization:tinker-lite-local",
        "email": "local@tinker-lite.invalid",
    }
    code, out, _ = call(capsys, monkeypatch, url, "auth", "whoami")
    assert out.splitlines()[0] == "Email:        local@tinker-lite.invalid"


def test_check_reports_the_stored_key_by_its_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path, url: str
) -> None:
    assert call(capsys, monkeypatch, url, "auth", "login", stdin=KEY)[0] == 0
    code, out, _ = call(capsys, monkeypatch, url, "check", "--format", "json")
    doc = json.loads(out)
    assert code == 0
    assert doc["api_key_source"] == "file"
    assert doc["auth"] == "ok"
    assert KEY not in out


def test_login_to_the_hosted_service_points_at_its_console_first(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(KEY + "\n", tty=False))
    monkeypatch.setattr("socket.gethostname", lambda: "laptop.example.org")
    code = main(["auth", "login", "--startup-timeout", "0.2"])  # no network in tests
    captured = capsys.readouterr()
    assert captured.err.startswith(
        "Create an API key: https://tinker.thinkingmachines.ai/keys?new_key=true"
        "&key_name=tinker-cli-laptop\n"
    )
    assert code == 6
    assert KEY not in captured.out + captured.err
    assert not (home / ".tinker").exists()
