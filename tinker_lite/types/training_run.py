"""``TrainingRun`` (official module ``tinker.types.training_run``)."""

from __future__ import annotations

from datetime import datetime

import attrs

from .checkpoint import Checkpoint


@attrs.frozen(kw_only=True)
class TrainingRun:
    """A training run (a trained model) and its latest checkpoints."""

    training_run_id: str
    base_model: str
    model_owner: str
    is_lora: bool
    corrupted: bool = False
    lora_rank: int | None = None
    last_request_time: datetime
    last_checkpoint: Checkpoint | None = None
    last_sampler_checkpoint: Checkpoint | None = None
    user_metadata: dict[str, str] | None = None
