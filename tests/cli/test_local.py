"""tinker-lite commands end to end against the offline local server (LocalServer)."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tinker_lite as tinker
from tinker_lite import types
from tinker_lite._api.requestor import Requestor
from tinker_lite._transport.download import part_path
from tinker_lite.cli import main
from tinker_lite.local import LocalServer

BASE_MODEL = "tinker-lite/tiny-64"


class FakeClock:
    """Wall clock of the local server (TTLs, archive expiry) that tests move forward."""

    def __init__(self) -> None:
        import time

        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="module")
def url(clock: FakeClock) -> Iterator[str]:
    with LocalServer(clock=clock, archive_ttl_s=60.0) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TINKER_API_KEY", "TINKER_BASE_URL", "TINKER_LOG", "TINKER_LITE_JOURNAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    download_sleep(monkeypatch, lambda seconds: None)


def download_sleep(monkeypatch: pytest.MonkeyPatch, sleep: Callable[[float], None]) -> None:
    """Downloads wait with their connection's sleep: replace it, so they never really wait."""
    original = Requestor.__init__

    def init(self: Requestor, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.sleep = sleep

    monkeypatch.setattr(Requestor, "__init__", init)


def make_run(url: str, states: int = 1, samplers: int = 1) -> dict[str, Any]:
    """A training run with ``states`` saved states and ``samplers`` sampler checkpoints."""
    with tinker.ServiceClient(base_url=url, telemetry=False) as service:
        training = service.create_lora_training_client(BASE_MODEL, rank=4).result()
        tokens = list(range(60, 80))
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(tokens[:-1]),
            loss_fn_inputs={"target_tokens": tokens[1:], "weights": np.ones(len(tokens) - 1)},
        )
        training.forward_backward([datum], "cross_entropy").result()
        training.optim_step(types.AdamParams(learning_rate=1e-3)).result()
        state_paths = [training.save_state(f"state-{i}").result().path for i in range(states)]
        sampler_paths = [
            training.save_weights_for_sampler(f"sampler-{i}").result().path for i in range(samplers)
        ]
        return {
            "run_id": training.model_id,
            "session_id": service.session_id,
            "states": state_paths,
            "samplers": sampler_paths,
        }


@pytest.fixture(scope="module")
def run(url: str) -> dict[str, Any]:
    return make_run(url, states=2, samplers=1)


def call(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--base-url", url])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def call_json(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, Any]:
    code, out, err = call(capsys, url, *argv, "--format", "json")
    assert "Traceback" not in err
    return code, json.loads(out)


def test_check_reports_reachable_local_server(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, _ = call(capsys, url, "check")
    assert code == 0
    assert "API key:     not set" in out
    assert "reachable (healthz HTTP 200" in out
    assert "sample_max_concurrent_requests" in out
    code, doc = call_json(capsys, url, "check")
    assert code == 0
    assert doc["reachable"] is True
    assert doc["base_url"] == url
    assert BASE_MODEL in doc["models"]
    assert isinstance(doc["client_config"], dict)


def test_check_with_api_key_never_prints_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "tml-local-secret-0123456789"
    with LocalServer(api_key=secret) as guarded:
        monkeypatch.setenv("TINKER_API_KEY", secret)
        code, out, err = call(capsys, guarded, "check")
        assert code == 0
        assert "API key:     set (from TINKER_API_KEY)" in out
        assert "Auth:        ok" in out
        assert secret not in out + err
        monkeypatch.setenv("TINKER_API_KEY", "tml-wrong-key")
        code, out, err = call(capsys, guarded, "check")
        assert code == 3
        assert "rejected (HTTP 401)" in out
        code, out, err = call(capsys, guarded, "run", "list")
        assert code == 3
        # As 0.38: the refusal comes from the first request, the start-up's client config.
        assert err.startswith(
            "tinker-lite: error: POST /api/v1/client/config (start-up) failed with HTTP 401 "
            "Unauthorized"
        )
        assert err.rstrip().endswith("Check the API key (TINKER_API_KEY).")
        assert len(err.splitlines()) == 1
        assert "tml-wrong-key" not in out + err


def test_check_local_scheme_starts_a_server(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = call_json(capsys, "local://", "check")
    assert code == 0
    assert doc["reachable"] is True
    assert doc["server"].startswith("local (in-process")


def test_run_list_and_info(
    capsys: pytest.CaptureFixture[str], url: str, run: dict[str, Any]
) -> None:
    code, out, _ = call(capsys, url, "run", "list", "--all")
    assert code == 0
    assert out.splitlines()[0].split()[:3] == ["RUN", "ID", "BASE"]
    assert run["run_id"] in out
    code, doc = call_json(capsys, url, "run", "list", "--limit", "100")
    assert code == 0
    assert list(doc) == ["runs"]  # the official CLI's document
    assert run["run_id"] in [r["training_run_id"] for r in doc["runs"]]
    code, out, _ = call(capsys, url, "run", "list", "--limit", "0", "-c", "id,owner,checkpoint")
    assert code == 0
    assert out.splitlines()[0].split() == ["RUN", "ID", "OWNER", "LAST", "CHECKPOINT"]
    assert run["states"][-1] in out
    code, doc = call_json(capsys, url, "run", "info", run["run_id"])
    assert code == 0
    assert doc["base_model"] == BASE_MODEL
    assert doc["lora_rank"] == 4
    code, doc = call_json(capsys, url, "run", "info", run["samplers"][0])
    assert doc["training_run_id"] == run["run_id"]


def test_unknown_run_is_not_found(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, err = call(capsys, url, "run", "info", "no-such-run")
    assert code == 4
    assert out == ""
    # One sentence: the request once, the status, the service's own message, what to try.
    assert err.startswith(
        "tinker-lite: error: GET /api/v1/training_runs/no-such-run failed with HTTP 404 Not Found: "
    )
    assert err.count("/api/v1/training_runs/no-such-run") == 1
    assert "{" not in err
    assert "'detail'" not in err
    assert err.rstrip().endswith("Check the id or tinker:// path.")
    assert len(err.splitlines()) == 1


def test_checkpoint_list_and_info(
    capsys: pytest.CaptureFixture[str], url: str, run: dict[str, Any]
) -> None:
    code, doc = call_json(capsys, url, "checkpoint", "list", "--run-id", run["run_id"])
    assert code == 0
    assert list(doc) == ["run_id", "checkpoints"]  # the official CLI's document
    assert doc["run_id"] == run["run_id"]
    paths = {c["tinker_path"] for c in doc["checkpoints"]}
    assert paths == set(run["states"] + run["samplers"])
    code, doc = call_json(capsys, url, "checkpoint", "list", "--limit", "0")
    assert list(doc) == ["checkpoints"]
    assert set(run["states"]) <= {c["tinker_path"] for c in doc["checkpoints"]}
    code, out, _ = call(capsys, url, "checkpoint", "list", "--all")
    assert code == 0
    assert run["samplers"][0] in out
    code, doc = call_json(capsys, url, "checkpoint", "info", run["samplers"][0])
    assert code == 0
    assert doc["checkpoint_type"] == "sampler"
    assert doc["tinker_path"] == run["samplers"][0]
    assert (doc["is_lora"], doc["lora_rank"]) == (True, 4)
    missing = run["samplers"][0].rsplit("/", 1)[0] + "/nope"
    code, out, err = call(capsys, url, "checkpoint", "info", missing)
    assert code == 4
    assert err == f"tinker-lite: error: no checkpoint {missing}\n"


def test_publish_unpublish_and_conflicts(capsys: pytest.CaptureFixture[str], url: str) -> None:
    path = make_run(url, states=0, samplers=1)["samplers"][0]
    code, doc = call_json(capsys, url, "checkpoint", "publish", path)
    assert (code, doc) == (0, {"tinker_path": path, "public": True})
    code, out, err = call(capsys, url, "checkpoint", "publish", path)
    assert code == 5
    assert err == f"tinker-lite: error: conflict: {path} is already public\n"
    code, out, _ = call(capsys, url, "checkpoint", "unpublish", path)
    assert (code, out) == (0, f"unpublished {path}\n")
    code, _, err = call(capsys, url, "checkpoint", "unpublish", path)
    assert code == 5


def test_set_ttl_and_remove(capsys: pytest.CaptureFixture[str], url: str) -> None:
    made = make_run(url, states=1, samplers=0)
    path = made["states"][0]
    code, out, _ = call(capsys, url, "checkpoint", "set-ttl", path, "2h")
    assert code == 0
    assert out == f"{path} expires in 2 hours\n"
    code, out, _ = call(capsys, url, "checkpoint", "set-ttl", path, "604800")
    assert (code, out) == (0, f"{path} expires in 7 days\n")
    _, doc = call_json(capsys, url, "checkpoint", "list", "--run", made["run_id"])
    assert doc["checkpoints"][0]["expires_at"] is not None
    code, doc = call_json(capsys, url, "checkpoint", "set-ttl", path, "never")
    assert (code, doc) == (0, {"tinker_path": path, "ttl_seconds": None})
    _, doc = call_json(capsys, url, "checkpoint", "list", "--run", made["run_id"])
    assert doc["checkpoints"][0]["expires_at"] is None


def test_delete_checkpoints(capsys: pytest.CaptureFixture[str], url: str) -> None:
    made = make_run(url, states=2, samplers=0)
    code, out, _ = call(capsys, url, "checkpoint", "delete", *made["states"])
    assert code == 0
    assert out.splitlines() == [f"deleted {p}" for p in made["states"]]
    _, doc = call_json(capsys, url, "checkpoint", "list", "--run", made["run_id"])
    assert doc["checkpoints"] == []
    code, doc = call_json(capsys, url, "checkpoint", "delete", made["states"][0])
    assert code == 4
    assert doc["deleted_count"] == 0
    assert doc["failed"][0]["tinker_path"] == made["states"][0]


def _archive_names(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        return sorted(tar.getnames())


def test_download_and_extract(
    capsys: pytest.CaptureFixture[str], url: str, run: dict[str, Any], tmp_path: Path
) -> None:
    path = run["samplers"][0]
    code, doc = call_json(
        capsys, url, "checkpoint", "download", path, "-o", str(tmp_path), "--extract",
        str(tmp_path / "adapter"),
    )  # fmt: skip
    assert code == 0
    archive = Path(doc["path"])
    assert archive.parent == tmp_path
    assert archive.name.endswith("-sampler_weights-sampler-0.tar.gz")
    assert archive.stat().st_size == doc["size_bytes"]
    assert not part_path(archive).exists()
    assert sorted(doc["files"]) == _archive_names(archive)
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == 4
    assert (tmp_path / "adapter" / "adapter_model.safetensors").stat().st_size > 0
    # A second download to the same file is a conflict unless --force.
    code, _, err = call(capsys, url, "checkpoint", "download", path, "-o", str(archive))
    assert code == 5
    assert "--force" in err
    code, _, _ = call(capsys, url, "checkpoint", "download", path, "-o", str(archive), "--force")
    assert code == 0


def test_download_resumes_after_a_dropped_connection(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    faults = "path=/_local/download/*,action=truncate,truncate_at=0.5,count=1"
    with LocalServer(faults=faults) as flaky:
        path = make_run(flaky, states=0, samplers=1)["samplers"][0]
        dest = tmp_path / "a.tar.gz"
        code, doc = call_json(capsys, flaky, "checkpoint", "download", path, "-o", str(dest))
        assert code == 0
        assert doc["attempts"] == 2
        assert doc["size_bytes"] == dest.stat().st_size
        names = _archive_names(dest)
        assert "adapter_config.json" in names


def test_download_refreshes_an_expired_url(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    faults = "path=/_local/download/*,action=truncate,truncate_at=0.5,count=1"
    with LocalServer(faults=faults, clock=clock, archive_ttl_s=30.0) as flaky:
        path = make_run(flaky, states=0, samplers=1)["samplers"][0]

        def sleep_past_expiry(seconds: float) -> None:
            clock.now += 120.0  # the signed URL (30 s) has expired by the retry

        download_sleep(monkeypatch, sleep_past_expiry)
        dest = tmp_path / "b.tar.gz"
        code, doc = call_json(capsys, flaky, "checkpoint", "download", path, "-o", str(dest))
        assert code == 0
        assert doc["url_refreshes"] == 1
        assert doc["attempts"] == 3  # truncated, expired (404), resumed with a fresh URL
        assert "adapter_model.safetensors" in _archive_names(dest)


def test_prune_keeps_newest_per_type(capsys: pytest.CaptureFixture[str], url: str) -> None:
    made = make_run(url, states=4, samplers=2)
    run_id = made["run_id"]
    code, out, _ = call(capsys, url, "checkpoint", "prune", "--keep-last", "2", "--run", run_id,
                        "--dry-run")  # fmt: skip
    assert code == 0
    assert out.splitlines()[-1].startswith("dry run: would delete")
    _, doc = call_json(capsys, url, "checkpoint", "list", "--run", run_id)
    assert len(doc["checkpoints"]) == 6
    code, doc = call_json(capsys, url, "checkpoint", "prune", "--keep-last", "1", "--run", run_id)
    assert code == 0
    assert doc["failed"] == []
    assert len(doc["deleted"]) == 4
    _, listing = call_json(capsys, url, "checkpoint", "list", "--run", run_id)
    left = {c["tinker_path"] for c in listing["checkpoints"]}
    assert left == set(doc["kept"])
    assert {c["checkpoint_type"] for c in listing["checkpoints"]} == {"training", "sampler"}


def test_session_list_and_info(
    capsys: pytest.CaptureFixture[str], url: str, run: dict[str, Any]
) -> None:
    code, doc = call_json(capsys, url, "session", "list", "--limit", "100")
    assert code == 0
    assert run["session_id"] in doc["sessions"]
    code, doc = call_json(capsys, url, "session", "info", run["session_id"])
    assert code == 0
    assert run["run_id"] in doc["training_run_ids"]
    code, out, _ = call(capsys, url, "session", "info", run["session_id"])
    assert f"Training runs: {run['run_id']}" in out


def test_local_serve_passes_arguments_through(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["local", "serve", "--help"])
    out = capsys.readouterr().out
    assert code == 0
    assert "--data-dir" in out
    code = main(["local", "serve", "--port", "not-a-number"])
    assert code == 2


def test_rest_client_pages_through_every_run_and_checkpoint(url: str) -> None:
    first = make_run(url, states=2, samplers=1)
    second = make_run(url, states=1, samplers=0)
    with tinker.RestClient(base_url=url, telemetry=False) as rest:
        every_run = rest.list_all_training_runs(page_size=1, page_timeout=30)
        ids = [r.training_run_id for r in every_run]
        assert {first["run_id"], second["run_id"]} <= set(ids)
        assert len(ids) == len(set(ids)) == rest.list_training_runs().result().cursor.total_count
        listing = rest.list_all_checkpoints(page_size=2, page_timeout=30)
        assert listing.complete, listing.reason
        paths = {c.tinker_path for c in listing.checkpoints}
        assert set(first["states"] + first["samplers"] + second["states"]) <= paths
        one_run = rest.list_all_checkpoints(first["run_id"])
        assert one_run.complete
        assert {c.tinker_path for c in one_run.checkpoints} == set(
            first["states"] + first["samplers"]
        )
        assert "complete" in repr(one_run)
