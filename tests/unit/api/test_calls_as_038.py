"""The clients' calls as the official SDK 0.38 makes them (docs/protocol.rst §1.1, golden-0.38).

Behaviour the golden replay (tests/golden/test_golden_038.py) does not reach on its own: the cached
get_info, chunk order without ``parallel_fwdbwd_chunks``, save_weights_and_get_sampling_client's
deprecated ``name`` and its ``kind`` / ``record_stability_info``, the archive ``Accept`` header,
and what a 0.4.1-era service (no ``client/config``) still gets.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from tests.support.clients import API_KEY, RUN, FakeTinker, ce_datum, seq_ids
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import InvalidInputError, RestClient, ServiceClient, types
from tinker_lite._api import training as _api_training
from tinker_lite._codec import zstd as _zstd_codec

BASE = "Qwen/Qwen3-8B"
CHUNKED = {"fwdbwd_max_chunk_len": 2}


def _client(server: ScriptedServer) -> ServiceClient:
    return ServiceClient(base_url=server.url, api_key=API_KEY, telemetry=False, wire="json")


@pytest.fixture
def current(server: ScriptedServer) -> Iterator[tuple[FakeTinker, ServiceClient]]:
    """A current service (it answers client/config) with chunks of 2 datums."""
    fake = FakeTinker(server, client_config=dict(CHUNKED))
    with _client(server) as client:
        yield fake, client


def _batch(n: int) -> list[types.Datum]:
    return [ce_datum([1, 2, 3, 4 + i]) for i in range(n)]


def test_get_info_is_read_once_at_creation(current: tuple[FakeTinker, ServiceClient]) -> None:
    fake, client = current
    trainer = client.create_lora_training_client(BASE).result()
    assert len(fake.submits("get_info")) == 1
    assert fake.submits("get_info")[0].header("x-sdk-method") == (
        "ServiceClient.create_lora_training_client"
    )
    assert trainer.get_info().model_id == trainer.model_id
    trainer.get_info()
    assert len(fake.submits("get_info")) == 1


def test_later_chunks_go_out_before_the_first(current: tuple[FakeTinker, ServiceClient]) -> None:
    fake, client = current
    trainer = client.create_lora_training_client(BASE).result()
    out = trainer.forward_backward(_batch(5), "cross_entropy").result(timeout=30)
    assert len(out.loss_fn_outputs) == 5
    # seq_ids reserved in call order (1, 2, 3), the first chunk sent last
    assert seq_ids(fake.submits("forward_backward")) == [2, 3, 1]
    trainer.optim_step(types.AdamParams()).result(timeout=30)
    assert seq_ids(fake.submits("optim_step")) == [4]


def test_without_parallel_chunks_they_go_in_seq_id_order(server: ScriptedServer) -> None:
    fake = FakeTinker(server, client_config={**CHUNKED, "parallel_fwdbwd_chunks": False})
    with _client(server) as client:
        trainer = client.create_lora_training_client(BASE).result()
        trainer.forward_backward(_batch(5), "cross_entropy").result(timeout=30)
    assert seq_ids(fake.submits("forward_backward")) == [1, 2, 3]


def test_a_legacy_service_gets_chunks_in_order_and_no_sampler_read(server: ScriptedServer) -> None:
    fake = FakeTinker(server)  # no client/config: a 0.4.1-era service
    with _client(server) as client:
        trainer = client.create_lora_training_client(BASE).result()
        data = [ce_datum([1, 2, 3, 4 + i]) for i in range(130)]  # 128 + 2 (docs/protocol.rst §7.4)
        trainer.forward_backward(data, "cross_entropy").result(timeout=30)
        client.create_sampling_client(model_path=f"tinker://{RUN}/sampler_weights/s1").result()
    assert seq_ids(fake.submits("forward_backward")) == [1, 2]
    assert [r for r in server.requests() if r.path.startswith("/api/v1/samplers/")] == []


def test_save_weights_and_get_sampling_client_name_is_deprecated_and_ignored(
    current: tuple[FakeTinker, ServiceClient],
) -> None:
    fake, client = current
    trainer = client.create_lora_training_client(BASE).result()
    with pytest.warns(DeprecationWarning, match="'name' parameter"):
        sampler = trainer.save_weights_and_get_sampling_client(name="ignored").result()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inflight = trainer.save_weights_and_get_sampling_client(
            kind="inflight", record_stability_info=True
        ).result()
    first, second = (r.json() for r in fake.submits("save_weights_for_sampler"))
    assert "path" not in first
    assert first["kind"] == "snapshot"
    assert (first["sampling_session_seq_id"], second["sampling_session_seq_id"]) == (0, 1)
    assert second["kind"] == "inflight"
    prompt = types.ModelInput.from_ints([1, 2])
    sampler.sample(prompt, 1, types.SamplingParams(max_tokens=2)).result(timeout=30)
    inflight.sample(prompt, 1, types.SamplingParams(max_tokens=2)).result(timeout=30)
    flags = [r.json()["record_stability_info"] for r in fake.submits("asample")]
    assert flags == [False, True]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"kind": "later"}, "kind"), ({"record_stability_info": "yes"}, "record_stability_info")],
)
def test_bad_sampler_options_fail_before_sending(
    current: tuple[FakeTinker, ServiceClient], kwargs: dict[str, object], field: str
) -> None:
    fake, client = current
    trainer = client.create_lora_training_client(BASE).result()
    with pytest.raises(InvalidInputError) as info:
        trainer.save_weights_and_get_sampling_client(**kwargs).result()  # type: ignore[arg-type]
    assert info.value.field == field
    with pytest.raises(InvalidInputError):
        client.create_sampling_client(base_model=BASE, record_stability_info=1).result()  # type: ignore[arg-type]
    assert fake.submits("save_weights_for_sampler", "create_sampling_session") == []


def test_sampler_from_a_path_is_read_after_creation(
    current: tuple[FakeTinker, ServiceClient], server: ScriptedServer
) -> None:
    _, client = current
    server.default(
        "GET",
        "/api/v1/samplers/sess-0001:sample:1",
        Reply(200, {"sampler_id": "sess-0001:sample:1", "base_model": BASE}),
    )
    sampler = client.create_sampling_client(
        model_path=f"tinker://{RUN}/sampler_weights/s1", record_stability_info=True
    ).result()
    read = server.requests("/api/v1/samplers/sess-0001:sample:1")
    assert [r.method for r in read] == ["GET"]
    assert read[0].header("x-sdk-method") == "ServiceClient.create_sampling_client"
    assert sampler.base_model == BASE
    assert sampler.record_stability_info is True


def test_archive_request_accepts_json_and_gzip(
    current: tuple[FakeTinker, ServiceClient], server: ScriptedServer
) -> None:
    _, client = current
    RestClient(client).get_checkpoint_archive_url(RUN, "weights/ckpt-001").result(30)
    (request,) = server.requests(
        f"/api/v1/training_runs/{RUN}/checkpoints/weights/ckpt-001/archive"
    )
    accepted = [
        v.strip()
        for k, line in request.raw_headers
        if k.lower() == "accept"
        for v in line.split(",")
    ]
    assert accepted == ["application/json", "application/gzip"]


def test_zstd_asked_without_zstandard_warns_once_and_sends_uncompressed(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_zstd_codec, "_zstd", lambda: None)
    _api_training._warn_zstd_missing.cache_clear()  # the warning is once per process
    fake = FakeTinker(server, client_config={"proto_compress_fwdbwd": True})
    with ServiceClient(base_url=server.url, api_key=API_KEY, telemetry=False) as client:
        trainer = client.create_lora_training_client(BASE).result()
        with caplog.at_level("WARNING", logger="tinker_lite.api"):
            for _ in range(2):
                out = trainer.forward_backward(_batch(1), "cross_entropy").result(timeout=30)
                assert len(out.loss_fn_outputs) == 1
    sent = fake.submits("forward_backward")
    assert len(sent) == 2
    for request in sent:
        assert request.header("Content-Type") == "application/x-protobuf"
        assert request.header("Content-Encoding") is None
    warned = [r for r in caplog.records if "zstandard" in r.getMessage()]
    assert len(warned) == 1
    assert "pip install 'tinker-lite[zstd]'" in warned[0].getMessage()
