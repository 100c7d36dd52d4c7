"""examples/rl_ray.py and SamplingClient hand-over on a local Ray cluster (``num_cpus=2``).

Opt-in, like the official-SDK tests: ``make test-ray`` installs ``ray`` when it is missing and
runs this module with ``TINKER_LITE_RAY=1``; ``make test`` skips it. The cluster stays on
loopback (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray use 127.0.0.1 as the node address)
and sends no usage statistics.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

import tinker_lite as tinker
from tests.loopback.test_examples import load_example
from tests.support.handover import (  # noqa: F401 - fixtures used by name
    KEY,
    MODEL,
    keyed_fixture,
    server_fixture,
)
from tinker_lite import types
from tinker_lite.local import LocalServer
from tinker_lite.sampling_client import carry_api_key

RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
SMALL = ["--workers", "2", "--problems", "4", "--group-size", "2", "--max-tokens", "4"]

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("TINKER_LITE_RAY") != "1",
        reason="opt-in: make test-ray (TINKER_LITE_RAY=1) runs the Ray tests",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="ray is not installed (make test-ray installs it)",
    ),
]


@pytest.fixture(scope="module")
def ray() -> Iterator[Any]:
    """A local cluster of 2 CPUs; its workers start with no TINKER_* variable."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("TINKER_")]:
            patch.delenv(name)
        for name, value in RAY_ENV.items():
            patch.setenv(name, value)
        patch.setenv("TINKER_TELEMETRY", "0")
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            yield ray
        finally:
            ray.shutdown()


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TINKER_BASE_URL", "TINKER_API_KEY", "TINKER_LITE_JOURNAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")


def server_line(out: str) -> dict[str, int]:
    found = re.search(
        r"server: sessions (\d+)  client/config (\d+)  join_sampling_session (\d+)", out
    )
    assert found is not None, out
    sessions, configs, joins = (int(n) for n in found.groups())
    return {"sessions": sessions, "configs": configs, "joins": joins}


def step_lines(out: str) -> list[tuple[int, int]]:
    found = re.findall(r"step \d+: samples (\d+) from (\d+) worker processes", out)
    return [(int(samples), int(workers)) for samples, workers in found]


@pytest.mark.parametrize("handover", ["pickle", "handle"])
def test_rl_ray_runs_on_a_local_cluster_against_local_serve(
    ray: Any, handover: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*SMALL, "--steps", "3", "--handover", handover]
    assert load_example("rl_ray").main(argv) == 0
    out = capsys.readouterr().out
    assert re.search(r"local server: http://127\.0\.0\.1:\d+ \(tinker-lite local serve\)", out)
    assert step_lines(out) == [(4 * 2, 2)] * 3
    # Two worker processes for three steps: each connected once and joined each step's
    # sampler once; the driver's session is the only one.
    assert server_line(out) == {"sessions": 1, "configs": 1 + 2, "joins": 2 * 3}


def test_a_worker_that_dies_mid_sample_loses_no_step(
    ray: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*SMALL, "--steps", "3", "--kill-worker-at-step", "2"]
    assert load_example("rl_ray").main(argv) == 0
    out = capsys.readouterr().out
    lost = re.findall(r"step 2: worker 0 lost mid-sample \((\w+)\): its 2 problems handed", out)
    assert len(lost) == 1
    assert lost[0] in {"ActorDiedError", "ActorUnavailableError", "RayActorError"}
    # Every step has all its samples; step 2 finished on the surviving worker, and Ray's
    # restarted worker 0 served step 3 after connecting once.
    assert step_lines(out) == [(8, 2), (8, 1), (8, 2)]
    counts = server_line(out)
    assert counts["sessions"] == 1
    assert counts["configs"] == 1 + 2 + 1
    # 2 per step, plus the dead worker's copy and its share handed over in step 2.
    assert counts["joins"] == 2 * 3 + 1


def test_workers_sample_the_weights_of_the_step_they_were_given(
    ray: Any, server: LocalServer
) -> None:
    worker = ray.remote(num_cpus=1)(load_example("rl_ray").RolloutWorker).remote(0)
    prompt = [85, 115, 101, 114, 58, 32, 104, 105]
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(prompt[:-1]),
        loss_fn_inputs={"target_tokens": prompt[1:]},
    )
    with tinker.ServiceClient(base_url=server.base_url) as service:
        training = service.create_lora_training_client(MODEL, rank=4, seed=0).result()
        given = training.save_weights_and_get_sampling_client().result()
        for _ in range(3):
            training.forward_backward([datum], "cross_entropy").result()
            training.optim_step(types.AdamParams(learning_rate=0.1)).result()
        replaced = training.save_weights_and_get_sampling_client().result()
        for handed in (given, given.get_sampler_handle()):
            result = ray.get(worker.rollout.remote(handed, [(0, (1, 2), prompt)], 1, 6, 7))
            (_, (tokens,), (logprobs,), _) = result["graded"][0]
            full = types.ModelInput.from_ints(prompt + tokens)
            as_given = given.compute_logprobs(full).result()[-len(tokens) :]
            as_replaced = replaced.compute_logprobs(full).result()[-len(tokens) :]
            assert max(abs(a - b) for a, b in zip(as_given, logprobs, strict=True)) < 1e-4
            assert max(abs(a - b) for a, b in zip(as_replaced, logprobs, strict=True)) > 1e-2
    ray.kill(worker)


def test_the_key_stays_out_of_the_object_store_unless_the_driver_opts_in(
    ray: Any, keyed: LocalServer
) -> None:
    example = load_example("rl_ray")
    actor = ray.remote(num_cpus=1)(example.RolloutWorker)
    item = [(0, (1, 2), [85, 115, 101, 114])]
    with tinker.ServiceClient(base_url=keyed.base_url, api_key=KEY) as service:
        sampler = service.create_sampling_client(base_model=MODEL).result()
        assert KEY.encode() not in ray.cloudpickle.dumps(sampler)  # what Ray stores
        bare = actor.remote(0)
        with pytest.raises(tinker.AuthenticationError):  # typed across Ray: no key borrowed
            ray.get(bare.rollout.remote(sampler, item, 1, 4, 1))
        own = actor.options(runtime_env={"env_vars": {"TINKER_API_KEY": KEY}}).remote(0)
        assert ray.get(own.rollout.remote(sampler, item, 1, 4, 1))["graded"]
        ray.kill(own)
        carried = carry_api_key(sampler)
        assert KEY.encode() in ray.cloudpickle.dumps(carried)
        assert ray.get(bare.rollout.remote(carried, item, 1, 4, 1))["graded"]
        ray.kill(bare)
