"""The official ``tinker`` CLI (0.38) and ``tinker-lite`` side by side, against
``tinker-lite local serve``: the same stored login, the same JSON keys, the same exit codes.

Opt-in (``make test-official``): runs only with ``TINKER_LITE_OFFICIAL=1`` and the official SDK's
virtualenv present (``TINKER_OFFICIAL_VENV``, default ``~/.cache/tinker-lite-bench/official-venv``).
The official CLI runs as a subprocess of its own interpreter; ``tinker-lite`` runs here.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_local import make_run
from tests.support.served import served
from tests.unit.session.test_credentials import train_one_step
from tinker_lite import ServiceClient
from tinker_lite.cli import main

VENV = Path(
    os.environ.get("TINKER_OFFICIAL_VENV")
    or Path.home() / ".cache" / "tinker-lite-bench" / "official-venv"
)
OFFICIAL_TINKER = VENV / "bin" / "tinker"
KEY = "tml-official-cli-key-0123456789"
HF_TOKEN = "hf_standin_token_123"

pytestmark = pytest.mark.skipif(
    os.environ.get("TINKER_LITE_OFFICIAL") != "1" or not OFFICIAL_TINKER.exists(),
    reason="opt-in: make test-official (needs the official SDK 0.38 venv)",
)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with served("--jwt", "--api-key", KEY) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def _own_home(home: Path) -> None:
    """Every test has a HOME of its own (conftest ``home``)."""


@pytest.fixture(scope="module")
def run(url: str) -> dict[str, Any]:
    os.environ["TINKER_API_KEY"] = KEY
    try:
        return make_run(url, states=2, samplers=3)
    finally:
        del os.environ["TINKER_API_KEY"]


def official(
    url: str, *argv: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the official ``tinker`` CLI (HOME as this test's)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    clean.update(TINKER_BASE_URL=url, TINKER_TELEMETRY="0", **(env or {}))
    done = subprocess.run(
        [str(OFFICIAL_TINKER), *argv],
        input=stdin,
        env=clean,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode == -signal.SIGABRT and done.stdout and not done.stderr:
        # The official CLI now and then aborts in interpreter teardown (its event-loop thread)
        # after printing its whole answer; the answer is what these tests compare.
        done.returncode = 0
    return done


def lite(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    *argv: str,
    stdin: str = "",
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main([*argv, "--base-url", url])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def shape(value: Any) -> Any:
    """The keys of a JSON document at every level (lists: the union of their items' shapes)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        merged: dict[str, Any] = {}
        for item in value:
            item_shape = shape(item)
            if isinstance(item_shape, dict):
                merged.update(item_shape)
        return [merged] if merged else []
    return None


# -- the stored login, written by one and read by the other --------------------------------------


def test_a_login_stored_by_the_official_cli_is_used_by_tinker_lite(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path, url: str
) -> None:
    done = official(url, "auth", "login", stdin=KEY + "\n")
    assert done.returncode == 0, done.stderr
    code, out, _ = lite(capsys, monkeypatch, url, "auth", "status")
    assert code == 0
    assert out.startswith("Credentials available: yes (file: ")
    assert out.endswith("Tinker accessible: yes\n")
    with ServiceClient(base_url=url) as service:
        assert service.holder.settings.credential_source == "file"
        assert train_one_step(service) > 0
    code, out, _ = lite(capsys, monkeypatch, url, "auth", "logout")
    assert code == 0
    assert "Removed credential 'tinker-lite-local'" in out
    done = official(url, "auth", "status")
    assert done.returncode != 0
    assert "Credentials available: no" in done.stdout


def test_a_login_stored_by_tinker_lite_is_used_by_the_official_cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    assert lite(capsys, monkeypatch, url, "auth", "login", stdin=KEY + "\n")[0] == 0
    done = official(url, "auth", "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Credentials available: yes\nTinker accessible: yes\n"
    done = official(url, "--format", "json", "run", "list")
    assert done.returncode == 0, done.stderr
    done = official(url, "auth", "login", stdin=KEY + "\n")
    assert done.returncode != 0
    assert "Already logged in" in done.stderr
    done = official(url, "auth", "logout")
    assert done.returncode == 0, done.stderr
    code, out, _ = lite(capsys, monkeypatch, url, "auth", "status")
    assert code == 3
    assert "Credentials available: no" in out


# -- the same JSON keys ---------------------------------------------------------------------------


def _window() -> tuple[str, str]:
    hour = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    return (
        (hour - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        (hour + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def test_every_command_prints_the_official_json_keys(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    run: dict[str, Any],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", KEY)
    start, end = _window()
    session = run["session_id"]
    commands = [
        ["checkpoint", "list"],
        ["checkpoint", "list", "--run-id", run["run_id"]],
        ["checkpoint", "info", run["samplers"][0]],
        ["checkpoint", "info", run["states"][0]],
        ["run", "list"],
        ["run", "list", "--limit", "0"],
        ["run", "info", run["run_id"]],
        ["model", "list"],
        ["model", "list", "qwen3"],
        ["auth", "whoami"],
        ["billing", "usage", start, end],
        ["billing", "checkpoint-storage"],
        ["session", "export-trace", session, "--url-only"],
    ]
    compared = []
    for argv in commands:
        done = official(url, "--format", "json", *argv, env={"TINKER_API_KEY": KEY})
        assert done.returncode == 0, (argv, done.stderr[-2000:])
        code, out, err = lite(capsys, monkeypatch, url, "--format", "json", *argv)
        assert code == 0, (argv, err)
        theirs, ours = json.loads(done.stdout), json.loads(out)
        assert shape(ours) == shape(theirs), argv
        compared.append(" ".join(argv[:2]))
    # Commands whose output names a file or deletes: each CLI on its own target.
    done = official(url, "--format", "json", "session", "export-trace", session, "-o",
                    str(tmp_path / "a.pftrace"), env={"TINKER_API_KEY": KEY})  # fmt: skip
    code, out, _ = lite(capsys, monkeypatch, url, "--format", "json", "session", "export-trace",
                        session, "-o", str(tmp_path / "b.pftrace"))  # fmt: skip
    assert shape(json.loads(out)) == shape(json.loads(done.stdout))
    done = official(url, "--format", "json", "checkpoint", "delete", run["samplers"][1], "-y",
                    env={"TINKER_API_KEY": KEY})  # fmt: skip
    code, out, _ = lite(capsys, monkeypatch, url, "--format", "json", "checkpoint", "delete",
                        run["samplers"][2], "-y")  # fmt: skip
    assert json.loads(out) == json.loads(done.stdout) == {"deleted_count": 1, "failed": []}
    print(f"\nsame JSON keys as the official CLI: {sorted(set(compared))}")


def test_exit_codes_agree_on_success_failure_and_usage(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", KEY)
    for argv, expected in (
        (["model", "list"], 0),
        (["run", "info", "no-such-run"], "failure"),
        (["model", "list", "no-such-model"], "failure"),
        (["checkpoint", "list", "--no-such-option"], 2),
        (["billing", "usage"], 2),
    ):
        theirs = official(url, *argv, env={"TINKER_API_KEY": KEY}).returncode
        ours = lite(capsys, monkeypatch, url, *argv)[0]
        if expected == "failure":
            assert theirs != 0, argv
            assert ours != 0, argv
        else:
            assert theirs == ours == expected, argv


def test_push_hf_makes_the_same_repository_as_the_official_cli(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    run: dict[str, Any],
) -> None:
    from tests.support.hub_standin import hub_standin

    monkeypatch.setenv("TINKER_API_KEY", KEY)
    path = run["states"][0]  # the official CLI pushes training and external-weights checkpoints
    with hub_standin(HF_TOKEN) as hub:
        hub_env = {"HF_ENDPOINT": hub.url, "HF_TOKEN": HF_TOKEN, "TINKER_API_KEY": KEY}
        for name, value in hub_env.items():
            monkeypatch.setenv(name, value)
        done = official(url, "--format", "json", "checkpoint", "push-hf", path, "--repo",
                        "tester/official", env=hub_env)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        code, out, err = lite(capsys, monkeypatch, url, "--format", "json", "checkpoint",
                              "push-hf", path, "--repo", "tester/lite")  # fmt: skip
        assert code == 0, err
        assert shape(json.loads(out)) == shape(json.loads(done.stdout))
        theirs, ours = hub.files("tester/official"), hub.files("tester/lite")
        assert sorted(ours) == sorted(theirs)
        assert hub.repos["tester/lite"]["private"] == hub.repos["tester/official"]["private"]
        for files in (theirs, ours):
            card = files["README.md"].decode()
            assert "base_model: tinker-lite/tiny-64" in card
            assert f"tinker_path: {path}" in card
            config = json.loads(files["adapter_config.json"])
            assert config["base_model_name_or_path"] == "tinker-lite/tiny-64"
        assert ours["adapter_model.safetensors"] == theirs["adapter_model.safetensors"]
