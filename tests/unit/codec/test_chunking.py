"""Chunk planning (docs/protocol.rst §7.4), result merging (docs/protocol.rst §7.5) and the dry-run
validator."""

from __future__ import annotations

import numpy as np
import pytest

import tinker_lite
from tests.support.audio import tensor_container
from tests.support.paths import REPO
from tinker_lite import types
from tinker_lite._codec.chunking import (
    DEFAULT_LIMITS,
    ChunkLimits,
    combine_outputs,
    datum_sizes,
    plan_chunks,
)
from tinker_lite._errors import InvalidInputError, WireFormatError
from tinker_lite._training.validate import validate


def _datum(n: int = 3, **extra: object) -> types.Datum:
    inputs: dict[str, object] = {"target_tokens": list(range(1, n + 1))}
    inputs.update(extra)
    return types.Datum(
        model_input=types.ModelInput.from_ints(list(range(n))), loss_fn_inputs=inputs
    )


def _output(n: int, metrics: dict[str, float], tag: str = "CE") -> types.ForwardBackwardOutput:
    outs = [
        {"logprobs": types.TensorData.from_numpy(np.full(2, -float(i), dtype=np.float32))}
        for i in range(n)
    ]
    return types.ForwardBackwardOutput(
        loss_fn_output_type=tag, loss_fn_outputs=outs, metrics=metrics
    )


# -- planning ---------------------------------------------------------------------------------


def test_plan_splits_by_datum_count() -> None:
    chunks = plan_chunks([1] * 300, DEFAULT_LIMITS)
    assert [len(c) for c in chunks] == [128, 128, 44]
    assert chunks[1] == range(128, 256)


def test_plan_splits_by_number_count() -> None:
    chunks = plan_chunks([200_000] * 5, DEFAULT_LIMITS)
    assert [list(c) for c in chunks] == [[0, 1], [2, 3], [4]]


def test_plan_exact_limit_stays_in_one_chunk() -> None:
    assert [len(c) for c in plan_chunks([250_000, 250_000, 1], DEFAULT_LIMITS)] == [2, 1]


def test_plan_oversized_datum_is_its_own_chunk_and_empty_batch_has_none() -> None:
    assert [list(c) for c in plan_chunks([10, 600_000, 10], DEFAULT_LIMITS)] == [[0], [1], [2]]
    assert plan_chunks([], DEFAULT_LIMITS) == []


def test_plan_byte_limits() -> None:
    limits = ChunkLimits(max_datums=2, max_numbers=None, max_bytes=100)
    assert limits.unit == "estimated bytes"
    assert [list(c) for c in plan_chunks([40, 40, 40, 90, 5], limits)] == [[0, 1], [2], [3, 4]]


def test_sizes_of_a_datum() -> None:
    datum = _datum(4, weights=[1.0, 1.0, 0.0, 1.0])
    # numbers; bytes: 4 per token, int64 targets (8 bytes), float32 weights (4 bytes)
    assert datum_sizes(datum) == (4 + 4 + 4, 16 + 32 + 16)
    assert DEFAULT_LIMITS.size_of(datum) == 4 + 4 + 4
    assert ChunkLimits(max_bytes=100).size_of(datum) == 16 + 32 + 16
    image = types.Datum(
        model_input=types.ModelInput(
            chunks=[
                types.EncodedTextChunk(tokens=[1]),
                types.ImageChunk(data=b"abcdef", format="png", expected_tokens=3),
            ]
        ),
        loss_fn_inputs={"target_tokens": [1, 2, 3, 4]},
    )
    assert datum_sizes(image) == (4 + 4, 4 + 6 + 32)


def test_sizes_of_a_datum_with_audio() -> None:
    # 0.38 _estimate_chunk_bytes_count_proto: an audio chunk is len(dmel) bytes; its positions
    # are its length (dimension 0 of the TensorContainer).
    dmel = tensor_container((5, 80), payload=bytes(100))
    datum = types.Datum(
        model_input=types.ModelInput(
            chunks=[types.EncodedTextChunk(tokens=[1, 2]), types.DmelChunk(dmel=dmel)]
        ),
        loss_fn_inputs={"target_tokens": list(range(7))},
    )
    assert len(dmel) == 104
    assert datum_sizes(datum) == (2 + 5 + 7, 8 + 104 + 56)
    report = validate([datum] * 3, "cross_entropy", limits=ChunkLimits(max_bytes=400))
    assert report.estimated_bytes == 3 * 168
    assert [list(c) for c in report.chunks] == [[0, 1], [2]]
    with pytest.raises(InvalidInputError, match=r"data\[0\]: holds 168 estimated bytes"):
        validate([datum], "cross_entropy", limits=ChunkLimits(max_bytes=100))


# -- merging ----------------------------------------------------------------------------------


def test_combine_matches_the_verified_example() -> None:
    # docs/protocol.rst §7.5 VERIFIED: two chunks of 128 and 2 datums.
    first = _output(
        128,
        {
            "acc:mean": 0.5,
            "loss:sum": 10.0,
            "tok:max": 4.0,
            "tok:min": 3.0,
            "seed:unique": 7.0,
            "weird:median": 1.0,
            "only_first:sum": 1.0,
        },
    )
    second = _output(
        2,
        {
            "acc:mean": 0.75,
            "loss:sum": 11.0,
            "tok:max": 2.0,
            "tok:min": 5.0,
            "seed:unique": 8.0,
            "weird:median": 2.0,
            "only_second:sum": 3.0,
        },
    )
    merged = combine_outputs([first, second])
    assert merged.loss_fn_output_type == "CE"
    assert len(merged.loss_fn_outputs) == 130
    assert merged.loss_fn_outputs[128] == second.loss_fn_outputs[0]
    assert merged.metrics == {
        "acc:mean": pytest.approx(0.5038461538461538, abs=1e-15),
        "loss:sum": 21.0,
        "tok:max": 4.0,
        "tok:min": 3.0,
        "seed:unique": 7.0,
        "seed:unique_1": 8.0,
    }


def test_combine_slack_and_hash_unordered() -> None:
    merged = combine_outputs(
        [
            _output(1, {"x:slack": 1.0, "h:hash_unordered": 5.0}),
            _output(3, {"x:slack": 3.0, "h:hash_unordered": 2.0}),
        ]
    )
    assert merged.metrics["x:slack"] == pytest.approx(3.0 - 2.5)
    assert merged.metrics["h:hash_unordered"] == float(hash((2, 5)))
    # Order of chunks does not matter for hash_unordered.
    swapped = combine_outputs(
        [_output(3, {"h:hash_unordered": 2.0}), _output(1, {"h:hash_unordered": 5.0})]
    )
    assert swapped.metrics["h:hash_unordered"] == merged.metrics["h:hash_unordered"]


def test_combine_single_chunk_still_reduces() -> None:
    merged = combine_outputs([_output(2, {"h:hash_unordered": 3.0, "loss:sum": 1.5})])
    assert merged.metrics == {"h:hash_unordered": float(hash((3,))), "loss:sum": 1.5}


def test_combine_mean_with_no_outputs_is_plain_mean() -> None:
    merged = combine_outputs([_output(0, {"a:mean": 1.0}), _output(0, {"a:mean": 3.0})])
    assert merged.metrics["a:mean"] == 2.0


@pytest.mark.parametrize("key", ["loss", "a:b:sum"])
def test_combine_reports_malformed_metric_keys(key: str) -> None:
    with pytest.raises(WireFormatError, match="name:reduction") as info:
        combine_outputs([_output(1, {key: 1.0})])
    assert repr(key) in str(info.value)


def test_combine_empty() -> None:
    merged = combine_outputs([])
    assert merged == types.ForwardBackwardOutput(
        loss_fn_output_type="", loss_fn_outputs=[], metrics={}
    )


# -- validate ---------------------------------------------------------------------------------


def test_chunk_limits_are_public_and_documented_by_their_public_name() -> None:
    assert tinker_lite.ChunkLimits is ChunkLimits
    assert "ChunkLimits" in tinker_lite.__all__
    api = (REPO / "docs" / "api.rst").read_text(encoding="utf-8")
    assert ".. autoclass:: tinker_lite.ChunkLimits" in api
    assert "tinker_lite._codec.chunking" not in api
    by_bytes = ChunkLimits(max_datums=4, max_bytes=100)
    assert (by_bytes.max_size, by_bytes.unit) == (100, "estimated bytes")
    assert (DEFAULT_LIMITS.max_size, DEFAULT_LIMITS.unit) == (500_000, "numbers")


def test_validate_reports_chunks() -> None:
    report = tinker_lite.validate([_datum(3)] * 130, "cross_entropy")
    assert (report.n_datums, report.n_chunks) == (130, 2)
    assert report.n_numbers == 130 * 6
    assert report.estimated_bytes == 130 * (12 + 24)
    assert report.chunks == (range(0, 128), range(128, 130))


def test_validate_empty_batch() -> None:
    report = validate([], "ppo")
    assert (report.n_datums, report.n_chunks, report.n_numbers) == (0, 0, 0)


def test_validate_unknown_loss() -> None:
    with pytest.raises(InvalidInputError, match="unknown loss function") as info:
        validate([_datum()], "mse")
    assert info.value.field == "loss_fn"


@pytest.mark.parametrize("loss", ["importance_sampling", "ppo", "cispo", "dro"])
def test_validate_rl_losses_need_logprobs_and_advantages(loss: str) -> None:
    with pytest.raises(InvalidInputError, match="'advantages', 'logprobs'") as info:
        validate([_datum()], loss)
    assert info.value.field == "data[0].loss_fn_inputs"
    ok = _datum(3, logprobs=[0.0, -1.0, -2.0], advantages=[1.0, 1.0, 1.0])
    assert validate([ok], loss).n_chunks == 1


def test_validate_rejects_inputs_the_loss_does_not_take() -> None:
    with pytest.raises(InvalidInputError, match="does not take 'advantages'"):
        validate([_datum(3, advantages=[1.0, 1.0, 1.0])], "cross_entropy")
    with pytest.raises(InvalidInputError, match="mask"):
        validate([_datum(3, mask=np.ones(3, dtype=np.float32))], "cross_entropy")


def test_validate_cross_entropy_needs_targets() -> None:
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2]), loss_fn_inputs={"weights": [1.0, 1.0]}
    )
    with pytest.raises(InvalidInputError, match="'target_tokens'"):
        validate([datum], "cross_entropy")


def test_validate_non_finite_values() -> None:
    with pytest.raises(InvalidInputError, match="non-finite") as info:
        validate([_datum(), _datum(3, weights=[1.0, np.nan, 1.0])], "cross_entropy")
    assert info.value.field == "data[1].loss_fn_inputs['weights']"


def test_validate_vocab_bound() -> None:
    with pytest.raises(InvalidInputError, match="vocabulary") as info:
        validate([_datum(3)], "cross_entropy", vocab_size=3)
    assert "target_tokens" in info.value.field
    assert validate([_datum(3)], "cross_entropy", vocab_size=4).n_datums == 1


def test_validate_single_datum_over_the_limit() -> None:
    big = _datum(300_000)
    with pytest.raises(InvalidInputError, match="more than the 500000") as info:
        validate([_datum(), big], "cross_entropy")
    assert info.value.field == "data[1]"
    limits = ChunkLimits(max_datums=4, max_numbers=None, max_bytes=1000)
    with pytest.raises(InvalidInputError, match="estimated bytes"):
        validate([_datum(100)], "cross_entropy", limits=limits)


def test_validate_bad_data_types() -> None:
    with pytest.raises(InvalidInputError):
        validate("abc", "cross_entropy")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="Datum"):
        validate([{"model_input": 1}], "cross_entropy")  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="loss_fn_config"):
        validate([_datum()], "ppo", {"clip_low_threshold": float("nan")})
