"""Where a client finds its credential, in the official SDK 0.38's order, and every failure.

argument > ``TINKER_API_KEY`` > ``TINKER_CREDENTIAL_CMD`` > the default key of
``~/.tinker/credentials.json``; the stored file is read, checked and written as the official CLI
does. Each test has a ``HOME`` of its own (the ``home`` fixture), so ``~`` is a temporary
directory.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tinker_lite
from tinker_lite import AuthenticationError, InvalidInputError, ServiceClient, types
from tinker_lite._session.credentials import (
    ResolvedCredential,
    resolve_credential,
    run_credential_command,
)
from tinker_lite._session.credentials_file import CredentialsFile, StoredKey
from tinker_lite.cli.auth import add_default, remove_default
from tinker_lite.local import LocalServer

KEY = "tml-stored-key-0123456789"
BASE_MODEL = "tinker-lite/tiny-64"


def stored_file(home: Path, document: Any, mode: int = 0o600) -> Path:
    """Write ``document`` (JSON-encoded unless it is a str) as ``~/.tinker/credentials.json``."""
    path = home / ".tinker" / "credentials.json"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    path.chmod(mode)
    return path


def official_file(key: str = KEY, key_id: str = "42", **record: Any) -> dict[str, Any]:
    """A credentials file as ``tinker auth login`` writes it."""
    entry = {
        "type": "manual",
        "key": key,
        "name": "tinker-cli-laptop",
        "note": "",
        "details": {
            "org_details": {"name": "Acme"},
            "user_details": {"email": "ada@acme.example"},
        },
        **record,
    }
    return {"version": 1, "default": key_id, "keys": {key_id: entry}}


def command_printing(text: str, *, log: Path | None = None, status: int = 0) -> str:
    """A shell command printing ``text`` (appending a line to ``log`` each run)."""
    script = f"import sys; print({text!r}); sys.exit({status})"
    if log is not None:
        script = f"open({str(log)!r}, 'a').write('run\\n'); " + script
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"


def train_one_step(service: ServiceClient) -> float:
    training = service.create_lora_training_client(BASE_MODEL, rank=4).result()
    tokens = list(range(60, 80))
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": np.ones(len(tokens) - 1)},
    )
    loss = training.forward_backward([datum], "cross_entropy").result(timeout=60)
    return float(loss.metrics["loss:sum"])


# -- the order ----------------------------------------------------------------------------------


def test_each_source_in_order(home: Path) -> None:
    stored_file(home, official_file())
    command = command_printing("tml-from-command")
    env = {"TINKER_API_KEY": "tml-env", "TINKER_CREDENTIAL_CMD": command}
    assert resolve_credential("tml-arg", env) == ResolvedCredential(
        "tml-arg", "argument", command, "api_key="
    )
    assert resolve_credential(None, env) == ResolvedCredential(
        "tml-env", "environment", command, "TINKER_API_KEY"
    )
    only_command = resolve_credential(None, {"TINKER_CREDENTIAL_CMD": command})
    assert (only_command.key, only_command.source) == (None, "command")
    from_file = resolve_credential(None, {})
    assert (from_file.key, from_file.source, from_file.command) == (KEY, "file", None)
    assert "credentials.json, key 'tinker-cli-laptop'" in from_file.origin
    assert KEY not in repr(from_file)


def test_an_empty_argument_falls_back_to_the_environment(home: Path) -> None:
    # As the official SDK: `api_key or TINKER_API_KEY`.
    assert resolve_credential("", {"TINKER_API_KEY": "tml-env"}).key == "tml-env"


def test_the_command_shadows_the_stored_file_which_is_then_not_read(home: Path) -> None:
    stored_file(home, "{not json")
    found = resolve_credential(None, {"TINKER_CREDENTIAL_CMD": "true"})
    assert found.source == "command"
    with pytest.raises(InvalidInputError):
        resolve_credential(None, {})


def test_the_key_is_resolved_once_when_the_client_is_created(home: Path) -> None:
    path = stored_file(home, official_file())
    with LocalServer(api_key=KEY) as url:
        service = ServiceClient(base_url=url)
        path.unlink()  # a worker without the file still has the key the client resolved
        with service:
            assert service.holder.settings.api_key == KEY
            assert service.holder.settings.credential_source == "file"
            assert train_one_step(service) > 0


def test_settings_repr_names_the_source_not_the_key(home: Path) -> None:
    stored_file(home, official_file())
    with LocalServer(api_key=KEY) as url, ServiceClient(base_url=url) as service:
        text = repr(service.holder.settings)
    assert "credential_source='file'" in text
    assert KEY not in text


# -- the stored file: failures ------------------------------------------------------------------


def test_no_file_and_no_key_for_a_remote_service_says_where_it_looked(home: Path) -> None:
    with pytest.raises(InvalidInputError) as caught:
        ServiceClient(base_url="https://tinker.example")
    message = str(caught.value)
    assert f"{home}/.tinker/credentials.json does not exist" in message
    assert "TINKER_API_KEY" in message
    assert "tinker-lite auth login" in message


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"version": 1, "keys": {', "is not valid JSON (Expecting property name"),
        (b"\xff\xfe{}", "is not UTF-8 text"),
        ("[1, 2]", "expected a JSON object"),
        ({"version": 2, "keys": {}}, "version: expected one of [1]"),
        ({"version": 1, "default": "a", "keys": {"a": KEY}}, "at keys['a']: expected an object"),
        ({"version": 1, "default": "a", "keys": [KEY]}, "at keys: expected an object"),
        (
            {"version": 1, "default": "a", "keys": {"a": {"key": KEY}}},
            "missing required key 'name'",
        ),
        (
            official_file(type="borrowed"),
            "type: expected one of ['manual', 'generated']",
        ),
    ],
)
def test_a_malformed_file_names_the_file_and_the_problem_never_the_key(
    home: Path, content: Any, problem: str
) -> None:
    path = home / ".tinker" / "credentials.json"
    path.parent.mkdir()
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    path.chmod(0o600)
    with pytest.raises(InvalidInputError) as caught:
        ServiceClient(base_url="https://tinker.example")
    error = caught.value
    assert error.field == str(path)
    assert problem in error.problem
    assert "tinker-lite auth login" in error.hint
    assert KEY not in str(error)
    # No JSON parser traceback: nothing chained, or the chain suppressed.
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


def test_an_unreadable_file_is_a_clear_error(home: Path) -> None:
    path = home / ".tinker" / "credentials.json"
    path.mkdir(parents=True)  # a directory where the file should be: it cannot be read
    with pytest.raises(InvalidInputError, match=r"credentials\.json: cannot be read \(Is a dir"):
        resolve_credential(None, {})


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_a_file_without_read_permission_is_a_clear_error(home: Path) -> None:
    stored_file(home, official_file(), mode=0o000)
    with pytest.raises(InvalidInputError, match=r"cannot be read \(Permission denied\)"):
        resolve_credential(None, {})


def test_a_file_others_may_read_is_used_with_a_warning(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    path = stored_file(home, official_file(), mode=0o644)
    assert resolve_credential(None, {}).key == KEY
    resolve_credential(None, {})  # once per file and mode, not on every client
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"{path} holds API keys but others may read it (mode 0644): run chmod 600 {path}"
    ]
    caplog.clear()
    path.chmod(0o600)
    resolve_credential(None, {})
    assert not caplog.records


@pytest.mark.parametrize(
    ("document", "why"),
    [
        ({"version": 1, "keys": {}}, "has no default key"),
        ({"version": 1, "default": None, "keys": official_file()["keys"]}, "has no default key"),
        ({**official_file(), "default": "7"}, "names key '7', which is not there"),
        (official_file(key=""), "is empty"),
    ],
)
def test_an_empty_default_means_no_stored_key(home: Path, document: Any, why: str) -> None:
    stored_file(home, document)
    found = resolve_credential(None, {})
    assert (found.key, found.source) == (None, None)
    assert why in found.origin
    with pytest.raises(InvalidInputError, match=why):
        ServiceClient(base_url="https://tinker.example")
    assert not tinker_lite.auth.tinker_has_credentials()
    assert tinker_lite.auth.get_tinker_token() is None


def test_a_stored_key_with_whitespace_names_the_file(home: Path) -> None:
    path = stored_file(home, official_file(key=KEY + "\n"))
    with pytest.raises(InvalidInputError) as caught:
        resolve_credential(None, {})
    assert caught.value.field == str(path)
    assert "whitespace" in caught.value.problem


# -- the stored file: writing -------------------------------------------------------------------


def test_writing_is_atomic_owner_only_and_in_the_official_format(home: Path) -> None:
    store = CredentialsFile()
    add_default(store, "7", StoredKey(key=KEY, name="laptop"))
    path = home / ".tinker" / "credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert sorted(os.listdir(path.parent)) == ["credentials.json"]  # no temporary file left
    assert json.loads(path.read_text()) == {
        "version": 1,
        "default": "7",
        "keys": {"7": {"type": "manual", "key": KEY, "name": "laptop"}},
    }
    assert list(json.loads(path.read_text())) == ["version", "default", "keys"]


def test_rewriting_keeps_other_keys_and_fields_it_does_not_know(home: Path) -> None:
    document = official_file()
    document["keys"]["42"]["scopes"] = ["train"]  # written by a newer version
    document["keys"]["9"] = {"type": "generated", "key": "tml-other", "name": "ci",
                             "details": document["keys"]["42"]["details"]}  # fmt: skip
    path = stored_file(home, document)
    store = CredentialsFile()
    removed = remove_default(store)
    assert removed is not None
    assert removed[0] == "42"
    after = json.loads(path.read_text())
    assert "default" not in after
    assert list(after["keys"]) == ["9"]
    add_default(store, "43", StoredKey(key="tml-new", name="desk"))
    after = json.loads(path.read_text())
    assert after["default"] == "43"
    assert after["keys"]["9"]["key"] == "tml-other"
    document = official_file()
    document["keys"]["42"]["scopes"] = ["train"]
    stored_file(home, document)
    add_default(CredentialsFile(), "44", StoredKey(key="tml-x", name="x"))
    assert json.loads(path.read_text())["keys"]["42"]["scopes"] == ["train"]


def test_a_broken_file_is_not_overwritten(home: Path) -> None:
    path = stored_file(home, "{broken")
    with pytest.raises(InvalidInputError):
        add_default(CredentialsFile(), "1", StoredKey(key=KEY, name="x"))
    assert path.read_text() == "{broken"


# -- the credential command ---------------------------------------------------------------------


def test_the_command_authenticates_every_exchange_when_the_service_asks_for_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs.log"
    monkeypatch.setenv("TINKER_CREDENTIAL_CMD", command_printing(KEY, log=runs))
    monkeypatch.setenv("TINKER_API_KEY", KEY)
    config = {"credential_default_source": "credential_cmd"}
    with LocalServer(api_key=KEY, jwt=True, config_overrides=config) as url:
        with ServiceClient(base_url=url) as service:
            assert train_one_step(service) > 0
            assert service.holder.uses_jwt
        # A static key is there, but the service asks for the command: it ran for the exchange.
        assert runs.read_text() == "run\n"
    runs.unlink()
    with LocalServer(api_key=KEY, jwt=True) as url, ServiceClient(base_url=url) as service:
        assert train_one_step(service) > 0
    assert not runs.exists()  # credential_default_source "api_key": the key, not the command


def test_the_command_alone_authenticates_the_config_and_the_exchange(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs.log"
    stored_file(home, official_file(key="tml-not-this-one"))
    monkeypatch.setenv("TINKER_CREDENTIAL_CMD", command_printing(KEY, log=runs))
    with LocalServer(api_key=KEY, jwt=True) as url, ServiceClient(base_url=url) as service:
        assert service.holder.settings.credential_source == "command"
        assert train_one_step(service) > 0
    assert runs.read_text() == "run\nrun\n"  # client/config, then auth/token


def test_the_command_alone_cannot_serve_a_service_without_token_exchange(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_CREDENTIAL_CMD", command_printing(KEY))
    with LocalServer(api_key=KEY) as url, ServiceClient(base_url=url) as service:
        with pytest.raises(InvalidInputError, match="this service takes only API keys"):
            train_one_step(service)


def test_a_service_requiring_the_command_refuses_a_static_key(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = {"credential_default_source": "credential_cmd"}
    with LocalServer(api_key=KEY, jwt=True, config_overrides=config) as url:
        with ServiceClient(base_url=url, api_key=KEY) as service:
            with pytest.raises(InvalidInputError, match="requires dynamic credentials") as caught:
                train_one_step(service)
    assert caught.value.field == "TINKER_CREDENTIAL_CMD"


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        (command_printing("", status=0), "printed an empty credential"),
        (command_printing(KEY, status=3), "exited with status 3"),
        (command_printing("two words"), "printed more than one word"),
    ],
)
def test_a_failing_command_is_a_clear_error_at_connect(
    home: Path, monkeypatch: pytest.MonkeyPatch, command: str, problem: str
) -> None:
    monkeypatch.setenv("TINKER_CREDENTIAL_CMD", command)
    with LocalServer(api_key=KEY, jwt=True) as url, ServiceClient(base_url=url) as service:
        with pytest.raises(InvalidInputError) as caught:
            train_one_step(service)
    assert caught.value.field == "TINKER_CREDENTIAL_CMD"
    assert problem in caught.value.problem
    assert KEY not in str(caught.value)
    assert command not in str(caught.value)  # the command itself may hold secrets


def test_the_command_error_shows_its_last_stderr_line() -> None:
    script = "import sys; sys.stderr.write('token service: 403 forbidden\\n'); sys.exit(1)"
    with pytest.raises(InvalidInputError) as caught:
        run_credential_command(f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}")
    assert caught.value.problem == "the command exited with status 1: token service: 403 forbidden"


def test_a_hanging_command_times_out() -> None:
    script = "import time; time.sleep(30)"
    with pytest.raises(InvalidInputError, match=r"did not finish within 0\.5 s"):
        run_credential_command(
            f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}", timeout=0.5
        )


def test_an_expired_jwt_from_the_command_is_refused() -> None:
    import base64

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    token = f"{part({'alg': 'HS256'})}.{part({'exp': 1000})}.c2ln"
    with pytest.raises(InvalidInputError, match="printed an expired JWT"):
        run_credential_command(command_printing(token), wall_clock=lambda: 2000.0)
    assert run_credential_command(command_printing(token), wall_clock=lambda: 10.0) == token


# -- tinker_lite.auth ---------------------------------------------------------------------------


def test_auth_helpers_report_on_the_same_order(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    auth = tinker_lite.auth
    assert (auth.get_tinker_token(), auth.tinker_has_credentials()) == (None, False)
    stored_file(home, official_file())
    assert (auth.get_tinker_token(), auth.tinker_has_credentials()) == (KEY, True)
    monkeypatch.setenv("TINKER_API_KEY", "tml-env")
    assert auth.get_tinker_token() == "tml-env"
    monkeypatch.delenv("TINKER_API_KEY")
    stored_file(home, "{broken")
    assert (auth.get_tinker_token(), auth.tinker_has_credentials()) == (None, False)
    # A command counts without being run (it may reach a credential service).
    monkeypatch.setenv("TINKER_CREDENTIAL_CMD", "exit 1")
    assert auth.tinker_has_credentials()
    assert auth.get_tinker_token() is None


def test_raise_if_not_accessible_uses_the_stored_key(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalServer(api_key=KEY) as url:
        monkeypatch.setenv("TINKER_BASE_URL", url)
        stored_file(home, official_file())
        tinker_lite.auth.raise_if_tinker_not_accessible()  # returns None: it does not raise
        stored_file(home, official_file(key="tml-wrong"))
        with pytest.raises(AuthenticationError):
            tinker_lite.auth.raise_if_tinker_not_accessible()


# -- end to end: an official-SDK script, the server in a process of its own ----------------------

SCRIPT = """
import numpy as np
import tinker
from tinker import types

service = tinker.ServiceClient()
training = service.create_lora_training_client("tinker-lite/tiny-64", rank=4)
tokens = list(range(60, 80))
datum = types.Datum(
    model_input=types.ModelInput.from_ints(tokens[:-1]),
    loss_fn_inputs={"target_tokens": tokens[1:], "weights": np.ones(len(tokens) - 1)},
)
for step in range(2):
    loss = training.forward_backward([datum], "cross_entropy").result().metrics["loss:sum"]
    training.optim_step(types.AdamParams(learning_rate=1e-2)).result()
print("LOSS", loss)
service.close()
"""


def test_an_official_script_finds_the_stored_key_and_the_environment_wins(
    home: Path, tmp_path: Path
) -> None:
    import subprocess

    from tests.support.served import REPO, served

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)

    def run_script(url: str, **env: str) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
        clean.update(HOME=str(home), TINKER_BASE_URL=url, TINKER_TELEMETRY="0", **env)
        clean["PYTHONPATH"] = str(REPO) + os.pathsep + clean.get("PYTHONPATH", "")
        return subprocess.run(
            [sys.executable, "-m", "tinker_lite.as_tinker", str(script)],
            env=clean,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    with served("--api-key", KEY) as url:
        stored_file(home, official_file())  # the key only in the file
        done = run_script(url)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.startswith("LOSS ")
        # TINKER_API_KEY comes before the file: a wrong one there is what is sent.
        done = run_script(url, TINKER_API_KEY="tml-wrong-environment-key")
        assert done.returncode != 0
        assert "401" in done.stderr
        assert "AuthenticationError" in done.stderr
        stored_file(home, official_file(key="tml-wrong-stored-key"))
        done = run_script(url, TINKER_API_KEY=KEY)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.startswith("LOSS ")
        for text in (done.stdout, done.stderr):
            assert KEY not in text
