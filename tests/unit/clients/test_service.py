"""ServiceClient: start-up, local://, training clients from saved state, close and threads."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.clients import (  # noqa: F401 - fixture used by name
    API_KEY,
    RUN,
    FakeTinker,
    ce_datum,
    joined_threads_fixture,
    service_with,
)
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Drop,
    FakeClock,
    Hang,
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import APIConnectionError, InvalidInputError, ServiceClient, types
from tinker_lite._transport.http import ClientClosedError
from tinker_lite.rest_client import RestClient

CKPT = f"tinker://{RUN}/weights/ckpt-001"


def _client(server: ScriptedServer, **kwargs: Any) -> ServiceClient:
    kwargs.setdefault("wire", "json")
    return ServiceClient(base_url=server.url, api_key=API_KEY, telemetry=False, **kwargs)


def test_local_url_runs_the_offline_server(
    clean_env: None, joined_threads: Callable[[], list[str]]
) -> None:
    with ServiceClient(base_url="local://", telemetry=False) as client:
        assert client.base_url.startswith("http://127.0.0.1:")
        capabilities = RestClient(client).get_server_capabilities().result(timeout=60)
        names = {m.model_name for m in capabilities.supported_models}
        assert "tinker-lite/tiny-64" in names
        trainer = client.create_lora_training_client("tinker-lite/tiny-64", rank=2).result()
        trainer.forward_backward([ce_datum([1, 2, 3])], "cross_entropy")
        trainer.optim_step(types.AdamParams()).result(timeout=60)
        sampler = trainer.save_weights_and_get_sampling_client().result()
        sampler.sample(types.ModelInput.from_ints([1, 2]), 1, types.SamplingParams(max_tokens=2))
        RestClient(client).list_training_runs().result(timeout=60)
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
        assert client.holder.settings.stall_timeout == 0.5
        assert client.holder.wire_format == "json"
        assert client.chunk_limits().max_datums == 128
        # docs/protocol.rst §8.1: on first use
        assert server.requests("/api/v1/create_session") == []
        assert client.session_id == "sess-0001"
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
        trainer = client.create_training_client_from_state(CKPT, user_metadata={"k": "v"}).result()
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
            client.create_training_client_from_state_with_optimizer(CKPT).result()
        else:
            client.create_training_client_from_state(CKPT).result()
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
        client.create_training_client_from_state(path).result()


def test_model_seq_ids_count_per_service_client(server: ScriptedServer) -> None:
    fake = FakeTinker(server)
    with _client(server) as client:
        client.create_lora_training_client("Qwen/Qwen3-8B").result()
        client.create_lora_training_client("Qwen/Qwen3-8B", rank=4, seed=1).result()
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
    trainer = client.create_lora_training_client("Qwen/Qwen3-8B").result()
    server.on("POST", "/api/v1/optim_step", Hang())
    hung = trainer.optim_step(types.AdamParams())
    queued = trainer.optim_step(types.AdamParams())
    server.wait_for("/api/v1/optim_step", 1)
    # wait=False: a normal close would wait for the hung request (tests/loopback/test_closing.py).
    closer = threading.Thread(target=lambda: client.close(wait=False))
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
        client.create_lora_training_client("Qwen/Qwen3-8B").result()
    assert len(fake.submits("optim_step")) == 1
    # The scripted server still holds the hung request; only the client's threads must be gone.
    assert [name for name in joined_threads() if name.startswith("tinker-lite")] == []


def test_the_constructor_sends_nothing_and_rest_calls_open_no_session(
    server: ScriptedServer,
) -> None:
    FakeTinker(server)
    with _client(server, display_name="nightly") as client:
        assert server.requests() == []  # docs/protocol.rst §8.1: the session starts on first use
        RestClient(client).get_server_capabilities().result(timeout=60)
        RestClient(client).list_training_runs().result(timeout=30)
        assert server.requests("/api/v1/create_session") == []
        client.create_sampling_client(base_model="Qwen/Qwen3-8B").result()
        client.create_sampling_client(base_model="Qwen/Qwen3-8B").result()
        (created,) = server.requests("/api/v1/create_session")
    assert created.json()["display_name"] == "nightly"


def test_a_positional_string_is_not_taken_for_the_api_key(server: ScriptedServer) -> None:
    with pytest.raises(InvalidInputError) as info:
        ServiceClient(API_KEY, base_url=server.url)  # type: ignore[arg-type]
    assert info.value.field == "user_metadata"
    assert "api_key=" in str(info.value)
    assert API_KEY not in str(info.value)
    assert server.requests() == []


def test_unknown_keywords_warn_as_0_38_does_and_are_ignored(server: ScriptedServer) -> None:
    FakeTinker(server)
    with pytest.warns(FutureWarning) as caught:
        client = ServiceClient(
            base_url=server.url,
            api_key=API_KEY,
            timeout=120,
            stall_timout=5,  # a misspelt option is named too
        )
    (warning,) = caught
    assert str(warning.message) == (
        "ServiceClient ignores unsupported arguments: stall_timout, timeout. Passing them "
        "will be an error in a future version of the Tinker SDK."
    )
    assert warning.filename == __file__  # reported where the caller passed them
    with client:
        assert client.holder.settings.stall_timeout != 5
        RestClient(client).get_server_capabilities().result(timeout=60)


def test_default_headers_overrides_reach_every_request(server: ScriptedServer) -> None:
    FakeTinker(server)
    with _client(
        server, default_headers={"X-A": "1", "X-B": "1"}, default_headers_overrides={"X-B": "2"}
    ) as client:
        RestClient(client).get_server_capabilities().result(timeout=60)
    for request in server.requests():
        assert (request.header("X-A"), request.header("X-B")) == ("1", "2")


def test_startup_timeout_from_argument_environment_or_stall_timeout(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_LITE_STARTUP_TIMEOUT", raising=False)
    with _client(server, stall_timeout=7.0) as client:
        assert client.holder.settings.startup_timeout == 7.0
    monkeypatch.setenv("TINKER_LITE_STARTUP_TIMEOUT", "3")
    with _client(server) as client:
        assert client.holder.settings.startup_timeout == 3.0
    with _client(server, startup_timeout=1.5) as client:
        assert client.holder.settings.startup_timeout == 1.5
    monkeypatch.setenv("TINKER_LITE_STARTUP_TIMEOUT", "soon")
    with pytest.raises(InvalidInputError) as info:
        _client(server)
    assert info.value.field == "TINKER_LITE_STARTUP_TIMEOUT"


def test_startup_timeout_bounds_the_start_up_retries(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    FakeTinker(server, client_config={})
    server.on("POST", "/api/v1/client/config", Reply(503, {"detail": "busy"}))
    caplog.set_level(logging.INFO, logger="tinker_lite")
    with _client(server, startup_timeout=0.2) as client:
        RestClient(client).get_server_capabilities().result(timeout=60)
    # A 0.2 s budget leaves no room for the first 0.5 s back-off: one attempt, then defaults.
    assert len(server.requests("/api/v1/client/config")) == 1
    assert any("built-in defaults" in r.getMessage() for r in caplog.records)


def test_until_the_service_answers_start_up_is_retried_for_startup_timeout(
    server: ScriptedServer,
) -> None:
    FakeTinker(server, client_config={})
    # The service is still starting: five connections are dropped before it answers.
    server.on("POST", "/api/v1/client/config", *[Drop()] * 5)
    clock = FakeClock()
    with service_with(
        {"sleep": clock.sleep, "clock": clock},
        base_url=server.url,
        api_key=API_KEY,
        telemetry=False,
        startup_timeout=60.0,
    ) as client:
        RestClient(client).get_server_capabilities().result(timeout=60)
    assert len(server.requests("/api/v1/client/config")) == 6
    assert sum(clock.sleeps) <= 60.0


def test_a_service_that_never_answers_fails_after_startup_timeout() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    clock = FakeClock()
    with (
        service_with(
            {"sleep": clock.sleep, "clock": clock},
            base_url=f"http://127.0.0.1:{port}",
            api_key=API_KEY,
            telemetry=False,
            startup_timeout=20.0,
        ) as client,
        pytest.raises(APIConnectionError, match=r"Connection refused .*client/config"),
    ):
        client.create_sampling_client(base_model="Qwen/Qwen3-8B").result()
    # Retried (well beyond the two HTTP retries of a start-up request) until the budget ran out.
    assert len(clock.sleeps) > 3
    assert 20.0 - 1.0 <= sum(clock.sleeps) <= 20.0 + 1e-6


def test_options_are_resolved_once_and_handed_down_whole() -> None:
    service = ServiceClient(
        base_url="http://127.0.0.1:9",
        display_name="run",
        default_headers={"x-a": "1"},
        default_headers_overrides={"x-a": "2", "x-b": "3"},
        sample_workers=2,
        telemetry=False,
    )
    try:
        settings = service.holder.settings
        assert settings.display_name == "run"
        assert settings.default_headers == {"x-a": "2", "x-b": "3"}
        assert settings.sample_workers == 2
        assert service._context.api.transport.default_headers()["x-a"] == "2"
    finally:
        service.close()
