"""The client-config sampling flags on the local server: retrieve_futures batch polling, joined
copies (pickled or handed over as a sampler handle) and their seq_ids."""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Iterator

import pytest

from tinker_lite import InvalidInputError, SamplingClient, ServiceClient, types
from tinker_lite.local import LocalServer

PROMPT = types.ModelInput.from_ints([104, 105, 32])
PARAMS = types.SamplingParams(max_tokens=2, seed=3)
FLAGS = {"sample_use_retrieve_futures": True, "sample_join_sampling_session": True}


@pytest.fixture(scope="module")
def flagged() -> Iterator[LocalServer]:
    server = LocalServer(stub_model=True, faults="", config_overrides=FLAGS)
    server.start()
    yield server
    server.stop()


def _sampler(client: ServiceClient) -> SamplingClient:
    return client.create_sampling_client(base_model="tinker-lite/tiny-64").result()


def test_one_long_poll_thread_serves_every_sample_of_a_session(flagged: LocalServer) -> None:
    with ServiceClient(base_url=flagged.base_url, telemetry=False) as client:
        sampler = _sampler(client)
        futures = [sampler.sample(PROMPT, 1, PARAMS) for _ in range(300)]
        results = [f.result(timeout=60) for f in futures]
        assert all(len(r.sequences) == 1 for r in results)
        batch = client._context.batch_poller()
        assert batch is not None
        # No sample was polled request by request: the per-request poller never started.
        assert client.holder.poller.thread_count == 0
        assert batch.thread_count == 1
        assert batch.fetcher.thread_count <= batch.fetcher.max_workers == 16
        assert client.holder.sample_gate.in_flight == 0


def test_a_pickled_copy_joins_the_session_and_numbers_from_its_counter(
    flagged: LocalServer,
) -> None:
    with ServiceClient(base_url=flagged.base_url, telemetry=False) as client:
        sampler = _sampler(client)
        sampler.sample(PROMPT, 1, PARAMS).result(timeout=30)
        first = pickle.loads(pickle.dumps(sampler))
        second = pickle.loads(pickle.dumps(sampler))
        assert first.sample(PROMPT, 1, PARAMS).result(timeout=30).sequences
        assert second.sample(PROMPT, 1, PARAMS).result(timeout=30).sequences
        # The service allocated client_counter 1 and 2: seq_ids start at counter * 1e9.
        assert (first._cloned_sampler_id, second._cloned_sampler_id) == (1, 2)
        assert first._next_seq_id == 1_000_000_001
        assert second._next_seq_id == 2_000_000_001
        assert sampler._next_seq_id == 1


def test_a_sampler_handle_rebuilds_the_client_without_credentials(flagged: LocalServer) -> None:
    with ServiceClient(base_url=flagged.base_url, api_key="tml-secret", telemetry=False) as c:
        sampler = _sampler(c)
        handle = sampler.get_sampler_handle()
        assert "tml-secret" not in base64.urlsafe_b64decode(handle).decode()
        assert json.loads(base64.urlsafe_b64decode(handle))["sampling_session_id"] == (
            sampler.sampling_session_id
        )
        copy = SamplingClient.from_sampler_handle(handle)
        again = SamplingClient.from_sampler_handle(handle, api_key="tml-other")
        for rebuilt in (copy, again):
            assert rebuilt.sampling_session_id == sampler.sampling_session_id
            assert rebuilt.sample(PROMPT, 1, PARAMS).result(timeout=30).sequences
        # An explicit key gets a connection of its own, not the live one.
        assert again._context is not c._context
        again._context.close()


@pytest.mark.parametrize("handle", ["not base64 json", base64.urlsafe_b64encode(b"{}").decode()])
def test_a_bad_sampler_handle_is_refused_naming_the_field(handle: str) -> None:
    with pytest.raises(InvalidInputError, match="handle"):
        SamplingClient.from_sampler_handle(handle)


def test_without_the_endpoint_samples_fall_back_to_per_request_polls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = LocalServer(stub_model=True, faults="", config_overrides=FLAGS)
    server.start()
    try:
        server.set_faults("path=/api/v1/retrieve_futures,status=404")
        with ServiceClient(base_url=server.base_url, telemetry=False) as client:
            sampler = _sampler(client)
            futures = [sampler.sample(PROMPT, 1, PARAMS) for _ in range(20)]
            assert all(f.result(timeout=60).sequences for f in futures)
        assert "polling each sample with retrieve_future instead" in caplog.text
    finally:
        server.stop()


def test_failed_long_polls_are_retried_without_falling_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = LocalServer(stub_model=True, faults="", config_overrides=FLAGS)
    server.start()
    try:
        server.set_faults("path=/api/v1/retrieve_futures,status=503,count=1")
        with ServiceClient(base_url=server.base_url, telemetry=False) as client:
            sampler = _sampler(client)
            futures = [sampler.sample(PROMPT, 1, PARAMS) for _ in range(5)]
            assert all(f.result(timeout=60).sequences for f in futures)
            assert client.holder.poller.thread_count == 0
        assert "polling each sample" not in caplog.text
    finally:
        server.stop()
