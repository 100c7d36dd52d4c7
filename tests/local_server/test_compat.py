"""What code written today for the service finds on the local server.

Today's model lineup (docs/service.rst §6), every loss function of 0.38's ``LossFnType``
(docs/service.rst §1) run or refused with its reason, and service messages that reach the caller
whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tinker_lite import BadRequestError, InvalidInputError, ServiceClient, TinkerError, types
from tinker_lite._errors import service_message
from tinker_lite.local import LocalServer
from tinker_lite.rest_client import RestClient

# docs/service.rst §6 "Today's lineup": the names real code is written against today.
TODAYS_LINEUP = (
    "Qwen/Qwen3.5-4B",
    "Qwen/Qwen3.5-9B",
    "Qwen/Qwen3.5-9B-Base",
    "Qwen/Qwen3.5-27B",
    "Qwen/Qwen3.5-35B-A3B",
    "Qwen/Qwen3.5-35B-A3B-Base",
    "Qwen/Qwen3.5-397B-A17B",
    "Qwen/Qwen3.6-27B",
    "Qwen/Qwen3.6-35B-A3B",
    "Qwen/Qwen3.8-27B",
    "moonshotai/Kimi-K2.5",
    "moonshotai/Kimi-K2.6",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
    "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16",
)
# docs/service.rst §6: the lineup of 2025-12-26, still served.
EARLIER_LINEUP = (
    "deepseek-ai/DeepSeek-V3.1",
    "deepseek-ai/DeepSeek-V3.1-Base",
    "moonshotai/Kimi-K2-Thinking",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.2-3B",
    "meta-llama/Llama-3.3-70B-Instruct",
    "Qwen/Qwen3-235B-A22B-Instruct-2507",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-30B-A3B-Base",
    "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-4B-Instruct-2507",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-8B-Base",
    "Qwen/Qwen3-VL-235B-A22B-Instruct",
    "Qwen/Qwen3-VL-30B-A3B-Instruct",
    "openai/gpt-oss-120b",
    "openai/gpt-oss-20b",
)


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceClient]:
    with (
        LocalServer(stub_model=True) as base_url,
        ServiceClient(base_url=base_url, telemetry=False) as client,
    ):
        yield client


def test_every_lineup_name_is_listed_and_accepted(service: ServiceClient) -> None:
    capabilities = RestClient(service).get_server_capabilities().result(timeout=60)
    listed = [m.model_name for m in capabilities.supported_models]
    assert set(TODAYS_LINEUP + EARLIER_LINEUP) <= set(listed)
    for name in (*TODAYS_LINEUP, "meta-llama/Llama-3.1-8B"):
        training = service.create_lora_training_client(base_model=name, rank=4).result()
        assert training.get_info().model_data.model_name == name
        sampling = service.create_sampling_client(base_model=name).result()
        assert sampling.base_model == name


def test_an_unknown_name_is_refused_with_the_whole_message(service: ServiceClient) -> None:
    with pytest.raises(BadRequestError) as info:
        service.create_lora_training_client(base_model="qwen/qwen3.5-9b-base", rank=4).result()
    message = str(info.value)
    assert "'qwen/qwen3.5-9b-base'" in message
    assert "case-sensitive" in message
    # the list is whole (its last name included) and so is the hint on how to register a name
    assert "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16" in message
    assert "tinker-lite/tiny-64" in message
    for way in ("--model", "models=", "TINKER_LITE_LOCAL_MODELS"):
        assert way in message
    assert "more characters" not in message


def test_registered_names_are_served() -> None:
    with (
        LocalServer(stub_model=True, models=["acme/custom-7b"]) as base_url,
        ServiceClient(base_url=base_url, telemetry=False) as client,
    ):
        training = client.create_lora_training_client(base_model="acme/custom-7b", rank=4).result()
        assert training.get_info().model_data.model_name == "acme/custom-7b"


def test_a_message_too_long_is_cut_at_a_separator_saying_what_is_left_out() -> None:
    names = ", ".join(f"org/model-{i}" for i in range(600))
    message = service_message({"detail": f"Unknown base_model 'x'. Supported models: {names}."})
    assert message is not None
    head, _, tail = message.rpartition(" ... (")
    assert head.endswith(",")  # cut after a whole name, never inside one
    left_out = int(tail.removesuffix(" more characters)"))
    assert len(head) + left_out == len(f"Unknown base_model 'x'. Supported models: {names}.")
    # a message of today's length is kept whole
    short = f"Supported models: {names[:2500].strip()}"
    assert service_message({"detail": short}) == short


def rl_datum(tokens: list[int], advantage: float) -> types.Datum:
    n = len(tokens) - 1
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": tokens[1:],
            "logprobs": [-5.0] * n,
            "advantages": [0.0] * 2 + [advantage] * (n - 2),
        },
    )


def test_gspo_trains_and_stable_reinforce_is_refused_with_its_reason() -> None:
    with ServiceClient(base_url="local://", telemetry=False) as client:
        training = client.create_lora_training_client(
            base_model="Qwen/Qwen3.5-9B-Base", rank=4
        ).result()
        data = [rl_datum(list(b"hello there"), 1.0), rl_datum(list(b"general kenobi"), -0.5)]
        out = training.forward_backward(data, "gspo").result(timeout=60)
        assert out.loss_fn_output_type == "GSPOLossReturn"
        elementwise = [o["elementwise_loss"].to_numpy() for o in out.loss_fn_outputs]
        assert out.metrics["loss:sum"] == pytest.approx(sum(float(e.sum()) for e in elementwise))
        assert all(float(e[0]) == 0.0 for e in elementwise)  # prompt positions: no loss
        training.optim_step(types.AdamParams(learning_rate=1e-2)).result(timeout=60)
        with pytest.raises(TinkerError) as info:
            training.forward_backward(data, "stable_reinforce").result(timeout=60)
        message = str(info.value)
        assert "'stable_reinforce'" in message
        assert "not published" in message
        assert "known loss functions" not in message


def test_a_prompt_past_the_context_window_is_a_bad_request(service: ServiceClient) -> None:
    # docs/service.rst §5: refused at submit with HTTP 400, so code catching BadRequestError
    # for a prompt that is too long (e.g. to compact a conversation) sees it as on the service.
    sampler = service.create_sampling_client(base_model="Qwen/Qwen3.5-4B").result()
    prompt = types.ModelInput.from_ints([1] * 500)
    with pytest.raises(BadRequestError) as info:
        sampler.sample(prompt, 1, types.SamplingParams(max_tokens=20)).result(timeout=60)
    assert info.value.status_code == 400
    assert "context window: 500 prompt tokens + 20 max_tokens > 512." in str(info.value)
    # Within the window it samples.
    sampler.sample(prompt, 1, types.SamplingParams(max_tokens=12)).result(timeout=60)


def test_an_empty_text_chunk_samples_and_is_refused_in_a_datum(service: ServiceClient) -> None:
    # As in 0.38: the chunk is built and a prompt with one is sent; a training datum with one is
    # refused before sending (the service fails it, docs/service.rst §2).
    prompt = types.ModelInput(
        chunks=[types.EncodedTextChunk(tokens=[5, 6]), types.EncodedTextChunk(tokens=[])]
    )
    sampler = service.create_sampling_client(base_model="Qwen/Qwen3.5-4B").result()
    result = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=3)).result(timeout=60)
    assert len(result.sequences[0].tokens) <= 3
    trainer = service.create_lora_training_client("Qwen/Qwen3.5-4B", rank=4).result()
    datum = types.Datum(model_input=prompt, loss_fn_inputs={"target_tokens": [6, 7]})
    with pytest.raises(InvalidInputError) as info:
        trainer.forward_backward([datum], "cross_entropy")
    assert info.value.field == "data[0].model_input.chunks[1].tokens"


def test_a_longer_context_is_the_same_model_with_its_checkpoints(tmp_path: Path) -> None:
    # serve --context-length: the same tiny model with a longer position table, so what was
    # saved under one context length samples the same under another.
    prompt = types.ModelInput.from_ints([5, 6, 7, 8, 9])
    model = "Qwen/Qwen3.5-4B"
    with LocalServer(data_dir=tmp_path) as url, ServiceClient(base_url=url, telemetry=False) as sc:
        trainer = sc.create_lora_training_client(model, rank=4).result()
        datum = types.Datum(
            model_input=types.ModelInput.from_ints([5, 6, 7, 8]),
            loss_fn_inputs={"target_tokens": [6, 7, 8, 9]},
        )
        trainer.forward_backward([datum], "cross_entropy").result(timeout=60)
        trainer.optim_step(types.AdamParams(learning_rate=0.1)).result(timeout=60)
        path = trainer.save_weights_for_sampler("short").result(timeout=60).path
        trained = sc.create_sampling_client(model_path=path).result()
        before = trained.compute_logprobs(prompt).result(timeout=60)
        base_before = sc.create_sampling_client(base_model=model).result()
        base = base_before.compute_logprobs(prompt).result(timeout=60)
    server = LocalServer(data_dir=tmp_path, context_length=1024)
    with server as url, ServiceClient(base_url=url, telemetry=False) as sc:
        capabilities = RestClient(sc).get_server_capabilities().result(timeout=60)
        assert {m.max_context_length for m in capabilities.supported_models} == {1024}
        sampler = sc.create_sampling_client(model_path=path).result()
        assert sampler.compute_logprobs(prompt).result(timeout=60) == before
        base_sampler = sc.create_sampling_client(base_model=model).result()
        assert base_sampler.compute_logprobs(prompt).result(timeout=60) == base
        long = types.ModelInput.from_ints([5] * 600)
        result = sampler.sample(long, 1, types.SamplingParams(max_tokens=20)).result(timeout=60)
        assert len(result.sequences[0].tokens) <= 20
        with pytest.raises(BadRequestError, match="1000 prompt tokens \\+ 30 max_tokens > 1024"):
            sampler.sample(
                types.ModelInput.from_ints([5] * 1000), 1, types.SamplingParams(max_tokens=30)
            ).result(timeout=60)
    with pytest.raises(ValueError, match="context_length"):
        LocalServer(context_length=8)
