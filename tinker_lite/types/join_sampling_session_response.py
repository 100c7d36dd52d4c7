"""``JoinSamplingSessionResponse``.

Official module ``tinker.types.join_sampling_session_response``.
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["JoinSamplingSessionResponse"]


@attrs.frozen(kw_only=True)
class JoinSamplingSessionResponse:
    """The joined session's counter for this client."""

    type: Literal["join_sampling_session"] = "join_sampling_session"
    client_counter: int
