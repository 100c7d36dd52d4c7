"""``CreateModelResponse`` (official module ``tinker.types.create_model_response``)."""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen(kw_only=True)
class CreateModelResponse:
    """Result of create_model."""

    model_id: str
    type: Literal["create_model"] = "create_model"
