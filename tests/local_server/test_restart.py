"""A local server restarted on the same data dir carries on where the last one stopped.

Each test stops (or kills) a server with a data dir and starts another on it, then checks what a
client relies on: its session and sampling sessions, its models with their weights, optimizer
state and gradients, the seq_id ledger (nothing applied twice, nothing dropped silently), the
results of applied requests, download links, the audit log and the usage records.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.local_server import Api, datum
from tests.support.served import start_served
from tinker_lite.local import LocalServer
from tinker_lite.local.storage.durable import LOST_IN_RESTART, DataDir, ModelJournal

TOKENS = list(range(5, 29))
USAGE = (
    "/api/v1/billing/usage/events"
    "?starting_on=2000-01-01T00:00:00Z&ending_before=2100-01-01T00:00:00Z"
)


def fb(model_id: str, seq_id: int, offset: int = 0) -> dict[str, Any]:
    tokens = [t + offset for t in TOKENS]
    return {
        "forward_backward_input": {"data": [datum(tokens)], "loss_fn": "cross_entropy"},
        "model_id": model_id,
        "seq_id": seq_id,
    }


def optim(model_id: str, seq_id: int) -> dict[str, Any]:
    return {"model_id": model_id, "seq_id": seq_id, "adam_params": {"learning_rate": 0.01}}


def applied(server: LocalServer, model_id: str) -> list[tuple[int | None, str, bool]]:
    entries = server.stats()["models"][model_id]["applied"]
    return [(e["seq_id"], e["kind"], e["ok"]) for e in entries]


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[list[LocalServer]]:
    """Servers started on one data dir (``start()`` them; the last one is stopped at the end)."""
    servers: list[LocalServer] = []
    yield servers
    for server in servers:
        server.stop()


def start(servers: list[LocalServer], data_dir: Path, **options: Any) -> tuple[LocalServer, Api]:
    port = 0
    if servers:  # the same port, as a restarted service keeps its address
        port = int(servers[-1].base_url.rsplit(":", 1)[1])
        servers[-1].stop()
    server = LocalServer(port=port, data_dir=data_dir, **options)
    server.start()
    servers.append(server)
    return server, Api(server.base_url)


def reference_losses(steps: list[str]) -> list[float]:
    """The losses of the same requests on a server that never restarts."""
    with LocalServer() as url:
        api = Api(url)
        model_id = api.model(api.session())
        losses = []
        for seq_id, step in enumerate(steps, start=1):
            if step == "fb":
                losses.append(api.run("/api/v1/forward_backward", fb(model_id, seq_id))["metrics"])
            else:
                api.run("/api/v1/optim_step", optim(model_id, seq_id))
        api.close()
    return [m["loss:sum"] for m in losses]


def test_training_carries_on_bit_for_bit(tmp_path: Path, restartable: list[LocalServer]) -> None:
    server, api = start(restartable, tmp_path)
    session_id = api.session()
    model_id = api.model(session_id)
    first = api.run("/api/v1/forward_backward", fb(model_id, 1))
    api.run("/api/v1/optim_step", optim(model_id, 2))
    pending_grads = api.ok("/api/v1/forward_backward", fb(model_id, 3))
    answer = api.result(pending_grads["request_id"])
    api.close()

    server, api = start(restartable, tmp_path)
    assert server.stats()["restored"] == {
        "sessions": 1,
        "models": 1,
        "samplers": 0,
        "lost_requests": 0,
    }
    # the result of an applied request is still there, the same
    assert api.result(pending_grads["request_id"]) == answer
    # the gradients of seq 3 were kept: the step after the restart is the same step
    api.run("/api/v1/optim_step", optim(model_id, 4))
    last = api.run("/api/v1/forward_backward", fb(model_id, 5))
    assert [first["metrics"]["loss:sum"], last["metrics"]["loss:sum"]] == [
        reference_losses(["fb", "optim", "fb", "optim", "fb"])[i] for i in (0, 2)
    ]
    assert applied(server, model_id) == [
        (0, "create_model", True),
        (1, "forward_backward", True),
        (2, "optim_step", True),
        (3, "forward_backward", True),
        (4, "optim_step", True),
        (5, "forward_backward", True),
    ]
    heartbeat = api.post("/api/v1/session_heartbeat", {"session_id": session_id})
    assert heartbeat.status_code == 200
    api.close()


def test_a_resend_after_a_restart_is_not_applied_again(
    tmp_path: Path, restartable: list[LocalServer]
) -> None:
    server, api = start(restartable, tmp_path, stub_model=True)
    model_id = api.model(api.session())
    sent = api.ok("/api/v1/forward_backward", fb(model_id, 1))
    api.result(sent["request_id"])
    api.close()

    server, api = start(restartable, tmp_path, stub_model=True)
    resent = api.ok("/api/v1/forward_backward", fb(model_id, 1))
    assert resent["request_id"] == sent["request_id"]
    api.run("/api/v1/optim_step", optim(model_id, 2))
    assert applied(server, model_id) == [
        (0, "create_model", True),
        (1, "forward_backward", True),
        (2, "optim_step", True),
    ]
    api.close()


def test_a_request_that_never_ran_fails_and_frees_its_seq_id(
    tmp_path: Path, restartable: list[LocalServer]
) -> None:
    server, api = start(restartable, tmp_path, stub_model=True)
    model_id = api.model(api.session())
    held = api.ok("/api/v1/optim_step", optim(model_id, 2))  # waits for seq 1, which never comes
    api.close()

    server, api = start(restartable, tmp_path, stub_model=True)
    assert server.stats()["restored"]["lost_requests"] == 1
    failed = api.result(held["request_id"])
    assert failed == {"error": LOST_IN_RESTART, "category": "server"}
    # a resend of the lost seq_id gets the same answer; seq 1 and 3 run, 2 is not waited for
    assert api.ok("/api/v1/optim_step", optim(model_id, 2))["request_id"] == held["request_id"]
    api.run("/api/v1/forward_backward", fb(model_id, 1))
    api.run("/api/v1/optim_step", optim(model_id, 3))
    entries = server.stats()["models"][model_id]["applied"]
    assert [(e["seq_id"], e["ok"], e.get("lost_in_restart", False)) for e in entries] == [
        (0, True, False),
        (2, False, True),
        (1, True, False),
        (3, True, False),
    ]
    api.close()


def test_a_refused_seq_id_stays_refused(tmp_path: Path, restartable: list[LocalServer]) -> None:
    _, api = start(restartable, tmp_path, stub_model=True)
    model_id = api.model(api.session())
    bad = {"model_id": model_id, "seq_id": 1, "path": "a/b"}  # a name must be one path segment
    refused = api.post("/api/v1/save_weights", bad)
    assert refused.status_code in (400, 422)
    api.close()

    _, api = start(restartable, tmp_path, stub_model=True)
    again = api.post("/api/v1/save_weights", bad)
    assert (again.status_code, again.json()) == (refused.status_code, refused.json())
    api.run("/api/v1/optim_step", optim(model_id, 2))  # not held for seq 1
    api.close()


def test_sampling_sessions_and_records_survive(
    tmp_path: Path, restartable: list[LocalServer]
) -> None:
    server, api = start(restartable, tmp_path)
    session_id = api.session()
    model_id = api.model(session_id)
    api.run("/api/v1/forward_backward", fb(model_id, 1))
    api.run("/api/v1/optim_step", optim(model_id, 2))
    snapshot = api.run(
        "/api/v1/save_weights_for_sampler",
        {"model_id": model_id, "seq_id": 3, "sampling_session_seq_id": 7},
    )
    saved = api.run(
        "/api/v1/save_weights_for_sampler", {"model_id": model_id, "seq_id": 4, "path": "keep"}
    )["path"]
    on_path = api.ok(
        "/api/v1/create_sampling_session",
        {"session_id": session_id, "sampling_session_seq_id": 8, "model_path": saved},
    )["sampling_session_id"]
    sample = {
        "prompt": {"chunks": [{"tokens": [1, 2, 3], "type": "encoded_text"}]},
        "sampling_params": {"max_tokens": 6, "seed": 11, "temperature": 1.0},
        "num_samples": 2,
    }
    before = [
        api.run("/api/v1/asample", {**sample, "sampling_session_id": sampler, "seq_id": 0})
        for sampler in (snapshot["sampling_session_id"], on_path)
    ]
    archive = api.get(f"/api/v1/training_runs/{model_id}/checkpoints/sampler_weights/keep/archive")
    assert archive.status_code == 200
    audit = api.get("/api/v1/audit").json()
    usage = api.get(USAGE).json()
    api.close()

    server, api = start(restartable, tmp_path)
    assert server.stats()["restored"]["samplers"] == 2
    assert api.get("/api/v1/audit").json() == audit
    assert usage["data"]
    assert api.get(USAGE).json()["data"] == usage["data"]
    after = [
        api.run("/api/v1/asample", {**sample, "sampling_session_id": sampler, "seq_id": 1})
        for sampler in (snapshot["sampling_session_id"], on_path)
    ]

    def drawn(answer: dict[str, Any]) -> list[tuple[list[int], list[float]]]:
        return [(seq["tokens"], seq["logprobs"]) for seq in answer["sequences"]]

    assert [drawn(a) for a in after] == [drawn(b) for b in before]
    session = api.get(f"/api/v1/sessions/{session_id}").json()
    assert session["training_run_ids"] == [model_id]
    assert set(session["sampler_ids"]) >= {snapshot["sampling_session_id"], on_path}
    # the download link handed out before the restart still serves the archive
    download = requests.get(archive.url, timeout=30)
    assert download.status_code == 200
    assert download.content[:2] == b"\x1f\x8b"
    api.close()


def test_a_kill_between_the_state_and_the_ledger_line(tmp_path: Path) -> None:
    """A kill after the state snapshot, before the ledger line: the request was applied."""
    with LocalServer(data_dir=tmp_path, stub_model=True) as url:
        api = Api(url)
        model_id = api.model(api.session())
        sent = api.ok("/api/v1/forward_backward", fb(model_id, 1))
        result = api.result(sent["request_id"])
        api.close()
    ledger = tmp_path / "runs" / model_id / "ledger.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    assert b'"event":"applied"' in lines[-1]
    ledger.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])  # the last line torn by the kill
    restored = ModelJournal(DataDir(tmp_path), model_id).read()
    assert restored is not None
    assert [entry["seq_id"] for entry, _ in restored.applied] == [0, 1]
    assert restored.lost == []
    with LocalServer(data_dir=tmp_path, stub_model=True) as url:
        api = Api(url)
        assert api.result(sent["request_id"]) == result
        api.close()


def test_external_link_expiry_keeps_the_checkpoint(tmp_path: Path) -> None:
    now = [1_000_000.0]
    with LocalServer(data_dir=tmp_path, stub_model=True, clock=lambda: now[0]) as url:
        api = Api(url)
        model_id = api.model(api.session())
        api.run(
            "/api/v1/save_weights_for_sampler", {"model_id": model_id, "seq_id": 1, "path": "x"}
        )
        route = f"/api/v1/training_runs/{model_id}/checkpoints/sampler_weights/x"
        urls = api.get(route + "/external_weights_urls").json()["urls"]
        assert urls
        now[0] += 24 * 3600.0  # every link expired
        listed = api.get(f"/api/v1/training_runs/{model_id}/checkpoints").json()["checkpoints"]
        assert [c["checkpoint_id"] for c in listed] == ["sampler_weights/x"]
        files = sorted(
            p.name for p in (tmp_path / "runs" / model_id / "sampler_weights" / "x").iterdir()
        )
        assert "adapter_model.safetensors" in files
        assert api.get(route + "/archive").status_code == 200
        api.close()


def test_without_a_data_dir_nothing_is_kept() -> None:
    server = LocalServer(stub_model=True)
    server.start()
    try:
        api = Api(server.base_url)
        model_id = api.model(api.session())
        api.run("/api/v1/forward_backward", fb(model_id, 1))
        api.close()
        kept = [p.name for p in server.data_dir.rglob("*") if p.is_file()]
        assert kept == ["run.json"]  # the run's record, for the REST listings, as before
    finally:
        server.stop()


def _serve(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    return start_served("--data-dir", str(data_dir), "--log-level", "WARNING")


def test_kill_9(tmp_path: Path) -> None:
    """SIGKILL mid-run: the next server on the data dir answers as if nothing had happened."""
    proc, url = _serve(tmp_path)
    try:
        api = Api(url)
        model_id = api.model(api.session())
        losses = [api.run("/api/v1/forward_backward", fb(model_id, 1))["metrics"]["loss:sum"]]
        api.run("/api/v1/optim_step", optim(model_id, 2))
        api.close()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
    proc, url = _serve(tmp_path)
    try:
        api = Api(url)
        losses.append(api.run("/api/v1/forward_backward", fb(model_id, 3))["metrics"]["loss:sum"])
        stats = api.get("/_local/stats").json()
        api.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
    assert losses == [reference_losses(["fb", "optim", "fb"])[i] for i in (0, 1)]
    assert [e["seq_id"] for e in stats["models"][model_id]["applied"]] == [0, 1, 2, 3]
    assert stats["restored"]["models"] == 1


def test_tokens_and_copy_counters_survive(tmp_path: Path, restartable: list[LocalServer]) -> None:
    options: dict[str, Any] = {"stub_model": True, "api_key": "key", "jwt": True}
    server, api = start(restartable, tmp_path, **options)
    api = Api(server.base_url, api_key="key")
    token = api.ok("/api/v1/auth/token", {})["jwt"]
    session_id = api.session()
    sampler = api.ok(
        "/api/v1/create_sampling_session",
        {
            "session_id": session_id,
            "sampling_session_seq_id": 0,
            "base_model": "tinker-lite/tiny-64",
        },
    )["sampling_session_id"]
    join = {"sampling_session_id": sampler}
    assert [api.ok("/api/v1/join_sampling_session", join)["client_counter"] for _ in "ab"] == [1, 2]
    api.close()

    server, _ = start(restartable, tmp_path, **options)
    with_token = Api(server.base_url, api_key=token)
    assert (
        with_token.post("/api/v1/session_heartbeat", {"session_id": session_id}).status_code == 200
    )
    # a copy joining now must not get the numbers (and so the sample seq_ids) of an earlier one
    assert with_token.ok("/api/v1/join_sampling_session", join)["client_counter"] == 3
    with_token.close()


def test_a_request_that_cannot_be_recorded_fails_to_its_caller(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The data dir refuses the write (a disk full): the caller is told, the worker goes on."""
    with LocalServer(data_dir=tmp_path, stub_model=True) as url:
        api = Api(url)
        model_id = api.model(api.session())
        state = tmp_path / "runs" / model_id / "state.npz"
        state.unlink()
        state.mkdir()  # os.replace onto a directory fails
        failed = api.run("/api/v1/forward_backward", fb(model_id, 1))
        assert failed["category"] == "server"
        assert "could not record it in its data dir" in failed["error"]
        state.rmdir()
        assert "loss_fn_outputs" in api.run("/api/v1/forward_backward", fb(model_id, 2))
        api.close()
    assert any("cannot record" in r.getMessage() for r in caplog.records)
