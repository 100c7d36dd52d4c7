"""``SaveWeightsForSamplerResponseInternal`` and ``SaveWeightsForSamplerResponse``.

Official module ``tinker.types.save_weights_for_sampler_response``.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class SaveWeightsForSamplerResponseInternal:
    """Raw result of save_weights_for_sampler: a path (named) or a sampling session (ephemeral)."""

    path: str | None = None
    sampling_session_id: str | None = None
    type: str | None = None


@attrs.frozen
class SaveWeightsForSamplerResponse:
    """Result of TrainingClient.save_weights_for_sampler: the sampler checkpoint's path."""

    path: str
    type: str | None = None
