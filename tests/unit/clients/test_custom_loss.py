"""forward_backward_custom (docs/protocol.rst §7.6): the numpy contract, its checks, and a gradient
check.

The numpy contract is the one of a machine without torch: those tests hide torch (with torch
installed the loss function gets torch tensors, as in 0.38)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from tests.support.clients import API_KEY, FakeTinker, ce_datum
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import InvalidInputError, ServiceClient, TrainingClient, types
from tinker_lite.local import LocalServer

Arrays = list[npt.NDArray[Any]]


@pytest.fixture
def fake(server: ScriptedServer) -> FakeTinker:
    return FakeTinker(server)


@pytest.fixture
def trainer(fake: FakeTinker) -> Iterator[TrainingClient]:
    with ServiceClient(
        base_url=fake.server.url, api_key=API_KEY, telemetry=False, wire="json"
    ) as client:
        yield client.create_lora_training_client("Qwen/Qwen3-8B").result()


def _data() -> list[types.Datum]:
    return [
        types.Datum(
            model_input=types.ModelInput.from_ints([301, 302, 303]),
            loss_fn_inputs={
                "target_tokens": [302, 303, 304],
                "weights": [0.5, 1.0, 2.0],
                "advantages": [1.0, -1.0, 0.5],
            },
        ),
        ce_datum([401, 402, 403], weights=[1.0, 0.25]),
    ]


@pytest.mark.usefixtures("without_torch")
def test_numpy_loss_sends_minus_the_gradient(fake: FakeTinker, trainer: TrainingClient) -> None:
    seen: list[Arrays] = []

    def loss_fn(
        data: list[types.Datum], logprobs: Arrays
    ) -> tuple[float, Arrays, dict[str, float]]:
        seen.append([lp.copy() for lp in logprobs])
        weights = [d.loss_fn_inputs["weights"].to_numpy() for d in data]
        loss = -sum(float((lp * w).sum()) for lp, w in zip(logprobs, weights, strict=True))
        grads = [-w for w in weights]
        return loss, grads, {"custom_metric": 7.0, "loss:sum": -1.0}

    out = trainer.forward_backward_custom(_data(), loss_fn).result(timeout=30)
    # the fake answers logprobs of -1 for every target
    assert [lp.tolist() for lp in seen[0]] == [[-1.0, -1.0, -1.0], [-1.0, -1.0]]
    assert all(lp.dtype == np.float32 for lp in seen[0])
    forward, backward = fake.submits("forward")[0], fake.submits("forward_backward")[0]
    assert (forward.json()["seq_id"], backward.json()["seq_id"]) == (1, 2)
    sent = forward.json()["forward_input"]["data"][0]["loss_fn_inputs"]
    assert sorted(sent) == ["target_tokens", "weights"]  # extra inputs stay on the client
    inputs = [d["loss_fn_inputs"] for d in backward.json()["forward_backward_input"]["data"]]
    assert [i["weights"]["data"] for i in inputs] == [[0.5, 1.0, 2.0], [1.0, 0.25]]
    assert [i["target_tokens"]["data"] for i in inputs] == [[302, 303, 304], [402, 403]]
    assert backward.json()["forward_backward_input"]["loss_fn"] == "cross_entropy"
    # As in 0.38: loss:sum is the custom loss (sum of weights here, the loss function's own
    # "loss:sum" is replaced), the service's loss:sum (2.0 from the fake) is the surrogate's.
    assert out.metrics == {"loss:sum": 4.75, "custom_metric": 7.0, "surrogate_loss:sum": 2.0}


@pytest.mark.usefixtures("without_torch")
@pytest.mark.parametrize(
    ("result", "match"),
    [
        ((1.0, {}), "must return \\(loss, grads, metrics\\)"),
        ((float("nan"), [np.zeros(3), np.zeros(2)], {}), "non-finite"),
        ((1.0, [np.zeros(3)], {}), "1 gradients for 2 datums"),
        ((1.0, [np.zeros(4), np.zeros(2)], {}), "shape"),
        ((1.0, [np.zeros(3), np.array([np.inf, 0.0])], {}), "NaN or Inf"),
        ((1.0, [np.zeros(3), np.zeros(2)], {"m": "x"}), "must be a number"),
    ],
)
def test_bad_loss_results_are_reported(
    fake: FakeTinker, trainer: TrainingClient, result: Any, match: str
) -> None:
    future = trainer.forward_backward_custom(_data(), lambda data, logprobs: result)
    with pytest.raises(InvalidInputError, match=match):
        future.result(timeout=30)
    # The reserved seq_id is filled by a backward pass that learns nothing ...
    (backward,) = fake.submits("forward_backward")
    inputs = [d["loss_fn_inputs"] for d in backward.json()["forward_backward_input"]["data"]]
    assert [i["weights"]["data"] for i in inputs] == [[0.0, 0.0, 0.0], [0.0, 0.0]]
    assert backward.json()["seq_id"] == 2
    # ... so the client goes on in order.
    after = trainer.forward_backward([ce_datum([5, 6, 7])], "cross_entropy").result(timeout=30)
    assert after.loss_fn_outputs
    assert [r.json()["seq_id"] for r in fake.submits("forward_backward")] == [2, 3]


@pytest.mark.usefixtures("without_torch")
def test_a_later_call_is_ordered_after_the_backward_pass(
    fake: FakeTinker, trainer: TrainingClient
) -> None:
    """As in 0.38: the call returns at once with the backward's seq_id reserved, so an
    optim_step made while the loss is still being computed is applied after the backward."""
    optim_called = threading.Event()
    loss_saw_optim_called: list[bool] = []

    def loss_fn(
        data: list[types.Datum], logprobs: Arrays
    ) -> tuple[float, Arrays, dict[str, float]]:
        loss_saw_optim_called.append(optim_called.wait(timeout=10))
        return 1.0, [np.ones_like(lp) for lp in logprobs], {}

    future = trainer.forward_backward_custom(_data(), loss_fn)
    optim = trainer.optim_step(types.AdamParams(learning_rate=1e-3))
    optim_called.set()
    assert future.result(timeout=30).metrics["loss:sum"] == 1.0
    optim.result(timeout=30)
    assert loss_saw_optim_called == [True]  # the call did not wait for the loss
    submits = [
        r
        for r in fake.server.requests()
        if r.path.endswith(("/forward", "/forward_backward", "/optim_step"))
    ]
    assert [(r.path.rsplit("/", 1)[1], r.json()["seq_id"]) for r in submits] == [
        ("forward", 1),
        ("forward_backward", 2),
        ("optim_step", 3),
    ]


def test_targets_are_required(trainer: TrainingClient) -> None:
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2]), loss_fn_inputs={"weights": [1.0, 1.0]}
    )
    with pytest.raises(InvalidInputError, match="target_tokens"):
        trainer.forward_backward_custom([datum], lambda d, lp: (0.0, lp, {}))


def _quadratic(data: list[types.Datum], logprobs: Arrays) -> tuple[float, Arrays, dict[str, float]]:
    """L = sum_t c_t * lp_t**2 (a nonlinear loss) and its gradient 2 * c_t * lp_t."""
    loss = 0.0
    grads: Arrays = []
    for datum, lp in zip(data, logprobs, strict=True):
        c = datum.loss_fn_inputs["weights"].to_numpy().astype(np.float64)
        x = lp.astype(np.float64)
        loss += float((c * x * x).sum())
        grads.append(2.0 * c * x)
    return loss, grads, {"quadratic": loss}


def _loss_at(trainer: TrainingClient, data: list[types.Datum]) -> float:
    out = trainer.forward(data, "cross_entropy").result(timeout=60)
    logprobs = [o["logprobs"].to_numpy() for o in out.loss_fn_outputs]
    return _quadratic(data, logprobs)[0]


@pytest.mark.usefixtures("without_torch")
def test_gradient_matches_finite_differences_on_the_local_server() -> None:
    """One plain gradient step on the custom loss changes it by -eta * |grad|**2 (first order).

    With beta1 = beta2 = 0 and an eps far above every gradient entry, Adam's update is
    ``-(lr / eps) * g``: plain gradient descent with step ``eta = lr / eps``. The service reports
    ``|g|`` (``unclipped_grad_l2:mean``, asked for with a huge ``grad_clip_norm``), so the
    measured change of the loss checks that the service applied exactly the custom loss's
    gradient (a wrong sign or scale would change the loss differently).
    """
    data = [
        ce_datum([10, 20, 30, 40, 50, 60], weights=[1.0, 0.5, 2.0, 1.0, 0.25]),
        ce_datum([70, 80, 90, 100], weights=[0.3, 1.5, 1.0]),
    ]
    with LocalServer() as url, ServiceClient(base_url=url, telemetry=False) as client:
        trainer = client.create_lora_training_client("tinker-lite/tiny-64", rank=4, seed=3).result()
        # Move off the LoRA initialisation (B = 0) so every adapter has a gradient.
        trainer.forward_backward(data, "cross_entropy")
        trainer.optim_step(types.AdamParams(learning_rate=5e-3)).result(timeout=60)

        def plain_step(eta: float, grad_norm: float) -> float:
            eps = 1e6 * max(grad_norm, 1e-12)
            trainer.forward_backward_custom(data, _quadratic).result(timeout=60)
            params = types.AdamParams(
                learning_rate=eta * eps, beta1=0.0, beta2=0.0, eps=eps, grad_clip_norm=1e30
            )
            metrics = trainer.optim_step(params).result(timeout=60).metrics
            assert metrics is not None
            return metrics["unclipped_grad_l2:mean"]

        loss0 = _loss_at(trainer, data)
        grad_norm = plain_step(0.0, 1.0)  # learning rate 0: measures |g| and changes nothing
        assert _loss_at(trainer, data) == pytest.approx(loss0, rel=1e-6)
        assert grad_norm > 0
        eta = 2e-3 * loss0 / grad_norm**2
        assert plain_step(eta, grad_norm) == pytest.approx(grad_norm, rel=1e-4)
        loss1 = _loss_at(trainer, data)
        predicted = -eta * grad_norm**2
        assert loss1 - loss0 == pytest.approx(predicted, rel=0.01)


def test_torch_loss_uses_autograd(trainer: TrainingClient, fake: FakeTinker) -> None:
    torch = pytest.importorskip("torch")

    def loss_fn(data: list[types.Datum], logprobs: list[Any]) -> tuple[Any, dict[str, float]]:
        weights = [torch.tensor(d.loss_fn_inputs["weights"].to_numpy()) for d in data]
        loss = sum((lp**2 * w).sum() for lp, w in zip(logprobs, weights, strict=True))
        return loss, {"torch": 1.0}

    out = trainer.forward_backward_custom(_data(), loss_fn).result(timeout=30)
    backward = fake.submits("forward_backward")[0].json()["forward_backward_input"]["data"]
    # d/dlp (w * lp**2) = 2 * w * lp = -2 * w at lp = -1, sent as weights = -grad = 2 * w
    assert backward[0]["loss_fn_inputs"]["weights"]["data"] == [1.0, 2.0, 4.0]
    assert out.metrics["torch"] == 1.0


def _handle(session_id: str, loss_id: str | None) -> Any:
    from tinker_lite import LossHandle

    inputs = (types.CustomLossInput(name="logprobs", rank=1),)
    return LossHandle(name="neg", inputs=inputs, session_id=session_id, graph=None, loss_id=loss_id)


def test_an_uploaded_loss_handle_is_one_custom_forward_backward(
    fake: FakeTinker, trainer: TrainingClient
) -> None:
    session_id = trainer._context.holder.ensure_session()
    trainer.forward_backward_custom(_data(), _handle(session_id, "loss-7")).result(timeout=30)
    assert fake.submits("forward") == []  # the service runs the loss: no client-side pass
    (sent,) = fake.submits("forward_backward")
    body = sent.json()["forward_backward_input"]
    assert (body["loss_fn"], body["loss_fn_config"]) == ("custom", {"loss_id": "loss-7"})


def test_a_loss_handle_of_another_session_is_refused_before_sending(
    fake: FakeTinker, trainer: TrainingClient
) -> None:
    with pytest.raises(InvalidInputError, match=r"loss_fn.*created in session other-session"):
        trainer.forward_backward_custom(_data(), _handle("other-session", "loss-7"))
    assert fake.submits("forward") == []
    assert fake.submits("forward_backward") == []
