"""Checks of the values a store is handed: text-only inputs, save metadata, optimizer choice.

The HTTP layer structures a body into ``types``; these check what the schema cannot (a user error
or a refusal naming the field).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tinker_lite import types
from tinker_lite.local.refusals import InvalidRequest, UserInputError, field_error

__all__ = ["DimuonStepRequest", "check_optimizer_config", "text_tokens", "user_metadata"]


def user_metadata(extras: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The ``user_metadata`` of a save request (string keys and values), or None."""
    metadata = (extras or {}).get("user_metadata")
    if metadata is None:
        return None
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise field_error(
            ["body", "user_metadata"], "user_metadata: must map strings to strings", "dict_type"
        )
    return dict(metadata)


def check_optimizer_config(config: Any, where: str) -> str | None:
    """The optimizer family of an ``optimizer_config`` ("adamw" or "dimuon"), None when absent.

    0.38 sends ``{"type": "adamw"}`` or ``{"type": "dimuon", "version": 1}``; another type is a
    400 naming the supported ones, a bad Dimuon version or key a 422 naming the field.
    """
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise field_error(["body", where], f"{where}: must be an object", "dict_type")
    kind = config.get("type", "adamw")
    if kind == "adamw":
        return "adamw"
    if kind != "dimuon":
        raise InvalidRequest(
            f"{where}.type: unsupported optimizer {kind!r} (supported: 'adamw', 'dimuon')"
        )
    for key in config:
        if key not in ("type", "version"):
            raise field_error(
                ["body", where, str(key)],
                f"{where}.{key}: Extra inputs are not permitted",
                "extra_forbidden",
            )
    version = config.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise field_error(
            ["body", where, "version"],
            f"{where}.version: Dimuon version {version!r} is not served (only 1)",
            "literal_error",
        )
    return "dimuon"


@dataclass(frozen=True)
class DimuonStepRequest:
    """An optim_step carrying 0.38's ``optimizer_params`` of type "dimuon" (checked)."""

    model_id: str
    seq_id: int | None
    learning_rate: float
    grad_clip_norm: float
    beta1: float


def text_tokens(chunks: Sequence[Any], where: str) -> list[int]:
    """The token ids of a model input's chunks; a user error for any non-text chunk."""
    tokens: list[int] = []
    for index, chunk in enumerate(chunks):
        if not isinstance(chunk, types.EncodedTextChunk):
            kind = getattr(chunk, "type", type(chunk).__name__)
            # docs/service.rst §2: tinker_lite's model takes text chunks only
            raise UserInputError(
                f"{where}.chunks[{index}]: {kind} chunks are not supported by the local server's "
                "text-only model; send encoded_text chunks"
            )
        tokens.extend(chunk.tokens)
    return tokens
