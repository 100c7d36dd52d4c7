"""TrainingClient: sequencing (docs/protocol.rst §7), chunking (docs/protocol.rst §7.4, §7.5),
pipelining and input checks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.support.clients import API_KEY, FakeTinker, ce_datum, seq_ids
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
    BadRequestError,
    InvalidInputError,
    ServiceClient,
    TrainingClient,
    types,
)
from tinker_lite.local import LocalServer
from tinker_lite.local.protocol import codecs as _codecs


@pytest.fixture
def fake(server: ScriptedServer) -> FakeTinker:
    return FakeTinker(server)


@pytest.fixture
def service(fake: FakeTinker) -> Iterator[ServiceClient]:
    with ServiceClient(
        base_url=fake.server.url, api_key=API_KEY, telemetry=False, wire="json"
    ) as client:
        yield client


@pytest.fixture
def trainer(service: ServiceClient) -> TrainingClient:
    return service.create_lora_training_client("Qwen/Qwen3-8B", rank=8).result()


@pytest.fixture(scope="module")
def local_url() -> Iterator[str]:
    with LocalServer() as url:
        yield url


def _block_first(fake: FakeTinker, path: str) -> threading.Event:
    """Hold the first request to ``path`` until the returned event is set."""
    release = threading.Event()

    def respond(r: Recorded) -> Any:
        assert release.wait(30), "the test never released the blocked submit"
        return fake.handle(r)

    fake.server.on("POST", path, Respond(respond))
    return release


# -- sequencing -------------------------------------------------------------------------------


def test_calls_return_at_once_and_arrive_in_seq_order(
    fake: FakeTinker, trainer: TrainingClient
) -> None:
    release = _block_first(fake, "/api/v1/forward_backward")
    data = [ce_datum([1, 2, 3, 4])] * 130
    fb = trainer.forward_backward(data, "cross_entropy")
    step = trainer.optim_step(types.AdamParams(learning_rate=1e-3))
    save = trainer.save_state("ckpt")
    fb2 = trainer.forward_backward([ce_datum([5, 6, 7])], "cross_entropy")
    # Every call returned while the service still holds the first submit: they are pipelined.
    assert not fb.done()
    assert not step.done()
    fake.server.wait_for("/api/v1/forward_backward", 1)
    release.set()
    out = fb.result(timeout=30)
    assert len(out.loss_fn_outputs) == 130
    assert out.metrics == {"loss:sum": 130.0}
    assert step.result(timeout=30) == types.OptimStepResponse(metrics=None)
    assert save.result(timeout=30).path == "tinker://run-0001/weights/ckpt"
    assert len(fb2.result(timeout=30).loss_fn_outputs) == 1
    submits = fake.submits("forward_backward", "optim_step", "save_weights")
    assert seq_ids(submits) == [1, 2, 3, 4, 5]
    assert [r.path.rsplit("/", 1)[1] for r in submits] == [
        "forward_backward",
        "forward_backward",
        "optim_step",
        "save_weights",
        "forward_backward",
    ]
    # One request in flight per model: a submit is sent only after the previous one answered.
    first, second = submits[0], submits[1]
    assert len(first.json()["forward_backward_input"]["data"]) == 128
    assert len(second.json()["forward_backward_input"]["data"]) == 2


def test_submits_do_not_wait_for_results(fake: FakeTinker, trainer: TrainingClient) -> None:
    # The service holds forward_backward's result until optim_step's submit has arrived: a
    # client that waited for the result before sending the next submit would never finish.
    def hold_result(r: Recorded) -> Any:
        fake.server.wait_for("/api/v1/optim_step", 1, timeout=30)
        return fake.handle(r)

    fake.server.on("POST", "/api/v1/retrieve_future", Respond(hold_result))
    fb = trainer.forward_backward([ce_datum([1, 2, 3])], "cross_entropy")
    step = trainer.optim_step(types.AdamParams())
    assert fb.result(timeout=30).metrics == {"loss:sum": 1.0}
    assert step.result(timeout=30).metrics is None
    assert seq_ids(fake.submits("forward_backward", "optim_step")) == [1, 2]


def test_calls_from_many_threads_stay_ordered(fake: FakeTinker, trainer: TrainingClient) -> None:
    arrivals = iter(range(10_000))

    def sometimes_slow(r: Recorded) -> Any:
        if next(arrivals) % 3 == 0:
            time.sleep(0.02)  # a slow service answer, not synchronisation
        return fake.handle(r)

    fake.server.default("POST", "/api/v1/optim_step", Respond(sometimes_slow))
    futures: list[Any] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        for _ in range(5):
            future = trainer.optim_step(types.AdamParams())
            with lock:
                futures.append(future)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for future in futures:
        future.result(timeout=30)
    assert seq_ids(fake.submits("optim_step")) == list(range(1, 41))


def test_a_failed_submit_passes_the_turn(fake: FakeTinker, trainer: TrainingClient) -> None:
    fake.server.on("POST", "/api/v1/optim_step", Reply(400, {"detail": "bad adam params"}))
    first = trainer.optim_step(types.AdamParams())
    second = trainer.optim_step(types.AdamParams())
    third = trainer.save_state("after-failure")
    with pytest.raises(BadRequestError, match="bad adam params"):
        first.result(timeout=30)
    assert second.result(timeout=30).metrics is None
    assert third.result(timeout=30).path.endswith("/after-failure")
    assert seq_ids(fake.submits("optim_step", "save_weights")) == [1, 2, 3]


def test_retries_resend_the_same_seq_id(fake: FakeTinker, trainer: TrainingClient) -> None:
    # Layer A: eleven 500s exhaust the HTTP retries; Layer B re-sends the same body.
    fail = Reply(500, {"detail": "boom"}, headers={"retry-after-ms": "1"})
    fake.server.on("POST", "/api/v1/forward_backward", *([fail] * 11))
    out = trainer.forward_backward([ce_datum([1, 2, 3])], "cross_entropy").result(timeout=30)
    assert len(out.loss_fn_outputs) == 1
    attempts = fake.submits("forward_backward")
    assert len(attempts) == 12
    assert {r.body for r in attempts} == {attempts[0].body}
    assert seq_ids(attempts) == [1] * 12
    keys = [r.header("X-Idempotency-Key") for r in attempts]
    assert len(set(keys[:11])) == 1
    assert keys[11] != keys[0]
    assert [r.header("x-stainless-retry-count") for r in attempts[:3]] == ["0", "1", "2"]
    assert trainer.optim_step(types.AdamParams()).result(timeout=30).metrics is None
    assert seq_ids(fake.submits("optim_step")) == [2]


def test_polls_carry_the_request_type(fake: FakeTinker, trainer: TrainingClient) -> None:
    trainer.forward([ce_datum([1, 2, 3])], "cross_entropy").result(timeout=30)
    trainer.optim_step(types.AdamParams()).result(timeout=30)
    polls = fake.server.requests("/api/v1/retrieve_future")
    types_seen = [p.header("X-Tinker-Request-Type") for p in polls]
    assert types_seen == ["CreateModel", "Forward", "OptimStep"]
    assert all(p.header("Accept") == "application/json" for p in polls)
    forward = fake.submits("forward")[0]
    assert forward.json()["seq_id"] == 1
    assert forward.header("Content-Type") == "application/json"


def test_protobuf_wire_when_the_service_has_a_client_config(server: ScriptedServer) -> None:
    fake = FakeTinker(server, client_config={"proto_compress_fwdbwd": False})
    with ServiceClient(base_url=server.url, api_key=API_KEY, telemetry=False) as client:
        assert client.holder.wire_format == "protobuf"
        assert client.chunk_limits().max_bytes == 5_000_000
        trainer = client.create_lora_training_client("Qwen/Qwen3-8B").result()
        fb = trainer.forward_backward([ce_datum([1, 2, 3])] * 3, "cross_entropy")
        assert len(fb.result(timeout=30).loss_fn_outputs) == 3
        forward = trainer.forward([ce_datum([1, 2, 3])], "cross_entropy").result(timeout=30)
        assert len(forward.loss_fn_outputs) == 1
        trainer.optim_step(types.AdamParams()).result(timeout=30)
    submits = fake.submits("forward_backward", "forward")
    assert [r.path for r in submits] == ["/api/v1/forward_backward"] * 2
    assert {r.header("Content-Type") for r in submits} == {"application/x-protobuf"}
    decoded = [_codecs.decode_forward_backward_request(r.body) for r in submits]
    assert [(d.seq_id, d.forward_only, len(d.data)) for d in decoded] == [
        (1, False, 3),
        (2, True, 1),
    ]
    accepts = {
        p.header("X-Tinker-Request-Type"): p.header("Accept")
        for p in server.requests("/api/v1/retrieve_future")
    }
    assert accepts == {
        "CreateModel": "application/json",
        "ForwardBackward": "application/x-protobuf",
        "Forward": "application/x-protobuf",
        "OptimStep": "application/json",
    }


# -- chunking ---------------------------------------------------------------------------------


def test_number_count_limit_splits_chunks(fake: FakeTinker, trainer: TrainingClient) -> None:
    tokens = list(range(1, 100_002))  # 100,000 positions -> 300,000 numbers per datum
    datum = ce_datum(tokens, weights=[1.0] * 100_000)
    out = trainer.forward_backward([datum, datum, datum], "cross_entropy").result(timeout=60)
    assert len(out.loss_fn_outputs) == 3
    assert out.metrics == {"loss:sum": 3.0}
    assert seq_ids(fake.submits("forward_backward")) == [1, 2, 3]


def test_single_datum_over_the_limit_is_refused(fake: FakeTinker, trainer: TrainingClient) -> None:
    big = ce_datum(list(range(1, 300_002)))
    with pytest.raises(InvalidInputError, match="more than the 500000") as info:
        trainer.forward_backward([big], "cross_entropy")
    assert info.value.field == "data[0]"
    assert fake.submits("forward_backward") == []


def test_client_config_limits_are_used() -> None:
    local = LocalServer(config_overrides={"fwdbwd_max_chunk_len": 4})
    url = local.start()
    try:
        with ServiceClient(base_url=url, telemetry=False) as client:
            assert client.holder.wire_format == "protobuf"
            trainer = client.create_lora_training_client("tinker-lite/tiny-64", rank=2).result()
            data = [ce_datum([1, 2, 3, 4, 5], weights=[1.0] * 4) for _ in range(10)]
            out = trainer.forward_backward(data, "cross_entropy").result(timeout=60)
            assert len(out.loss_fn_outputs) == 10
            assert out.loss_fn_outputs[0]["logprobs"].to_numpy().shape == (4,)
            assert "loss:sum" in out.metrics
            trainer.optim_step(types.AdamParams()).result(timeout=60)
            applied = local.stats()["models"][trainer.model_id]["applied"]
            assert [(a["seq_id"], a["kind"]) for a in applied[1:]] == [
                (1, "forward_backward"),
                (2, "forward_backward"),
                (3, "forward_backward"),
                (4, "optim_step"),
            ]
            assert all(a["ok"] for a in applied)
    finally:
        local.stop()


def test_empty_batch_sends_nothing(fake: FakeTinker, trainer: TrainingClient) -> None:
    out = trainer.forward_backward([], "cross_entropy").result(timeout=5)
    assert out == types.ForwardBackwardOutput(
        loss_fn_output_type="", loss_fn_outputs=[], metrics={}
    )
    assert fake.submits("forward_backward") == []


# -- input checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda t: t.forward_backward([ce_datum([1, 2])], "mse"), "loss_fn"),
        (lambda t: t.forward_backward([ce_datum([1, 2])], "ppo"), "data[0].loss_fn_inputs"),
        (lambda t: t.forward([[1, 2]], "cross_entropy"), "data[0]"),
        (lambda t: t.optim_step({"learning_rate": 1e-4}), "optim_params"),
        (lambda t: t.optim_step(adam_params={"learning_rate": 1e-4}), "adam_params"),
        (lambda t: t.save_state("a/b"), "name"),
        (lambda t: t.save_state(""), "name"),
        (lambda t: t.save_weights_for_sampler("x/y"), "name"),
        (lambda t: _load_state_deprecated(t, "/tmp/ckpt"), "path"),
        (
            lambda t: t.create_sampling_client("tinker://run-0001/weights/ckpt").result(),
            "model_path",
        ),
    ],
)
def test_bad_input_is_refused_before_sending(
    fake: FakeTinker, trainer: TrainingClient, call: Any, field: str
) -> None:
    before = len(fake.server.requests())
    with pytest.raises(InvalidInputError) as info:
        call(trainer)
    assert info.value.field == field
    sent = [r for r in fake.server.requests()[before:] if "heartbeat" not in r.path]
    assert sent == []
    # No seq_id was consumed.
    trainer.optim_step(types.AdamParams()).result(timeout=30)
    assert seq_ids(fake.submits("optim_step")) == [1]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"rank": 0}, "rank"), ({"rank": True}, "rank"), ({"rank": "8"}, "rank")],
)
def test_bad_lora_settings(
    fake: FakeTinker, service: ServiceClient, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInputError) as info:
        service.create_lora_training_client("Qwen/Qwen3-8B", **kwargs).result()
    assert info.value.field == field
    assert fake.submits("create_model") == []


def test_all_train_flags_off_is_refused(service: ServiceClient) -> None:
    with pytest.raises(InvalidInputError, match="nothing would be trained"):
        service.create_lora_training_client(
            "Qwen/Qwen3-8B", train_mlp=False, train_attn=False, train_unembed=False
        ).result()


# -- end to end on the local server -----------------------------------------------------------


def test_training_reduces_the_loss_on_the_local_server(local_url: str) -> None:
    with ServiceClient(base_url=local_url, telemetry=False) as client:
        trainer = client.create_lora_training_client("tinker-lite/tiny-64", rank=4, seed=1).result()
        tokenizer = trainer.get_tokenizer()
        ids = tokenizer.encode("the cat sat on the mat")
        datum = ce_datum(ids, weights=[1.0] * (len(ids) - 1))
        losses = []
        for _ in range(4):
            fb = trainer.forward_backward([datum] * 2, "cross_entropy")
            step = trainer.optim_step(types.AdamParams(learning_rate=2e-2))
            losses.append(fb.result(timeout=60).metrics["loss:sum"])
            step.result(timeout=60)
        assert losses[-1] < losses[0]
        info = trainer.get_info()
        assert info.model_data.tokenizer_id == "tinker-lite/byte-tokenizer"
        assert trainer.get_tokenizer() is tokenizer


@pytest.mark.parametrize("wire", ["json", "protobuf"])
def test_rl_losses_on_the_local_server(local_url: str, wire: str) -> None:
    with ServiceClient(base_url=local_url, telemetry=False, wire=wire) as client:
        trainer = client.create_lora_training_client("tinker-lite/tiny-64", rank=2).result()
        n = 5
        datum = types.Datum(
            model_input=types.ModelInput.from_ints([1, 2, 3, 4, 5]),
            loss_fn_inputs={
                "target_tokens": [2, 3, 4, 5, 6],
                "logprobs": np.full(n, -2.0, dtype=np.float32),
                "advantages": np.linspace(-1, 1, n, dtype=np.float32),
            },
        )
        for loss in ("importance_sampling", "ppo", "cispo", "dro"):
            config = {"beta": 0.05} if loss == "dro" else None
            out = trainer.forward_backward([datum], loss, config).result(timeout=60)
            assert out.loss_fn_outputs[0]["logprobs"].to_numpy().shape == (n,)
            assert "loss:sum" in out.metrics
        forward = trainer.forward([ce_datum([1, 2, 3, 4])], "cross_entropy").result(timeout=60)
        assert forward.loss_fn_outputs[0]["logprobs"].size == 3


def test_save_load_and_restore_on_the_local_server(local_url: str) -> None:
    with ServiceClient(base_url=local_url, telemetry=False) as client:
        trainer = client.create_lora_training_client("tinker-lite/tiny-64", rank=4).result()
        datum = ce_datum([5, 6, 7, 8, 9], weights=[1.0] * 4)
        trainer.forward_backward([datum], "cross_entropy")
        trainer.optim_step(types.AdamParams(learning_rate=1e-2))
        state = trainer.save_state("state-1").result(timeout=60)
        assert state.path.endswith("/weights/state-1")
        assert _load_state_deprecated(trainer, state.path).result(timeout=60).path == state.path
        with pytest.warns(FutureWarning, match="load_state"):
            loaded = trainer.load_state_with_optimizer(state.path)
        assert loaded.result(timeout=60) is not None
        before = trainer.forward([datum], "cross_entropy").result(timeout=60).metrics
        restored = client.create_training_client_from_state(state.path).result()
        assert restored.model_id != trainer.model_id
        after = restored.forward([datum], "cross_entropy").result(timeout=60).metrics
        assert after["loss:sum"] == pytest.approx(before["loss:sum"], rel=1e-5)
        with_opt = client.create_training_client_from_state_with_optimizer(state.path).result()
        assert with_opt.get_info().lora_rank == 4


def _load_state_deprecated(
    trainer: TrainingClient, path: str
) -> APIFuture[types.LoadWeightsResponse]:
    """``load_state``, which warns FutureWarning first (deprecated, as in the official SDK)."""
    with pytest.warns(FutureWarning, match="load_state"):
        return trainer.load_state(path)
