"""Awaiting tinker_lite's futures and calling the official ``*_async`` methods, on local://.

Everything runs against the embedded local server from a plain ``asyncio.run``, the way a sync
helper in user code that awaits internally would. tinker_lite itself starts no event loop and no
thread for this, and plain sync use never imports ``asyncio``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from tests.support.clients import ce_datum
from tests.support.paths import REPO
from tinker_lite import (
    APIFuture,
    APITimeoutError,
    BackcompatSamplingClientFuture,
    BackcompatTrainingClientFuture,
    RestClient,
    SamplingClient,
    ServiceClient,
    TrainingClient,
    types,
)

BASE_MODEL = "tinker-lite/tiny-64"
DATA = [ce_datum([5, 6, 7, 8, 9]), ce_datum([10, 11, 12], weights=[1.0, 0.5])]
PROMPT = types.ModelInput.from_ints([104, 105, 32])
GREEDY = types.SamplingParams(max_tokens=4, temperature=0.0)


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceClient]:
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("TINKER")}
    try:
        with ServiceClient(base_url="local://", telemetry=False) as client:
            yield client
    finally:
        os.environ.update(saved)


@pytest.fixture(scope="module")
def trainer(service: ServiceClient) -> TrainingClient:
    return service.create_lora_training_client(BASE_MODEL, rank=2).result()


@pytest.fixture(scope="module")
def sampler(service: ServiceClient) -> SamplingClient:
    return service.create_sampling_client(base_model=BASE_MODEL).result()


def _tokens(response: types.SampleResponse) -> list[list[int]]:
    return [list(seq.tokens) for seq in response.sequences]


def _logprobs(output: types.ForwardBackwardOutput) -> list[list[float]]:
    return [out["logprobs"].tolist() for out in output.loss_fn_outputs]


# ---------------------------------------------------------------------------------------------
# awaiting futures


def test_await_training_and_sampling_futures_from_asyncio_run(
    trainer: TrainingClient, sampler: SamplingClient
) -> None:
    expected_forward = trainer.forward(DATA, "cross_entropy").result(timeout=60)
    expected_sample = sampler.sample(PROMPT, 2, GREEDY).result(timeout=60)

    async def main() -> tuple[types.ForwardBackwardOutput, types.SampleResponse, object]:
        forward = trainer.forward(DATA, "cross_entropy")
        sample = sampler.sample(PROMPT, 2, GREEDY)
        # Both were submitted before either is awaited; gather awaits APIFutures directly.
        out, response = await asyncio.gather(forward, sample)
        fb = trainer.forward_backward(DATA, "cross_entropy")
        optim = await trainer.optim_step(types.AdamParams(learning_rate=1e-3))
        assert (await fb.result_async()).metrics["loss:sum"] > 0
        return out, response, optim

    out, response, optim = asyncio.run(main())
    assert _logprobs(out) == _logprobs(expected_forward)
    assert _tokens(response) == _tokens(expected_sample)
    assert len(response.sequences) == 2
    assert isinstance(optim, types.OptimStepResponse)


def test_coroutine_and_future_members(sampler: SamplingClient) -> None:
    future = sampler.sample(PROMPT, 1, GREEDY)
    assert future.future() is future
    assert isinstance(future.future(), concurrent.futures.Future)

    async def main() -> types.SampleResponse:
        task = asyncio.create_task(future.coroutine())
        return await task

    response = asyncio.run(main())
    assert response is future.result()


def test_await_propagates_the_request_error() -> None:
    failed = APIFuture.failed(APITimeoutError("gone", request_id="r-1"))

    async def main() -> None:
        await failed

    with pytest.raises(APITimeoutError, match="gone"):
        asyncio.run(main())


def test_result_async_timeout_keeps_the_request_and_can_be_awaited_again() -> None:
    pending: APIFuture[int] = APIFuture("req-7")

    async def first() -> None:
        await pending.result_async(timeout=0.01)

    with pytest.raises(APITimeoutError) as info:
        asyncio.run(first())
    assert isinstance(info.value, concurrent.futures.TimeoutError)
    assert "req-7" in str(info.value)
    assert not pending.cancelled()
    pending.set_result(41)

    async def second() -> int:
        return await pending.result_async(timeout=5) + await pending

    assert asyncio.run(second()) == 82


def test_cancelling_the_awaiting_task_cancels_the_future() -> None:
    pending: APIFuture[int] = APIFuture("req-8")

    async def main() -> None:
        task = asyncio.create_task(pending.coroutine())
        await asyncio.sleep(0)  # let the task start waiting (a scheduling point, not a delay)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert pending.cancelled()


def test_client_creation_futures_await_to_their_clients(
    service: ServiceClient, trainer: TrainingClient
) -> None:
    async def main() -> tuple[
        BackcompatTrainingClientFuture,
        TrainingClient,
        TrainingClient,
        BackcompatSamplingClientFuture,
        SamplingClient,
    ]:
        # Both requests are under way before either is awaited (the official async spelling).
        creating = service.create_lora_training_client(BASE_MODEL, rank=2)
        saving = trainer.save_weights_and_get_sampling_client()
        new_trainer, sampler = await asyncio.gather(creating, saving)
        return creating, new_trainer, await creating.result_async(), saving, sampler

    creating, new_trainer, again, saving, sampler = asyncio.run(main())
    assert type(new_trainer) is TrainingClient
    assert again is new_trainer
    assert creating.future().result(timeout=0) is new_trainer
    assert type(sampler) is SamplingClient
    assert saving.result(timeout=0) is sampler
    assert sampler.sample(PROMPT, 1, GREEDY).result(timeout=60).sequences


def test_awaiting_starts_no_thread_and_no_executor() -> None:
    done = APIFuture.completed(3)
    before = set(threading.enumerate())

    async def main() -> int:
        return await done + await done.result_async(timeout=1) + await done.coroutine()

    assert asyncio.run(main()) == 9
    assert set(threading.enumerate()) - before == set()


def test_awaiting_real_calls_uses_no_asyncio_executor(sampler: SamplingClient) -> None:
    async def main() -> types.SampleResponse:
        return await sampler.sample(PROMPT, 1, GREEDY)

    asyncio.run(main())
    assert not [t.name for t in threading.enumerate() if t.name.startswith("asyncio")]


# ---------------------------------------------------------------------------------------------
# the *_async twins


def test_async_twins_give_the_sync_results(
    service: ServiceClient, trainer: TrainingClient, sampler: SamplingClient
) -> None:
    expected_sample = sampler.sample(PROMPT, 1, GREEDY).result(timeout=60)
    expected_forward = trainer.forward(DATA, "cross_entropy").result(timeout=60)
    rest = RestClient(service)
    expected_run = rest.get_training_run(trainer.model_id).result(timeout=60)

    async def main() -> tuple[
        types.SampleResponse,
        list[float | None],
        APIFuture[types.ForwardBackwardOutput],
        types.ForwardBackwardOutput,
        types.GetInfoResponse,
        types.TrainingRun,
        types.GetServerCapabilitiesResponse,
    ]:
        sample = await sampler.sample_async(PROMPT, 1, GREEDY)
        logprobs = await sampler.compute_logprobs_async(PROMPT)
        # Training twins return the future (as officially): await it a second time.
        forward_future = await trainer.forward_async(DATA, "cross_entropy")
        forward = await forward_future
        info = await trainer.get_info_async()
        run = await rest.get_training_run_async(trainer.model_id)
        capabilities = await service.get_server_capabilities_async()
        return sample, logprobs, forward_future, forward, info, run, capabilities

    with pytest.warns(FutureWarning, match=r"_async\(\) is deprecated") as caught:
        sample, logprobs, forward_future, forward, info, run, capabilities = asyncio.run(main())
    twins = {str(w.message).split("(", 1)[0] for w in caught if "_async()" in str(w.message)}
    assert twins == {
        "SamplingClient.sample_async",
        "SamplingClient.compute_logprobs_async",
        "TrainingClient.forward_async",
        "TrainingClient.get_info_async",
        "RestClient.get_training_run_async",
        "ServiceClient.get_server_capabilities_async",
    }
    # The twins' warnings point at the caller's line, as the official ones do.
    assert all(w.filename == __file__ for w in caught if "_async()" in str(w.message))
    assert isinstance(sample, types.SampleResponse)
    assert _tokens(sample) == _tokens(expected_sample)
    assert logprobs == sampler.compute_logprobs(PROMPT).result(timeout=60)
    assert isinstance(forward_future, APIFuture)
    assert isinstance(forward, types.ForwardBackwardOutput)
    assert _logprobs(forward) == _logprobs(expected_forward)
    assert info == trainer.get_info()
    assert isinstance(run, types.TrainingRun)
    assert run.training_run_id == expected_run.training_run_id == trainer.model_id
    assert isinstance(capabilities, types.GetServerCapabilitiesResponse)
    assert BASE_MODEL in {m.model_name for m in capabilities.supported_models}


def test_async_twins_create_clients(service: ServiceClient) -> None:
    async def main() -> tuple[TrainingClient, SamplingClient]:
        trainer = await service.create_lora_training_client_async(BASE_MODEL, rank=2)
        sampler = await trainer.save_weights_and_get_sampling_client_async()
        return trainer, sampler

    with pytest.warns(FutureWarning):
        trainer, sampler = asyncio.run(main())
    assert isinstance(trainer, TrainingClient)
    assert isinstance(sampler, SamplingClient)
    assert sampler.sample(PROMPT, 1, GREEDY).result(timeout=60).sequences


def test_async_twins_take_the_sync_signatures() -> None:
    for cls, name in [
        (TrainingClient, "forward_backward"),
        (SamplingClient, "sample"),
        (ServiceClient, "create_lora_training_client"),
        (RestClient, "list_training_runs"),
    ]:
        twin = getattr(cls, f"{name}_async")
        assert inspect.iscoroutinefunction(twin)
        assert inspect.signature(twin) == inspect.signature(getattr(cls, name))
        assert twin.__qualname__ == f"{cls.__name__}.{name}_async"
        assert "deprecated" in twin.__deprecated__


def test_async_twin_errors_surface_at_await(sampler: SamplingClient) -> None:
    async def main() -> None:
        await sampler.sample_async(PROMPT, 0, GREEDY)

    with pytest.warns(FutureWarning), pytest.raises(ValueError, match="num_samples"):
        asyncio.run(main())


# ---------------------------------------------------------------------------------------------
# no asyncio in sync use


def test_plain_sync_use_never_imports_asyncio() -> None:
    code = f"""
import sys
import tinker_lite as tinker
from tinker_lite import types
with tinker.ServiceClient(base_url="local://", telemetry=False) as service:
    trainer = service.create_lora_training_client({BASE_MODEL!r}, rank=2)
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={{"target_tokens": [2, 3, 4]}},
    )
    trainer.forward_backward([datum], "cross_entropy")
    trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    sampler = trainer.save_weights_and_get_sampling_client()
    prompt = types.ModelInput.from_ints([1, 2])
    sampler.sample(prompt, 1, types.SamplingParams(max_tokens=2)).result()
    tinker.RestClient(service).list_training_runs().result()
print("asyncio" in sys.modules)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
