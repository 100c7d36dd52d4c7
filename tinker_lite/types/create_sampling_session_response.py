"""``CreateSamplingSessionResponse``.

Official module ``tinker.types.create_sampling_session_response``.
"""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen(kw_only=True)
class CreateSamplingSessionResponse:
    """The new sampling session's id."""

    sampling_session_id: str
    type: Literal["create_sampling_session"] = "create_sampling_session"
