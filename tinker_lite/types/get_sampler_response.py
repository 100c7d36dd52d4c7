"""``GetSamplerResponse`` (official module ``tinker.types.get_sampler_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class GetSamplerResponse:
    """A sampler's base model and, for trained weights, its model path."""

    sampler_id: str
    base_model: str
    model_path: str | None = None
