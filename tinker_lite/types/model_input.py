"""``ModelInput`` (official module ``tinker.types.model_input``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _token_ids
from .dmel_chunk import DmelChunk
from .encoded_text_chunk import EncodedTextChunk
from .model_input_chunk import _CHUNK_TYPES, ModelInputChunk

if TYPE_CHECKING:
    import numpy.typing as npt


def _convert_chunks(value: Iterable[ModelInputChunk]) -> list[ModelInputChunk]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInputError(
            "ModelInput.chunks", f"must be a list of chunks, got {type(value).__name__}"
        )
    chunks = list(value)
    for index, chunk in enumerate(chunks):
        if not isinstance(chunk, _CHUNK_TYPES):
            raise InvalidInputError(
                f"ModelInput.chunks[{index}]",
                "must be EncodedTextChunk, ImageChunk, ImageAssetPointerChunk or DmelChunk, "
                f"got {type(chunk).__name__}",
                "build token inputs with ModelInput.from_ints(tokens)",
            )
    return chunks


@attrs.frozen
class ModelInput:
    """The input of a model: a list of text, image and audio (dmel) chunks."""

    chunks: list[ModelInputChunk] = attrs.field(converter=_convert_chunks)

    @classmethod
    def from_ints(cls, tokens: Sequence[int] | npt.NDArray[Any]) -> ModelInput:
        """Build a text-only input from token ids (an empty list gives an empty input)."""
        ids = _token_ids("tokens", tokens)
        if not len(ids):
            return cls(chunks=[])
        return cls(chunks=[EncodedTextChunk._trusted(ids)])

    @classmethod
    def empty(cls) -> ModelInput:
        """Return an input with no chunks."""
        return cls(chunks=[])

    def to_ints(self) -> list[int]:
        """Return all token ids; raises InvalidInputError if the input holds a non-text chunk."""
        out: list[int] = []
        for index, chunk in enumerate(self.chunks):
            if not isinstance(chunk, EncodedTextChunk):
                raise InvalidInputError(
                    f"chunks[{index}]",
                    f"to_ints() needs text chunks only, found {chunk.type!r}",
                    "read tokens chunk by chunk instead",
                )
            ids = chunk._current_ids()
            out.extend(chunk.tokens if ids is None else ids.tolist())
        return out

    @property
    def length(self) -> int:
        """Number of model positions (text tokens, image token counts, audio lengths).

        A dmel chunk whose TensorContainer header is malformed raises InvalidInputError.
        """
        return sum(chunk.length for chunk in self.chunks)

    def append(self, chunk: ModelInputChunk) -> ModelInput:
        """Return a new input with ``chunk`` added at the end."""
        return ModelInput(chunks=[*self.chunks, chunk])

    def append_int(self, token: int) -> ModelInput:
        """Return a new input with ``token`` as a new one-token chunk (as the official SDK does)."""
        return self.append(EncodedTextChunk._trusted(_token_ids("token", [token])))


def check_dmel_headers(model_input: ModelInput, where: str) -> None:
    """Raise InvalidInputError naming ``<where>.chunks[j].dmel`` for an audio chunk whose
    TensorContainer header gives no length; checked before a model input is sent."""
    for index, chunk in enumerate(model_input.chunks):
        if isinstance(chunk, DmelChunk):
            chunk._checked_length(f"{where}.chunks[{index}].dmel")
