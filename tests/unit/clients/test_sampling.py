"""SamplingClient: seq_ids (docs/protocol.rst §7.3), shared 429 back-off and in-flight cap
(docs/protocol.rst §6.4)."""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clients import API_KEY, SESSION, FakeTinker, seq_ids
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Recorded,
    Reply,
    Respond,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import InvalidInputError, SamplingClient, ServiceClient, types
from tinker_lite.local import LocalServer

PROMPT = types.ModelInput.from_ints([104, 105, 32, 116, 104, 101, 114, 101])


@pytest.fixture
def fake(server: ScriptedServer) -> FakeTinker:
    return FakeTinker(server)


def _client(fake: FakeTinker, **kwargs: Any) -> ServiceClient:
    return ServiceClient(
        base_url=fake.server.url, api_key=API_KEY, telemetry=False, wire="json", **kwargs
    )


@pytest.fixture
def service(fake: FakeTinker) -> Iterator[ServiceClient]:
    with _client(fake) as client:
        yield client


@pytest.fixture
def sampler(service: ServiceClient) -> SamplingClient:
    return service.create_sampling_client(base_model="Qwen/Qwen3-8B").result()


def test_sample_and_compute_logprobs(fake: FakeTinker, sampler: SamplingClient) -> None:
    params = types.SamplingParams(max_tokens=8, temperature=0.5, stop=["\n"])
    response = sampler.sample(PROMPT, 2, params).result(timeout=30)
    assert [s.tokens for s in response.sequences] == [[1, 2], [1, 2]]
    logprobs = sampler.compute_logprobs(PROMPT).result(timeout=30)
    assert logprobs == [None] + [-1.0] * 7
    first, second = fake.submits("asample")
    assert first.header("X-Tinker-Sampling-Backpressure") == "1"
    body = first.json()
    assert body["sampling_session_id"] == f"{SESSION}:sample:1"
    assert body["sampling_params"] == {
        "max_tokens": 8,
        "stop": ["\n"],
        "temperature": 0.5,
        "top_k": -1,
        "top_p": 1.0,
    }
    assert (body["num_samples"], body["prompt_logprobs"], body["seq_id"]) == (2, False, 0)
    assert second.json()["sampling_params"] == {
        "max_tokens": 1,
        "temperature": 1.0,
        "top_k": -1,
        "top_p": 1.0,
    }
    assert (second.json()["prompt_logprobs"], second.json()["seq_id"]) == (True, 1)
    polls = fake.server.requests("/api/v1/retrieve_future")
    assert {p.header("X-Tinker-Request-Type") for p in polls} == {"Sample"}


def test_each_sampling_client_counts_from_zero(
    fake: FakeTinker, service: ServiceClient, sampler: SamplingClient
) -> None:
    other = service.create_sampling_client(
        model_path="tinker://run-0001/sampler_weights/s"
    ).result()
    futures = [sampler.sample(PROMPT, 1, types.SamplingParams()) for _ in range(3)]
    futures.append(other.sample(PROMPT, 1, types.SamplingParams()))
    for future in futures:
        future.result(timeout=30)
    by_session: dict[str, list[int]] = {}
    for r in fake.submits("asample"):
        by_session.setdefault(r.json()["sampling_session_id"], []).append(r.json()["seq_id"])
    assert sorted(by_session[f"{SESSION}:sample:1"]) == [0, 1, 2]
    assert by_session[f"{SESSION}:sample:2"] == [0]


def test_a_sampling_client_is_shared_by_threads(fake: FakeTinker, sampler: SamplingClient) -> None:
    results: list[types.SampleResponse] = []
    lock = threading.Lock()

    def worker() -> None:
        futures = [sampler.sample(PROMPT, 1, types.SamplingParams(max_tokens=2)) for _ in range(10)]
        for future in futures:
            response = future.result(timeout=30)
            with lock:
                results.append(response)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 80
    assert sorted(seq_ids(fake.submits("asample"))) == list(range(80))


def test_sampling_session_seq_id_is_shared(fake: FakeTinker, service: ServiceClient) -> None:
    trainer = service.create_lora_training_client("Qwen/Qwen3-8B").result()
    service.create_sampling_client(base_model="Qwen/Qwen3-8B").result()
    ephemeral = trainer.save_weights_and_get_sampling_client().result()
    trainer.create_sampling_client("tinker://run-0001/sampler_weights/s1").result()
    assert ephemeral.sampling_session_id == "run-0001:ephemeral:1"
    ephemeral.sample(PROMPT, 1, types.SamplingParams(max_tokens=4)).result(timeout=30)
    sessions = [
        r.json()["sampling_session_seq_id"] for r in fake.submits("create_sampling_session")
    ]
    saves = fake.submits("save_weights_for_sampler")
    assert sessions == [0, 2]
    assert saves[0].json() == {
        "model_id": "run-0001",
        "sampling_session_seq_id": 1,
        "kind": "snapshot",  # golden-0.38 save_weights_and_get_sampling_client
        "seq_id": 1,
        "type": "save_weights_for_sampler",
    }
    asample = fake.submits("asample")[0].json()
    assert (asample["sampling_session_id"], asample["seq_id"]) == ("run-0001:ephemeral:1", 0)


def test_a_410_resubmits_with_a_new_seq_id(fake: FakeTinker, sampler: SamplingClient) -> None:
    fake.server.on("POST", "/api/v1/retrieve_future", Reply(410, {"detail": "expired"}))
    response = sampler.sample(PROMPT, 1, types.SamplingParams(max_tokens=2)).result(timeout=30)
    assert len(response.sequences) == 1
    sampler.sample(PROMPT, 1, types.SamplingParams(max_tokens=2)).result(timeout=30)
    assert seq_ids(fake.submits("asample")) == [0, 1, 2]


def test_429_backoff_is_shared_by_two_sampling_clients(fake: FakeTinker) -> None:
    arrivals: list[tuple[float, Recorded]] = []
    lock = threading.Lock()

    def record(answer: Any) -> Respond:
        def respond(r: Recorded) -> Any:
            with lock:
                arrivals.append((time.monotonic(), r))
            return answer(r) if callable(answer) else answer

        return Respond(respond)

    throttled = Reply(429, {"detail": "slow down"}, headers={"Retry-After": "0.4"})
    fake.server.on("POST", "/api/v1/asample", record(throttled))
    fake.server.default("POST", "/api/v1/asample", record(fake.handle))
    with _client(fake) as first_service, _client(fake) as second_service:
        first = first_service.create_sampling_client(base_model="Qwen/Qwen3-8B").result()
        second = second_service.create_sampling_client(base_model="Qwen/Qwen3-8B").result()
        gate = first_service.holder.sample_gate
        assert gate is second_service.holder.sample_gate
        noted = threading.Event()
        original = gate.hold

        def hold(seconds: float) -> None:
            original(seconds)
            noted.set()

        gate.hold = hold  # type: ignore[method-assign]
        future_a = first.sample(PROMPT, 1, types.SamplingParams(max_tokens=2))
        assert noted.wait(30)
        future_b = second.sample(PROMPT, 1, types.SamplingParams(max_tokens=2))
        future_a.result(timeout=30)
        future_b.result(timeout=30)
    throttled_at = arrivals[0][0]
    later = arrivals[1:]
    assert len(later) == 2
    # Neither sampler sent anything inside the window the 429 opened.
    assert all(at - throttled_at >= 0.35 for at, _ in later)
    # The throttled request was re-sent with the same body (same seq_id).
    sessions = {r.json()["sampling_session_id"] for _, r in later}
    assert len(sessions) == 2
    resent = [
        r
        for _, r in later
        if r.json()["sampling_session_id"] == arrivals[0][1].json()["sampling_session_id"]
    ]
    assert resent[0].body == arrivals[0][1].body
    assert resent[0].json()["seq_id"] == 0


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda s: s.sample([1, 2, 3], 1, types.SamplingParams()), "prompt"),
        (lambda s: s.sample(PROMPT, -1, types.SamplingParams()), "num_samples"),
        (lambda s: s.sample(PROMPT, 0, types.SamplingParams()), "num_samples"),
        (lambda s: s.sample(PROMPT, 1, {"max_tokens": 3}), "sampling_params"),
        (
            lambda s: s.sample(PROMPT, 1, types.SamplingParams(), topk_prompt_logprobs=-1),
            "topk_prompt_logprobs",
        ),
        (lambda s: s.sample(types.ModelInput.empty(), 1, types.SamplingParams()), "prompt"),
    ],
)
def test_bad_sample_input(fake: FakeTinker, sampler: SamplingClient, call: Any, field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        call(sampler)
    assert info.value.field == field
    assert fake.submits("asample") == []
    sampler.sample(PROMPT, 1, types.SamplingParams()).result(timeout=30)
    assert seq_ids(fake.submits("asample")) == [0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "neither is set"),
        ({"model_path": "/local/weights"}, "tinker://"),
        ({"model_path": "tinker://run/weights/state"}, "training state"),
        ({"base_model": ""}, "base_model"),
    ],
)
def test_bad_sampling_client_arguments(
    fake: FakeTinker, service: ServiceClient, kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvalidInputError, match=match):
        service.create_sampling_client(**kwargs).result()
    assert fake.submits("create_sampling_session") == []


def test_weights_and_their_base_model_are_both_sent(
    fake: FakeTinker, service: ServiceClient
) -> None:
    path = "tinker://r/sampler_weights/x"
    sampler = service.create_sampling_client(base_model="Qwen/Qwen3-8B", model_path=path).result()
    (request,) = fake.submits("create_sampling_session")
    assert request.json()["model_path"] == path
    assert request.json()["base_model"] == "Qwen/Qwen3-8B"
    assert sampler.get_base_model() == "Qwen/Qwen3-8B"


def test_sampling_client_pickles(fake: FakeTinker, sampler: SamplingClient) -> None:
    copy = pickle.loads(pickle.dumps(sampler))
    assert copy.sampling_session_id == sampler.sampling_session_id
    assert API_KEY.encode() not in pickle.dumps(sampler)
    copy.sample(PROMPT, 1, types.SamplingParams()).result(timeout=30)
    (request,) = fake.submits("asample")
    assert request.json()["seq_id"] >= 10**9
    assert request.json()["sampling_session_id"] == sampler.sampling_session_id


# -- on the local server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> Iterator[LocalServer]:
    server = LocalServer()
    server.start()
    yield server
    server.stop()


def _sample_many(client: ServiceClient, count: int) -> int:
    """Send ``count`` samples at once; return the most that were in flight together."""
    gate = client.holder.sample_gate
    peak = [0]
    original = gate.acquire

    def acquire(timeout: float | None = None) -> bool:
        ok = original(timeout)
        if ok:
            peak[0] = max(peak[0], gate.in_flight)
        return ok

    gate.acquire = acquire  # type: ignore[method-assign]
    try:
        sampler = client.create_sampling_client(base_model="tinker-lite/tiny-64").result()
        params = types.SamplingParams(max_tokens=2, seed=1)
        futures = [sampler.sample(PROMPT, 1, params) for _ in range(count)]
        results = [f.result(timeout=110) for f in futures]
        assert all(len(r.sequences[0].tokens) <= 2 for r in results)
        assert gate.in_flight == 0
    finally:
        del gate.acquire
    return peak[0]


def test_400_concurrent_samples_complete(local: LocalServer) -> None:
    before = local.stats()["samples_completed"]
    with ServiceClient(base_url=local.base_url, telemetry=False) as client:
        assert client.holder.sample_gate.limit == 400
        peak = _sample_many(client, 400)
        assert 1 <= peak <= 400
    assert local.stats()["samples_completed"] - before == 400


def test_client_config_changes_the_in_flight_cap() -> None:
    server = LocalServer(config_overrides={"sample_max_concurrent_requests": 8})
    server.start()
    try:
        with ServiceClient(base_url=server.base_url, telemetry=False) as client:
            assert _sample_many(client, 60) <= 8
            assert client.holder.sample_gate.limit == 8
    finally:
        server.stop()


def test_protobuf_results_on_the_local_server(
    local: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with ServiceClient(base_url=local.base_url, telemetry=False) as client:
        assert client.holder.wire_format == "protobuf"
        sampler = client.create_sampling_client(base_model="tinker-lite/tiny-64").result()
        response = sampler.sample(
            PROMPT,
            3,
            types.SamplingParams(max_tokens=4, seed=7),
            include_prompt_logprobs=True,
            topk_prompt_logprobs=2,
        ).result(timeout=60)
        assert len(response.sequences) == 3
        assert response.prompt_logprobs is not None
        assert response.prompt_logprobs[0] is None
        assert len(response.prompt_logprobs) == PROMPT.length
        assert response.topk_prompt_logprobs is not None
        assert len(response.topk_prompt_logprobs[1] or []) == 2
        logprobs = sampler.compute_logprobs(PROMPT).result(timeout=60)
        assert logprobs[1] == pytest.approx(response.prompt_logprobs[1], abs=1e-5)
        assert sampler.get_tokenizer().decode([104, 105]) == "hi"
