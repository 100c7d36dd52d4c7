"""``EncodedTextChunk`` (official module ``tinker.types.encoded_text_chunk``)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ._common import FlatValues, _set, _token_ids

if TYPE_CHECKING:
    import numpy.typing as npt


@attrs.frozen(init=False, slots=False)
class EncodedTextChunk:
    """A run of token ids.

    ``tokens`` is a ``list[int]``; a list, tuple, numpy array or torch tensor of ids is accepted.
    The ids are kept as an int32 array (a stdlib array for a list, numpy for numpy and torch
    values), and the list is made from it when first read.
    """

    tokens: list[int]
    type: Literal["encoded_text"] = attrs.field(default="encoded_text", init=False)

    def __init__(self, tokens: Sequence[int] | npt.NDArray[Any]) -> None:
        # Empty is allowed, as in 0.38 (renderers make one for an empty message); a training
        # datum refuses it when sent (docs/service.rst §2).
        ids = _token_ids("EncodedTextChunk.tokens", tokens)
        _set(self, "type", "encoded_text")
        _set(self, "_ids", ids)

    @classmethod
    def _trusted(cls, ids: FlatValues) -> EncodedTextChunk:
        # For an array from _token_ids: skips checking it again.
        chunk = object.__new__(cls)
        _set(chunk, "type", "encoded_text")
        _set(chunk, "_ids", ids)
        return chunk

    def _current_ids(self) -> FlatValues | None:
        """Return the token ids as an int32 store, or None if ``tokens`` was changed.

        None once the ``tokens`` list was changed in place (or replaced): the caller then reads
        ``tokens`` itself.
        """
        state = self.__dict__
        ids: FlatValues | None = state.get("_ids")
        tokens = state.get("tokens")
        if tokens is None or ids is None:
            return ids
        return ids if tokens == state.get("_ids_list") else None

    def _max_id(self) -> int | None:
        """The largest token id (None for no ids), read once per stored id array.

        The stored ids are a private copy nothing changes, so their largest value is kept with
        them; once ``tokens`` was changed in place it is read from ``tokens`` on every call.
        """
        ids = self._current_ids()
        if ids is None:
            return max(self.tokens, default=None)
        state = self.__dict__
        memo: tuple[FlatValues, int | None] | None = state.get("_max_id_memo")
        if memo is not None and memo[0] is ids:
            return memo[1]
        if isinstance(ids, array):
            highest = max(ids, default=None)
        else:
            highest = int(ids.max()) if ids.size else None
        state["_max_id_memo"] = (ids, highest)
        return highest

    @property
    def length(self) -> int:
        """Number of model positions the chunk takes."""
        ids = self._current_ids()
        return len(ids) if ids is not None else len(self.tokens)


def _read_chunk_tokens(chunk: EncodedTextChunk) -> list[int]:
    state = chunk.__dict__
    tokens: list[int] | None = state.get("tokens")
    if tokens is None:
        made = state["_ids"].tolist()
        # `_ids_list` is what _current_ids compares `tokens` with to see an in-place change;
        # setdefault keeps one list when two threads read `tokens` at once.
        state.setdefault("_ids_list", list(made))
        tokens = state.setdefault("tokens", made)
    return tokens


def _write_chunk_tokens(chunk: EncodedTextChunk, tokens: list[int]) -> None:
    # Reached through object.__setattr__ only: the frozen class refuses `chunk.tokens = ...`.
    chunk.__dict__["tokens"] = tokens


# attrs takes field attributes off the class; `tokens` is served by this property instead.
EncodedTextChunk.tokens = property(  # type: ignore[assignment]
    _read_chunk_tokens, _write_chunk_tokens, doc="The token ids, as a list."
)
