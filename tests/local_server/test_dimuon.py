"""The local server's Dimuon optimizer (0.38 ``DimuonOptimizerConfig`` / ``DimuonParams``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.support.local_server import Api, datum, fb_body
from tinker_lite import ServiceClient, TrainingClient, types
from tinker_lite._errors import BadRequestError, RequestFailedError
from tinker_lite.local import LocalServer
from tinker_lite.local.model.optimizer import Dimuon, orthogonalise

BASE_MODEL = "tinker-lite/tiny-64"
TOKENS = list(b"the cat sat on the mat. the cat sat on the mat.")
OTHER_TOKENS = list(b"a dog ran in the park, a dog ran home.")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with LocalServer(long_poll_s=0.2) as url:
        yield url


@pytest.fixture(scope="module")
def service(base_url: str) -> Iterator[ServiceClient]:
    with ServiceClient(base_url=base_url, telemetry=False) as client:
        yield client


@pytest.fixture
def api(base_url: str) -> Iterator[Api]:
    client = Api(base_url)
    yield client
    client.close()


def sft_datum(tokens: list[int] = TOKENS) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


def dimuon_client(service: ServiceClient) -> TrainingClient:
    return service.create_lora_training_client(
        BASE_MODEL, rank=8, seed=3, optimizer=types.DimuonOptimizerConfig()
    ).result()


def train_step(trainer: TrainingClient, tokens: list[int] = TOKENS) -> float:
    """One forward_backward + Dimuon step; the loss before the step."""
    result = trainer.forward_backward([sft_datum(tokens)], "cross_entropy").result(timeout=60)
    trainer.optim_step(types.DimuonParams(learning_rate=0.01, beta1=0.9)).result(timeout=60)
    return float(result.metrics["loss:sum"])


def logprobs(trainer: TrainingClient) -> np.ndarray[Any, Any]:
    out = trainer.forward([sft_datum(OTHER_TOKENS)], "cross_entropy").result(timeout=60)
    return np.asarray(out.loss_fn_outputs[0]["logprobs"].tolist())


# -- the update --------------------------------------------------------------------------------


def test_newton_schulz_brings_singular_values_near_one() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(8, 32)) * np.linspace(0.2, 5.0, 32)
    before = np.linalg.svd(matrix, compute_uv=False)
    assert before.max() / before.min() > 3
    for m in (matrix, matrix.T):
        result = orthogonalise(m)
        assert result.shape == m.shape
        singular = np.linalg.svd(result, compute_uv=False)
        assert np.all((singular > 0.6) & (singular < 1.3)), singular
        # the direction is kept: close to U V^T of the input
        u, _, vt = np.linalg.svd(m, full_matrices=False)
        polar = u @ vt
        assert np.sum(result * polar) / np.sum(polar * polar) > 0.85


def test_dimuon_step_follows_the_momentum_rule() -> None:
    dimuon = Dimuon(np.dtype(np.float64))
    params = {"w": np.zeros((2, 6)), "b": np.zeros(3)}
    g1 = {"w": np.arange(12.0).reshape(2, 6) - 5, "b": np.array([1.0, -2.0, 0.5])}
    g2 = {"w": np.ones((2, 6)), "b": np.array([0.0, 1.0, 1.0])}
    first, metrics = dimuon.step(params, g1, learning_rate=0.1, beta1=0.5)
    assert metrics is None
    second, _ = dimuon.step(first, g2, learning_rate=0.1, beta1=0.5)
    momentum = {k: 0.5 * g1[k] + g2[k] for k in g1}
    # 1-D: the momentum itself; 2-D wide (rows <= cols): orthogonalised, scale 1
    np.testing.assert_allclose(second["b"], first["b"] - 0.1 * momentum["b"])
    np.testing.assert_allclose(second["w"], first["w"] - 0.1 * orthogonalise(momentum["w"]))
    state = dimuon.state(second)
    np.testing.assert_allclose(state["w.momentum_buffer"], momentum["w"])
    assert int(state["step"]) == 2
    # a tall matrix is scaled by sqrt(rows / cols); clipping reports the unclipped norm
    tall = Dimuon(np.dtype(np.float64))
    grad = np.arange(8.0).reshape(8, 1) + 1
    new, metrics = tall.step(
        {"t": np.zeros((8, 1))}, {"t": grad}, learning_rate=1.0, beta1=0.9, grad_clip_norm=1.0
    )
    assert metrics == pytest.approx({"unclipped_grad_l2:mean": float(np.linalg.norm(grad))})
    expected = -orthogonalise(grad / np.linalg.norm(grad)) * np.sqrt(8.0)
    np.testing.assert_allclose(new["t"], expected)


# -- end to end with tinker_lite as the client ---------------------------------------------------


def test_dimuon_model_trains_and_reports_its_optimizer(service: ServiceClient) -> None:
    trainer = dimuon_client(service)
    assert isinstance(trainer.get_info().optimizer_config, types.DimuonOptimizerConfig)
    losses = [train_step(trainer) for _ in range(15)]
    assert losses[-1] < losses[0] / 4, losses


def test_a_step_of_the_other_family_is_refused_naming_both(service: ServiceClient) -> None:
    dimuon = dimuon_client(service)
    with pytest.raises(BadRequestError, match=r"(?s)'dimuon'.*DimuonOptimizerConfig.*adam_params"):
        dimuon.optim_step(types.AdamParams(learning_rate=1e-3)).result(timeout=60)
    adamw = service.create_lora_training_client(BASE_MODEL, rank=8).result()
    assert isinstance(adamw.get_info().optimizer_config, types.AdamOptimizerConfig)
    with pytest.raises(BadRequestError, match=r"(?s)'adamw'.*AdamOptimizerConfig.*dimuon"):
        adamw.optim_step(types.DimuonParams(learning_rate=1e-3)).result(timeout=60)
    # the refused step consumed its seq_id: both models keep training
    train_step(dimuon)
    adamw.optim_step(types.AdamParams(learning_rate=1e-3)).result(timeout=60)


def test_save_and_load_with_optimizer_round_trips_the_momentum(service: ServiceClient) -> None:
    original = dimuon_client(service)
    for _ in range(3):
        train_step(original)
    saved = original.save_state("dimuon-mid").result(timeout=60).path
    train_step(original, OTHER_TOKENS)
    expected = logprobs(original)

    restored = dimuon_client(service)
    with pytest.warns(FutureWarning, match="load_state"):
        restored.load_state_with_optimizer(saved).result(timeout=60)
    train_step(restored, OTHER_TOKENS)
    np.testing.assert_array_equal(logprobs(restored), expected)

    # without the momentum the same step lands elsewhere
    weights_only = dimuon_client(service)
    with pytest.warns(FutureWarning, match="load_state"):
        weights_only.load_state(saved).result(timeout=60)
    train_step(weights_only, OTHER_TOKENS)
    assert not np.allclose(logprobs(weights_only), expected, atol=1e-4)

    # a new run from the state keeps the Dimuon optimizer and its momentum
    resumed = service.create_training_client_from_state_with_optimizer(saved).result()
    assert isinstance(resumed.get_info().optimizer_config, types.DimuonOptimizerConfig)
    train_step(resumed, OTHER_TOKENS)
    np.testing.assert_array_equal(logprobs(resumed), expected)

    # Dimuon state cannot become AdamW state
    adamw = service.create_lora_training_client(BASE_MODEL, rank=8, seed=3).result()
    with (
        pytest.raises(RequestFailedError, match=r"dimuon optimizer state.*'adamw'"),
        pytest.warns(FutureWarning, match="load_state"),
    ):
        adamw.load_state_with_optimizer(saved).result(timeout=60)


# -- request validation (raw HTTP: tinker_lite's own types refuse these before sending) --------


def _dimuon_model(api: Api) -> str:
    body = {
        "session_id": api.session(),
        "model_seq_id": 0,
        "base_model": BASE_MODEL,
        "lora_config": {"rank": 8, "seed": 3},
        "optimizer_config": {"type": "dimuon", "version": 1},
    }
    model_id: str = api.run("/api/v1/create_model", body)["model_id"]
    return model_id


@pytest.mark.parametrize(
    ("params", "loc"),
    [
        ({"type": "dimuon", "learning_rate": -0.1}, "learning_rate"),
        ({"type": "dimuon", "learning_rate": 0.1, "beta1": 1.0}, "beta1"),
        ({"type": "dimuon", "learning_rate": "fast"}, "learning_rate"),
        ({"type": "dimuon", "learning_rate": 0.1, "grad_clip_norm": None}, "grad_clip_norm"),
        ({"type": "dimuon"}, "learning_rate"),
        ({"type": "dimuon", "learning_rate": 0.1, "beta2": 0.9}, "beta2"),
        ({"type": "lion", "learning_rate": 0.1}, "type"),
    ],
)
def test_bad_dimuon_params_are_refused_naming_the_field(
    api: Api, params: dict[str, Any], loc: str
) -> None:
    model_id = _dimuon_model(api)
    body = {"model_id": model_id, "seq_id": 1, "type": "optim_step", "optimizer_params": params}
    response = api.post("/api/v1/optim_step", body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "optimizer_params", loc]
    # the refusal consumed seq_id 1; a good step at seq_id 2 runs
    good = {"type": "dimuon", "learning_rate": 0.01, "grad_clip_norm": -1.0}
    api.run(
        "/api/v1/forward_backward",
        fb_body(model_id, 2, [datum(TOKENS)], "forward_backward_input"),
    )
    result = api.run(
        "/api/v1/optim_step", {"model_id": model_id, "seq_id": 3, "optimizer_params": good}
    )
    assert "metrics" not in result or result["metrics"] is None, result


def test_optim_step_bodies_and_configs_are_checked(api: Api) -> None:
    model_id = _dimuon_model(api)
    both = {
        "model_id": model_id,
        "seq_id": 1,
        "adam_params": {},
        "optimizer_params": {"type": "dimuon", "learning_rate": 0.1},
    }
    response = api.post("/api/v1/optim_step", both)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "adam_params"]
    create = {
        "session_id": api.session(),
        "model_seq_id": 0,
        "base_model": BASE_MODEL,
        "optimizer_config": {"type": "dimuon", "version": 2},
    }
    response = api.post("/api/v1/create_model", create)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "optimizer_config", "version"]
    response = api.post("/api/v1/create_model", {**create, "optimizer_config": {"type": "sgd"}})
    assert response.status_code == 400
    assert "'sgd'" in response.json()["detail"]
