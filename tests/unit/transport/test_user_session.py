"""The usual tools for code built on requests see tinker_lite's traffic; a caller's own session
carries it.

``responses`` records a training step and a sample sent by the real client to
``python -m tinker_lite.local serve`` (in a process of its own); ``requests-mock`` answers a
RestClient's calls; a ``requests.Session`` given as ``requests_session=`` carries every request
through the adapter the test mounted on it, with its headers, and is left open by ``close()``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import requests.adapters
import requests_mock
import responses

import tinker_lite as tinker
from tests.support.served import served
from tinker_lite import types

BASE_MODEL = "tinker-lite/tiny-64"


@pytest.fixture(scope="module")
def served_url() -> Iterator[str]:
    """``python -m tinker_lite.local serve`` in its own process; yields its base URL."""
    with served("--stub-model") as url:
        yield url


@pytest.fixture(autouse=True)
def _no_tinker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("TINKER_BASE_URL", raising=False)


def _datum() -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3, 4, 5, 6, 7, 8]),
        loss_fn_inputs={"target_tokens": [2, 3, 4, 5, 6, 7, 8, 9], "weights": [1.0] * 8},
    )


def _train_and_sample(service: tinker.ServiceClient) -> None:
    """One training step (forward_backward + optim_step), then one sample of the result."""
    trainer = service.create_lora_training_client(BASE_MODEL, rank=4).result()
    fb = trainer.forward_backward([_datum()], "cross_entropy")
    optim = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
    assert fb.result(timeout=60).loss_fn_outputs
    optim.result(timeout=60)
    sampler = trainer.save_weights_and_get_sampling_client().result()
    result = sampler.sample(
        prompt=types.ModelInput.from_ints([1, 2, 3]),
        num_samples=1,
        sampling_params=types.SamplingParams(max_tokens=2),
    ).result(timeout=60)
    assert len(result.sequences[0].tokens) == 2


def test_responses_records_a_training_step_and_a_sample(served_url: str) -> None:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as recorder:
        for method in ("GET", "POST", "PUT", "DELETE"):
            recorder.add(responses.PassthroughResponse(method, re.compile(re.escape(served_url))))
        with tinker.ServiceClient(base_url=served_url, telemetry=False) as service:
            _train_and_sample(service)
        seen = [(call.request.method, call.request.path_url) for call in recorder.calls]
    paths = {path.split("?")[0] for _, path in seen}
    for path in (
        "/api/v1/create_session",
        "/api/v1/create_model",
        "/api/v1/forward_backward",
        "/api/v1/optim_step",
        "/api/v1/asample",
        "/api/v1/retrieve_future",
    ):
        assert path in paths, (path, sorted(paths))
    # Every call went through requests: each answered call has its requests.Response.
    assert all(isinstance(call.response, requests.Response) for call in recorder.calls)


def test_requests_mock_answers_a_rest_client(monkeypatch: pytest.MonkeyPatch) -> None:
    base = "http://tinker.test"
    runs = {
        "training_runs": [],
        "cursor": {"offset": 0, "limit": 20, "total_count": 0},
    }
    with requests_mock.Mocker() as mocked:
        mocked.post(f"{base}/api/v1/client/config", status_code=404, json={"detail": "none"})
        listing = mocked.get(f"{base}/api/v1/training_runs", json=runs)
        with tinker.RestClient(base_url=base, api_key="tml-mocked-key", telemetry=False) as rest:
            page = rest.list_training_runs().result(timeout=30)
    assert page.training_runs == []
    assert listing.call_count == 1
    (request,) = listing.request_history
    assert request.headers["X-API-Key"] == "tml-mocked-key"
    assert request.qs["limit"] == ["20"]


class CountingAdapter(requests.adapters.HTTPAdapter):
    """A caller's adapter: counts what it sends and stamps a header of its own."""

    def __init__(self) -> None:
        super().__init__(pool_maxsize=32)
        self.lock = threading.Lock()
        self.paths: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.paths.append(request.path_url)
        request.headers["X-Corporate-Gateway"] = "passed"
        return super().send(request, *args, **kwargs)


def test_a_callers_session_and_its_mounted_adapter_carry_the_traffic(served_url: str) -> None:
    adapter = CountingAdapter()
    session = requests.Session()
    session.mount("http://", adapter)
    session.headers["X-Team"] = "research"
    recorded: list[requests.PreparedRequest] = []
    session.hooks["response"].append(lambda r, **kwargs: recorded.append(r.request))
    with tinker.ServiceClient(
        base_url=served_url, telemetry=False, requests_session=session
    ) as service:
        _train_and_sample(service)
    for path in ("/api/v1/forward_backward", "/api/v1/optim_step", "/api/v1/asample"):
        assert path in adapter.paths
    assert len(recorded) == len(adapter.paths)
    assert all(r.headers["X-Team"] == "research" for r in recorded)
    assert all(r.headers["X-Corporate-Gateway"] == "passed" for r in recorded)
    assert all(r.headers["User-Agent"].startswith("tinker_lite/") for r in recorded)
    # The session is the caller's: still open and usable after the client closed.
    assert session.get(served_url.rstrip("/") + "/api/v1/healthz", timeout=10).ok


def test_a_requests_session_of_the_wrong_type_is_named() -> None:
    with pytest.raises(tinker.InvalidInputError) as info:
        tinker.ServiceClient(
            base_url="http://127.0.0.1:9",
            requests_session=object(),  # type: ignore[arg-type]
        )
    assert info.value.field == "requests_session"
