"""``CheckpointType``, ``Checkpoint`` and ``ParsedCheckpointTinkerPath``.

Official module ``tinker.types.checkpoint``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import check_tinker_path

CheckpointType = Literal["training", "sampler", "external"]


@attrs.frozen(kw_only=True)
class Checkpoint:
    """A saved checkpoint (``checkpoint_type`` is ``"training"`` or ``"sampler"``)."""

    checkpoint_id: str
    checkpoint_type: str
    time: datetime
    tinker_path: str
    size_bytes: int | None = None
    public: bool = False
    expires_at: datetime | None = None
    user_metadata: dict[str, str] | None = None


_PATH_KINDS: Mapping[str, CheckpointType] = {
    "weights": "training",
    "sampler_weights": "sampler",
    "external_weights": "external",
}


@attrs.frozen(kw_only=True)
class ParsedCheckpointTinkerPath:
    """The parts of ``tinker://{training_run_id}/{weights|sampler_weights}/{name}``."""

    tinker_path: str
    training_run_id: str
    checkpoint_type: CheckpointType
    checkpoint_id: str

    @classmethod
    def from_tinker_path(cls, tinker_path: str) -> ParsedCheckpointTinkerPath:
        """Parse a checkpoint path (docs/protocol.rst §4.8); InvalidInputError says what is
        wrong."""
        kinds_hint = (
            "paths look like tinker://<run>/weights/<name> (a training state, loadable with "
            "load_state / create_training_client_from_state) or "
            "tinker://<run>/sampler_weights/<name> (sampleable and downloadable), or "
            "tinker://<run>/external_weights/<name> (from save_weights_external)"
        )
        path = check_tinker_path("tinker_path", tinker_path)
        parts = path[len("tinker://") :].split("/")
        if len(parts) != 3 or not all(parts):
            empty = parts.count("")
            raise InvalidInputError(
                "tinker_path",
                f"{path!r} has {len(parts)} part(s) after tinker://"
                f"{f' ({empty} empty)' if empty else ''}, expected 3 non-empty",
                kinds_hint,
            )
        run_id, kind, name = parts
        if run_id in (".", "..") or name in (".", ".."):
            raise InvalidInputError(
                "tinker_path",
                f"{path!r} has a '.' or '..' part, which would address another resource",
                kinds_hint,
            )
        if kind not in _PATH_KINDS:
            raise InvalidInputError(
                "tinker_path",
                f"unknown checkpoint kind {kind!r} in {path!r}",
                kinds_hint,
            )
        return cls(
            tinker_path=path,
            training_run_id=run_id,
            checkpoint_type=_PATH_KINDS[kind],
            checkpoint_id=f"{kind}/{name}",
        )
