"""Find and load the tokenizer of a Tinker model: what ``get_tokenizer()`` returns
(docs/protocol.rst §10).

With ``transformers`` installed, the result is the tokenizer ``transformers`` builds from the
model's tokenizer files (``AutoTokenizer.from_pretrained``), as the official SDK returns; without
it, a :class:`~tinker_lite._tokenizer.light.LightTokenizer` built from the same files, with the
same ids and the calls scripts use (``encode`` gives ``list[int]``). Either way the raw
``tokenizers.Tokenizer`` is its ``backend_tokenizer``.

Resolution follows the official SDK 0.38 (docs/protocol.rst §10): the server's ``tokenizer_id`` when
it gives one, otherwise a heuristic on the model name (Llama-3 models use an ungated copy of their
tokenizer; an ``org/model/variant`` name uses ``org/model``; the local server's ``tinker-lite/*``
models use its byte-level tokenizer). The tokenizer files are then looked up, in this order:

1. ``tinker-lite/byte-tokenizer`` (the local server's model): the files shipped in the package;
2. an existing local path (a ``tokenizer.json`` file, or a directory holding one);
3. ``$TINKER_LITE_TOKENIZER_DIR/<org>/<name>/``, then ``$TINKER_LITE_TOKENIZER_DIR/``;
4. the Hugging Face hub cache (``$HF_HUB_CACHE``, ``$HF_HOME/hub`` or ``~/.cache/huggingface/hub``);
5. a download from the Hugging Face hub (skipped when ``HF_HUB_OFFLINE`` is set).

A directory supplies ``tokenizer.json`` and, when present, ``tokenizer_config.json`` (special
tokens, chat template), ``special_tokens_map.json`` and ``chat_template.jinja``. Loaded tokenizers
are cached per id for the life of the process.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinker_lite._errors import TokenizerUnavailableError
from tinker_lite._tokenizer.light import BatchEncoding, LightTokenizer

if TYPE_CHECKING:
    from typing import TypeAlias

    from transformers import PreTrainedTokenizerBase

    PretrainedTokenizer: TypeAlias = LightTokenizer | PreTrainedTokenizerBase

__all__ = [
    "BYTE_TOKENIZER_ID",
    "BatchEncoding",
    "LightTokenizer",
    "TokenizerUnavailableError",
    "clear_tokenizer_cache",
    "load_tokenizer",
    "resolve_tokenizer_id",
]

BYTE_TOKENIZER_ID = "tinker-lite/byte-tokenizer"
TOKENIZER_DIR_ENV = "TINKER_LITE_TOKENIZER_DIR"

# The local server's own model names (tinker_lite.local) all use its byte-level tokenizer, whose
# files ship in the package next to the server (read as files: the server is not imported).
_LOCAL_PREFIX = "tinker-lite/"
_BYTE_TOKENIZER_DIR = Path(__file__).with_name("local")
# The official SDK 0.38 maps every meta-llama/Llama-3* model to this ungated copy (avoids gating).
_LLAMA3_PREFIX = "meta-llama/Llama-3"
_LLAMA3_TOKENIZER = "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer"
# Kimi tokenizers are tiktoken code run with `trust_remote_code`, which tinker_lite never does.
_UNSUPPORTED_PREFIXES = ("moonshotai/Kimi",)
# The files a tokenizer directory may hold (downloaded together).
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "additional_chat_templates/*.jinja",
)

_cache: dict[str, PretrainedTokenizer] = {}
_cache_lock = threading.Lock()


def resolve_tokenizer_id(model_name: str | None, tokenizer_id: str | None = None) -> str:
    """Return the tokenizer id for a model: the server's id, else the docs/protocol.rst §10
    heuristics."""
    if tokenizer_id:
        # docs/protocol.rst §10 (0.8.1): anything after the first ':' is a server-side variant tag.
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


def load_tokenizer(tokenizer_id: str) -> PretrainedTokenizer:
    """Return the tokenizer for ``tokenizer_id`` (cached per id): ``transformers``' when it is
    installed, tinker_lite's :class:`LightTokenizer` otherwise."""
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


def _transformers_available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def _load_uncached(tokenizer_id: str) -> PretrainedTokenizer:
    with_transformers = _transformers_available()
    if tokenizer_id == BYTE_TOKENIZER_ID:
        found: Path | None = _BYTE_TOKENIZER_DIR / "tokenizer.json"
    else:
        found = _find_local_file(tokenizer_id)
    if found is None:
        if tokenizer_id.startswith(_UNSUPPORTED_PREFIXES):
            raise TokenizerUnavailableError(
                tokenizer_id,
                "its tokenizer is code run with transformers' trust_remote_code, which "
                "tinker_lite does not do; " + _offline_hint(tokenizer_id),
            )
        if _env_flag("HF_HUB_OFFLINE"):
            raise TokenizerUnavailableError(
                tokenizer_id,
                "it is not on this machine and HF_HUB_OFFLINE is set; "
                + _offline_hint(tokenizer_id),
            )
        if with_transformers:
            # What the official SDK does: transformers fetches the files itself.
            return _with_transformers(tokenizer_id, tokenizer_id)
        found = _download(tokenizer_id) / "tokenizer.json"
    source = str(found.parent) if found.name == "tokenizer.json" else str(found)
    if with_transformers:
        return _with_transformers(source, tokenizer_id)
    try:
        if found.name == "tokenizer.json":
            return LightTokenizer.from_directory(found.parent, name_or_path=tokenizer_id)
        from tokenizers import Tokenizer

        return LightTokenizer(Tokenizer.from_file(str(found)), name_or_path=tokenizer_id)
    except Exception as e:
        raise TokenizerUnavailableError(
            tokenizer_id, f"{found} is not a valid tokenizers JSON file: {e}"
        ) from e


def _with_transformers(source: str, tokenizer_id: str) -> Any:
    """``transformers``' tokenizer from a directory, a tokenizer file or a hub id."""
    try:
        if source.endswith(".json"):
            from transformers import PreTrainedTokenizerFast

            tokenizer = PreTrainedTokenizerFast(tokenizer_file=source)
        else:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(source)
    except Exception as e:
        raise TokenizerUnavailableError(
            tokenizer_id,
            f"transformers could not load it from {source} ({type(e).__name__}: "
            f"{_root_cause(e)}); " + _offline_hint(tokenizer_id),
        ) from e
    # The id, not where the files happened to be found, as the official SDK's tokenizer says.
    tokenizer.name_or_path = tokenizer_id
    return tokenizer


def _download(tokenizer_id: str) -> Path:
    """Fetch the tokenizer files of a hub repository into the hub cache; their directory."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:
        raise TokenizerUnavailableError(
            tokenizer_id,
            "it is not on this machine and huggingface_hub, which downloads it, is not "
            "installed (pip install huggingface_hub); " + _offline_hint(tokenizer_id),
        ) from e
    try:
        directory = Path(snapshot_download(tokenizer_id, allow_patterns=list(_TOKENIZER_FILES)))
    except Exception as e:
        raise TokenizerUnavailableError(
            tokenizer_id,
            f"it is not on this machine and could not be fetched from the Hugging Face hub "
            f"({_root_cause(e)}); " + _offline_hint(tokenizer_id),
        ) from e
    if not (directory / "tokenizer.json").is_file():
        raise TokenizerUnavailableError(
            tokenizer_id,
            "its hub repository has no tokenizer.json; " + _offline_hint(tokenizer_id),
        )
    return directory


def _root_cause(error: BaseException) -> str:
    """The innermost cause of a failed fetch, in one short line (hub errors span paragraphs)."""
    root, seen = error, {id(error)}
    while root.__cause__ is not None and id(root.__cause__) not in seen:
        root = root.__cause__
        seen.add(id(root))
    first_line = str(root).strip().split("\n", 1)[0]
    text = " ".join(first_line.split()) or type(root).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _offline_hint(tokenizer_id: str) -> str:
    """Where to put the files, and how to get them, for a machine without the hub."""
    configured = os.environ.get(TOKENIZER_DIR_ENV)
    where = f"it is {configured}" if configured else "it is not set"
    hint = (
        f"to use it offline put its tokenizer.json (and tokenizer_config.json, for the special "
        f"tokens and chat template) in ${TOKENIZER_DIR_ENV}/{tokenizer_id}/ (or "
        f"${TOKENIZER_DIR_ENV}/; {where})"
    )
    if _looks_like_repo(tokenizer_id):
        hint += (
            f", or fetch them once where the hub is reachable with `hf download {tokenizer_id} "
            "tokenizer.json tokenizer_config.json` (the Hugging Face cache is searched too)"
        )
    return hint + f"; the local server's {_LOCAL_PREFIX}* models need no download"


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
