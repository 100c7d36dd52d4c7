"""ServiceClient: start-up, local://, training clients from saved state, close and threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from tests._clients_support import (  # noqa: F401 - fixture used by name
    API_KEY,
    RUN,
    FakeTinker,
    ce_datum,
    joined_threads_fixture,
)
from tests._scripted_server import (  # noqa: F401 - fixtures used by name
    Hang,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import InvalidInputError, ServiceClient, types
from tinker_lite._http import ClientClosedError

CKPT = f"tinker://{RUN}/weights/ckpt-001"


def _client(server: ScriptedServer, **kwargs: Any) -> ServiceClient:
    kwargs.setdefault("wire", "json")
    return ServiceClient(base_url=server.url, api_key=API_KEY, telemetry=False, **kwargs)


def test_local_url_runs_the_offline_server(
    clean_env: None, joined_threads: Callable[[], list[str]]
) -> None:
    with ServiceClient(base_url="local://", telemetry=False) as client:
        assert client.base_url.startswith("http://127.0.0.1:")
        names = {m.model_name for m in client.get_server_capabilities().supported_models}
        assert "tinker-lite/tiny-64" in names
        trainer = client.create_lora_training_client("tinker-lite/tiny-64", rank=2)
        trainer.forward_backward([ce_datum([1, 2, 3])], "cross_entropy")
        trainer.optim_step(types.AdamParams()).result(timeout=60)
        sampler = trainer.save_weights_and_get_sampling_client()
        sampler.sample(types.ModelInput.from_ints([1, 2]), 1, types.SamplingParams(max_tokens=2))
        client.create_rest_client().list_training_runs().result(timeout=60)
    assert client.closed
    assert joined_threads() == []


def test_env_base_url_local(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, joined_threads: Callable[[], list[str]]
) -> None:
    monkeypatch.setenv("TINKER_BASE_URL", "local://")
    client = ServiceClient(telemetry=False)
    try:
        assert client.session_id is not None
        assert client.holder.wire_format == "protobuf"
    finally:
        client.close()
        client.close()  # idempotent
    assert joined_threads() == []


def test_options_reach_the_session(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeTinker(server)
    monkeypatch.setenv("TINKER_LITE_STALL_TIMEOUT", "0.5")
    with _client(server, user_metadata={"team": "a"}, project_id="p1") as client:
        assert client.holder.stall_timeout == 0.5
        assert client.holder.wire_format == "json"
        assert client.chunk_limits().max_datums == 128
        (created,) = server.requests("/api/v1/create_session")
        assert created.json()["user_metadata"] == {"team": "a"}
        assert created.json()["project_id"] == "p1"
    (finish,) = server.requests("/api/v1/sessions/sess-0001/finish")
    assert finish.json()["reason"] == {"type": "success"}
    # golden-0.38/service_client_close: the finish is sent inside ServiceClient.close.
    assert finish.header("x-sdk-method") == "ServiceClient.close"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"wire": "xml"}, "wire"), ({"sample_workers": 0}, "sample_workers")],
)
def test_bad_options(server: ScriptedServer, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        _client(server, **kwargs)
    assert info.value.field == field


def test_from_state_uses_weights_info(server: ScriptedServer) -> None:
    fake = FakeTinker(server, weights_info=True)
    with _client(server) as client:
        trainer = client.create_training_client_from_state(CKPT, user_metadata={"k": "v"})
        trainer.optim_step(types.AdamParams()).result(timeout=30)
    assert [r.path for r in fake.submits("weights_info", "create_model", "load_weights")] == [
        "/api/v1/weights_info",
        "/api/v1/create_model",
        "/api/v1/load_weights",
    ]
    assert server.requests(f"/api/v1/training_runs/{RUN}") == []
    create = fake.submits("create_model")[0].json()
    assert create["lora_config"] == {
        "rank": 8,
        "train_unembed": True,
        "train_mlp": False,
        "train_attn": True,
    }
    assert create["user_metadata"] == {"k": "v"}
    load = fake.submits("load_weights")[0].json()
    assert load == {
        "model_id": "run-0001",
        "seq_id": 1,
        "path": CKPT,
        "optimizer": False,
        "type": "load_weights",
    }
    assert fake.submits("optim_step")[0].json()["seq_id"] == 2


@pytest.mark.parametrize("optimizer", [False, True])
def test_from_state_falls_back_to_the_training_run(server: ScriptedServer, optimizer: bool) -> None:
    fake = FakeTinker(server)
    with _client(server) as client:
        if optimizer:
            client.create_training_client_from_state_with_optimizer(CKPT)
        else:
            client.create_training_client_from_state(CKPT)
    (run,) = server.requests(f"/api/v1/training_runs/{RUN}")
    assert run.method == "GET"
    assert run.body == b""
    create = fake.submits("create_model")[0].json()
    assert create["base_model"] == "Qwen/Qwen3-8B"
    assert create["user_metadata"] == {}
    assert create["lora_config"]["rank"] == 32
    load = fake.submits("load_weights")[0].json()
    assert (load["seq_id"], load["optimizer"], load["path"]) == (1, optimizer, CKPT)


@pytest.mark.parametrize("path", ["/tmp/ckpt", "tinker://run/weights", "tinker://run/other/x"])
def test_from_state_rejects_bad_paths(server: ScriptedServer, path: str) -> None:
    FakeTinker(server)
    with _client(server) as client, pytest.raises(InvalidInputError, match="tinker"):
        client.create_training_client_from_state(path)


def test_model_seq_ids_count_per_service_client(server: ScriptedServer) -> None:
    fake = FakeTinker(server)
    with _client(server) as client:
        client.create_lora_training_client("Qwen/Qwen3-8B")
        client.create_lora_training_client("Qwen/Qwen3-8B", rank=4, seed=1)
    bodies = [r.json() for r in fake.submits("create_model")]
    assert [b["model_seq_id"] for b in bodies] == [0, 1]
    assert bodies[1]["lora_config"]["seed"] == 1
    assert "seed" not in bodies[0]["lora_config"]
    assert "user_metadata" not in bodies[0]


def test_close_fails_pending_requests(
    server: ScriptedServer, joined_threads: Callable[[], list[str]]
) -> None:
    fake = FakeTinker(server)
    client = _client(server)
    trainer = client.create_lora_training_client("Qwen/Qwen3-8B")
    server.on("POST", "/api/v1/optim_step", Hang())
    hung = trainer.optim_step(types.AdamParams())
    queued = trainer.optim_step(types.AdamParams())
    server.wait_for("/api/v1/optim_step", 1)
    closer = threading.Thread(target=client.close)
    closer.start()
    closer.join(30)
    assert not closer.is_alive()
    with pytest.raises(ClientClosedError):
        hung.result(timeout=30)
    with pytest.raises(ClientClosedError):
        queued.result(timeout=30)
    with pytest.raises(ClientClosedError):
        trainer.optim_step(types.AdamParams())
    with pytest.raises(ClientClosedError):
        client.create_lora_training_client("Qwen/Qwen3-8B")
    assert len(fake.submits("optim_step")) == 1
    # The scripted server still holds the hung request; only the client's threads must be gone.
    assert [name for name in joined_threads() if name.startswith("tinker-lite")] == []
