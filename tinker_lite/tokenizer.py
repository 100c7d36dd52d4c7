"""Find and load the tokenizer of a Tinker model, on Hugging Face ``tokenizers`` only.

Resolution follows WIRE.md §9: the server's ``tokenizer_id`` when it gives one, otherwise a
heuristic on the model name (Llama-3 models use an ungated copy of their tokenizer; an
``org/model/variant`` name uses ``org/model``; the local server's ``tinker-lite/*`` models use
its byte-level tokenizer). The id is then looked up, in this order:

1. ``tinker-lite/byte-tokenizer`` (the local server's model) from the file shipped in the package;
2. an existing local path (a ``tokenizer.json`` file or a directory holding one);
3. ``$TINKER_LITE_TOKENIZER_DIR/<org>/<name>/tokenizer.json``, then
   ``$TINKER_LITE_TOKENIZER_DIR/tokenizer.json``;
4. the Hugging Face hub cache (``$HF_HUB_CACHE``, ``$HF_HOME/hub`` or ``~/.cache/huggingface/hub``);
5. a download with ``tokenizers.Tokenizer.from_pretrained`` (skipped when ``HF_HUB_OFFLINE`` is
   set).

Loaded tokenizers are cached per id for the life of the process. ``transformers`` is never used:
the result is a plain ``tokenizers.Tokenizer`` and no chat template is applied.
"""

from __future__ import annotations

import importlib.resources
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from tinker_lite._errors import TokenizerUnavailableError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "BYTE_TOKENIZER_ID",
    "TokenizerUnavailableError",
    "clear_tokenizer_cache",
    "load_tokenizer",
    "resolve_tokenizer_id",
]

BYTE_TOKENIZER_ID = "tinker-lite/byte-tokenizer"
TOKENIZER_DIR_ENV = "TINKER_LITE_TOKENIZER_DIR"

# The local server's own model names (tinker_lite.local) all use its byte-level tokenizer.
_LOCAL_PREFIX = "tinker-lite/"
# WIRE.md §9: 0.4.1 maps every meta-llama/Llama-3* model to this ungated copy (avoids HF gating).
_LLAMA3_PREFIX = "meta-llama/Llama-3"
_LLAMA3_TOKENIZER = "baseten/Meta-Llama-3-tokenizer"
# WIRE.md §9: Kimi tokenizers need `trust_remote_code` (tiktoken), which plain `tokenizers` lacks.
_UNSUPPORTED_PREFIXES = ("moonshotai/Kimi",)

_cache: dict[str, Tokenizer] = {}
_cache_lock = threading.Lock()


def resolve_tokenizer_id(model_name: str | None, tokenizer_id: str | None = None) -> str:
    """Return the tokenizer id for a model: the server's id, else the WIRE.md §9 heuristics."""
    if tokenizer_id:
        # WIRE.md §9 (0.8.1): anything after the first ':' is a server-side variant tag.
        return tokenizer_id.split(":", 1)[0] if _looks_like_repo(tokenizer_id) else tokenizer_id
    if not model_name:
        raise TokenizerUnavailableError(
            "<unknown>", "the server reported neither a tokenizer_id nor a model_name"
        )
    name = model_name.split(":", 1)[0]
    if name.startswith(_LOCAL_PREFIX):
        return BYTE_TOKENIZER_ID
    if name.startswith(_LLAMA3_PREFIX):
        return _LLAMA3_TOKENIZER
    parts = name.split("/")
    if len(parts) == 3:
        return f"{parts[0]}/{parts[1]}"
    return name


def load_tokenizer(tokenizer_id: str) -> Tokenizer:
    """Return the ``tokenizers.Tokenizer`` for ``tokenizer_id`` (cached per id)."""
    with _cache_lock:
        cached = _cache.get(tokenizer_id)
    if cached is not None:
        return cached
    tokenizer = _load_uncached(tokenizer_id)
    with _cache_lock:
        return _cache.setdefault(tokenizer_id, tokenizer)


def clear_tokenizer_cache() -> None:
    """Forget every loaded tokenizer (the next load reads it again)."""
    with _cache_lock:
        _cache.clear()


def _looks_like_repo(tokenizer_id: str) -> bool:
    return tokenizer_id.count("/") == 1 and not Path(tokenizer_id).exists()


def _load_uncached(tokenizer_id: str) -> Tokenizer:
    from tokenizers import Tokenizer

    if tokenizer_id == BYTE_TOKENIZER_ID:
        # Read as package data: the local server's code is not imported.
        resource = importlib.resources.files("tinker_lite") / "local" / "tokenizer.json"
        if resource.is_file():
            return Tokenizer.from_str(resource.read_text(encoding="utf-8"))
    local = _find_local_file(tokenizer_id)
    if local is not None:
        try:
            return Tokenizer.from_file(str(local))
        except Exception as e:
            raise TokenizerUnavailableError(
                tokenizer_id, f"{local} is not a valid tokenizers JSON file: {e}"
            ) from e
    if tokenizer_id.startswith(_UNSUPPORTED_PREFIXES):
        raise TokenizerUnavailableError(
            tokenizer_id,
            "its tokenizer needs transformers with trust_remote_code, which tinker_lite does not "
            "use; " + _offline_hint(tokenizer_id),
        )
    if _env_flag("HF_HUB_OFFLINE"):
        raise TokenizerUnavailableError(
            tokenizer_id,
            "not found locally and HF_HUB_OFFLINE is set; " + _offline_hint(tokenizer_id),
        )
    try:
        return Tokenizer.from_pretrained(tokenizer_id)
    except Exception as e:
        raise TokenizerUnavailableError(
            tokenizer_id,
            f"could not fetch it from the Hugging Face hub ({type(e).__name__}: {e}); "
            + _offline_hint(tokenizer_id),
        ) from e


def _offline_hint(tokenizer_id: str) -> str:
    return (
        f"to use it offline put its tokenizer.json at ${TOKENIZER_DIR_ENV}/{tokenizer_id}/"
        f"tokenizer.json (or ${TOKENIZER_DIR_ENV}/tokenizer.json)"
    )


def _find_local_file(tokenizer_id: str) -> Path | None:
    candidate = _as_tokenizer_file(Path(tokenizer_id).expanduser())
    if candidate is not None:
        return candidate
    base = os.environ.get(TOKENIZER_DIR_ENV)
    if base:
        root = Path(base).expanduser()
        for path in (root / tokenizer_id / "tokenizer.json", root / "tokenizer.json"):
            if path.is_file():
                return path
    return _find_in_hub_cache(tokenizer_id)


def _as_tokenizer_file(path: Path) -> Path | None:
    if path.is_file() and path.suffix == ".json":
        return path
    if path.is_dir() and (path / "tokenizer.json").is_file():
        return path / "tokenizer.json"
    return None


def _find_in_hub_cache(tokenizer_id: str) -> Path | None:
    if tokenizer_id.count("/") != 1:
        return None
    hub_cache = os.environ.get("HF_HUB_CACHE")
    if hub_cache:
        root = Path(hub_cache)
    else:
        hf_home = os.environ.get("HF_HOME")
        root = Path(hf_home) / "hub" if hf_home else Path.home() / ".cache" / "huggingface" / "hub"
    repo_dir = root.expanduser() / ("models--" + tokenizer_id.replace("/", "--"))
    snapshots = repo_dir / "snapshots"
    if not snapshots.is_dir():
        return None
    # An unreadable cache is treated as a cache miss: the caller then reports what to do.
    try:
        pinned = snapshots / (repo_dir / "refs" / "main").read_text(encoding="utf-8").strip()
        if (pinned / "tokenizer.json").is_file():
            return pinned / "tokenizer.json"
    except (OSError, UnicodeDecodeError):
        pass
    try:
        for snapshot in sorted(snapshots.iterdir()):
            if (snapshot / "tokenizer.json").is_file():
                return snapshot / "tokenizer.json"
    except OSError:
        pass
    return None


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}
