"""``GetSessionResponse`` (official module ``tinker.types.get_session_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class GetSessionResponse:
    """Training runs and samplers of one session."""

    training_run_ids: list[str]
    sampler_ids: list[str]
    display_name: str | None = None
    user_metadata: dict[str, str] | None = None
