"""Tokenizer resolution (WIRE.md §9) and loading, with tokenizers built offline (no downloads)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from tinker_lite import TinkerError
from tinker_lite import tokenizer as tok
from tinker_lite.tokenizer import (
    BYTE_TOKENIZER_ID,
    TokenizerUnavailableError,
    load_tokenizer,
    resolve_tokenizer_id,
)


def build_tokenizer(words: list[str]) -> Tokenizer:
    """A tiny word-level tokenizer, built in memory."""
    vocab = {"[UNK]": 0, **{word: index + 1 for index, word in enumerate(words)}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv(tok.TOKENIZER_DIR_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_download(repo_id: str, *args: object, **kwargs: object) -> Tokenizer:
        raise AssertionError(f"tests never download ({repo_id})")

    monkeypatch.setattr(Tokenizer, "from_pretrained", staticmethod(no_download))
    tok.clear_tokenizer_cache()
    yield
    tok.clear_tokenizer_cache()


@pytest.mark.parametrize(
    ("model_name", "tokenizer_id", "expected"),
    [
        ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-tok", "Qwen/Qwen3-8B-tok"),
        (
            "Qwen/Qwen3-8B",
            "thinkingmachineslabinc/meta-llama-3-tokenizer:v2",
            "thinkingmachineslabinc/meta-llama-3-tokenizer",
        ),
        ("meta-llama/Llama-3.1-8B", None, "baseten/Meta-Llama-3-tokenizer"),
        ("meta-llama/Llama-3.2-1B:peft", None, "baseten/Meta-Llama-3-tokenizer"),
        ("org/model/variant", None, "org/model"),
        ("Qwen/Qwen3-8B", None, "Qwen/Qwen3-8B"),
        ("Qwen/Qwen3-8B:latest", "", "Qwen/Qwen3-8B"),
        ("x", BYTE_TOKENIZER_ID, BYTE_TOKENIZER_ID),
        ("tinker-lite/tiny-64", None, BYTE_TOKENIZER_ID),
    ],
)
def test_resolution(model_name: str, tokenizer_id: str | None, expected: str) -> None:
    assert resolve_tokenizer_id(model_name, tokenizer_id) == expected


def test_resolution_needs_a_name() -> None:
    with pytest.raises(TokenizerUnavailableError, match="neither"):
        resolve_tokenizer_id(None, None)


def test_loads_from_the_tokenizer_dir_tree(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "toks" / "acme" / "tiny"
    target.mkdir(parents=True)
    build_tokenizer(["hello", "world"]).save(str(target / "tokenizer.json"))
    monkeypatch.setenv(tok.TOKENIZER_DIR_ENV, str(tmp_path / "toks"))
    loaded = load_tokenizer("acme/tiny")
    assert loaded.encode("hello world").ids == [1, 2]
    assert load_tokenizer("acme/tiny") is loaded  # cached per id
    tok.clear_tokenizer_cache()
    assert load_tokenizer("acme/tiny") is not loaded


def test_loads_from_a_flat_tokenizer_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    build_tokenizer(["a", "b"]).save(str(tmp_path / "tokenizer.json"))
    monkeypatch.setenv(tok.TOKENIZER_DIR_ENV, str(tmp_path))
    assert load_tokenizer("some/model").encode("b a").ids == [2, 1]


def test_loads_from_a_local_path(tmp_path: Path) -> None:
    build_tokenizer(["x"]).save(str(tmp_path / "tokenizer.json"))
    assert load_tokenizer(str(tmp_path)).encode("x").ids == [1]
    assert load_tokenizer(str(tmp_path / "tokenizer.json")).encode("x").ids == [1]


def test_loads_from_the_hub_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    repo = tmp_path / "hf-home" / "hub" / "models--acme--cached"
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    build_tokenizer(["cached"]).save(str(snapshot / "tokenizer.json"))
    assert load_tokenizer("acme/cached").encode("cached").ids == [1]


def test_a_broken_cache_is_a_clear_miss(tmp_path: Path) -> None:
    repo = tmp_path / "hf-home" / "hub" / "models--acme--broken"
    repo.mkdir(parents=True)
    (repo / "snapshots").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(TinkerError) as info:
        load_tokenizer("acme/broken")
    assert "acme/broken" in str(info.value)


def test_byte_tokenizer_comes_from_the_package() -> None:
    tokenizer = load_tokenizer(BYTE_TOKENIZER_ID)
    ids = tokenizer.encode("hi").ids
    assert ids
    assert tokenizer.decode(ids) == "hi"


def test_byte_tokenizer_does_not_import_the_local_server() -> None:
    code = (
        "import sys\n"
        "from tinker_lite.tokenizer import load_tokenizer, BYTE_TOKENIZER_ID\n"
        "load_tokenizer(BYTE_TOKENIZER_ID)\n"
        "loaded = [m for m in sys.modules if m.startswith('tinker_lite.local')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_offline_error_names_the_repo_and_the_fix() -> None:
    with pytest.raises(TokenizerUnavailableError) as info:
        load_tokenizer("acme/missing")
    message = str(info.value)
    assert "'acme/missing'" in message
    assert "HF_HUB_OFFLINE" in message
    assert "TINKER_LITE_TOKENIZER_DIR/acme/missing/tokenizer.json" in message
    assert info.value.tokenizer_id == "acme/missing"


def test_download_failure_names_the_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    calls: list[str] = []

    def failing(repo_id: str, *args: object, **kwargs: object) -> Tokenizer:
        calls.append(repo_id)
        raise OSError("no route to host")

    monkeypatch.setattr(Tokenizer, "from_pretrained", staticmethod(failing))
    with pytest.raises(TokenizerUnavailableError, match="no route to host") as info:
        load_tokenizer("acme/remote")
    assert calls == ["acme/remote"]
    assert "TINKER_LITE_TOKENIZER_DIR" in str(info.value)


def test_download_is_used_when_not_found_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    fetched = build_tokenizer(["remote"])
    monkeypatch.setattr(Tokenizer, "from_pretrained", staticmethod(lambda repo_id: fetched))
    assert load_tokenizer("acme/remote") is fetched


def test_kimi_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(TokenizerUnavailableError, match="trust_remote_code"):
        load_tokenizer("moonshotai/Kimi-K2-Thinking")


def test_invalid_local_file(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerUnavailableError, match="not a valid"):
        load_tokenizer(str(bad))
