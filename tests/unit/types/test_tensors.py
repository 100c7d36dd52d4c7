"""TensorData result semantics (flat ``data``, shaped ``tolist``), sparse CSR, per-token shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.support.proto import decode_to_dict
from tinker_lite import types
from tinker_lite._codec import proto as _proto
from tinker_lite._codec import wire as _wire
from tinker_lite._errors import InvalidInputError
from tinker_lite.local.protocol import codecs as _codecs


def test_data_is_a_flat_list_and_tolist_keeps_the_shape() -> None:
    tensor = types.TensorData.from_numpy(np.arange(6, dtype=np.int64).reshape(2, 3))
    assert tensor.data == [0, 1, 2, 3, 4, 5]
    assert all(type(v) is int for v in tensor.data)
    assert tensor.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert tensor.to_numpy().shape == (2, 3)
    flat = types.TensorData(data=[0.5, 1.5], dtype="float32")
    assert flat.tolist() == [0.5, 1.5]
    assert flat.data == [0.5, 1.5]


def test_official_constructor_signature_and_defaults() -> None:
    empty = types.TensorData(dtype="float32")
    assert empty.data == []
    assert empty.sparse_crow_indices is None
    assert empty.sparse_col_indices is None
    with pytest.raises(InvalidInputError, match=r"TensorData\.dtype"):
        types.TensorData([1.0])
    positional = types.TensorData([1, 2, 3, 4], "int64", [2, 2])
    assert positional.tolist() == [[1, 2], [3, 4]]


SPARSE: dict[str, Any] = {
    "data": [1.0, 2.0, 3.0],
    "dtype": "float32",
    "shape": [2, 3],
    "sparse_crow_indices": [0, 1, 3],
    "sparse_col_indices": [2, 0, 1],
}


def test_sparse_tensor_keeps_its_values_and_densifies_on_demand() -> None:
    tensor = types.TensorData(**SPARSE)
    assert tensor.is_sparse
    assert tensor.data == [1.0, 2.0, 3.0]  # the stored values, as in the official SDK
    assert tensor.tolist() == [[0.0, 0.0, 1.0], [2.0, 3.0, 0.0]]
    np.testing.assert_array_equal(tensor.to_numpy(pad_value=-1), [[-1, -1, 1], [2, 3, -1]])
    dense = types.TensorData.from_numpy(np.array([[0, 0, 1], [2, 3, 0]], dtype=np.float32))
    assert tensor == dense
    assert tensor.size == 6


@pytest.mark.parametrize(
    ("change", "field", "fix"),
    [
        ({"sparse_col_indices": [2, 0, 3]}, "sparse_col_indices", r"\[0, 3\)"),
        ({"sparse_col_indices": [2, -1, 0]}, "sparse_col_indices", r"\[0, 3\)"),
        ({"sparse_col_indices": [2, 0]}, "sparse_col_indices", "one column index per"),
        ({"sparse_crow_indices": [0, 4, 3]}, "sparse_crow_indices", "data\\[crow"),
        ({"sparse_crow_indices": [0, 3]}, "sparse_crow_indices", "shape\\[0\\] \\+ 1"),
        ({"sparse_crow_indices": [1, 2, 3]}, "sparse_crow_indices", "crow\\[0\\] = 0"),
        ({"sparse_crow_indices": [0, 1, 2]}, "sparse_crow_indices", "crow\\[-1\\] = len"),
        ({"sparse_col_indices": None}, "sparse_col_indices", "together"),
        ({"shape": [6]}, "shape", "shape=\\[rows, columns\\]"),
        ({"shape": None}, "shape", "shape=\\[rows, columns\\]"),
        ({"sparse_col_indices": [2.5, 0, 1]}, "sparse_col_indices", "pass ints"),
        ({"data": [[1.0, 2.0, 3.0]]}, "data", "nnz values"),
    ],
)
def test_bad_sparse_input_names_the_field_and_the_fix(
    change: dict[str, Any], field: str, fix: str
) -> None:
    with pytest.raises(InvalidInputError, match=f"TensorData.{field}") as caught:
        types.TensorData(**{**SPARSE, **change})
    assert caught.value.hint
    assert caught.match(fix)


@given(
    hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=2, max_dims=2, max_side=6),
        elements=st.sampled_from([0.0, 0.0, 0.0, 1.5, -2.0]),
    )
)
def test_sparse_from_dense_round_trips_through_json(array: np.ndarray) -> None:
    tensor = types.TensorData.from_numpy_sparse(array)
    np.testing.assert_array_equal(tensor.to_numpy(), array)
    back = _wire.structure(_wire.loads(_wire.dumps(tensor)), types.TensorData, strict=True)
    assert back == tensor
    assert back.is_sparse == tensor.is_sparse


def test_a_sparse_loss_input_is_sent_as_sparse_csr_in_protobuf() -> None:
    weights = types.TensorData(
        data=[1.0],
        dtype="float32",
        shape=[3, 1],
        sparse_crow_indices=[0, 0, 1, 1],
        sparse_col_indices=[0],
    )
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={"target_tokens": [2, 3, 4], "weights": weights},
    )
    body = _proto.encode_forward_backward_request(
        model_id="m",
        seq_id=0,
        data=[datum],
        loss_fn="cross_entropy",
        loss_fn_config=None,
        forward_only=False,
    )
    (decoded,) = _codecs.decode_forward_backward_request(body).data
    assert decoded.loss_fn_inputs["weights"].tolist() == [[0.0], [1.0], [0.0]]
    # golden-0.38: sent as sparse_csr {values, crow_indices, col_indices}, int64 indices
    fields = decode_to_dict("ForwardBackwardRequest", body)["data"][0]["loss_fn_inputs"]
    assert fields["weights"] == {
        "sparse_csr": {
            "values": {"float32le": [1.0]},
            "crow_indices": {"int64le": [0, 0, 1, 1]},
            "col_indices": {"int64le": [0]},
        },
        "dtype": "DTYPE_FLOAT32",
        "shape": [3, 1],
    }


def test_batch_dimension_of_one_is_refused_before_sending() -> None:
    model_input = types.ModelInput.from_ints([1, 2, 3])
    batched = np.array([[2, 3, 4]], dtype=np.int64)  # shape [1, 3]: fails on the service
    with pytest.raises(InvalidInputError, match=r"loss_fn_inputs\['target_tokens'\]") as caught:
        types.Datum(model_input=model_input, loss_fn_inputs={"target_tokens": batched})
    assert "reshape(-1)" in str(caught.value)
    ok = types.Datum(model_input=model_input, loss_fn_inputs={"target_tokens": batched[0]})
    # A datum whose (mutable) dict was changed after it was built is checked per batch index.
    ok.loss_fn_inputs["target_tokens"] = types.TensorData.from_numpy(batched)
    good = types.Datum(model_input=model_input, loss_fn_inputs={"target_tokens": [2, 3, 4]})
    with pytest.raises(InvalidInputError, match=r"data\[1\]\.loss_fn_inputs\['target_tokens'\]"):
        types.ForwardBackwardInput(data=[good, ok], loss_fn="cross_entropy")


def test_rows_must_line_up_with_the_input() -> None:
    model_input = types.ModelInput.from_ints([1, 2, 3])
    two_d = types.Datum(
        model_input=model_input, loss_fn_inputs={"target_tokens": np.zeros((3, 2), np.int64)}
    )
    assert two_d.loss_fn_inputs["target_tokens"].shape == [3, 2]
    with pytest.raises(InvalidInputError, match="positions"):
        types.Datum(model_input=model_input, loss_fn_inputs={"weights": [1.0, 1.0]})


def test_provenance_spans_tile_their_fields_and_are_refused_before_sending() -> None:
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={"target_tokens": [2, 3, 4]},
    )
    prompt = types.PromptProvenanceSpan(sequence_id="s-1", length=2)
    sampled = types.SampledProvenanceSpan(sequence_id="s-1", offset=0, length=1)
    with_spans = datum.with_provenance(
        model_input=[prompt, sampled], loss_fn_inputs=[prompt, sampled]
    )
    assert with_spans.model_input_spans == [prompt, sampled]
    assert datum.model_input_spans is None
    with pytest.raises(InvalidInputError, match="spans cover 2 positions but the field has 3"):
        datum.with_provenance(model_input=[prompt], loss_fn_inputs=[prompt, sampled])
    with pytest.raises(InvalidInputError, match="pair"):
        types.Datum(model_input=datum.model_input, model_input_spans=[prompt, sampled])
    with pytest.raises(InvalidInputError, match=r"PromptProvenanceSpan\.length"):
        types.PromptProvenanceSpan(sequence_id="s", length=-1)
    # Neither encoder carries provenance yet: refused with the datum index, never dropped.
    with pytest.raises(InvalidInputError, match=r"data\[0\]\.model_input_spans"):
        types.ForwardBackwardInput(data=[with_spans], loss_fn="cross_entropy")
