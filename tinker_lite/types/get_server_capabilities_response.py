"""``SupportedModel`` and ``GetServerCapabilitiesResponse``.

Official module ``tinker.types.get_server_capabilities_response``.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class SupportedModel:
    """A base model the service can train or sample."""

    model_name: str | None = None
    max_context_length: int | None = None
    trainable: bool | None = None
    sampleable: bool | None = None


@attrs.frozen
class GetServerCapabilitiesResponse:
    """The service's supported models."""

    supported_models: list[SupportedModel]
