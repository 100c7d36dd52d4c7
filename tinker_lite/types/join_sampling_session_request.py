"""``JoinSamplingSessionRequest``.

Official module ``tinker.types.join_sampling_session_request``.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import _check_str


@attrs.frozen(kw_only=True)
class JoinSamplingSessionRequest:
    """POST /api/v1/join_sampling_session (a copied SamplingClient joins an existing session)."""

    sampling_session_id: str
    type: Literal["join_sampling_session"] = attrs.field(
        default="join_sampling_session", init=False
    )

    def __attrs_post_init__(self) -> None:
        _check_str("sampling_session_id", self.sampling_session_id)
