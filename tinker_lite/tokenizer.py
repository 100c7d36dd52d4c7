"""Find and load the tokenizer of a Tinker model: what ``get_tokenizer()`` returns.

``transformers``' tokenizer when it is installed, else a :class:`LightTokenizer` over the same
files; docs/protocol.rst §10 gives the resolution and where the files are looked up.
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

# The local server's models use its byte-level tokenizer, read as files (no server import).
_LOCAL_PREFIX = "tinker-lite/"
_BYTE_TOKENIZER_DIR = Path(__file__).with_name("local")
# The official SDK 0.38 maps every meta-llama/Llama-3* model to this ungated copy.
_LLAMA3_PREFIX = "meta-llama/Llama-3"
_LLAMA3_TOKENIZER = "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer"
# Kimi tokenizers are tiktoken code run with `trust_remote_code`, which tinker_lite never does.
_UNSUPPORTED_PREFIXES = ("moonshotai/Kimi",)
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
    """The tokenizer id of a model: the server's, else the heuristics of docs/protocol.rst §10."""
    if tokenizer_id:
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
    """The tokenizer of ``tokenizer_id`` (cached per id): ``transformers``' when it is installed,
    a :class:`LightTokenizer` otherwise."""
    with _cache_lock:
        cached = _cache.get(tokenizer_id)
    if cached is not None:
        return cached
    tokenizer = _load_uncached(tokenizer_id)
    with _cache_lock:
        return _cache.setdefault(tokenizer_id, tokenizer)


def clear_tokenizer_cache() -> None:
    """Forget every loaded tokenizer."""
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
        if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
            raise TokenizerUnavailableError(
                tokenizer_id,
                "it is not on this machine and HF_HUB_OFFLINE is set; "
                + _offline_hint(tokenizer_id),
            )
        if with_transformers:
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
    # The id, not where the files were found, as the official SDK's tokenizer says.
    tokenizer.name_or_path = tokenizer_id
    return tokenizer


def _download(tokenizer_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download  # a dependency of tokenizers

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
    """The innermost cause of a failed fetch, in one short line."""
    root, seen = error, {id(error)}
    while root.__cause__ is not None and id(root.__cause__) not in seen:
        root = root.__cause__
        seen.add(id(root))
    first_line = str(root).strip().split("\n", 1)[0]
    text = " ".join(first_line.split()) or type(root).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _offline_hint(tokenizer_id: str) -> str:
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
    given = Path(tokenizer_id).expanduser()
    if given.is_file() and given.suffix == ".json":
        return given
    base = os.environ.get(TOKENIZER_DIR_ENV)
    roots = [Path(base).expanduser() / tokenizer_id, Path(base).expanduser()] if base else []
    for directory in [given, *roots]:
        if (directory / "tokenizer.json").is_file():
            return directory / "tokenizer.json"
    return _find_in_hub_cache(tokenizer_id)


def _find_in_hub_cache(tokenizer_id: str) -> Path | None:
    if tokenizer_id.count("/") != 1:
        return None
    hf_home = os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface"
    root = Path(os.environ.get("HF_HUB_CACHE") or Path(hf_home) / "hub").expanduser()
    repo_dir = root / ("models--" + tokenizer_id.replace("/", "--"))
    snapshots = repo_dir / "snapshots"
    # The snapshot refs/main names first, then any other; an unreadable cache is a miss.
    try:
        pinned = [snapshots / (repo_dir / "refs" / "main").read_text(encoding="utf-8").strip()]
    except (OSError, UnicodeDecodeError):
        pinned = []
    try:
        for snapshot in [*pinned, *sorted(snapshots.iterdir())]:
            if (snapshot / "tokenizer.json").is_file():
                return snapshot / "tokenizer.json"
    except OSError:
        pass
    return None
