"""``SaveWeightsExternalRequest``.

Official module ``tinker.types.save_weights_external_request``.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import _check_opt_int, _check_str

__all__ = ["SaveWeightsExternalRequest"]


@attrs.frozen(kw_only=True)
class SaveWeightsExternalRequest:
    """Export weights to ``path`` (optionally age-encrypted to the given recipients)."""

    model_id: str
    path: str
    seq_id: int | None = None
    ttl_seconds: int | None = None
    age_encryption_recipients: list[str] | None = None
    type: Literal["save_weights_external"] = attrs.field(
        default="save_weights_external", init=False
    )

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)
        _check_str("path", self.path)
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        _check_opt_int("ttl_seconds", self.ttl_seconds, minimum=1)
