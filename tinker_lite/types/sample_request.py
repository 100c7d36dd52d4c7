"""``SampleRequest`` (official module ``tinker.types.sample_request``)."""

from __future__ import annotations

from typing import Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import (
    _check_bool,
    _check_int,
    _check_opt_int,
    _check_opt_str,
    _set,
    check_tinker_path,
)
from .model_input import ModelInput, check_dmel_headers
from .sampling_params import SamplingParams
from .tensor_data import TensorData


@attrs.frozen(kw_only=True)
class SampleRequest:
    """POST /api/v1/asample."""

    num_samples: int = 1
    prompt: ModelInput
    sampling_params: SamplingParams
    base_model: str | None = None
    model_path: str | None = None
    sampling_session_id: str | None = None
    seq_id: int | None = None
    prompt_logprobs: bool = False
    topk_prompt_logprobs: int = 0
    topk_sample_logprobs: int | None = None
    target_prompt_logprobs: TensorData | None = None
    prompt_alt_tokens_k: int | None = None
    prompt_logprobs_last_n: int | None = None
    record_stability_info: bool | None = None
    type: Literal["sample"] = attrs.field(default="sample", init=False)

    def __attrs_post_init__(self) -> None:
        _check_int("num_samples", self.num_samples, minimum=1)
        if not isinstance(self.prompt, ModelInput):
            raise InvalidInputError(
                "prompt", "must be a ModelInput", "use ModelInput.from_ints(tokens)"
            )
        if not self.prompt.chunks:
            raise InvalidInputError("prompt", "is empty", "give at least one prompt token")
        check_dmel_headers(self.prompt, "prompt")
        if not isinstance(self.sampling_params, SamplingParams):
            raise InvalidInputError("sampling_params", "must be a SamplingParams")
        _check_opt_str("base_model", self.base_model)
        if self.model_path is not None:
            check_tinker_path("model_path", self.model_path)
        _check_opt_str("sampling_session_id", self.sampling_session_id)
        if self.sampling_session_id is None and self.base_model is None and self.model_path is None:
            raise InvalidInputError(
                "sampling_session_id",
                "is not set (nor base_model / model_path)",
                "sample through a SamplingClient",
            )
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        _set(self, "prompt_logprobs", _check_bool("prompt_logprobs", self.prompt_logprobs))
        _check_int("topk_prompt_logprobs", self.topk_prompt_logprobs, minimum=0)
        _check_opt_int("topk_sample_logprobs", self.topk_sample_logprobs, minimum=0)
        _check_opt_int("prompt_alt_tokens_k", self.prompt_alt_tokens_k, minimum=0)
        _check_opt_int("prompt_logprobs_last_n", self.prompt_logprobs_last_n, minimum=1)
        if self.record_stability_info is not None:
            _check_bool("record_stability_info", self.record_stability_info)
        if self.target_prompt_logprobs is not None and not isinstance(
            self.target_prompt_logprobs, TensorData
        ):
            raise InvalidInputError("target_prompt_logprobs", "must be a TensorData")
