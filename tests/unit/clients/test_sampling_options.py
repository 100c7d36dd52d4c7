"""SamplingClient.sample's further options: sent as 0.38 sends them; the local server accepts them.

0.38 sends ``topk_sample_logprobs``, ``prompt_alt_tokens_k`` and ``record_stability_info`` on
every asample (defaults included, docs/protocol.rst §3.1); ``target_prompt_logprobs`` and
``prompt_logprobs_last_n`` only when set.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clients import API_KEY, FakeTinker
from tests.support.golden import GOLDEN_038_DIR, assert_body_matches, load_golden
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import InvalidInputError, SamplingClient, ServiceClient, types
from tinker_lite.local import LocalServer

OPTIONS = (
    "topk_sample_logprobs",
    "target_prompt_logprobs",
    "prompt_alt_tokens_k",
    "prompt_logprobs_last_n",
    "record_stability_info",
)
PROMPT = [151644, 872, 198, 9707, 11, 1879, 0]
# 0.38 sends these on every asample, defaults included.
DEFAULTS_038 = {"topk_sample_logprobs": 0, "prompt_alt_tokens_k": 0, "record_stability_info": False}
TARGETS = types.TensorData(data=[5, -1, 6, 7, -1, 8], dtype="int64", shape=[3, 2])

needs_golden = pytest.mark.skipif(
    not GOLDEN_038_DIR.is_dir(), reason="golden-0.38 fixtures not found"
)


@pytest.fixture
def fake(server: ScriptedServer) -> FakeTinker:
    return FakeTinker(server)


@pytest.fixture
def sampler(fake: FakeTinker) -> Iterator[SamplingClient]:
    with ServiceClient(
        base_url=fake.server.url, api_key=API_KEY, telemetry=False, wire="json"
    ) as client:
        yield client.create_sampling_client(base_model="Qwen/Qwen3-8B").result()


def _last_body(fake: FakeTinker) -> dict[str, Any]:
    body: dict[str, Any] = fake.submits("asample")[-1].json()
    return body


def test_defaults_send_the_038_defaults_only(fake: FakeTinker, sampler: SamplingClient) -> None:
    prompt = types.ModelInput.from_ints(PROMPT)
    sampler.sample(prompt, 1, types.SamplingParams(max_tokens=2)).result(timeout=30)
    sampler.sample(
        prompt,
        1,
        types.SamplingParams(max_tokens=2),
        topk_sample_logprobs=0,
        target_prompt_logprobs=None,
        prompt_alt_tokens_k=0,
        prompt_logprobs_last_n=None,
    ).result(timeout=30)
    bodies = [request.json() for request in fake.submits("asample")]
    assert len(bodies) == 2
    for body in bodies:
        assert {key: body[key] for key in set(OPTIONS) & set(body)} == DEFAULTS_038


@needs_golden
@pytest.mark.parametrize(
    ("name", "call"),
    [
        (
            "sample_topk_sample_logprobs",
            (PROMPT, (2, types.SamplingParams(max_tokens=3)), {"topk_sample_logprobs": 3}),
        ),
        (
            "sample_prompt_logprobs_last_n",
            (
                PROMPT,
                (1, types.SamplingParams(max_tokens=1), True, 2),
                {"prompt_logprobs_last_n": 3},
            ),
        ),
        (
            "sample_target_prompt_logprobs",
            (
                [1, 2, 3, 4],
                (1, types.SamplingParams(max_tokens=1)),
                {"target_prompt_logprobs": TARGETS, "prompt_alt_tokens_k": 2},
            ),
        ),
    ],
)
def test_set_options_are_sent_like_the_official_sdk(
    fake: FakeTinker,
    sampler: SamplingClient,
    name: str,
    call: tuple[list[int], tuple[Any, ...], dict[str, Any]],
) -> None:
    prompt, args, kwargs = call
    sampler.sample(types.ModelInput.from_ints(prompt), *args, **kwargs).result(timeout=30)
    ours = _last_body(fake)
    for key, value in kwargs.items():
        assert key in ours, key
        assert ours[key] == (_tensor_json(value) if key == "target_prompt_logprobs" else value)
    unset = set(OPTIONS) - set(kwargs) - set(DEFAULTS_038)
    assert not unset & set(ours), "target_prompt_logprobs / prompt_logprobs_last_n: only when set"
    for key, value in DEFAULTS_038.items():
        assert ours[key] == kwargs.get(key, value), key

    fixture = load_golden(name, version="0.38")
    ours["seq_id"] = fixture["body"]["seq_id"]  # order-dependent: this test sends fewer samples
    assert_body_matches(fixture, ours)


def _tensor_json(tensor: types.TensorData) -> dict[str, Any]:
    return {"data": tensor.data, "dtype": tensor.dtype, "shape": tensor.shape}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"topk_sample_logprobs": -1}, "topk_sample_logprobs"),
        ({"prompt_alt_tokens_k": -2}, "prompt_alt_tokens_k"),
        ({"prompt_logprobs_last_n": 0}, "prompt_logprobs_last_n"),
        ({"target_prompt_logprobs": [[5, 6]]}, "target_prompt_logprobs"),
    ],
)
def test_bad_options_are_refused_before_sending(
    fake: FakeTinker, sampler: SamplingClient, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInputError) as info:
        sampler.sample(
            types.ModelInput.from_ints(PROMPT), 1, types.SamplingParams(max_tokens=1), **kwargs
        )
    assert info.value.field == field
    assert fake.submits("asample") == []


def test_local_server_accepts_and_ignores_the_options(clean_env: None) -> None:
    local = LocalServer()
    with local as url, ServiceClient(base_url=url, telemetry=False) as client:
        sampler = client.create_sampling_client(base_model="tinker-lite/tiny-64").result()
        response = sampler.sample(
            types.ModelInput.from_ints([1, 2, 3, 4]),
            2,
            types.SamplingParams(max_tokens=3, seed=0),
            True,
            0,
            topk_sample_logprobs=3,
            target_prompt_logprobs=TARGETS,
            prompt_alt_tokens_k=2,
            prompt_logprobs_last_n=2,
        ).result(timeout=60)
        assert len(response.sequences) == 2
        assert all(len(seq.tokens) <= 3 for seq in response.sequences)
        assert response.prompt_logprobs is not None
        assert local.stats()["samples_completed"] == 1
