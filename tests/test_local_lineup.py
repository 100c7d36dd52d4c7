"""The local server serves today's model lineup (SERVER.md §6) and refuses other names in full."""

from __future__ import annotations

import pytest

from tinker_lite import BadRequestError, ServiceClient
from tinker_lite._errors import service_message
from tinker_lite.local import LocalServer
from tinker_lite.rest_client import RestClient

# SERVER.md §6 "Today's lineup": the names real code is written against today.
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
# SERVER.md §6: the lineup of 2025-12-26, still served.
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
def service() -> ServiceClient:
    with (
        LocalServer(stub_model=True) as base_url,
        ServiceClient(base_url=base_url, telemetry=False) as client,
    ):
        yield client


def test_every_lineup_name_is_listed_and_accepted(service: ServiceClient) -> None:
    capabilities = RestClient(service).get_server_capabilities().result(timeout=60)
    listed = [m.model_name for m in capabilities.supported_models]
    assert set(TODAYS_LINEUP + EARLIER_LINEUP) <= set(listed)
    for name in TODAYS_LINEUP + ("meta-llama/Llama-3.1-8B",):
        training = service.create_lora_training_client(base_model=name, rank=4)
        assert training.get_info().model_data.model_name == name
        sampling = service.create_sampling_client(base_model=name)
        assert sampling.base_model == name


def test_an_unknown_name_is_refused_with_the_whole_message(service: ServiceClient) -> None:
    with pytest.raises(BadRequestError) as info:
        service.create_lora_training_client(base_model="qwen/qwen3.5-9b-base", rank=4)
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
        training = client.create_lora_training_client(base_model="acme/custom-7b", rank=4)
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
