"""The official CLI's commands in ``tinker-lite``: model, billing, session export-trace,
checkpoint push-hf, and the official argument forms of delete and set-ttl, end to end against
the local server (and a loopback stand-in for the Hugging Face Hub)."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_local import make_run
from tests.support.hub_standin import HubStandIn, hub_standin
from tinker_lite.cli import main
from tinker_lite.local import LocalServer

BASE_MODEL = "tinker-lite/tiny-64"
HF_TOKEN = "hf_standin_token_123"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with LocalServer() as base_url:
        yield base_url


@pytest.fixture(scope="module")
def run(url: str) -> dict[str, Any]:
    return make_run(url, states=1, samplers=1)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TINKER_API_KEY", "TINKER_BASE_URL", "TINKER_LOG", "TINKER_LITE_JOURNAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")


def call(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--base-url", url])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def call_json(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, Any]:
    code, out, err = call(capsys, url, "--format", "json", *argv)
    assert "Traceback" not in err
    return code, json.loads(out)


# -- model ---------------------------------------------------------------------------------------


def test_model_list_and_substring(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, doc = call_json(capsys, url, "model", "list")
    assert code == 0
    assert list(doc) == ["models"]
    assert set(doc["models"][0]) == {"model_name", "max_context_length", "trainable", "sampleable"}
    assert BASE_MODEL in [m["model_name"] for m in doc["models"]]
    code, doc = call_json(capsys, url, "model", "list", "QWEN3-8b")
    names = [m["model_name"] for m in doc["models"]]
    assert names
    assert all("qwen3-8b" in name.lower() for name in names)
    code, out, _ = call(capsys, url, "model", "list", "tiny")
    assert out.splitlines()[0].split() == ["MODEL", "MAX", "CONTEXT", "TRAINABLE", "SAMPLEABLE"]
    assert out.splitlines()[1].split()[:2] == [BASE_MODEL, "512"]
    code, out, err = call(capsys, url, "model", "list", "no-such-model")
    assert (code, out) == (4, "")
    assert "no model name contains 'no-such-model'" in err


# -- billing -------------------------------------------------------------------------------------


def _csv_rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def _window() -> tuple[str, str]:
    hour = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    start, end = hour - timedelta(hours=2), hour + timedelta(hours=1)
    return start.strftime("%Y-%m-%dT%H:%M:%SZ"), end.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_billing_usage_json_table_and_csv(
    capsys: pytest.CaptureFixture[str], url: str, run: dict[str, Any], tmp_path: Path
) -> None:
    start, end = _window()
    code, doc = call_json(capsys, url, "billing", "usage", start, end)
    assert code == 0
    assert list(doc) == ["data", "sessions", "cost_data_through"]
    mine = [row for row in doc["data"] if row["session_id"] == run["session_id"]]
    assert {row["event_info"]["type"] for row in mine} >= {"training", "checkpoint"}
    assert run["session_id"] in doc["sessions"]
    code, out, _ = call(capsys, url, "billing", "usage", start, end)
    header = out.splitlines()[0].split()
    assert header[:3] == ["BUCKET_START", "BUCKET_END", "BASE_MODEL"]
    assert "TYPE" in header
    assert "TOKEN_COUNT" in header
    rows_csv, sessions_csv = tmp_path / "usage.csv", tmp_path / "sessions.csv"
    code, out, err = call(
        capsys, url, "billing", "usage", start, end, "--csv", str(rows_csv),
        "--sessions-csv", str(sessions_csv),
    )  # fmt: skip
    assert (code, out) == (0, "")
    assert f"to {rows_csv}" in err
    rows = _csv_rows(rows_csv)
    assert len(rows) == len(doc["data"])
    training = next(r for r in rows if r["type"] == "training")
    assert int(training["token_count"]) > 0
    assert training["user_name"] == ""  # absent values are empty cells
    sessions = {r["session_id"]: r for r in _csv_rows(sessions_csv)}
    assert run["session_id"] in sessions
    code, out, _ = call(capsys, url, "billing", "usage", start, end, "--csv", "-")
    assert list(csv.DictReader(io.StringIO(out))) == rows


def test_billing_usage_bad_window_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    code, out, err = call(capsys, url, "billing", "usage", "2026-01-02T00:00:00Z", "yesterday")
    assert (code, out) == (2, "")
    assert "ending_before" in err


def test_billing_checkpoint_storage(
    capsys: pytest.CaptureFixture[str], url: str, run: dict[str, Any], tmp_path: Path
) -> None:
    code, doc = call_json(capsys, url, "billing", "checkpoint-storage")
    assert code == 0
    assert list(doc) == ["effective_rate_usd_per_gigabyte_month", "data"]
    assert sum(row["checkpoint_count"] for row in doc["data"]) >= 2
    target = tmp_path / "storage.csv"
    code, _, _ = call(capsys, url, "billing", "checkpoint-storage", "--csv", str(target))
    rows = _csv_rows(target)
    assert list(rows[0])[:2] == ["effective_rate_usd_per_gigabyte_month", "project_id"]
    code, doc = call_json(capsys, url, "billing", "checkpoint-storage", "--project-id", "none")
    assert doc["data"] == []


# -- session export-trace ------------------------------------------------------------------------


def test_session_export_trace_downloads_or_prints_the_url(
    capsys: pytest.CaptureFixture[str],
    url: str,
    run: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = run["session_id"]
    target = tmp_path / "traces" / "run.pftrace"
    code, doc = call_json(capsys, url, "session", "export-trace", session, "-o", str(target))
    assert code == 0
    assert doc == {
        "session_id": session,
        "destination": str(target),
        "file_size_bytes": target.stat().st_size,
    }
    trace = json.loads(target.read_text())
    assert trace["traceEvents"]
    code, doc = call_json(capsys, url, "session", "export-trace", session, "--url-only")
    assert list(doc) == ["session_id", "url"]
    code, out, err = call(capsys, url, "session", "export-trace", session, "--url-only")
    assert out.startswith(f"{url}/_local/download/")  # the URL alone, for "$(...)"
    assert len(out.splitlines()) == 1
    assert err == ""  # "Exporting the trace ..." is for a terminal only
    monkeypatch.chdir(tmp_path)
    code, out, _ = call(capsys, url, "session", "export-trace", session)
    assert code == 0
    assert (tmp_path / f"{session}.pftrace").stat().st_size > 0
    code, out, err = call(capsys, url, "session", "export-trace", "sess-nope")
    assert code == 4


# -- checkpoint delete / set-ttl, the official forms ----------------------------------------------


def test_delete_a_runs_checkpoints_by_type_needs_yes(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    made = make_run(url, states=2, samplers=1)
    run_id = made["run_id"]
    code, out, err = call(capsys, url, "checkpoint", "delete", "--run-id", run_id, "--type",
                          "weights")  # fmt: skip
    assert (code, out) == (2, "")
    assert "refusing to delete 2 checkpoint(s)" in err
    assert "--yes" in err
    code, doc = call_json(capsys, url, "checkpoint", "delete", "--run-id", run_id, "--type",
                          "weights", "--after", "2000-01-01", "-y")  # fmt: skip
    assert (code, doc) == (0, {"deleted_count": 2, "failed": []})
    _, listing = call_json(capsys, url, "checkpoint", "list", "--run-id", run_id)
    assert [c["tinker_path"] for c in listing["checkpoints"]] == made["samplers"]
    code, doc = call_json(capsys, url, "checkpoint", "delete", "--run-id", run_id,
                          "--before", "2000-01-01", "--yes")  # fmt: skip
    assert (code, doc) == (0, {"deleted_count": 0, "failed": []})
    code, _, err = call(capsys, url, "checkpoint", "delete", made["samplers"][0], "--run-id",
                        run_id)  # fmt: skip
    assert code == 2
    code, _, err = call(capsys, url, "checkpoint", "delete", made["samplers"][0], "--type",
                        "weights")  # fmt: skip
    assert code == 2
    assert "need --run-id" in err


def test_set_ttl_takes_the_official_options(capsys: pytest.CaptureFixture[str], url: str) -> None:
    made = make_run(url, states=1, samplers=0)
    path = made["states"][0]
    code, doc = call_json(capsys, url, "checkpoint", "set-ttl", path, "--ttl", "7200")
    assert (code, doc) == (0, {"tinker_path": path, "ttl_seconds": 7200})
    _, listing = call_json(capsys, url, "checkpoint", "list", "--run-id", made["run_id"])
    assert listing["checkpoints"][0]["expires_at"] is not None
    code, doc = call_json(capsys, url, "checkpoint", "set-ttl", path, "--remove")
    assert (code, doc) == (0, {"tinker_path": path, "ttl_seconds": None})
    _, listing = call_json(capsys, url, "checkpoint", "list", "--run-id", made["run_id"])
    assert listing["checkpoints"][0]["expires_at"] is None
    for argv in ([], ["1h", "--remove"], ["--ttl", "60", "--remove"]):
        code, _, err = call(capsys, url, "checkpoint", "set-ttl", path, *argv)
        assert code == 2, argv
        assert "give the TTL once" in err


# -- checkpoint push-hf --------------------------------------------------------------------------


def _forget_hub_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub reads HF_ENDPOINT once, when imported: an import by an earlier test is
    set aside (until the test ends) so that the CLI imports it as a process started with
    HF_ENDPOINT does."""
    for name in [m for m in sys.modules if m.partition(".")[0] == "huggingface_hub"]:
        monkeypatch.delitem(sys.modules, name)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubStandIn]:
    with hub_standin(HF_TOKEN) as standin:
        monkeypatch.setenv("HF_ENDPOINT", standin.url)
        _forget_hub_import(monkeypatch)
        monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        yield standin


def _card_front_matter(readme: str) -> dict[str, str]:
    head = readme.split("---\n")[1]
    return dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)


def test_push_hf_publishes_a_private_adapter_repository(
    capsys: pytest.CaptureFixture[str], url: str, run: dict[str, Any], hub: HubStandIn
) -> None:
    path = run["samplers"][0]
    code, doc = call_json(capsys, url, "checkpoint", "push-hf", path, "--repo", "tester/adapter")
    assert code == 0
    assert doc == {"checkpoint_path": path, "repo_id": "tester/adapter", "public": False}
    assert hub.repos["tester/adapter"]["private"] is True
    files = hub.files("tester/adapter")
    assert sorted(files) == ["README.md", "adapter_config.json", "adapter_model.safetensors"]
    config = json.loads(files["adapter_config.json"])
    assert (config["base_model_name_or_path"], config["r"]) == (BASE_MODEL, 4)
    assert files["adapter_model.safetensors"][:8] != b""  # the weights themselves
    readme = files["README.md"].decode()
    assert _card_front_matter(readme) == {
        "base_model": BASE_MODEL,
        "library_name": "peft",
        "tinker_path": path,
    }
    assert f"- Base model: {BASE_MODEL}" in readme
    assert "- LoRA rank: 4" in readme
    # The same checkpoint again: allowed (same tinker path in the card).
    code, _, _ = call(capsys, url, "checkpoint", "push-hf", path, "--repo", "tester/adapter")
    assert code == 0


def test_push_hf_public_default_name_and_a_training_state(
    capsys: pytest.CaptureFixture[str], url: str, hub: HubStandIn
) -> None:
    made = make_run(url, states=1, samplers=0)
    path = made["states"][0]
    code, doc = call_json(capsys, url, "checkpoint", "push-hf", path, "--public")
    assert code == 0
    repo_id = "tester/tinker-tiny-64-" + made["run_id"].replace(":", "-")
    assert doc == {
        "checkpoint_path": path,
        "repo_id": repo_id,
        "revision": "weights-state-0",
        "public": True,
    }
    assert hub.repos[repo_id]["private"] is False
    files = hub.files(repo_id, "weights-state-0")
    assert json.loads(files["adapter_config.json"])["base_model_name_or_path"] == BASE_MODEL
    assert _card_front_matter(files["README.md"].decode())["tinker_path"] == path
    # The state was exported as external weights for the upload; the export is gone again.
    _, listing = call_json(capsys, url, "checkpoint", "list", "--run-id", made["run_id"])
    assert [c["checkpoint_type"] for c in listing["checkpoints"]] == ["training"]


def test_push_hf_refuses_a_repository_of_another_checkpoint(
    capsys: pytest.CaptureFixture[str], url: str, run: dict[str, Any], hub: HubStandIn
) -> None:
    other = make_run(url, states=0, samplers=1)["samplers"][0]
    assert call(capsys, url, "checkpoint", "push-hf", other, "--repo", "tester/taken")[0] == 0
    code, out, err = call(capsys, url, "checkpoint", "push-hf", run["samplers"][0], "-r",
                          "tester/taken")  # fmt: skip
    assert (code, out) == (5, "")
    assert f"holds another checkpoint ({other})" in err
    assert _card_front_matter(hub.files("tester/taken")["README.md"].decode())["tinker_path"] == (
        other
    )


def test_push_hf_without_a_hub_token_is_an_auth_error(
    capsys: pytest.CaptureFixture[str],
    url: str,
    run: dict[str, Any],
    hub: HubStandIn,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    code, out, err = call(capsys, url, "checkpoint", "push-hf", run["samplers"][0])
    assert (code, out) == (3, "")
    assert "not logged in to the Hugging Face Hub" in err
    assert "hf_wrong" not in err
    assert not hub.repos
