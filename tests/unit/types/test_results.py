"""Result fields of the official 0.38 sample results exist and decode from JSON."""

from __future__ import annotations

import math

import numpy as np

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite.types.topk_logprobs import MASK_LOGPROB, TopkLogprobs, topk_to_lists

SAMPLE_BODY = {
    "type": "sample",
    "sequences": [
        {
            "stop_reason": "length",
            "tokens": [5, 6],
            "logprobs": [-0.5, -1.5],
            "topk_logprobs": [[[5, -0.5], [9, -2.0]], None],
            "sequence_id": "seq-0",
        }
    ],
    "prompt_logprobs": [None, -0.25, -3.0],
    "topk_prompt_logprobs": [None, [[1, -0.25]], [[2, -3.0], [4, -4.0]]],
    "prompt_cache_hit_tokens": 2,
    "target_prompt_logprobs": {"data": [0.0, -0.25, -3.0], "dtype": "float32", "shape": [3]},
    "prompt_alt_tokens": {
        "tokens": {"data": [7, 8, 9, 10], "dtype": "int64", "shape": [2, 2]},
        "logprobs": {"data": [-1.0, -2.0, -3.0, -4.0], "dtype": "float32", "shape": [2, 2]},
    },
}


def test_sample_response_fields_decode_strictly() -> None:
    response = _wire.structure(SAMPLE_BODY, types.SampleResponse, strict=True)
    (sequence,) = response.sequences
    assert sequence.sequence_id == "seq-0"
    assert sequence.topk_logprobs == [[(5, -0.5), (9, -2.0)], None]
    assert response.prompt_cache_hit_tokens == 2
    assert response.target_prompt_logprobs is not None
    assert response.target_prompt_logprobs.tolist() == [0.0, -0.25, -3.0]
    alt = response.prompt_alt_tokens
    assert alt is not None
    assert alt.tokens.to_numpy().tolist() == [[7, 8], [9, 10]]
    assert alt.logprobs.shape == [2, 2]


def test_result_fields_default_like_the_official_sdk() -> None:
    response = _wire.structure({"sequences": []}, types.SampleResponse)
    assert response.prompt_cache_hit_tokens == 0
    assert response.target_prompt_logprobs is None
    assert response.prompt_alt_tokens is None
    sequence = types.SampledSequence(stop_reason="stop", tokens=[1])
    assert sequence.topk_logprobs is None
    assert sequence.sequence_id is None


def test_numpy_views_of_sample_results() -> None:
    response = _wire.structure(SAMPLE_BODY, types.SampleResponse, strict=True)
    (sequence,) = response.sequences
    assert sequence.tokens_np.dtype == np.int32
    assert sequence.tokens_np.tolist() == [5, 6]
    assert sequence.logprobs_np is not None
    assert sequence.logprobs_np.dtype == np.float32
    topk = sequence.topk_logprobs_np
    assert topk is not None
    assert topk.token_ids.tolist() == [[5, 9], [0, 0]]
    assert topk.logprobs[1].tolist() == [MASK_LOGPROB, MASK_LOGPROB]
    prompt = response.prompt_logprobs_np
    assert prompt is not None
    assert math.isnan(float(prompt[0]))
    assert prompt[1] == np.float32(-0.25)


def test_topk_lists_round_trip_through_the_dense_matrices() -> None:
    rows = [[(3, -1.0), (4, -2.0)], None, [(7, -0.5)]]
    dense = types.SampledSequence(stop_reason="stop", tokens=[1, 2, 3], topk_logprobs=rows)
    assert dense.topk_logprobs_np is not None
    assert topk_to_lists(dense.topk_logprobs_np) == rows
    assert topk_to_lists(TopkLogprobs(np.zeros((0, 0), np.int32), np.zeros((0, 0)))) == []


def test_sample_submit_answer_carries_sequence_ids() -> None:
    future = _wire.structure(
        {"request_id": "r-1", "sample_sequence_ids": ["a", "b"]},
        types.UntypedAPIFuture,
        strict=True,
    )
    assert future.sample_sequence_ids == ["a", "b"]
