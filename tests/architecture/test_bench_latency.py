"""bench/bench_latency.py pairs each client call with the local server's result it waited for."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.support.paths import REPO
from tinker_lite import ServiceClient, types
from tinker_lite.local import LocalServer

BENCH_DIR = REPO / "bench"


@pytest.fixture
def bench_latency() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH_DIR))
    try:
        import bench_latency

        yield bench_latency
    finally:
        sys.path.remove(str(BENCH_DIR))


def test_sample_calls_are_paired_with_the_servers_sample_results(bench_latency: ModuleType) -> None:
    server = LocalServer(faults="", stub_model=True)
    server.start()
    try:
        with ServiceClient(base_url=server.base_url, telemetry=False) as client:
            sampler = client.create_sampling_client(base_model="tinker-lite/tiny-64").result()
            prompt = types.ModelInput.from_ints([1, 2, 3])
            calls = []
            for _ in range(3):
                t_submit = time.perf_counter()
                sampler.sample(prompt, 1, types.SamplingParams(max_tokens=1)).result(timeout=60)
                calls.append([t_submit, time.perf_counter()])
        entries = bench_latency._server_entries(server, "Sample")
    finally:
        server.stop()
    assert len(entries) == 3
    latencies, misses = bench_latency.pair_latencies(calls, entries)
    assert misses == 0
    assert len(latencies) == 3
    assert all(latency >= 0 for latency in latencies)
