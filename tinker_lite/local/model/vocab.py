"""The token ids each served model takes and gives: its tokenizer's, folded into the tiny table.

The service names each model's own tokenizer in ``get_info`` (docs/service.rst §6), and code
written for it tokenizes with that tokenizer: Qwen3 ids reach 151,935, gpt-oss ids 201,087. The
tiny model has one table of :data:`TABLE_SIZE` rows (the byte tokenizer's 259 ids), so a served
name other than ``tinker-lite/*`` gets a :class:`TokenSpace` that accepts every id of its
tokenizer's vocabulary (the model's embedding size) and folds each into a row: ids below the
table's size keep their own row (byte-valued ids train as on the byte model), larger ones are
hashed onto it. Training and scoring read the row of each id; sampling
draws a row and answers an id of the vocabulary for it: the last id of the request's stop tokens
that falls in that row, else the last such id of the prompt, else the row's own index. So a
sampled id is always valid for the tokenizer, a model trained to emit a stop token stops, and
text sampled after a prompt is made of that prompt's tokens where it can be.

The server ships no tokenizer but its own, and never downloads one. ``stop`` strings need text:
for a folded model they are matched with its tokenizer's ``tokenizer.json`` when the server finds
it where ``get_tokenizer()`` looks offline (``$TINKER_LITE_TOKENIZER_DIR/<tokenizer_id>/``, then
the Hugging Face hub cache), and never match otherwise. The server does not know a folded
model's EOS ids either: its samples end at the request's stop tokens, a stop string or
``max_tokens``.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "BYTE_TOKENIZER_ID",
    "TABLE_SIZE",
    "TokenSpace",
    "find_tokenizer_file",
    "load_tokenizer",
    "token_space",
    "tokenizer_path",
]

Array = npt.NDArray[Any]

log = logging.getLogger("tinker_lite.local")

BYTE_TOKENIZER_ID: Final = "tinker-lite/byte-tokenizer"
# The tiny model's table: 256 bytes, <|bos|>, <|eos|>, <|pad|> (tinker_lite.local.model.tiny_lm).
TABLE_SIZE: Final = 259
# Knuth's multiplicative constant: consecutive ids land far apart.
_FOLD_MULTIPLIER: Final = 2654435761

# The official SDK 0.38 loads every meta-llama/Llama-3* tokenizer from this ungated copy
# (docs/protocol.rst §10); the service names the model's own repository for the others.
_LLAMA3_TOKENIZER: Final = "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer"

# Name prefix -> how many ids the model's tokenizer has (the model's embedding rows, its
# config's ``vocab_size``), first match wins; from the models' published configs.
_VOCABULARY_SIZES: Final = (
    ("Qwen/Qwen3.5-", 248_320),
    ("Qwen/Qwen3.6-", 248_320),
    ("Qwen/Qwen3.8-", 248_320),
    ("Qwen/Qwen3-", 151_936),
    ("meta-llama/Llama-3", 128_256),
    ("deepseek-ai/DeepSeek-V3", 129_280),
    ("moonshotai/Kimi-K2", 163_840),
    ("nvidia/NVIDIA-Nemotron-3", 131_072),
    ("openai/gpt-oss-", 201_088),
)


def tokenizer_path() -> Path:
    """Return the path of the shipped byte tokenizer's ``tokenizer.json``."""
    return Path(__file__).parent.with_name("tokenizer.json")


@functools.lru_cache(maxsize=1)
def load_tokenizer() -> Tokenizer:
    """Load the shipped byte-level tokenizer (offline, cached)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tokenizer_path()))


@dataclass(frozen=True)
class TokenSpace:
    """A model's token ids ``[0, size)`` and how they map onto the tiny model's table."""

    tokenizer_id: str
    size: int = TABLE_SIZE

    @property
    def folded(self) -> bool:
        """True when ids are folded into the table (any tokenizer but the byte tokenizer)."""
        return self.size > TABLE_SIZE

    def rows(self, ids: Array) -> Array:
        """The table row of each id (ids already checked to lie in ``[0, size)``).

        Ids below :data:`TABLE_SIZE` keep their own row; larger ones are hashed onto the table.
        """
        if not self.folded:
            return ids
        ids = ids.astype(np.int64)
        hashed = (ids * _FOLD_MULTIPLIER) % (1 << 32) % TABLE_SIZE
        rows: Array = np.where(ids < TABLE_SIZE, ids, hashed)
        return rows

    def decoder(self) -> Callable[[list[int]], str] | None:
        """Ids to text with this tokenizer's files when the server finds them, else None."""
        return _decoder(self.tokenizer_id) if self.folded else None

    def ids_for_rows(self, *contexts: Iterable[int]) -> Array:
        """For each table row, the id a sample drawn there answers (identity when not folded).

        Each row answers its own index (the one id below :data:`TABLE_SIZE` in it), unless an id
        of ``contexts`` falls in it: later contexts win over earlier ones, later ids over
        earlier ones.
        """
        answer: Array = np.arange(TABLE_SIZE, dtype=np.int64)
        if not self.folded:
            return answer
        for context in contexts:
            ids = np.asarray(list(context), dtype=np.int64)
            ids = ids[(ids >= 0) & (ids < self.size)]
            if ids.size:
                latest_first = ids[::-1]
                rows, first = np.unique(self.rows(latest_first), return_index=True)
                answer[rows] = latest_first[first]
        return answer


@functools.lru_cache(maxsize=16)
def _decoder(tokenizer_id: str) -> Callable[[list[int]], str] | None:
    path = find_tokenizer_file(tokenizer_id)
    if path is None:
        log.info("no tokenizer.json for %s: its stop strings cannot match", tokenizer_id)
        return None
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception for a bad file
        log.warning("cannot read %s (%s): stop strings of %s cannot match", path, e, tokenizer_id)
        return None
    decode: Callable[[list[int]], str] = tokenizer.decode
    return decode


def find_tokenizer_file(tokenizer_id: str) -> Path | None:
    """``tokenizer.json`` of ``tokenizer_id`` where ``get_tokenizer()`` finds it offline.

    ``$TINKER_LITE_TOKENIZER_DIR/<tokenizer_id>/``, then the Hugging Face hub cache
    (``$HF_HUB_CACHE``, ``$HF_HOME/hub`` or ``~/.cache/huggingface/hub``); None elsewhere.
    """
    base = os.environ.get("TINKER_LITE_TOKENIZER_DIR")
    if base and (Path(base).expanduser() / tokenizer_id / "tokenizer.json").is_file():
        return Path(base).expanduser() / tokenizer_id / "tokenizer.json"
    if tokenizer_id.count("/") != 1:
        return None
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join("~", ".cache", "huggingface"), "hub"
    )
    snapshots = Path(hub).expanduser() / ("models--" + tokenizer_id.replace("/", "--"))
    try:
        found = sorted((snapshots / "snapshots").glob("*/tokenizer.json"))
    except OSError:
        return None
    return found[0] if found else None


def token_space(model_name: str) -> TokenSpace:
    """The token space of a served model name: its tokenizer id and vocabulary size.

    ``tinker-lite/*`` names, and registered names of no known family (``serve --model``), use
    the byte tokenizer and the table as is.
    """
    for prefix, size in _VOCABULARY_SIZES:
        if model_name.startswith(prefix):
            tokenizer = _LLAMA3_TOKENIZER if prefix == "meta-llama/Llama-3" else model_name
            return TokenSpace(tokenizer, size)
    return TokenSpace(BYTE_TOKENIZER_ID)
