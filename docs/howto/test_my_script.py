"""Tests of a training script of your own, without the hosted service: copy this file beside
your script as ``test_my_script.py`` and run ``pytest test_my_script.py``.

It needs ``pytest``, and ``responses`` and ``requests-mock`` for the tests that use them
(``pip install pytest responses requests-mock``). ``fine_tune`` stands for your own code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import requests
import requests_mock
import responses

import tinker_lite as tinker
from tinker_lite import types
from tinker_lite.local import LocalServer

BASE_MODEL = "tinker-lite/tiny-64"


def fine_tune(base_url: str, prompt: str, answer: str, steps: int) -> tuple[list[float], str]:
    """The code under test: train on ``prompt + answer``; return the losses per token and
    what the trained weights answer to ``prompt``."""
    with tinker.ServiceClient(base_url=base_url) as service:
        training = service.create_lora_training_client(BASE_MODEL, rank=8).result()
        tokenizer = training.get_tokenizer()
        tokens = tokenizer.encode(prompt + answer)
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(tokens[:-1]),
            loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
        )
        losses = []
        for _ in range(steps):
            fwd_bwd = training.forward_backward([datum], "cross_entropy")
            optim = training.optim_step(types.AdamParams(learning_rate=1e-2))
            losses.append(fwd_bwd.result().metrics["loss:sum"] / (len(tokens) - 1))
            optim.result()
        sampler = training.save_weights_and_get_sampling_client().result()
        params = types.SamplingParams(max_tokens=8, temperature=0.0, stop=["\n"])
        model_input = types.ModelInput.from_ints(tokenizer.encode(prompt))
        sampled = sampler.sample(model_input, 1, params).result().sequences[0].tokens
        return losses, tokenizer.decode(sampled)


@pytest.fixture(scope="session")
def tinker_url() -> Iterator[str]:
    """An offline Tinker server for the whole test session, on a free loopback port.

    It trains and samples for real with a tiny model; its data is removed at the end.
    """
    with LocalServer() as url:
        yield url


@pytest.fixture(autouse=True)
def no_hosted_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches the hosted service by accident, nor sends telemetry."""
    for name in ("TINKER_API_KEY", "TINKER_BASE_URL", "TINKER_LITE_JOURNAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")  # a proxy never sees loopback


def test_fine_tune_learns(tinker_url: str) -> None:
    losses, answer = fine_tune(tinker_url, "User: hi\nAssistant:", " hello\n", steps=10)
    assert losses[-1] < losses[0] / 2
    assert answer == " hello\n"  # learnt, and stopped at the stop string


def test_responses_sees_every_request(tinker_url: str) -> None:
    # Pass-through rules: the requests still reach the server; `responses` records them.
    with responses.RequestsMock(assert_all_requests_are_fired=False) as recorder:
        for method in ("GET", "POST", "PUT", "DELETE"):
            recorder.add(responses.PassthroughResponse(method, re.compile(re.escape(tinker_url))))
        fine_tune(tinker_url, "User: hi\nAssistant:", " hello\n", steps=1)
        paths = {call.request.path_url.split("?")[0] for call in recorder.calls}
    for path in ("/api/v1/forward_backward", "/api/v1/optim_step", "/api/v1/asample"):
        assert path in paths


def test_requests_mock_answers_rest_calls() -> None:
    # A RestClient call is one request and one answer: easy to stub without any server.
    base = "http://tinker.test"
    runs = {"training_runs": [], "cursor": {"offset": 0, "limit": 20, "total_count": 0}}
    with requests_mock.Mocker() as mocked:
        mocked.post(f"{base}/api/v1/client/config", status_code=404)  # built-in defaults
        listing = mocked.get(f"{base}/api/v1/training_runs", json=runs)
        with tinker.RestClient(base_url=base, api_key="tml-test-key") as rest:
            assert rest.list_training_runs().result(timeout=30).training_runs == []
    assert listing.call_count == 1
    assert listing.last_request.headers["X-API-Key"] == "tml-test-key"


def test_your_own_session_carries_the_traffic(tinker_url: str) -> None:
    # requests_session=: your headers, hooks, adapters, certificates and proxies apply.
    session = requests.Session()
    session.headers["X-Team"] = "research"
    sent: list[requests.PreparedRequest] = []
    session.hooks["response"].append(lambda r, **kwargs: sent.append(r.request))
    with tinker.RestClient(base_url=tinker_url, requests_session=session) as rest:
        rest.list_training_runs().result()
    assert sent
    assert all(r.headers["X-Team"] == "research" for r in sent)
    assert session.get(tinker_url + "/api/v1/healthz", timeout=10).ok  # still yours, still open
