"""A Hugging Face hub cache that holds stand-in tokenizer files, so tests never download one.

The local server names each model's real tokenizer (``Qwen/Qwen3-8B``,
``thinkingmachineslabinc/meta-llama-3-instruct-tokenizer``, ...); ``get_tokenizer()`` and the
server (for ``stop`` strings) look for its files in the hub cache. The stand-in files are the
local model's byte tokenizer, whose ids are valid ids of every real vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tinker_lite.local.model import tiny_lm as local_model

__all__ = ["LLAMA3_TOKENIZER", "stand_in_hub_cache"]

LLAMA3_TOKENIZER = "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer"


def stand_in_hub_cache(root: Path, tokenizer_ids: Iterable[str]) -> Path:
    """Fill ``root`` as a hub cache (``HF_HUB_CACHE``) with a snapshot per tokenizer id."""
    shipped = local_model.tokenizer_path().parent
    for tokenizer_id in tokenizer_ids:
        repo = root / ("models--" + tokenizer_id.replace("/", "--"))
        snapshot = repo / "snapshots" / "0"
        snapshot.mkdir(parents=True, exist_ok=True)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text("0")
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (snapshot / name).write_bytes((shipped / name).read_bytes())
    return root
