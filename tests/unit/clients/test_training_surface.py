"""TrainingClient and SamplingClient methods with the official 0.38 signatures, end to end.

Requests are checked key for key against what 0.38 sends (on the scripted fake service); results
are checked on the local server (checkpoint listings, console URL, custom-loss metrics, prompt
logprobs, queue-state notifications, client-creation results used as futures).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from tests.support.clients import API_KEY, RUN, FakeTinker, ce_datum
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Recorded,
    Reply,
    Respond,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import (
    APIFuture,
    InvalidInputError,
    RestClient,
    SamplingClient,
    ServiceClient,
    TrainingClient,
    types,
)
from tinker_lite.local import LocalServer

BASE = "tinker-lite/tiny-64"
STATE = f"tinker://{RUN}/weights/ckpt-001"
Arrays = list[npt.NDArray[Any]]


@pytest.fixture
def fake(server: ScriptedServer) -> FakeTinker:
    fake = FakeTinker(server)

    def save_external(r: Recorded) -> Reply:
        name = r.json()["path"]
        return fake.future({"path": f"tinker://{RUN}/external_weights/{name}", "size_bytes": 3})

    server.default("POST", "/api/v1/save_weights_external", Respond(save_external))
    return fake


@pytest.fixture
def trainer(fake: FakeTinker) -> Iterator[TrainingClient]:
    with ServiceClient(
        base_url=fake.server.url, api_key=API_KEY, telemetry=False, wire="json"
    ) as client:
        yield client.create_lora_training_client("Qwen/Qwen3-8B").result()


@pytest.fixture(scope="module")
def local_url() -> Iterator[str]:
    with LocalServer() as url:
        yield url


@pytest.fixture
def local(local_url: str) -> Iterator[ServiceClient]:
    with ServiceClient(base_url=local_url, telemetry=False) as client:
        yield client


def _body(fake: FakeTinker, endpoint: str) -> dict[str, Any]:
    """The last JSON body sent to ``endpoint``, without the session-dependent ``seq_id``."""
    body = dict(fake.submits(endpoint)[-1].json())
    assert isinstance(body.pop("seq_id"), int)
    return body


# -- requests, key for key as 0.38 sends them ---------------------------------------------------


def test_optim_step_sends_adam_and_dimuon_params_as_038(
    fake: FakeTinker, trainer: TrainingClient
) -> None:
    adam = {
        "learning_rate": 5e-05,
        "beta1": 0.9,
        "beta2": 0.95,
        "eps": 1e-12,
        "weight_decay": 0.0,
        "grad_clip_norm": 0.0,
    }
    # positional (the official first parameter is optim_params) and the legacy keyword
    calls: list[Callable[[], APIFuture[types.OptimStepResponse]]] = [
        lambda: trainer.optim_step(types.AdamParams(learning_rate=5e-5)),
        lambda: trainer.optim_step(adam_params=types.AdamParams(learning_rate=5e-5)),
        lambda: trainer.optim_step(optim_params=types.AdamParams(learning_rate=5e-5)),
    ]
    for call in calls:
        call().result(timeout=30)
        assert _body(fake, "optim_step") == {
            "model_id": "run-0001",
            "type": "optim_step",
            "adam_params": adam,
        }
    trainer.optim_step(types.DimuonParams(learning_rate=0.01, beta1=0.5)).result(timeout=30)
    # Captured from 0.38's OptimStepRequest(optim_params=DimuonParams(...)).
    assert _body(fake, "optim_step") == {
        "model_id": "run-0001",
        "type": "optim_step",
        "optimizer_params": {
            "type": "dimuon",
            "learning_rate": 0.01,
            "grad_clip_norm": 0.0,
            "beta1": 0.5,
        },
    }
    assert [r.json()["seq_id"] for r in fake.submits("optim_step")] == [1, 2, 3, 4]


def test_checkpoint_requests_carry_the_new_arguments(
    fake: FakeTinker, trainer: TrainingClient
) -> None:
    trainer.save_state("ckpt-001", 7200).result(timeout=30)  # the old positional order
    assert _body(fake, "save_weights") == {
        "model_id": "run-0001",
        "path": "ckpt-001",
        "ttl_seconds": 7200,
        "overwrite": False,
        "type": "save_weights",
    }
    trainer.save_state("ckpt-001", None, True, {"step": "3"}).result(timeout=30)
    assert _body(fake, "save_weights") == {
        "model_id": "run-0001",
        "path": "ckpt-001",
        "overwrite": True,
        "user_metadata": {"step": "3"},
        "type": "save_weights",
    }
    trainer.save_weights_for_sampler("s-1", None, {"k": "v"}).result(timeout=30)
    assert _body(fake, "save_weights_for_sampler") == {
        "model_id": "run-0001",
        "path": "s-1",
        "kind": "snapshot",
        "user_metadata": {"k": "v"},
        "type": "save_weights_for_sampler",
    }
    with pytest.warns(FutureWarning, match="create_training_client_from_state"):
        loaded = trainer.load_state(STATE, weights_access_token="tok-1")
    assert loaded.result(timeout=30).path == STATE
    assert _body(fake, "load_weights") == {
        "model_id": "run-0001",
        "path": STATE,
        "optimizer": False,
        "weights_access_token": "tok-1",
        "type": "load_weights",
    }
    with pytest.warns(FutureWarning, match="load_state"):
        loaded = trainer.load_state_with_optimizer(STATE, "tok-2")
    loaded.result(timeout=30)
    assert _body(fake, "load_weights")["optimizer"] is True
    assert _body(fake, "load_weights")["weights_access_token"] == "tok-2"
    out = trainer.save_weights_external("ext-1", 3600, ["age1abc"]).result(timeout=30)
    assert out == types.SaveWeightsExternalResponse(path=f"tinker://{RUN}/external_weights/ext-1")
    assert _body(fake, "save_weights_external") == {
        "model_id": "run-0001",
        "path": "ext-1",
        "ttl_seconds": 3600,
        "age_encryption_recipients": ["age1abc"],
        "type": "save_weights_external",
    }
    # one seq_id per training request, in call order
    sent = fake.submits(
        "save_weights", "save_weights_for_sampler", "load_weights", "save_weights_external"
    )
    assert [r.json()["seq_id"] for r in sent] == [1, 2, 3, 4, 5, 6]


def test_async_twins_take_the_new_parameters(fake: FakeTinker, trainer: TrainingClient) -> None:
    async def save() -> types.SaveWeightsResponse:
        with pytest.warns(FutureWarning, match="save_state_async"):
            future = await trainer.save_state_async("ckpt-001", None, True, {"a": "b"})
        return await future

    assert asyncio.run(save()).path == f"tinker://{RUN}/weights/ckpt-001"
    assert _body(fake, "save_weights")["overwrite"] is True
    assert _body(fake, "save_weights")["user_metadata"] == {"a": "b"}

    async def step() -> types.OptimStepResponse:
        with pytest.warns(FutureWarning, match="optim_step_async"):
            future = await trainer.optim_step_async(types.DimuonParams(learning_rate=0.5))
        return await future

    asyncio.run(step())
    assert _body(fake, "optim_step")["optimizer_params"]["learning_rate"] == 0.5


BAD_CALLS: list[tuple[str, Callable[[TrainingClient], Any], str]] = [
    ("overwrite-not-bool", lambda t: t.save_state("a", 3600, "yes"), "overwrite"),  # type: ignore[arg-type]
    # code that put user_metadata third, where 0.38 has overwrite
    ("metadata-in-overwrite", lambda t: t.save_state("a", None, {"k": "v"}), "overwrite"),  # type: ignore[arg-type]
    ("metadata-value", lambda t: t.save_state("a", None, False, {"k": 1}), "user_metadata['k']"),  # type: ignore[dict-item]
    ("sampler-metadata", lambda t: t.save_weights_for_sampler("a", None, True), "user_metadata"),  # type: ignore[arg-type]
    ("ttl-not-int", lambda t: t.save_weights_for_sampler("a", "1h"), "ttl_seconds"),  # type: ignore[arg-type]
    ("both-params", lambda t: t.optim_step(types.AdamParams(), adam_params=types.AdamParams()),
     "optim_params"),
    ("no-params", lambda t: t.optim_step(), "optim_params"),
    ("dimuon-as-adam", lambda t: t.optim_step(adam_params=types.DimuonParams(learning_rate=1.0)),  # type: ignore[arg-type]
     "adam_params"),
    ("recipients-str", lambda t: t.save_weights_external("a", None, "age1abc"),  # type: ignore[arg-type]
     "age_encryption_recipients"),
    ("recipients-many", lambda t: t.save_weights_external("a", None, ["age1"] * 11),
     "age_encryption_recipients"),
    ("external-name", lambda t: t.save_weights_external("a/b"), "name"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "field"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_a_wrong_argument_is_named_before_sending(
    fake: FakeTinker, trainer: TrainingClient, call: Callable[[TrainingClient], Any], field: str
) -> None:
    before = len(fake.server.requests())
    with pytest.raises(InvalidInputError) as info:
        call(trainer)
    assert info.value.field == field
    assert [r for r in fake.server.requests()[before:] if "heartbeat" not in r.path] == []
    # no seq_id was taken
    trainer.optim_step(types.AdamParams()).result(timeout=30)
    assert [r.json()["seq_id"] for r in fake.submits("optim_step")] == [1]


def test_load_state_names_a_flag_given_as_the_token(trainer: TrainingClient) -> None:
    """``load_state(path, True)`` (an optimizer flag where 0.38 has the token) is named."""
    with (
        pytest.warns(FutureWarning, match="load_state"),
        pytest.raises(InvalidInputError) as info,
    ):
        trainer.load_state(STATE, True)  # type: ignore[arg-type]
    assert info.value.field == "weights_access_token"
    assert "load_state_with_optimizer" in str(info.value)


@pytest.mark.usefixtures("without_torch")
def test_custom_loss_forward_sends_zero_weights_when_none_given(
    fake: FakeTinker, trainer: TrainingClient
) -> None:
    datum = ce_datum([1, 2, 3, 4])  # no weights

    def loss_fn(
        data: list[types.Datum], logprobs: Arrays
    ) -> tuple[float, Arrays, dict[str, float]]:
        return float(sum(lp.sum() for lp in logprobs)), [np.ones_like(lp) for lp in logprobs], {}

    out = trainer.forward_backward_custom([datum], loss_fn).result(timeout=30)
    inputs = fake.submits("forward")[0].json()["forward_input"]["data"][0]["loss_fn_inputs"]
    assert inputs["weights"] == {"data": [0.0, 0.0, 0.0], "dtype": "float32", "shape": [3]}
    backward = fake.submits("forward_backward")[0].json()["forward_backward_input"]["data"][0]
    assert backward["loss_fn_inputs"]["weights"]["data"] == [-1.0, -1.0, -1.0]
    assert out.metrics == {"loss:sum": -3.0, "surrogate_loss:sum": 1.0}


@pytest.mark.usefixtures("without_torch")
def test_loss_type_input_is_deprecated_and_checked(trainer: TrainingClient) -> None:
    def loss_fn(
        data: list[types.Datum], logprobs: Arrays
    ) -> tuple[float, Arrays, dict[str, float]]:
        return 0.0, [np.zeros_like(lp) for lp in logprobs], {}

    with pytest.warns(DeprecationWarning, match="loss_type_input"):
        trainer.forward_backward_custom(
            [ce_datum([1, 2, 3])], loss_fn, loss_type_input="logprobs"
        ).result(timeout=30)
    with (
        pytest.warns(DeprecationWarning, match="loss_type_input"),
        pytest.raises(InvalidInputError) as info,
    ):
        trainer.forward_backward_custom(
            [ce_datum([1, 2, 3])],
            loss_fn,
            loss_type_input="probs",  # type: ignore[arg-type]
        )
    assert info.value.field == "loss_type_input"


# -- results on the local server ----------------------------------------------------------------


def _by_id(client: ServiceClient, run: str) -> dict[str, types.Checkpoint]:
    listed = RestClient(client).list_checkpoints(run).result(timeout=30)
    return {c.checkpoint_id: c for c in listed.checkpoints}


def test_user_metadata_and_overwrite_show_in_the_listing(local: ServiceClient) -> None:
    trainer = local.create_lora_training_client(BASE, rank=4).result()
    first = trainer.save_state("state", 7200, False, {"step": "1"}).result(timeout=60)
    sampler = trainer.save_weights_for_sampler("weights", user_metadata={"k": "v"}).result(60)
    listed = _by_id(local, trainer.model_id)
    assert listed["weights/state"].user_metadata == {"step": "1"}
    assert listed["weights/state"].expires_at is not None
    assert listed["sampler_weights/weights"].user_metadata == {"k": "v"}
    assert listed["sampler_weights/weights"].tinker_path == sampler.path
    # overwrite replaces the checkpoint and its whole metadata
    again = trainer.save_state("state", overwrite=True, user_metadata={"step": "2"}).result(60)
    assert again.path == first.path
    assert _by_id(local, trainer.model_id)["weights/state"].user_metadata == {"step": "2"}
    trainer.save_state("state", overwrite=True).result(timeout=60)
    assert _by_id(local, trainer.model_id)["weights/state"].user_metadata is None


def test_save_weights_external_is_a_listed_checkpoint(local: ServiceClient) -> None:
    trainer = local.create_lora_training_client(BASE, rank=4).result()
    out = trainer.save_weights_external("export").result(timeout=60)
    assert isinstance(out, types.SaveWeightsExternalResponse)
    assert out.path == f"tinker://{trainer.model_id}/external_weights/export"
    listed = _by_id(local, trainer.model_id)["external_weights/export"]
    assert listed.tinker_path == out.path
    assert listed.size_bytes


def test_load_state_with_a_token_restores_the_weights(local: ServiceClient) -> None:
    trainer = local.create_lora_training_client(BASE, rank=4).result()
    datum = ce_datum([5, 6, 7, 8, 9], weights=[1.0] * 4)
    saved = trainer.save_state("before").result(timeout=60)
    before = trainer.forward([datum], "cross_entropy").result(timeout=60).metrics["loss:sum"]
    trainer.forward_backward([datum], "cross_entropy")
    trainer.optim_step(types.AdamParams(learning_rate=0.05)).result(timeout=60)
    moved = trainer.forward([datum], "cross_entropy").result(timeout=60).metrics["loss:sum"]
    assert moved != pytest.approx(before)
    with pytest.warns(FutureWarning, match="load_state"):
        loaded = trainer.load_state(saved.path, weights_access_token="unused-locally")
    assert loaded.result(timeout=60).path == saved.path
    after = trainer.forward([datum], "cross_entropy").result(timeout=60).metrics["loss:sum"]
    assert after == pytest.approx(before)


def test_console_url_names_the_training_run(local: ServiceClient) -> None:
    trainer = local.create_lora_training_client(BASE, rank=4).result()
    assert trainer.get_console_url() == (
        f"https://tinker.thinkingmachines.ai/training_runs/{trainer.model_id}"
    )


@pytest.mark.usefixtures("without_torch")
def test_custom_loss_metrics_report_the_custom_loss_and_the_surrogate(
    local: ServiceClient,
) -> None:
    """``loss:sum`` is the custom loss, ``surrogate_loss:sum`` the service's cross-entropy.

    For L = sum(c * lp**2) the weights sent are -dL/dlp = -2 c lp, so the service's surrogate
    sum(-lp * weights) is 2 L at the same logprobs: the two numbers come from different places.
    """
    trainer = local.create_lora_training_client(BASE, rank=4, seed=1).result()
    data = [
        ce_datum([3, 4, 5, 6, 7], weights=[1.0, 0.5, 2.0, 1.0]),
        ce_datum([8, 9, 10], weights=[0.25, 3.0]),
    ]
    seen: list[float] = []

    def quadratic(
        batch: list[types.Datum], logprobs: Arrays
    ) -> tuple[float, Arrays, dict[str, float]]:
        coefficients = [d.loss_fn_inputs["weights"].to_numpy().astype(np.float64) for d in batch]
        loss = sum(float((c * lp * lp).sum()) for c, lp in zip(coefficients, logprobs, strict=True))
        seen.append(loss)
        grads = [2.0 * c * lp for c, lp in zip(coefficients, logprobs, strict=True)]
        return loss, grads, {"mine": 1.5}

    out = trainer.forward_backward_custom(data, quadratic).result(timeout=60)
    assert out.metrics["loss:sum"] == pytest.approx(seen[0])
    assert out.metrics["surrogate_loss:sum"] == pytest.approx(2 * seen[0], rel=1e-4)
    assert out.metrics["mine"] == 1.5
    assert not math.isclose(out.metrics["loss:sum"], out.metrics["surrogate_loss:sum"])


def test_forward_result_tensors_are_flat_lists_with_a_shape(local: ServiceClient) -> None:
    trainer = local.create_lora_training_client(BASE, rank=4).result()
    targets = np.array([[2, 5], [3, 6], [4, 7]])
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={"target_tokens": targets},
    )
    logprobs = (
        trainer.forward([datum], "cross_entropy").result(timeout=60).loss_fn_outputs[0]["logprobs"]
    )
    assert logprobs.shape == [3, 2]
    assert len(logprobs.data) == 6
    assert all(isinstance(value, float) for value in logprobs.data)
    nested = logprobs.tolist()
    assert [len(row) for row in nested] == [2, 2, 2]
    assert [value for row in nested for value in row] == logprobs.data


def test_compute_logprobs_of_the_last_n_tokens(local: ServiceClient) -> None:
    sampler = local.create_sampling_client(base_model=BASE).result()
    prompt = types.ModelInput.from_ints([11, 12, 13, 14, 15, 16])
    full = sampler.compute_logprobs(prompt).result(timeout=60)
    last = sampler.compute_logprobs(prompt, 2).result(timeout=60)
    assert full[0] is None
    assert all(isinstance(v, float) for v in full[1:])
    assert last[:4] == [None] * 4
    assert last[4:] == pytest.approx(full[4:])
    with pytest.raises(InvalidInputError) as info:
        sampler.compute_logprobs(prompt, 0)
    assert info.value.field == "prompt_logprobs_last_n"


def test_get_base_model_of_base_and_saved_weight_samplers(local: ServiceClient) -> None:
    assert local.create_sampling_client(base_model=BASE).result().get_base_model() == BASE
    trainer = local.create_lora_training_client(BASE, rank=4).result()
    path = trainer.save_weights_for_sampler("for-sampling").result(timeout=60).path
    sampler = local.create_sampling_client(model_path=path).result()
    assert sampler.base_model == BASE  # read at creation with GET samplers/{id}, as 0.38 does
    assert sampler.get_base_model() == BASE
    assert sampler.get_base_model() == BASE


def test_saved_weights_sampled_with_their_base_model_named() -> None:
    server = LocalServer()
    with server as url, ServiceClient(base_url=url, telemetry=False) as service:
        trainer = service.create_lora_training_client(BASE, rank=4).result()
        datum = types.Datum(
            model_input=types.ModelInput.from_ints([5, 6, 7, 8]),
            loss_fn_inputs={"target_tokens": [6, 7, 8, 9]},
        )
        trainer.forward_backward([datum], "cross_entropy").result(timeout=60)
        trainer.optim_step(types.AdamParams(learning_rate=0.1)).result(timeout=60)
        path = trainer.save_weights_for_sampler("trained").result(timeout=60).path
        prompt = types.ModelInput.from_ints([5, 6, 7, 8, 9])
        by_path = service.create_sampling_client(model_path=path).result()
        assert _sampler_reads(server) == 1  # GET samplers/{id}: the weights' base model
        both = service.create_sampling_client(base_model=BASE, model_path=path).result()
        base = service.create_sampling_client(base_model=BASE).result()
        # 0.38 takes the named base model as the weights' own: nothing more is asked.
        assert both.get_base_model() == BASE
        assert _sampler_reads(server) == 1
        # The weights are what is sampled, not the base model.
        trained = both.compute_logprobs(prompt).result(timeout=60)
        assert trained == by_path.compute_logprobs(prompt).result(timeout=60)
        assert trained != base.compute_logprobs(prompt).result(timeout=60)


def _sampler_reads(server: LocalServer) -> int:
    requests = server.stats()["requests"].items()
    return sum(n for path, n in requests if path.startswith("/api/v1/samplers/"))


def test_create_results_are_futures_of_the_clients(local: ServiceClient) -> None:
    trainer = local.create_lora_training_client(BASE, rank=4).result()
    path = trainer.save_weights_for_sampler("as-future").result(timeout=60).path
    state = trainer.save_state("as-future").result(timeout=60).path
    futures: list[APIFuture[Any]] = [
        local.create_lora_training_client(BASE, rank=4),
        local.create_training_client_from_state(state),
        local.create_training_client_from_state_with_optimizer(state),
        local.create_sampling_client(base_model=BASE),
        trainer.create_sampling_client(path),
        trainer.save_weights_and_get_sampling_client(),
    ]

    async def awaited(future: Any) -> Any:
        return await future

    clients = []
    for future in futures:
        assert isinstance(future, APIFuture)
        client = future.result(timeout=60)
        assert future.done()
        assert not isinstance(client, APIFuture)
        assert future.result() is client
        assert future.future().result() is client
        assert asyncio.run(awaited(future)) is client
        clients.append(client)
    datum = ce_datum([5, 6, 7, 8])
    for trainer_client in clients[:3]:
        assert type(trainer_client) is TrainingClient
        trainer_client.forward_backward([datum], "cross_entropy").result(timeout=60)
    prompt = types.ModelInput.from_ints([1, 2, 3])
    params = types.SamplingParams(max_tokens=2, seed=1)
    for sampler in clients[3:]:
        assert type(sampler) is SamplingClient
        response = sampler.sample(prompt, 1, params).result(timeout=60)
        assert len(response.sequences[0].tokens) == 2


def test_queue_state_notifications_reach_on_queue_state_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The poller's queue-state notifications for a sample go to ``on_queue_state_change``."""
    spec = (
        "path=/api/v1/retrieve_future,request_type=Sample,action=try_again,"
        "queue_state=paused_capacity,reason={reason},count=2"
    )
    server = LocalServer(faults=spec.format(reason="maintenance"))
    prompt = types.ModelInput.from_ints([1, 2, 3])
    params = types.SamplingParams(max_tokens=1)
    with server as url, ServiceClient(base_url=url, telemetry=False) as client:
        sampler = client.create_sampling_client(base_model=BASE).result()
        with caplog.at_level(logging.WARNING, logger="tinker_lite"):
            sampler.sample(prompt, 1, params).result(timeout=60)
        # the default hook logs (at most once a minute) with the service's reason
        paused = [r.getMessage() for r in caplog.records if "is paused" in r.getMessage()]
        assert paused == [
            f"Sampling for {sampler.sampling_session_id} is paused. Reason: maintenance."
        ]
        # an override receives every notification, as a QueueState
        calls: list[tuple[types.QueueState, str | None]] = []

        def record(queue_state: types.QueueState, queue_state_reason: str | None) -> None:
            calls.append((queue_state, queue_state_reason))

        sampler.on_queue_state_change = record  # type: ignore[method-assign]
        server.set_faults(spec.format(reason="again"))
        sampler.sample(prompt, 1, params).result(timeout=60)
    assert calls == [(types.QueueState.PAUSED_CAPACITY, "again")] * 2
    assert all(isinstance(state, types.QueueState) for state, _ in calls)
