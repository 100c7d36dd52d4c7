"""Habits of code written for the official SDK 0.38, end to end against the local server.

Each test is a pattern such code uses that 0.38 accepts: unknown constructor keywords (ignored
with the official ``FutureWarning``), ``repr`` of a client whose constructor raised, the
holder's ``get_session_id()`` / ``get_training_client_id()`` / ``close()``, a custom loss whose
function has side effects (called once per call), and catching a refusal before sending as the
service's ``BadRequestError``.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pickle
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

import tinker_lite
from tinker_lite import (
    BadRequestError,
    ClientClosedError,
    InvalidInputError,
    RestClient,
    ServiceClient,
    types,
)
from tinker_lite.local import LocalServer
from tinker_lite.tokenizer import (
    TOKENIZER_DIR_ENV,
    TokenizerUnavailableError,
    clear_tokenizer_cache,
)

BASE_MODEL = "tinker-lite/tiny-64"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    local = LocalServer()
    local.start()
    yield local
    local.stop()


def _datum(tokens: list[int]) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


# -- 1. constructors: unknown keywords, repr of a half-built client ------------------------------


def test_unknown_service_client_keywords_warn_and_the_client_works(server: LocalServer) -> None:
    with pytest.warns(FutureWarning) as caught:
        service = ServiceClient(base_url=server.base_url, timeout=120, max_retries=3)
    # max_retries is tinker_lite's own option (HTTP retries): only timeout is unknown.
    assert [str(w.message) for w in caught] == [
        "ServiceClient ignores unsupported arguments: timeout. Passing them will be an error "
        "in a future version of the Tinker SDK."
    ]
    with service:
        assert service.holder.settings.max_retries == 3
        sampler = service.create_sampling_client(base_model=BASE_MODEL).result()
        prompt = types.ModelInput.from_ints([1, 2, 3])
        params = types.SamplingParams(max_tokens=2, seed=7)
        sampled = sampler.sample(prompt, 1, params).result(timeout=60)
        assert 1 <= len(sampled.sequences[0].tokens) <= 2  # an end-of-text token may stop it


def _half_built(error: BaseException, cls: type) -> Any:
    """The ``self`` of ``cls.__init__`` in the traceback of ``error`` (the half-built object)."""
    tb = error.__traceback__
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if type(candidate) is cls:
            return candidate
        tb = tb.tb_next
    raise AssertionError(f"no {cls.__name__} in the traceback")


def test_repr_of_a_client_whose_constructor_raised(server: LocalServer) -> None:
    with pytest.raises(InvalidInputError) as info:
        ServiceClient({"run": "a"}, {"not": "a project id"})  # type: ignore[arg-type]
    half = _half_built(info.value, ServiceClient)
    assert repr(half) == "<ServiceClient (incomplete)>"
    with pytest.raises(InvalidInputError) as info:
        RestClient("tml-not-a-holder", base_url=server.base_url)
    assert repr(_half_built(info.value, RestClient)) == "<RestClient (incomplete)>"
    # A built client keeps its informative repr.
    with ServiceClient(base_url=server.base_url) as service:
        assert repr(service).startswith(f"ServiceClient(base_url={server.base_url!r}")


def _hand_written_reprs() -> list[type[Any]]:
    """Every class of the client side whose ``__repr__`` is written in tinker_lite (not one
    that attrs or dataclasses generate). The value types (``types``, as pydantic's models in
    0.38) and the local server are not clients."""
    found: list[type[Any]] = []
    for info in pkgutil.walk_packages(tinker_lite.__path__, "tinker_lite."):
        if info.name.startswith(("tinker_lite.local", "tinker_lite.types")) or info.name.endswith(
            "__main__"
        ):
            continue
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if not (inspect.isclass(cls) and cls.__module__ == module.__name__):
                continue
            method = cls.__dict__.get("__repr__")
            code = getattr(inspect.unwrap(method), "__code__", None) if method else None
            if code is not None and code.co_filename.startswith(
                str(Path(tinker_lite.__file__).parent)
            ):
                found.append(cls)
    return found


def test_every_hand_written_repr_works_before_init_ran() -> None:
    classes = _hand_written_reprs()
    names = {cls.__name__ for cls in classes}
    assert {"ServiceClient", "TrainingClient", "SamplingClient", "APIFuture"} <= names
    extra: list[type[Any]] = [tinker_lite.RestClient, tinker_lite.AdminClient]
    for cls in classes + extra:
        text = repr(object.__new__(cls))
        assert text == f"<{cls.__qualname__} (incomplete)>", cls


# -- 2. the holder of 0.38 ------------------------------------------------------------------------


def test_holder_gives_the_session_id_and_training_client_numbers(server: LocalServer) -> None:
    with ServiceClient(base_url=server.base_url, telemetry=False) as service:
        session_id = service.holder.get_session_id()
        assert session_id == service.session_id
        # What public code does with it: read the session over REST.
        assert RestClient(service).get_session(session_id).result(timeout=30).training_run_ids == []
        assert service.holder.get_client_config() == service.holder.client_config
        taken = service.holder.get_training_client_id()
        training = service.create_lora_training_client(BASE_MODEL, rank=4).result()
        # The number taken by hand is skipped: the client got the next one.
        assert training.model_id.endswith(f":train:{taken + 1}")
        assert training.holder.get_session_id() == session_id
        sampler = training.save_weights_and_get_sampling_client().result(timeout=60)
        assert sampler.holder.get_session_id() == session_id
        run = RestClient(service).get_session(session_id).result(timeout=30)
        assert run.training_run_ids == [training.model_id]


def test_holder_runs_a_coroutine_of_awaited_calls_from_sync_code(server: LocalServer) -> None:
    with ServiceClient(base_url=server.base_url, telemetry=False) as service:
        sampler = service.create_sampling_client(base_model=BASE_MODEL).result()
        params = types.SamplingParams(max_tokens=2, seed=3)

        async def window() -> list[Any]:
            prompts = [types.ModelInput.from_ints([1, n]) for n in (2, 3, 4)]
            calls = [sampler.sample(prompt, 1, params) for prompt in prompts]
            return list(await asyncio.gather(*calls))

        done = sampler.holder.run_coroutine_threadsafe(window()).result(timeout=60)
        assert [len(response.sequences) for response in done] == [1, 1, 1]

        async def failing() -> None:
            raise KeyError("inside the coroutine")

        with pytest.raises(KeyError, match="inside the coroutine"):
            service.holder.run_coroutine_threadsafe(failing()).result(timeout=60)


def test_holder_close_ends_the_session(server: LocalServer) -> None:
    service = ServiceClient(base_url=server.base_url, telemetry=False)
    training = service.create_lora_training_client(BASE_MODEL, rank=4).result()
    service.holder.close()
    with pytest.raises(ClientClosedError):
        training.forward([_datum([1, 2, 3])], "cross_entropy").result(timeout=30)
    service.close()  # closing the client after its holder is harmless


def test_official_constructors_over_the_holder(server: LocalServer) -> None:
    """A model created by plain HTTP, numbered with the holder, gets its client as 0.38 allows."""
    with ServiceClient(base_url=server.base_url, telemetry=False) as service:
        model_seq_id = service.holder.get_training_client_id()
        created = requests.post(
            f"{server.base_url}/api/v1/create_model",
            json={
                "session_id": service.holder.get_session_id(),
                "model_seq_id": model_seq_id,
                "base_model": BASE_MODEL,
                "lora_config": {"rank": 4},
            },
            timeout=30,
        )
        assert created.status_code == 200, created.text
        model_id = created.json()["model_id"]
        answer: dict[str, Any] = {"type": "try_again"}
        while answer.get("type") == "try_again":
            answer = requests.post(
                f"{server.base_url}/api/v1/retrieve_future",
                json={"request_id": created.json()["request_id"]},
                timeout=30,
            ).json()
        training = tinker_lite.TrainingClient(
            service.holder, model_seq_id=model_seq_id, model_id=model_id
        )
        assert training.get_info().model_id == model_id
        out = training.forward_backward([_datum([1, 2, 3, 4])], "cross_entropy").result(60)
        assert out.metrics["loss:sum"] > 0
        training.optim_step(types.AdamParams(learning_rate=1e-3)).result(timeout=60)
        made = service.create_sampling_client(base_model=BASE_MODEL).result()
        sampler = tinker_lite.SamplingClient(
            service.holder, sampling_session_id=made.sampling_session_id, base_model=BASE_MODEL
        )
        prompt = types.ModelInput.from_ints([1, 2])
        params = types.SamplingParams(max_tokens=3, seed=7)
        sampled = sampler.sample(prompt, 1, params).result(60)
        assert 1 <= len(sampled.sequences[0].tokens) <= 3  # an end-of-text token may stop it
        session = RestClient(service.holder).get_session(service.holder.get_session_id())
        assert session.result(timeout=30).training_run_ids == [model_id]
    with pytest.raises(InvalidInputError, match="holder"):
        tinker_lite.TrainingClient(object(), model_seq_id=0, model_id=model_id)


# -- 3. a custom loss runs once per call -----------------------------------------------------------


@pytest.fixture
def training(server: LocalServer) -> Iterator[tinker_lite.TrainingClient]:
    with ServiceClient(base_url=server.base_url, telemetry=False) as service:
        yield service.create_lora_training_client(BASE_MODEL, rank=4, seed=1).result()


def test_without_torch_the_loss_gets_numpy_arrays_once(
    training: tinker_lite.TrainingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # as on a machine without torch
    calls: list[list[tuple[type, tuple[int, ...]]]] = []

    def loss_fn(
        data: list[types.Datum], logprobs: list[Any]
    ) -> tuple[float, list[Any], dict[str, float]]:
        calls.append([(type(lp), lp.shape) for lp in logprobs])
        return float(-sum(lp.sum() for lp in logprobs)), [-np.ones_like(lp) for lp in logprobs], {}

    data = [_datum([1, 2, 3, 4]), _datum([5, 6, 7])]
    for _ in range(2):
        training.forward_backward_custom(data, loss_fn).result(timeout=60)
    assert calls == [[(np.ndarray, (3,)), (np.ndarray, (2,))]] * 2


def test_without_torch_a_torch_style_loss_is_refused_after_one_call(
    training: tinker_lite.TrainingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    calls: list[int] = []

    def loss_fn(data: list[types.Datum], logprobs: list[Any]) -> tuple[Any, dict[str, float]]:
        calls.append(len(logprobs))
        return sum(lp.sum() for lp in logprobs), {}

    future = training.forward_backward_custom([_datum([1, 2, 3])], loss_fn)
    with pytest.raises(InvalidInputError, match="install torch"):
        future.result(timeout=60)
    assert calls == [1]


def test_with_torch_the_loss_gets_tensors_once_as_in_0_38(
    training: tinker_lite.TrainingClient,
) -> None:
    torch = pytest.importorskip("torch")
    seen: list[list[tuple[type, Any, bool | None]]] = []

    def loss_fn(data: list[types.Datum], logprobs: list[Any]) -> tuple[Any, dict[str, float]]:
        seen.append([(type(lp), lp.shape, getattr(lp, "requires_grad", None)) for lp in logprobs])
        loss = -sum(lp.sum() for lp in logprobs)
        return loss, {"calls": float(len(seen))}

    data = [_datum([1, 2, 3, 4]), _datum([5, 6, 7])]
    out = training.forward_backward_custom(data, loss_fn).result(timeout=60)
    assert seen == [[(torch.Tensor, (3,), True), (torch.Tensor, (2,), True)]]  # torch.Size
    assert out.metrics["calls"] == 1.0
    assert out.metrics["loss:sum"] > 0


def test_with_torch_the_explicit_gradient_form_still_works_once(
    training: tinker_lite.TrainingClient,
) -> None:
    torch = pytest.importorskip("torch")
    calls: list[int] = []

    def loss_fn(
        data: list[types.Datum], logprobs: list[Any]
    ) -> tuple[Any, list[Any], dict[str, float]]:
        calls.append(1)
        return -sum(lp.sum() for lp in logprobs), [-torch.ones_like(lp) for lp in logprobs], {}

    out = training.forward_backward_custom([_datum([1, 2, 3])], loss_fn).result(timeout=60)
    assert calls == [1]
    assert out.metrics["loss:sum"] > 0


# -- 4. refused before sending, caught as the service's answer ----------------------------------


def test_an_untyped_checkpoint_id_is_a_bad_request_400(server: LocalServer) -> None:
    with ServiceClient(base_url=server.base_url, telemetry=False) as service:
        rest = RestClient(service)
        before = server.stats()["requests"]
        with pytest.raises(BadRequestError) as info:
            rest.delete_checkpoint("some-run", "final").result(timeout=30)
        error = info.value
        assert server.stats()["requests"] == before  # refused before sending
    assert isinstance(error, InvalidInputError)
    assert isinstance(error, ValueError)
    assert error.status_code == 400
    assert error.field == "checkpoint_id"
    assert (error.body, error.request_id, error.headers) == (None, None, {})
    assert "weights/<name>" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is InvalidInputError
    assert (copy.status_code, copy.field, str(copy)) == (400, "checkpoint_id", str(error))
    assert repr(copy) == repr(error)


def test_invalid_request_content_is_caught_as_the_official_bad_request(
    training: tinker_lite.TrainingClient,
) -> None:
    """Code that catches ``tinker.BadRequestError`` and reads ``e.status_code`` sees it."""
    status: list[int] = []
    try:
        training.save_state("").result(timeout=30)
    except BadRequestError as e:
        status.append(e.status_code)
    assert status == [400]


# -- 5. the tokenizer of a served model, offline with nothing cached ------------------------------


def test_get_tokenizer_offline_says_where_to_put_the_files(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # No hub (the network is blocked beyond loopback), an empty cache, no tokenizer directory.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv(TOKENIZER_DIR_ENV, raising=False)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    clear_tokenizer_cache()
    with ServiceClient(base_url=server.base_url, telemetry=False) as service:
        sampler = service.create_sampling_client(base_model="Qwen/Qwen3-8B").result()
        with pytest.raises(TokenizerUnavailableError) as info:
            sampler.get_tokenizer()
    message = str(info.value)
    assert message.startswith("tokenizer 'Qwen/Qwen3-8B' is unavailable: ")
    assert "\n" not in message  # one line, whatever the hub library said
    assert "$TINKER_LITE_TOKENIZER_DIR/Qwen/Qwen3-8B/" in message
    assert "TINKER_LITE_TOKENIZER_DIR/; it is not set" in message
    assert "hf download Qwen/Qwen3-8B tokenizer.json tokenizer_config.json" in message
    # With the directory set, the files are found there and nothing is fetched.
    directory = tmp_path / "tokenizers" / "Qwen" / "Qwen3-8B"
    directory.mkdir(parents=True)
    (directory / "tokenizer.json").write_bytes(
        (Path(tinker_lite.__file__).parent / "local" / "tokenizer.json").read_bytes()
    )
    monkeypatch.setenv(TOKENIZER_DIR_ENV, str(tmp_path / "tokenizers"))
    clear_tokenizer_cache()
    try:
        with ServiceClient(base_url=server.base_url, telemetry=False) as service:
            sampler = service.create_sampling_client(base_model="Qwen/Qwen3-8B").result()
            assert sampler.get_tokenizer().decode(sampler.get_tokenizer().encode("hi")) == "hi"
    finally:
        clear_tokenizer_cache()
