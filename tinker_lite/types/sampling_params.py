"""``SamplingParams`` (official module ``tinker.types.sampling_params``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_float, _check_int, _check_opt_int, _is_integer, _set


def _convert_stop(value: object) -> str | list[str] | list[int] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInputError(
            "stop", f"must be a string, a list of strings or a list of token ids, got {value!r}"
        )
    items = list(value)
    if all(isinstance(item, str) for item in items):
        return items
    if all(_is_integer(item) for item in items):
        tokens = [int(item) for item in items]
        if any(t < 0 for t in tokens):
            raise InvalidInputError("stop", "stop token ids must be non-negative")
        return tokens
    raise InvalidInputError(
        "stop",
        f"mixes strings and token ids (or holds other values): {items!r}",
        "use either a list of strings or a list of token ids",
    )


@attrs.frozen
class SamplingParams:
    """How to sample: length limit, stop sequences, temperature, top-k and top-p."""

    max_tokens: int | None = None
    seed: int | None = None
    stop: str | list[str] | list[int] | None = attrs.field(default=None, converter=_convert_stop)
    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0

    def __attrs_post_init__(self) -> None:
        _set(self, "max_tokens", _check_opt_int("max_tokens", self.max_tokens, minimum=1))
        _set(self, "seed", _check_opt_int("seed", self.seed))
        temperature = _check_float("temperature", self.temperature)
        if temperature < 0:
            raise InvalidInputError(
                "temperature", f"must be >= 0, got {temperature}", "0 means greedy decoding"
            )
        _set(self, "temperature", temperature)
        top_k = _check_int("top_k", self.top_k, minimum=-1)
        if top_k == 0:
            raise InvalidInputError("top_k", "must be -1 (no limit) or >= 1, got 0")
        _set(self, "top_k", top_k)
        top_p = _check_float("top_p", self.top_p)
        if not 0.0 < top_p <= 1.0:
            raise InvalidInputError(
                "top_p", f"must be in (0, 1], got {top_p}", "1.0 disables nucleus sampling"
            )
        _set(self, "top_p", top_p)
