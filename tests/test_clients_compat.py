"""Client creation written for SDKs whose creation methods return a future of the client.

In the official SDK 0.38 ``create_lora_training_client``, ``create_training_client_from_state``
(``..._with_optimizer``), ``create_sampling_client`` and ``save_weights_and_get_sampling_client``
return a future that also acts as the client, so sync code reads
``tc = service_client.create_lora_training_client(...).result()``. Both that spelling and the
direct one run against the local server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tinker_lite as tinker
from tinker_lite.local import LocalServer

BASE_MODEL = "tinker-lite/tiny-64"


@pytest.fixture(scope="module")
def local_url() -> Iterator[str]:
    with LocalServer() as url:
        yield url


def _as_future(created: Any) -> Any:
    return created.result()


def _as_client(created: Any) -> Any:
    return created


def _datum() -> tinker.Datum:
    return tinker.Datum(
        model_input=tinker.ModelInput.from_ints([1, 2, 3, 4]),
        loss_fn_inputs={"target_tokens": [2, 3, 4, 5], "weights": [1.0, 1.0, 1.0, 1.0]},
    )


@pytest.mark.parametrize("ready", [_as_future, _as_client], ids=["future-style", "direct"])
def test_both_spellings_train_restore_and_sample(
    local_url: str, ready: Callable[[Any], Any]
) -> None:
    with tinker.ServiceClient(base_url=local_url, telemetry=False) as service_client:
        training_client = ready(
            service_client.create_lora_training_client(base_model=BASE_MODEL, rank=4, seed=0)
        )
        assert isinstance(training_client, tinker.TrainingClient)
        datum = _datum()
        training_client.forward_backward([datum], "cross_entropy").result()
        training_client.optim_step(tinker.AdamParams(learning_rate=1e-2)).result()
        trained = training_client.forward([datum], "cross_entropy").result().metrics["loss:sum"]

        state_path = training_client.save_state("compat-state").result().path
        restored = [
            ready(service_client.create_training_client_from_state(state_path)),
            ready(service_client.create_training_client_from_state_with_optimizer(state_path)),
        ]
        for client in restored:
            assert isinstance(client, tinker.TrainingClient)
            assert client.model_id != training_client.model_id
            loss = client.forward([datum], "cross_entropy").result().metrics["loss:sum"]
            assert loss == pytest.approx(trained, rel=1e-5)

        sampler_path = training_client.save_weights_for_sampler("compat-sampler").result().path
        samplers = [
            ready(service_client.create_sampling_client(model_path=sampler_path)),
            ready(service_client.create_sampling_client(base_model=BASE_MODEL)),
            ready(training_client.create_sampling_client(sampler_path)),
            ready(training_client.save_weights_and_get_sampling_client()),
        ]
        prompt = tinker.ModelInput.from_ints([1, 2, 3])
        params = tinker.SamplingParams(max_tokens=3, seed=0)
        for sampler in samplers:
            assert isinstance(sampler, tinker.SamplingClient)
            response = sampler.sample(prompt=prompt, num_samples=2, sampling_params=params).result()
            assert len(response.sequences) == 2
            assert all(1 <= len(seq.tokens) <= 3 for seq in response.sequences)


def test_result_and_done_give_back_the_client_itself(local_url: str) -> None:
    with tinker.ServiceClient(base_url=local_url, telemetry=False) as service_client:
        training_client = service_client.create_lora_training_client(BASE_MODEL, rank=4)
        sampling_client = service_client.create_sampling_client(base_model=BASE_MODEL)
        for client in (training_client, sampling_client):
            assert client.done() is True
            assert client.result() is client
            assert client.result(timeout=0.0) is client
            assert client.result(None).result() is client
