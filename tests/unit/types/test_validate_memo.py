"""Facts read once from stored values: a batch sent again is not rescanned, new data always is.

TensorData and EncodedTextChunk keep a private copy of their values that nothing changes after
construction, so the non-finite scan, the smallest / largest value and the largest token id are
computed once per object. These tests show the copy really is private, that a kept fact never
hides a bad value in new or changed data, and that what is encoded is always the current data.
"""

from __future__ import annotations

import pickle

import attrs
import numpy as np
import pytest

from tinker_lite import types
from tinker_lite._codec import proto as _proto
from tinker_lite._errors import InvalidInputError
from tinker_lite._training.validate import validate


def _datum(tokens: list[int] | np.ndarray, weights: np.ndarray | None = None) -> types.Datum:
    ids = np.asarray(tokens, dtype=np.int64)
    inputs: dict[str, object] = {"target_tokens": ids[1:]}
    if weights is not None:
        inputs["weights"] = weights
    return types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]), loss_fn_inputs=inputs)


def _encode(data: list[types.Datum]) -> bytes:
    return _proto.encode_forward_backward_request(
        model_id="m",
        seq_id=1,
        data=data,
        loss_fn="cross_entropy",
        loss_fn_config=None,
        forward_only=False,
    )


def test_numpy_values_are_copied_and_read_only() -> None:
    weights = np.ones(4, dtype=np.float32)
    tokens = np.arange(5, dtype=np.int64)
    datum = _datum(tokens, weights)
    validate([datum], "cross_entropy", vocab_size=10)
    # Changing the caller's arrays afterwards changes nothing the client holds.
    weights[2] = np.nan
    tokens[:] = 99
    stored = datum.loss_fn_inputs["weights"]
    assert stored.to_numpy().tolist() == [1.0, 1.0, 1.0, 1.0]
    assert datum.model_input.to_ints() == [0, 1, 2, 3]
    assert not stored._values.flags.writeable
    with pytest.raises(ValueError):
        stored._values[0] = np.nan
    # What to_numpy() hands out is the caller's own copy.
    copy = stored.to_numpy()
    copy[0] = np.nan
    assert stored._first_non_finite() is None
    assert validate([datum], "cross_entropy", vocab_size=10).n_datums == 1


def test_values_built_from_lists_are_copied() -> None:
    values = [1.0, 2.0, 3.0]
    tensor = types.TensorData(data=values, dtype="float32")
    assert tensor._first_non_finite() is None
    values[1] = float("nan")
    assert tensor.tolist() == [1.0, 2.0, 3.0]
    assert tensor._first_non_finite() is None


def test_sending_the_same_batch_again_does_not_rescan_its_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = [_datum(list(range(9)), np.ones(8, dtype=np.float32)) for _ in range(4)]
    scans: list[int] = []
    scan = types.TensorData._scan_non_finite

    def counting(self: types.TensorData) -> int | None:
        scans.append(id(self))
        return scan(self)

    monkeypatch.setattr(types.TensorData, "_scan_non_finite", counting)
    for _ in range(3):
        validate(data, "cross_entropy", vocab_size=16)
    # Each tensor (target_tokens and weights of 4 datums) was scanned once, however often the
    # batch was checked.
    assert len(scans) == 8
    assert len(set(scans)) == 8


def test_a_new_datum_among_resent_ones_is_fully_checked() -> None:
    good = [_datum(list(range(9)), np.ones(8, dtype=np.float32)) for _ in range(6)]
    validate(good, "cross_entropy", vocab_size=16)
    bad_weights = np.ones(8, dtype=np.float32)
    bad_weights[3] = np.inf
    with pytest.raises(InvalidInputError) as e:
        validate([*good[:4], _datum(list(range(9)), bad_weights), *good[4:]], "cross_entropy")
    assert e.value.field == "data[4].loss_fn_inputs['weights']"
    assert "position 3" in str(e.value)
    with pytest.raises(InvalidInputError) as e:
        validate([*good, _datum([1, 2, 40])], "cross_entropy", vocab_size=16)
    assert e.value.field == "data[6].loss_fn_inputs['target_tokens']"
    with pytest.raises(InvalidInputError) as e:
        validate([_datum([40, 2, 3]), *good], "cross_entropy", vocab_size=16)
    assert e.value.field == "data[0].model_input.chunks[0].tokens"
    # The same vocabulary bound keeps holding for the datums already checked.
    with pytest.raises(InvalidInputError) as e:
        validate(good, "cross_entropy", vocab_size=8)
    assert e.value.field == "data[0].loss_fn_inputs['target_tokens']"


def test_an_input_replaced_in_the_dict_is_checked_again() -> None:
    datum = _datum(list(range(9)), np.ones(8, dtype=np.float32))
    validate([datum], "cross_entropy")
    bad = np.ones(8, dtype=np.float32)
    bad[0] = np.nan
    datum.loss_fn_inputs["weights"] = types.TensorData.from_numpy(bad)
    with pytest.raises(InvalidInputError) as e:
        validate([datum], "cross_entropy")
    assert e.value.field == "data[0].loss_fn_inputs['weights']"


def test_tokens_changed_in_place_are_checked_and_sent_as_changed() -> None:
    datum = _datum(list(range(9)))
    before = _encode([datum])
    assert validate([datum], "cross_entropy", vocab_size=16).n_datums == 1
    chunk = datum.model_input.chunks[0]
    assert isinstance(chunk, types.EncodedTextChunk)
    chunk.tokens[2] = 15
    changed = _encode([datum])
    assert changed != before
    assert validate([datum], "cross_entropy", vocab_size=16).n_datums == 1
    chunk.tokens[2] = 99
    with pytest.raises(InvalidInputError) as e:
        validate([datum], "cross_entropy", vocab_size=16)
    assert e.value.field == "data[0].model_input.chunks[0].tokens"
    assert "99" in str(e.value)


def test_sparse_non_finite_position_is_the_dense_one() -> None:
    tensor = types.TensorData(
        data=[1.0, float("nan")],
        dtype="float32",
        shape=[2, 4],
        sparse_crow_indices=[0, 1, 2],
        sparse_col_indices=[0, 3],
    )
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([0, 1]),
        loss_fn_inputs={"target_tokens": [1, 2], "advantages": tensor, "logprobs": tensor},
    )
    for _ in range(2):  # the kept stored position gives the same dense position each time
        with pytest.raises(InvalidInputError) as e:
            validate([datum], "importance_sampling")
        assert e.value.field == "data[0].loss_fn_inputs['advantages']"
        assert "position 7" in str(e.value)


def test_kept_facts_stay_out_of_equality_repr_and_pickle() -> None:
    tensor = types.TensorData.from_numpy(np.array([3, 1, 2]))
    fresh = types.TensorData.from_numpy(np.array([3, 1, 2]))
    assert (tensor._stored_min(), tensor._stored_max(), tensor._first_non_finite()) == (1, 3, None)
    assert tensor == fresh
    assert repr(tensor) == repr(fresh)
    copy = pickle.loads(pickle.dumps(tensor))
    assert copy == tensor
    assert not hasattr(copy, "_memo_max")
    assert copy._stored_max() == 3
    assert not [f.name for f in attrs.fields(types.TensorData) if "memo" in f.name]
