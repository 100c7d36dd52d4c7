"""Tests for the local server's tiny numpy language model (tinker_lite.local.model.tiny_lm)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from tinker_lite.local.model import kernels
from tinker_lite.local.model import tiny_lm as lm
from tinker_lite.local.model.tiny_lm import DatumArrays, TinyLM, UserInputError
from tinker_lite.local.model.tokenizer_files import (
    CONFIG_FILE,
    build_config_json,
    build_tokenizer_json,
)

Array = npt.NDArray[Any]
ADAM = {"learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8}


def tiny_model(**kwargs: Any) -> TinyLM:
    """A float64 model small enough for finite differences."""
    options: dict[str, Any] = {
        "rank": 4,
        "d_model": 16,
        "n_layers": 2,
        "n_heads": 2,
        "context_length": 32,
        "dtype": np.float64,
    }
    options.update(kwargs)
    return TinyLM("test/tiny-base", **options)


def randomize_adapter(model: TinyLM, seed: int = 0, scale: float = 0.3) -> dict[str, Array]:
    """Give every LoRA matrix (B included) random float64 values, so every gradient is non-zero."""
    rng = np.random.default_rng(seed)
    state = {
        key: scale * rng.standard_normal(value.shape)
        for key, value in model.adapter_state().items()
    }
    model.load_adapter_state(state)
    return state


def ce_datum(sequence: list[int], weights: list[float] | None = None) -> DatumArrays:
    seq = np.array(sequence, dtype=np.int64)
    inputs: dict[str, Array] = {"target_tokens": seq[1:]}
    if weights is not None:
        inputs["weights"] = np.array(weights, dtype=np.float32)
    return DatumArrays(tokens=seq[:-1], inputs=inputs)


def rl_datum(sequence: list[int], sampler_logprobs: Array, advantages: Array) -> DatumArrays:
    seq = np.array(sequence, dtype=np.int64)
    return DatumArrays(
        tokens=seq[:-1],
        inputs={
            "target_tokens": seq[1:],
            "logprobs": np.asarray(sampler_logprobs, dtype=np.float32),
            "advantages": np.asarray(advantages, dtype=np.float32),
        },
    )


def loss_value(
    model: TinyLM, batch: list[DatumArrays], loss_fn: str, config: Mapping[str, float] | None
) -> float:
    _, metrics = model.forward_backward(batch, loss_fn, config, backward=False)
    return metrics["loss:sum"]


def gradients(model: TinyLM) -> dict[str, Array]:
    return {key: value.copy() for key, value in model._grads.items()}


def check_gradients(
    model: TinyLM,
    batch: list[DatumArrays],
    loss_fn: str,
    config: Mapping[str, float] | None = None,
    *,
    eps: float = 1e-6,
    scale: float = 0.3,
) -> None:
    """Compare analytic LoRA gradients with central differences along a random direction."""
    state = randomize_adapter(model, scale=scale)
    model.reset_optimizer()
    model.forward_backward(batch, loss_fn, config, backward=True)
    analytic = gradients(model)
    assert set(analytic) == set(state)
    rng = np.random.default_rng(1)
    for key in sorted(state):
        direction = rng.standard_normal(state[key].shape)
        plus = dict(state)
        plus[key] = state[key] + eps * direction
        model.load_adapter_state(plus)
        up = loss_value(model, batch, loss_fn, config)
        minus = dict(state)
        minus[key] = state[key] - eps * direction
        model.load_adapter_state(minus)
        down = loss_value(model, batch, loss_fn, config)
        numeric = (up - down) / (2 * eps)
        expected = float(np.vdot(analytic[key], direction))
        assert abs(expected) > 1e-8, key
        assert numeric == pytest.approx(expected, rel=1e-5, abs=1e-8), key
    model.load_adapter_state(state)


SEQ_A = [72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100]
SEQ_B = [5, 200, 17, 99, 256, 3, 42]


def datum_logprobs(model: TinyLM, sequence: list[int]) -> Array:
    outputs, _ = model.forward_backward([ce_datum(sequence)], "cross_entropy", None, backward=False)
    return outputs[0]["logprobs"].astype(np.float64)


def rl_batch(model: TinyLM, ratios: list[Array], advantages: list[Array]) -> list[DatumArrays]:
    """RL datums whose sampler logprobs put exp(lp - q) at the given ratios."""
    randomize_adapter(model)
    batch = []
    for sequence, ratio, adv in zip((SEQ_A, SEQ_B), ratios, advantages, strict=True):
        lp = datum_logprobs(model, sequence)
        batch.append(rl_datum(sequence, lp - np.log(ratio), adv))
    return batch


# ------------------------------------------------------------------------------------------------
# gradients


def test_gradient_cross_entropy_1d_every_placement() -> None:
    model = tiny_model()
    batch = [ce_datum(SEQ_A, [1.0, 0.5, -2.0, 1.0, 0.0, 1.0, 1.0, 3.0, 1.0, 1.0]), ce_datum(SEQ_B)]
    check_gradients(model, batch, "cross_entropy")


@pytest.mark.parametrize(
    "placement",
    [
        {"train_attn": True, "train_mlp": False, "train_unembed": False},
        {"train_attn": False, "train_mlp": True, "train_unembed": False},
        {"train_attn": False, "train_mlp": False, "train_unembed": True},
    ],
)
def test_gradient_each_lora_placement_alone(placement: dict[str, bool]) -> None:
    model = tiny_model(**placement)
    check_gradients(model, [ce_datum(SEQ_A), ce_datum(SEQ_B)], "cross_entropy")


def test_gradient_cross_entropy_top_k() -> None:
    model = tiny_model(n_layers=1)
    rng = np.random.default_rng(3)
    seq = np.array(SEQ_A, dtype=np.int64)
    targets = rng.integers(0, lm.VOCAB_SIZE, (len(seq) - 1, 3))
    targets[:, 0] = seq[1:]
    weights = rng.uniform(-1.0, 1.0, targets.shape).astype(np.float32)
    datum = DatumArrays(seq[:-1], {"target_tokens": targets, "weights": weights})
    check_gradients(model, [datum], "cross_entropy")
    outputs, metrics = model.forward_backward([datum], "cross_entropy", None, backward=False)
    assert outputs[0]["logprobs"].shape == targets.shape
    assert outputs[0]["logprobs"].dtype == np.float32
    expected_elementwise = -(outputs[0]["logprobs"].astype(np.float64) * weights).sum(axis=1)
    np.testing.assert_allclose(outputs[0]["elementwise_loss"], expected_elementwise, rtol=1e-5)
    assert metrics["loss:sum"] == pytest.approx(expected_elementwise.sum(), rel=1e-5)


def test_gradient_importance_sampling() -> None:
    model = tiny_model()
    rng = np.random.default_rng(4)
    ratios = [rng.uniform(0.5, 1.5, len(SEQ_A) - 1), rng.uniform(0.5, 1.5, len(SEQ_B) - 1)]
    advantages = [rng.standard_normal(len(SEQ_A) - 1), rng.standard_normal(len(SEQ_B) - 1)]
    batch = rl_batch(model, ratios, advantages)
    check_gradients(model, batch, "importance_sampling")
    outputs, _ = model.forward_backward(batch, "importance_sampling", None, backward=False)
    np.testing.assert_allclose(
        outputs[0]["elementwise_loss"], -ratios[0] * advantages[0], rtol=1e-4, atol=1e-6
    )


def test_gradient_ppo_both_clip_branches() -> None:
    model = tiny_model()
    # per token: (ratio, advantage) -> clipped branch active?
    cases = [(1.5, 1.0), (0.5, -1.0), (1.5, -0.7), (0.5, 0.8), (1.0, 1.3), (1.1, -0.4)]
    ratio_a = np.array([cases[i % len(cases)][0] for i in range(len(SEQ_A) - 1)])
    adv_a = np.array([cases[i % len(cases)][1] for i in range(len(SEQ_A) - 1)])
    ratio_b = np.full(len(SEQ_B) - 1, 1.4)
    adv_b = np.full(len(SEQ_B) - 1, 2.0)  # every token clipped: no gradient from datum B
    batch = rl_batch(model, [ratio_a, ratio_b], [adv_a, adv_b])
    check_gradients(model, batch, "ppo")
    outputs, _ = model.forward_backward(batch, "ppo", None, backward=False)
    expected = -np.minimum(ratio_a * adv_a, np.clip(ratio_a, 0.8, 1.2) * adv_a)
    np.testing.assert_allclose(outputs[0]["elementwise_loss"], expected, rtol=1e-4, atol=1e-6)
    # a fully clipped datum contributes no gradient
    model.reset_optimizer()
    model.forward_backward([batch[1]], "ppo", None, backward=True)
    assert all(not np.any(grad) for grad in gradients(model).values())
    # custom thresholds from loss_fn_config
    config = {"clip_low_threshold": 0.4, "clip_high_threshold": 1.6}
    check_gradients(model, batch, "ppo", config)


def test_gradient_cispo() -> None:
    model = tiny_model()
    # cispo stops the gradient through the clipped ratio; with every ratio outside [lo, hi] the
    # clipped ratio is locally constant, so finite differences of the loss see the same gradient
    config = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}
    ratio_a = np.where(np.arange(len(SEQ_A) - 1) % 2 == 0, 0.5, 1.6)
    ratio_b = np.full(len(SEQ_B) - 1, 2.0)
    rng = np.random.default_rng(5)
    advantages = [rng.standard_normal(len(SEQ_A) - 1), rng.standard_normal(len(SEQ_B) - 1)]
    batch = rl_batch(model, [ratio_a, ratio_b], advantages)
    check_gradients(model, batch, "cispo", config)
    outputs, _ = model.forward_backward(batch, "cispo", config, backward=False)
    lp = outputs[0]["logprobs"].astype(np.float64)
    expected = -np.clip(ratio_a, 0.8, 1.2) * lp * advantages[0]
    np.testing.assert_allclose(outputs[0]["elementwise_loss"], expected, rtol=1e-4, atol=1e-6)


def test_cispo_gradient_inside_the_clip_range_treats_the_ratio_as_constant() -> None:
    model = tiny_model(n_layers=1)
    rng = np.random.default_rng(6)
    ratio = rng.uniform(0.5, 3.0, len(SEQ_A) - 1)  # inside the default [0, 4]
    adv = rng.standard_normal(len(SEQ_A) - 1)
    (datum,) = rl_batch(model, [ratio, ratio[: len(SEQ_B) - 1]], [adv, adv[: len(SEQ_B) - 1]])[:1]
    model.reset_optimizer()
    model.forward_backward([datum], "cispo", None, backward=True)
    cispo_grads = gradients(model)
    # the same gradient as cross-entropy weighted by stopgrad(ratio)·A
    seq = np.array(SEQ_A, dtype=np.int64)
    surrogate = DatumArrays(seq[:-1], {"target_tokens": seq[1:], "weights": ratio * adv})
    model.reset_optimizer()
    model.forward_backward([surrogate], "cross_entropy", None, backward=True)
    # (the surrogate's weights use the nominal ratios; the sampler logprobs went through float32)
    for key, grad in gradients(model).items():
        np.testing.assert_allclose(
            cispo_grads[key], grad, rtol=1e-4, atol=1e-5 * np.abs(grad).max()
        )


def test_gradient_dro() -> None:
    model = tiny_model()
    rng = np.random.default_rng(7)
    ratios = [rng.uniform(0.3, 3.0, len(SEQ_A) - 1), rng.uniform(0.3, 3.0, len(SEQ_B) - 1)]
    advantages = [rng.standard_normal(len(SEQ_A) - 1), rng.standard_normal(len(SEQ_B) - 1)]
    batch = rl_batch(model, ratios, advantages)
    check_gradients(model, batch, "dro", {"beta": 0.3})
    check_gradients(model, batch, "dro")
    outputs, _ = model.forward_backward(batch, "dro", None, backward=False)
    lp = outputs[0]["logprobs"].astype(np.float64)
    q = lp - np.log(ratios[0])
    expected = -(lp * advantages[0] - 0.5 * lm.DEFAULT_DRO_BETA * (lp - q) ** 2)
    np.testing.assert_allclose(outputs[0]["elementwise_loss"], expected, rtol=1e-4, atol=1e-6)


def gspo_expected(
    lp: Array, q: Array, adv: Array, low: float = 0.8, high: float = 1.2
) -> tuple[float, float]:
    """docs/service.rst §1.7 gspo for one datum, by the formula: (loss, sequence ratio)."""
    trained = adv != 0
    ratio = math.exp(float(np.mean(lp[trained] - q[trained])))
    advantage = float(np.mean(adv[trained]))
    return -min(ratio * advantage, min(max(ratio, low), high) * advantage), ratio


def test_gradient_gspo_sequence_level_ratio() -> None:
    model = tiny_model()
    rng = np.random.default_rng(8)
    n_a, n_b = len(SEQ_A) - 1, len(SEQ_B) - 1
    # datum A: mixed per-token ratios whose sequence ratio is inside [0.8, 1.2]; its first three
    # positions are prompt (advantage 0, not trained). Datum B: every ratio 1.5 with a positive
    # advantage, so the clipped branch is active and B adds no gradient.
    ratio_a = np.exp(rng.uniform(-0.3, 0.3, n_a))
    adv_a = np.concatenate([np.zeros(3), np.full(n_a - 3, 0.7)])
    ratio_b = np.full(n_b, 1.5)
    adv_b = np.full(n_b, 2.0)
    batch = rl_batch(model, [ratio_a, ratio_b], [adv_a, adv_b])
    check_gradients(model, batch, "gspo")
    outputs, metrics = model.forward_backward(batch, "gspo", None, backward=False)
    total = 0.0
    for output, datum in zip(outputs, batch, strict=True):
        lp = output["logprobs"].astype(np.float64)
        q = datum.inputs["logprobs"].astype(np.float64)
        adv = datum.inputs["advantages"].astype(np.float64)
        expected, _ = gspo_expected(lp, q, adv)
        elementwise = output["elementwise_loss"].astype(np.float64)
        assert elementwise.sum() == pytest.approx(expected, rel=1e-5)
        assert not np.any(elementwise[adv == 0])  # untrained positions carry no loss
        total += expected
    assert metrics["loss:sum"] == pytest.approx(total, rel=1e-5)
    assert (
        0.8
        < gspo_expected(
            outputs[0]["logprobs"].astype(np.float64),
            batch[0].inputs["logprobs"].astype(np.float64),
            adv_a,
        )[1]
        < 1.2
    )
    # the clipped datum alone contributes no gradient; a negative advantage unclips it
    model.reset_optimizer()
    model.forward_backward([batch[1]], "gspo", None, backward=True)
    assert all(not np.any(grad) for grad in gradients(model).values())
    flipped = DatumArrays(batch[1].tokens, {**batch[1].inputs, "advantages": -adv_b})
    check_gradients(model, [flipped], "gspo")
    # custom thresholds from loss_fn_config put datum B's ratio inside the range
    check_gradients(model, batch, "gspo", {"clip_low_threshold": 0.5, "clip_high_threshold": 2.0})


def test_gspo_without_trained_tokens_is_zero() -> None:
    model = tiny_model(n_layers=1)
    (datum,) = rl_batch(
        model,
        [np.ones(len(SEQ_A) - 1), np.ones(len(SEQ_B) - 1)],
        [
            np.zeros(len(SEQ_A) - 1),
            np.zeros(len(SEQ_B) - 1),
        ],
    )[:1]
    model.reset_optimizer()
    outputs, metrics = model.forward_backward([datum], "gspo", None, backward=True)
    assert metrics["loss:sum"] == 0.0
    assert not np.any(outputs[0]["elementwise_loss"])
    assert all(not np.any(grad) for grad in gradients(model).values())


@pytest.mark.parametrize(
    ("loss_fn", "why"),
    [
        ("stable_reinforce", r"'stable_reinforce'.*not published.*'importance_sampling' or 'ppo'"),
        ("custom", r"'custom'.*create_custom_loss.*forward_backward_custom"),
    ],
)
def test_loss_functions_of_the_sdk_it_does_not_run_are_refused_with_the_reason(
    loss_fn: str, why: str
) -> None:
    model = tiny_model(n_layers=1)
    with pytest.raises(UserInputError, match=why) as info:
        model.forward_backward([ce_datum(SEQ_A)], loss_fn, None, backward=True)
    assert "known loss functions" not in str(info.value)


def test_every_loss_function_of_the_sdk_runs_or_is_refused_by_name() -> None:
    from tinker_lite.types import LossFnType

    model = tiny_model(n_layers=1)
    seq = np.array(SEQ_A, dtype=np.int64)
    n = len(seq) - 1
    rl = {"target_tokens": seq[1:], "logprobs": np.full(n, -3.0), "advantages": np.ones(n)}
    refusals: dict[str, str] = {}
    for loss_fn in LossFnType:
        datum = ce_datum(SEQ_A) if loss_fn == "cross_entropy" else DatumArrays(seq[:-1], rl)
        try:
            _, metrics = model.forward_backward([datum], loss_fn.value, None, backward=False)
        except UserInputError as e:
            refusals[loss_fn.value] = str(e)
        else:
            assert math.isfinite(metrics["loss:sum"]), loss_fn
    assert sorted(refusals) == ["custom", "stable_reinforce"]
    for name, message in refusals.items():
        assert f"loss function '{name}'" in message
        assert "known loss functions" not in message


def test_dro_accepts_reference_sampler_and_rejects_other_string_values() -> None:
    """0.38 sends dro's ``reference: "sampler"``: accepted, same result as without it."""
    model = tiny_model()
    rng = np.random.default_rng(5)
    ratios = [rng.uniform(0.5, 2.0, len(SEQ_A) - 1), rng.uniform(0.5, 2.0, len(SEQ_B) - 1)]
    batch = rl_batch(model, ratios, [np.ones(len(SEQ_A) - 1), -np.ones(len(SEQ_B) - 1)])
    plain, plain_metrics = model.forward_backward(batch, "dro", {"beta": 0.1}, backward=False)
    with_reference, metrics = model.forward_backward(
        batch, "dro", {"beta": 0.1, "reference": "sampler"}, backward=False
    )
    for got, expected in zip(with_reference, plain, strict=True):
        np.testing.assert_array_equal(got["elementwise_loss"], expected["elementwise_loss"])
    assert metrics == plain_metrics
    bad_configs: list[tuple[str, dict[str, Any], str]] = [
        (
            "dro",
            {"reference": "base"},
            r"loss_fn_config\['reference'\] must be one of \['sampler'\]",
        ),
        ("dro", {"reference": 1.0}, r"loss_fn_config\['reference'\] must be one of"),
        ("ppo", {"reference": "sampler"}, "unexpected loss_fn_config key 'reference' for loss ppo"),
        ("dro", {"mode": "fast"}, r"unexpected loss_fn_config key 'mode'.*\['beta', 'reference'\]"),
    ]
    for loss_fn, config, match in bad_configs:
        with pytest.raises(UserInputError, match=match):
            model.forward_backward(batch, loss_fn, config, backward=True)
    assert all(not np.any(grad) for grad in gradients(model).values())


def test_gradient_long_sequence_default_architecture() -> None:
    # long enough that every product is split into single-threaded blocks
    model = TinyLM("test/base", rank=4, dtype=np.float64)
    sequence = [(7 * i + 3) % 256 for i in range(301)]
    batch = [ce_datum(sequence, [1.0] * 150 + [-0.5] * 150)]
    check_gradients(model, batch, "cross_entropy", scale=0.05)


def test_blocked_matrix_products_match_plain_matmul() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1000, 64))
    b = rng.standard_normal((64, 300))
    c = rng.standard_normal((1000, 300))
    np.testing.assert_allclose(kernels.mm(a, b), a @ b, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(kernels.mm(c, b.T), c @ b.T, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(kernels.mm_tn(a, c), a.T @ c, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(kernels.mm_tn(a[:5], c[:5]), a[:5].T @ c[:5], rtol=1e-10, atol=1e-10)
    x = rng.standard_normal((2, 3, 301, 16))
    y = rng.standard_normal((2, 3, 16, 301))
    np.testing.assert_allclose(kernels.bmm(x, y), x @ y, rtol=1e-10, atol=1e-10)
    xy = x @ y
    np.testing.assert_allclose(
        kernels.bmm(xy.transpose(0, 1, 3, 2), x),
        xy.transpose(0, 1, 3, 2) @ x,
        rtol=1e-10,
        atol=1e-10,
    )


def test_padding_and_grouping_do_not_change_results() -> None:
    model = tiny_model()
    randomize_adapter(model)
    long_seq = list(range(1, 30))
    batch = [ce_datum(SEQ_B), ce_datum(long_seq), ce_datum(SEQ_A), ce_datum([7, 8])]
    together, metrics = model.forward_backward(batch, "cross_entropy", None, backward=True)
    joint = gradients(model)
    model.reset_optimizer()
    total = 0.0
    for datum, output in zip(batch, together, strict=True):
        alone, single = model.forward_backward([datum], "cross_entropy", None, backward=True)
        np.testing.assert_allclose(alone[0]["logprobs"], output["logprobs"], rtol=1e-6)
        total += single["loss:sum"]
    assert metrics["loss:sum"] == pytest.approx(total, rel=1e-9)
    for key, grad in gradients(model).items():
        np.testing.assert_allclose(grad, joint[key], rtol=1e-7, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# forward_backward semantics


def test_cross_entropy_outputs_and_missing_weights_mean_ones() -> None:
    model = TinyLM("test/base")
    out_none, metrics_none = model.forward_backward(
        [ce_datum(SEQ_A)], "cross_entropy", None, backward=False
    )
    out_ones, metrics_ones = model.forward_backward(
        [ce_datum(SEQ_A, [1.0] * (len(SEQ_A) - 1))], "cross_entropy", None, backward=False
    )
    logprobs = out_none[0]["logprobs"]
    assert logprobs.dtype == np.float32
    assert logprobs.shape == (len(SEQ_A) - 1,)
    assert np.all(logprobs < 0)
    np.testing.assert_array_equal(logprobs, out_ones[0]["logprobs"])
    np.testing.assert_allclose(out_none[0]["elementwise_loss"], -logprobs, rtol=1e-6)
    assert metrics_none == metrics_ones
    assert metrics_none["loss:sum"] == pytest.approx(-float(logprobs.sum()), rel=1e-5)
    assert list(metrics_none) == ["loss:sum"]


def test_forward_does_not_touch_gradients() -> None:
    model = tiny_model()
    randomize_adapter(model)
    model.forward_backward([ce_datum(SEQ_A)], "cross_entropy", None, backward=False)
    assert all(not np.any(grad) for grad in gradients(model).values())
    forward_out, _ = model.forward_backward(
        [ce_datum(SEQ_A)], "cross_entropy", None, backward=False
    )
    backward_out, _ = model.forward_backward(
        [ce_datum(SEQ_A)], "cross_entropy", None, backward=True
    )
    np.testing.assert_array_equal(forward_out[0]["logprobs"], backward_out[0]["logprobs"])


def test_gradient_accumulation_equals_one_combined_call() -> None:
    first, second = [ce_datum(SEQ_A)], [ce_datum(SEQ_B), ce_datum([1, 2, 3, 4])]
    split, joint = tiny_model(), tiny_model()
    for model in (split, joint):
        randomize_adapter(model)
    split.forward_backward(first, "cross_entropy", None, backward=True)
    split.forward_backward(second, "cross_entropy", None, backward=True)
    joint.forward_backward(first + second, "cross_entropy", None, backward=True)
    split_grads, joint_grads = gradients(split), gradients(joint)
    for key in joint_grads:
        np.testing.assert_allclose(split_grads[key], joint_grads[key], rtol=1e-9, atol=1e-12)
    split.optim_step(**ADAM)
    joint.optim_step(**ADAM)
    for key, value in joint.adapter_state().items():
        np.testing.assert_allclose(split.adapter_state()[key], value, rtol=1e-6)
    # gradients are zeroed after the step
    assert all(not np.any(grad) for grad in gradients(joint).values())


def test_training_reduces_cross_entropy() -> None:
    model = TinyLM("test/base", rank=8, seed=3)
    text = list(b"the quick brown fox jumps over the lazy dog. ")
    batch = [ce_datum(text)]
    losses = []
    for _ in range(20):
        _, metrics = model.forward_backward(batch, "cross_entropy", None, backward=True)
        losses.append(metrics["loss:sum"])
        model.optim_step(learning_rate=2e-2, beta1=0.9, beta2=0.95, eps=1e-8)
    _, metrics = model.forward_backward(batch, "cross_entropy", None, backward=False)
    assert metrics["loss:sum"] < 0.3 * losses[0]
    assert losses[-1] < losses[0]


def reference_adamw(
    params: dict[str, Array],
    grads: dict[str, Array],
    state: dict[str, Any],
    *,
    lr: float,
    b1: float,
    b2: float,
    eps: float,
    wd: float,
    clip: float,
) -> float:
    """torch.optim.AdamW, with global-norm clipping first; returns the unclipped norm."""
    norm = math.sqrt(sum(float((g * g).sum()) for g in grads.values()))
    if clip > 0 and norm > clip:
        grads = {k: g * (clip / norm) for k, g in grads.items()}
    state["t"] += 1
    t = state["t"]
    for key, param in params.items():
        m = state["m"].setdefault(key, np.zeros_like(param))
        v = state["v"].setdefault(key, np.zeros_like(param))
        g = grads[key]
        params[key] = param * (1 - lr * wd)
        m[...] = b1 * m + (1 - b1) * g
        v[...] = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        v_hat = v / (1 - b2**t)
        params[key] = params[key] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return norm


def test_optim_step_matches_reference_adamw() -> None:
    model = tiny_model()
    params = randomize_adapter(model)
    state: dict[str, Any] = {"t": 0, "m": {}, "v": {}}
    steps = [
        {"lr": 1e-2, "b1": 0.9, "b2": 0.95, "eps": 1e-8, "wd": 0.0, "clip": 0.0},
        {"lr": 5e-3, "b1": 0.8, "b2": 0.99, "eps": 1e-12, "wd": 0.1, "clip": 0.0},
        {"lr": 2e-2, "b1": 0.9, "b2": 0.95, "eps": 1e-8, "wd": 0.01, "clip": 1e-3},
        {"lr": 1e-2, "b1": 0.9, "b2": 0.95, "eps": 1e-8, "wd": 0.0, "clip": 1e6},
    ]
    for hyper in steps:
        model.forward_backward(
            [ce_datum(SEQ_A), ce_datum(SEQ_B)], "cross_entropy", None, backward=True
        )
        grads = gradients(model)
        norm = reference_adamw(params, grads, state, **hyper)
        metrics = model.optim_step(
            learning_rate=hyper["lr"],
            beta1=hyper["b1"],
            beta2=hyper["b2"],
            eps=hyper["eps"],
            weight_decay=hyper["wd"],
            grad_clip_norm=hyper["clip"],
        )
        if hyper["clip"] > 0:
            assert metrics is not None
            assert metrics["unclipped_grad_l2:mean"] == pytest.approx(norm, rel=1e-9)
            assert list(metrics) == ["unclipped_grad_l2:mean"]
        else:
            assert metrics is None
        actual = {key: value.copy() for key, value in model._params.items()}
        for key, value in params.items():
            np.testing.assert_allclose(actual[key], value, rtol=1e-6, atol=1e-9)
    assert int(model.optimizer_state()["step"]) == len(steps)


def test_optim_step_rejects_bad_hyperparameters() -> None:
    model = tiny_model()
    with pytest.raises(UserInputError):
        model.optim_step(learning_rate=-1.0, beta1=0.9, beta2=0.95, eps=1e-8)
    with pytest.raises(UserInputError):
        model.optim_step(learning_rate=1e-3, beta1=1.0, beta2=0.95, eps=1e-8)
    with pytest.raises(UserInputError):
        model.optim_step(learning_rate=math.nan, beta1=0.9, beta2=0.95, eps=1e-8)


# ------------------------------------------------------------------------------------------------
# state


def test_adapter_state_round_trip_gives_identical_logprobs() -> None:
    trained = TinyLM("test/base", rank=4)
    for _ in range(3):
        trained.forward_backward([ce_datum(SEQ_A)], "cross_entropy", None, backward=True)
        trained.optim_step(**ADAM)
    state = trained.adapter_state()
    assert all(value.dtype == np.float32 for value in state.values())
    fresh = TinyLM("test/base", rank=4)
    before = datum_logprobs(fresh, SEQ_B)
    fresh.load_adapter_state(state)
    np.testing.assert_array_equal(datum_logprobs(fresh, SEQ_B), datum_logprobs(trained, SEQ_B))
    assert not np.array_equal(before, datum_logprobs(fresh, SEQ_B))
    # copies: mutating the returned arrays changes nothing
    for value in state.values():
        value[...] = 0
    np.testing.assert_array_equal(datum_logprobs(fresh, SEQ_B), datum_logprobs(trained, SEQ_B))


def test_adapter_state_names_and_lora_config() -> None:
    model = TinyLM("test/base", rank=8, train_mlp=False)
    state = model.adapter_state()
    key = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    assert state[key].shape == (8, 64)
    assert state["base_model.model.lm_head.lora_B.weight"].shape == (lm.VOCAB_SIZE, 8)
    assert not any("mlp" in name for name in state)
    assert not np.any(state["base_model.model.lm_head.lora_B.weight"])
    config = model.lora_config()
    assert config["r"] == 8
    assert config["rank"] == 8
    assert config["lora_alpha"] == lm.LORA_ALPHA
    assert config["train_mlp"] is False
    assert config["target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj", "lm_head"]
    with pytest.raises(UserInputError, match="shape"):
        TinyLM("test/base", rank=4, train_mlp=False).load_adapter_state(state)
    with pytest.raises(UserInputError, match="does not match"):
        TinyLM("test/base", rank=8).load_adapter_state(state)


def test_lora_init_is_deterministic_per_seed_and_base_is_per_name() -> None:
    def a_matrix(model: TinyLM) -> Array:
        return model.adapter_state()["base_model.model.lm_head.lora_A.weight"]

    np.testing.assert_array_equal(a_matrix(TinyLM("m", seed=1)), a_matrix(TinyLM("m", seed=1)))
    np.testing.assert_array_equal(a_matrix(TinyLM("m")), a_matrix(TinyLM("m", seed=0)))
    assert not np.array_equal(a_matrix(TinyLM("m", seed=1)), a_matrix(TinyLM("m", seed=2)))
    same = datum_logprobs(TinyLM("base-one"), SEQ_A)
    np.testing.assert_array_equal(same, datum_logprobs(TinyLM("base-one", seed=9), SEQ_A))
    assert not np.allclose(same, datum_logprobs(TinyLM("base-two"), SEQ_A))


def test_optimizer_state_round_trip() -> None:
    first = tiny_model(dtype=np.float32)
    randomize_adapter(first)
    for _ in range(2):
        first.forward_backward([ce_datum(SEQ_A)], "cross_entropy", None, backward=True)
        first.optim_step(**ADAM)
    opt_state = first.optimizer_state()
    assert int(opt_state["step"]) == 2
    assert {k.rsplit(".", 1)[-1] for k in opt_state if k != "step"} == {"exp_avg", "exp_avg_sq"}
    second = tiny_model(dtype=np.float32)
    second.load_adapter_state(first.adapter_state())
    second.load_optimizer_state(opt_state)
    for model in (first, second):
        model.forward_backward([ce_datum(SEQ_B)], "cross_entropy", None, backward=True)
        model.optim_step(**ADAM)
    for key, value in first.adapter_state().items():
        np.testing.assert_array_equal(second.adapter_state()[key], value)
    # a reset optimizer restarts bias correction
    second.reset_optimizer()
    assert int(second.optimizer_state()["step"]) == 0
    with pytest.raises(UserInputError):
        second.load_optimizer_state({"step": np.array(1)})


# ------------------------------------------------------------------------------------------------
# validation


def expect_user_error(model: TinyLM, batch: list[DatumArrays], loss_fn: str, match: str) -> None:
    with pytest.raises(UserInputError, match=match):
        model.forward_backward(batch, loss_fn, None, backward=True)
    assert all(not np.any(grad) for grad in gradients(model).values())


def test_user_errors_in_forward_backward() -> None:
    model = TinyLM("test/base")
    seq = np.array(SEQ_A, dtype=np.int64)
    n = len(seq) - 1
    ones = np.ones(n, dtype=np.float32)
    rl_inputs: dict[str, Array] = {"target_tokens": seq[1:], "logprobs": -ones, "advantages": ones}

    with pytest.raises(UserInputError, match=r"Unknown loss function 'nope'.*cross_entropy.*dro"):
        model.forward_backward([ce_datum(SEQ_A)], "nope", None, backward=True)
    expect_user_error(
        model,
        [DatumArrays(seq[:-1], {**rl_inputs, "mask": ones})],
        "ppo",
        r"^Could not convert loss function inputs to array record: unexpected key 'mask' for "
        r"loss ppo; expected \['advantages', 'logprobs', 'target_tokens'\]",
    )
    expect_user_error(
        model,
        [DatumArrays(seq[:-1], {"target_tokens": seq[1:], "advantages": ones})],
        "importance_sampling",
        "missing key 'logprobs'",
    )
    expect_user_error(
        model,
        [DatumArrays(seq[:-1], {"target_tokens": seq[1:], "weights": ones[:-2]})],
        "cross_entropy",
        rf"^loss_fn_inputs\[weights\] has length {n - 2}, expected {n} = model_input.length",
    )
    expect_user_error(
        model,
        [ce_datum(SEQ_B), DatumArrays(seq[:-1], {"target_tokens": seq[2:]})],
        "cross_entropy",
        rf"loss_fn_inputs\[target_tokens\] has length {n - 1}, expected {n} .*datum 1",
    )
    expect_user_error(model, [ce_datum([1, 2, lm.VOCAB_SIZE])], "cross_entropy", "token id 259")
    expect_user_error(model, [ce_datum([1, lm.VOCAB_SIZE, 2])], "cross_entropy", "model_input")
    expect_user_error(model, [ce_datum([-1, 2, 3])], "cross_entropy", "token id -1")
    expect_user_error(
        model,
        [DatumArrays(np.zeros(0, np.int64), {"target_tokens": np.zeros(0, np.int64)})],
        "cross_entropy",
        "empty",
    )
    expect_user_error(
        model, [ce_datum(list(range(200)) * 3)], "cross_entropy", "PromptTooLong.*599.*512"
    )
    bad = ones.copy()
    bad[3] = np.nan
    expect_user_error(
        model,
        [DatumArrays(seq[:-1], {**rl_inputs, "advantages": bad})],
        "dro",
        r"NonFiniteInTensor: loss_fn_inputs\[advantages\]",
    )
    expect_user_error(
        model,
        [DatumArrays(seq[:-1], {**rl_inputs, "target_tokens": np.stack([seq[1:], seq[1:]], 1)})],
        "ppo",
        "shape",
    )
    with pytest.raises(UserInputError, match="unexpected loss_fn_config key 'beta'"):
        model.forward_backward(
            [DatumArrays(seq[:-1], rl_inputs)], "ppo", {"beta": 0.1}, backward=False
        )
    with pytest.raises(UserInputError, match="NonFiniteInTensor"):
        model.forward_backward(
            [DatumArrays(seq[:-1], rl_inputs)], "dro", {"beta": math.inf}, backward=False
        )


def test_user_errors_in_constructor() -> None:
    with pytest.raises(UserInputError, match="rank must be positive"):
        TinyLM("test/base", rank=0)
    with pytest.raises(UserInputError, match="rank must be positive"):
        TinyLM("test/base", rank=-4)
    with pytest.raises(UserInputError, match="At least one of"):
        TinyLM("test/base", train_attn=False, train_mlp=False, train_unembed=False)
    with pytest.raises(UserInputError, match="base_model"):
        TinyLM("")


def test_user_errors_in_sample() -> None:
    model = TinyLM("test/base")
    message = (
        r"^Prompt length plus max_tokens exceeds the model's context window: "
        r"500 prompt tokens \+ 20 max_tokens > 512\.$"
    )
    with pytest.raises(UserInputError, match=message):
        model.sample([1] * 500, max_tokens=20)
    with pytest.raises(UserInputError, match="PromptTooLong"):
        model.sample([1] * 600)
    with pytest.raises(UserInputError, match="at least one token"):
        model.sample([])
    with pytest.raises(UserInputError, match="token id"):
        model.sample([1, 999], max_tokens=1)
    with pytest.raises(UserInputError, match="temperature"):
        model.sample([1], max_tokens=1, temperature=-1.0)
    with pytest.raises(UserInputError, match="top_p"):
        model.sample([1], max_tokens=1, top_p=0.0)
    with pytest.raises(UserInputError, match="num_samples"):
        model.sample([1], max_tokens=1, num_samples=0)


# ------------------------------------------------------------------------------------------------
# sampling


def all_logprobs(model: TinyLM, tokens: list[int]) -> Array:
    """Logprobs of every vocabulary entry after each prefix of ``tokens`` (top-K CE over all)."""
    n = len(tokens)
    targets = np.tile(np.arange(lm.VOCAB_SIZE, dtype=np.int64), (n, 1))
    datum = DatumArrays(
        np.array(tokens, dtype=np.int64),
        {"target_tokens": targets, "weights": np.zeros(targets.shape, np.float32)},
    )
    outputs, _ = model.forward_backward([datum], "cross_entropy", None, backward=False)
    return outputs[0]["logprobs"].astype(np.float64)


PROMPT = list(b"Once upon a time")


def test_sampling_is_deterministic_per_seed() -> None:
    model = TinyLM("test/base")
    params: dict[str, Any] = {
        "max_tokens": 24,
        "stop_tokens": [],
        "num_samples": 3,
        "temperature": 0.9,
    }
    first = model.sample(PROMPT, seed=11, **params)
    again = model.sample(PROMPT, seed=11, **params)
    other = model.sample(PROMPT, seed=12, **params)
    assert first == again
    assert first.sequences != other.sequences
    # the samples of one request differ from each other
    assert first.sequences[0].tokens != first.sequences[1].tokens
    # sample i depends on (seed, i), not on how many samples were asked for
    single = model.sample(PROMPT, seed=11, **{**params, "num_samples": 1})
    assert single.sequences[0].tokens == first.sequences[0].tokens
    for seq in first.sequences:
        assert len(seq.tokens) == len(seq.logprobs) == 24
        assert seq.stop_reason == "length"
    # seed None draws fresh randomness
    fresh = {tuple(model.sample(PROMPT, **params).sequences[0].tokens) for _ in range(3)}
    assert len(fresh) > 1


def test_greedy_sampling_is_argmax_and_logprobs_match_forward() -> None:
    model = TinyLM("test/base", seed=1)
    model.forward_backward([ce_datum(PROMPT)], "cross_entropy", None, backward=True)
    model.optim_step(**ADAM)  # non-zero LoRA B, so merged weights matter
    result = model.sample(PROMPT, max_tokens=12, temperature=0.0, stop_tokens=[])
    generated = result.sequences[0].tokens
    table = all_logprobs(model, PROMPT + generated[:-1])
    steps = table[len(PROMPT) - 1 :]
    np.testing.assert_array_equal(steps.argmax(axis=1), generated)
    picked = steps[np.arange(len(generated)), generated]
    np.testing.assert_allclose(result.sequences[0].logprobs, picked, rtol=1e-4, atol=1e-4)
    # top_k=1 and a tiny top_p are greedy too
    assert (
        model.sample(PROMPT, max_tokens=12, top_k=1, stop_tokens=[], seed=3).sequences[0].tokens
        == generated
    )
    assert (
        model.sample(PROMPT, max_tokens=12, top_p=1e-6, stop_tokens=[], seed=3).sequences[0].tokens
        == generated
    )


def test_sampled_logprobs_use_the_temperature_scaled_distribution() -> None:
    model = TinyLM("test/base")
    tau = 0.7
    result = model.sample(PROMPT, max_tokens=10, temperature=tau, stop_tokens=[], seed=5)
    sampled = result.sequences[0]
    table = all_logprobs(model, PROMPT + sampled.tokens[:-1])[len(PROMPT) - 1 :]
    scaled = table / tau
    top = scaled.max(axis=1, keepdims=True)
    scaled -= top + np.log(np.exp(scaled - top).sum(axis=1, keepdims=True))
    picked = scaled[np.arange(len(sampled.tokens)), sampled.tokens]
    np.testing.assert_allclose(sampled.logprobs, picked, rtol=1e-4, atol=1e-4)


def test_top_k_only_samples_among_the_k_most_likely() -> None:
    model = TinyLM("test/base")
    result = model.sample(PROMPT, max_tokens=1, top_k=3, num_samples=40, seed=1, stop_tokens=[])
    first_tokens = {seq.tokens[0] for seq in result.sequences}
    top3 = set(np.argsort(-all_logprobs(model, PROMPT)[-1])[:3].tolist())
    assert first_tokens <= top3
    assert len(first_tokens) > 1


def test_stop_tokens_are_included() -> None:
    model = TinyLM("test/base")
    free = model.sample(PROMPT, max_tokens=30, temperature=0.0, stop_tokens=[]).sequences[0]
    stop_token = free.tokens[7]
    first = free.tokens.index(stop_token)
    stopped = model.sample(PROMPT, max_tokens=30, temperature=0.0, stop_tokens=[stop_token])
    seq = stopped.sequences[0]
    assert seq.tokens == free.tokens[: first + 1]
    assert seq.stop_reason == "stop"
    assert seq.logprobs == pytest.approx(free.logprobs[: first + 1], abs=1e-6)


def test_stop_strings_halt_after_the_completing_token() -> None:
    tokenizer = lm.load_tokenizer()
    model = TinyLM("test/base")
    free = model.sample(PROMPT, max_tokens=40, temperature=0.0, stop_tokens=[]).sequences[0]
    full_text = tokenizer.decode(free.tokens)
    stop_text = next(
        full_text[i : i + 2]
        for i in range(5, len(full_text) - 1)
        if "\ufffd" not in full_text[i : i + 2]
    )
    expected_end = next(
        j for j in range(1, len(free.tokens) + 1) if stop_text in tokenizer.decode(free.tokens[:j])
    )
    seq = model.sample(
        PROMPT, max_tokens=40, temperature=0.0, stop_strings=[stop_text, "never-there"]
    ).sequences[0]
    assert seq.tokens == free.tokens[:expected_end]
    assert seq.stop_reason == "stop"
    assert stop_text in tokenizer.decode(seq.tokens)


def test_eos_stops_by_default_and_an_empty_stop_list_disables_it() -> None:
    model = TinyLM("test/base", rank=8)
    # teach the model to say EOS after anything
    eos_datum = DatumArrays(
        np.array(PROMPT, dtype=np.int64),
        {"target_tokens": np.full(len(PROMPT), lm.EOS_TOKEN_ID, dtype=np.int64)},
    )
    for _ in range(15):
        model.forward_backward([eos_datum], "cross_entropy", None, backward=True)
        model.optim_step(learning_rate=5e-2, beta1=0.9, beta2=0.95, eps=1e-8)
    default = model.sample(PROMPT, max_tokens=8, temperature=0.0).sequences[0]
    assert default.tokens == [lm.EOS_TOKEN_ID]
    assert default.stop_reason == "stop"
    with_other_stops = model.sample(PROMPT, max_tokens=8, temperature=0.0, stop_tokens=[65])
    assert with_other_stops.sequences[0].tokens == [lm.EOS_TOKEN_ID]
    no_stop_options: list[dict[str, Any]] = [{"stop_tokens": []}, {"stop_strings": []}]
    for no_stops in no_stop_options:
        seq = model.sample(PROMPT, max_tokens=8, temperature=0.0, **no_stops).sequences[0]
        assert len(seq.tokens) == 8
        assert seq.tokens[0] == lm.EOS_TOKEN_ID
        assert seq.stop_reason == "length"


def test_max_tokens_none_runs_to_the_context_limit() -> None:
    model = tiny_model(dtype=np.float32)
    seq = model.sample([1, 2, 3], stop_tokens=[], seed=0).sequences[0]
    assert len(seq.tokens) == 32 - 3
    assert seq.stop_reason == "length"


def test_prompt_logprobs_match_forward_logprobs() -> None:
    model = TinyLM("test/base")
    result = model.sample(PROMPT, max_tokens=1, prompt_logprobs=True, topk_prompt_logprobs=4)
    assert result.prompt_logprobs is not None
    assert result.topk_prompt_logprobs is not None
    assert len(result.prompt_logprobs) == len(PROMPT)
    assert result.prompt_logprobs[0] is None
    forward = datum_logprobs(model, PROMPT)
    np.testing.assert_allclose(
        np.array(result.prompt_logprobs[1:], dtype=np.float64), forward, rtol=1e-5, atol=1e-5
    )
    table = all_logprobs(model, PROMPT[:-1])
    assert result.topk_prompt_logprobs[0] is None
    for position, pairs in enumerate(result.topk_prompt_logprobs[1:]):
        assert pairs is not None
        assert len(pairs) == 4
        values = [lp for _, lp in pairs]
        assert values == sorted(values, reverse=True)
        expected = np.argsort(-table[position], kind="stable")[:4].tolist()
        assert [tok for tok, _ in pairs] == expected
        np.testing.assert_allclose(values, table[position, expected], atol=1e-5)
    plain = model.sample(PROMPT, max_tokens=1)
    assert plain.prompt_logprobs is None
    assert plain.topk_prompt_logprobs is None


def test_stub_model_is_instant_and_shaped_like_the_real_one() -> None:
    stub = TinyLM.stub("test/base")
    result = stub.sample([1, 2, 3], max_tokens=5, num_samples=2, prompt_logprobs=True)
    assert [seq.tokens for seq in result.sequences] == [[ord("x")] * 5] * 2
    assert result.sequences[0].logprobs == [0.0] * 5
    assert result.sequences[0].stop_reason == "length"
    assert result.prompt_logprobs == [None, 0.0, 0.0]
    stopped = stub.sample([1], max_tokens=5, stop_tokens=[ord("x")])
    assert stopped.sequences[0].tokens == [ord("x")]
    assert stopped.sequences[0].stop_reason == "stop"
    outputs, metrics = stub.forward_backward(
        [ce_datum(SEQ_A)], "cross_entropy", None, backward=True
    )
    assert metrics == {"loss:sum": 0.0}
    assert outputs[0]["logprobs"].shape == (len(SEQ_A) - 1,)


# ------------------------------------------------------------------------------------------------
# tokenizer


def test_tokenizer_round_trips_text_and_loads_offline() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(lm.tokenizer_path()))
    assert tokenizer.get_vocab_size() == lm.VOCAB_SIZE
    assert tokenizer.token_to_id("<|bos|>") == lm.BOS_TOKEN_ID
    assert tokenizer.token_to_id("<|eos|>") == lm.EOS_TOKEN_ID
    assert tokenizer.token_to_id("<|pad|>") == lm.PAD_TOKEN_ID
    samples = [
        "",
        "hello world",
        "  leading and trailing  \n\ttabs\r\n",
        "héllo wörld — 日本語 🤖🎉",
        "\x00\x01\x7f control",
        "".join(chr(c) for c in range(0x20, 0x3000, 37)),
    ]
    for text in samples:
        ids = tokenizer.encode(text).ids
        assert ids == list(text.encode("utf-8"))
        assert tokenizer.decode(ids) == text
    assert lm.load_tokenizer() is lm.load_tokenizer()
    assert lm.TOKENIZER_ID == "tinker-lite/byte-tokenizer"


def test_shipped_tokenizer_matches_the_build_script() -> None:
    shipped = lm.tokenizer_path().read_text(encoding="utf-8")
    built = build_tokenizer_json()
    if '"ignore_merges"' not in built:  # tokenizers < 0.19 writes no such field: compare as read
        from tokenizers import Tokenizer

        shipped = Tokenizer.from_str(shipped).to_str(pretty=True) + "\n"
    assert shipped == built + "\n"
    assert CONFIG_FILE.read_text(encoding="utf-8") == build_config_json() + "\n"
    config = json.loads(build_config_json())
    assert (config["bos_token"], config["eos_token"], config["pad_token"]) == (
        "<|bos|>",
        "<|eos|>",
        "<|pad|>",
    )
    assert config["model_max_length"] == lm.CONTEXT_LENGTH
