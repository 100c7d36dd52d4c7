"""``TrainingRunsResponse`` (official module ``tinker.types.training_runs_response``)."""

from __future__ import annotations

import attrs

from .cursor import Cursor
from .training_run import TrainingRun


@attrs.frozen(kw_only=True)
class TrainingRunsResponse:
    """A page of training runs."""

    training_runs: list[TrainingRun]
    cursor: Cursor
