"""Tokenizer resolution (docs/protocol.rst §10), loading, and the light tokenizer
(docs/protocol.rst §10).

Tokenizers are built offline by the tests (no downloads). These tests run the light tokenizer,
what ``get_tokenizer()`` returns without ``transformers``; ``tests/compat/test_tokenizer_compat.py``
compares it with ``transformers`` where that is installed (``make test-transformers``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from tinker_lite import TinkerError, types
from tinker_lite import tokenizer as tok
from tinker_lite.tokenizer import (
    BYTE_TOKENIZER_ID,
    BatchEncoding,
    LightTokenizer,
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


def no_download(*args: object, **kwargs: object) -> Any:
    raise AssertionError(f"tests never download ({args})")


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv(tok.TOKENIZER_DIR_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.snapshot_download", no_download)
    # The light tokenizer, also where transformers is installed.
    monkeypatch.setattr(tok, "_transformers_available", lambda: False)
    tok.clear_tokenizer_cache()
    yield
    tok.clear_tokenizer_cache()


# ------------------------------------------------------------------------------------------------
# resolution and lookup


@pytest.mark.parametrize(
    ("model_name", "tokenizer_id", "expected"),
    [
        ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-tok", "Qwen/Qwen3-8B-tok"),
        (
            "Qwen/Qwen3-8B",
            "thinkingmachineslabinc/meta-llama-3-tokenizer:v2",
            "thinkingmachineslabinc/meta-llama-3-tokenizer",
        ),
        # the official SDK 0.38's ungated copy of the Llama 3 tokenizer
        ("meta-llama/Llama-3.1-8B", None, "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer"),
        (
            "meta-llama/Llama-3.2-1B:peft",
            None,
            "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer",
        ),
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
    assert loaded.encode("hello world") == [1, 2]
    assert loaded.name_or_path == "acme/tiny"
    assert load_tokenizer("acme/tiny") is loaded  # cached per id
    tok.clear_tokenizer_cache()
    assert load_tokenizer("acme/tiny") is not loaded


def test_loads_from_a_flat_tokenizer_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    build_tokenizer(["a", "b"]).save(str(tmp_path / "tokenizer.json"))
    monkeypatch.setenv(tok.TOKENIZER_DIR_ENV, str(tmp_path))
    assert load_tokenizer("some/model").encode("b a") == [2, 1]


def test_loads_from_a_local_path(tmp_path: Path) -> None:
    build_tokenizer(["x"]).save(str(tmp_path / "tokenizer.json"))
    assert load_tokenizer(str(tmp_path)).encode("x") == [1]
    assert load_tokenizer(str(tmp_path / "tokenizer.json")).encode("x") == [1]
    build_tokenizer(["y", "z"]).save(str(tmp_path / "other.json"))
    assert load_tokenizer(str(tmp_path / "other.json")).encode("z") == [2]


def test_loads_from_the_hub_cache(tmp_path: Path) -> None:
    repo = tmp_path / "hf-home" / "hub" / "models--acme--cached"
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    build_tokenizer(["cached"]).save(str(snapshot / "tokenizer.json"))
    (snapshot / "tokenizer_config.json").write_text(json.dumps({"unk_token": "[UNK]"}))
    loaded = load_tokenizer("acme/cached")
    assert loaded.encode("cached") == [1]
    assert loaded.unk_token_id == 0


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
    ids = tokenizer.encode("hi")
    assert ids == [104, 105]
    assert tokenizer.decode(ids) == "hi"
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (
        256,
        257,
        258,
    )
    assert tokenizer.model_max_length == 512


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
    assert "$TINKER_LITE_TOKENIZER_DIR/acme/missing/" in message
    assert info.value.tokenizer_id == "acme/missing"


def test_download_failure_names_the_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    calls: list[str] = []

    def failing(repo_id: str, **kwargs: object) -> str:
        calls.append(repo_id)
        raise OSError("no route to host")

    monkeypatch.setattr("huggingface_hub.snapshot_download", failing)
    with pytest.raises(TokenizerUnavailableError, match="no route to host") as info:
        load_tokenizer("acme/remote")
    assert calls == ["acme/remote"]
    assert "TINKER_LITE_TOKENIZER_DIR" in str(info.value)


def test_download_fetches_the_tokenizer_files_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    calls: list[tuple[str, list[str]]] = []

    def snapshot_download(repo_id: str, *, allow_patterns: list[str]) -> str:
        calls.append((repo_id, allow_patterns))
        folder = tmp_path / "snapshot"
        folder.mkdir()
        build_tokenizer(["remote", "</s>"]).save(str(folder / "tokenizer.json"))
        (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
        return str(folder)

    monkeypatch.setattr("huggingface_hub.snapshot_download", snapshot_download)
    loaded = load_tokenizer("acme/remote")
    assert loaded.encode("remote </s>") == [1, 2]
    assert loaded.eos_token_id == 2
    assert load_tokenizer("acme/remote") is loaded
    assert [repo for repo, _ in calls] == ["acme/remote"]
    assert {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"} <= set(calls[0][1])


def test_kimi_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(TokenizerUnavailableError, match="trust_remote_code"):
        load_tokenizer("moonshotai/Kimi-K2-Thinking")


def test_invalid_local_file(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerUnavailableError, match="not a valid"):
        load_tokenizer(str(bad))


# ------------------------------------------------------------------------------------------------
# the light tokenizer: the calls scripts make


def light_byte_tokenizer() -> LightTokenizer:
    tokenizer = load_tokenizer(BYTE_TOKENIZER_ID)
    assert isinstance(tokenizer, LightTokenizer)
    return tokenizer


def test_encode_gives_lists_that_add_up_and_feed_model_input() -> None:
    tokenizer = light_byte_tokenizer()
    prompt = tokenizer.encode("Q: 2+2?", add_special_tokens=True)
    completion = tokenizer.encode(" 4\n\n", add_special_tokens=False)
    tokens = prompt + completion
    assert type(prompt) is list
    assert all(type(t) is int for t in tokens)
    assert types.ModelInput.from_ints(tokens).to_ints() == list(b"Q: 2+2? 4\n\n")
    assert tokenizer.decode(tokens) == "Q: 2+2? 4\n\n"


def test_special_tokens_and_decode_skipping_them() -> None:
    tokenizer = light_byte_tokenizer()
    ids = tokenizer.encode("a<|eos|>b")
    assert ids == [97, 257, 98]
    assert tokenizer.decode(ids) == "a<|eos|>b"
    assert tokenizer.decode(ids, skip_special_tokens=True) == "ab"
    assert tokenizer.decode(257) == "<|eos|>"
    assert tokenizer.batch_decode([[104, 105], [257, 33]], skip_special_tokens=True) == ["hi", "!"]
    assert tokenizer.decode([[104], [105]]) == ["h", "i"]
    assert tokenizer.all_special_tokens == ["<|bos|>", "<|eos|>", "<|pad|>"]
    assert tokenizer.all_special_ids == [256, 257, 258]
    assert tokenizer.special_tokens_map == {
        "bos_token": "<|bos|>",
        "eos_token": "<|eos|>",
        "pad_token": "<|pad|>",
    }
    assert tokenizer.unk_token is None
    assert tokenizer.unk_token_id is None


def test_decode_takes_arrays() -> None:
    np = pytest.importorskip("numpy")
    tokenizer = light_byte_tokenizer()
    assert tokenizer.decode(np.array([104, 105], dtype=np.int32)) == "hi"
    assert tokenizer.decode((104, 105)) == "hi"


def test_vocabulary_and_conversions() -> None:
    tokenizer = light_byte_tokenizer()
    assert tokenizer.vocab_size == 256
    assert len(tokenizer) == 259
    vocab = tokenizer.get_vocab()
    assert len(vocab) == 259
    assert vocab["<|pad|>"] == 258
    assert tokenizer.get_added_vocab() == {"<|bos|>": 256, "<|eos|>": 257, "<|pad|>": 258}
    assert tokenizer.convert_tokens_to_ids("<|eos|>") == 257
    assert tokenizer.convert_tokens_to_ids(["h", "<|bos|>", "not-a-token"]) == [104, 256, None]
    assert tokenizer.convert_ids_to_tokens(104) == "h"
    assert tokenizer.convert_ids_to_tokens([104, 257, 105], skip_special_tokens=True) == ["h", "i"]
    assert tokenizer.tokenize("hi") == ["h", "i"]
    assert tokenizer.convert_tokens_to_string(["h", "i"]) == "hi"
    assert isinstance(tokenizer.backend_tokenizer, Tokenizer)
    assert tokenizer.name_or_path == BYTE_TOKENIZER_ID
    assert "byte-tokenizer" in repr(tokenizer)


def test_call_gives_input_ids_and_attention_mask() -> None:
    tokenizer = light_byte_tokenizer()
    single = tokenizer("hi")
    assert isinstance(single, BatchEncoding)
    assert single == {"input_ids": [104, 105], "attention_mask": [1, 1]}
    assert single.input_ids == [104, 105]
    batch = tokenizer(["a", "bc"])
    assert batch["input_ids"] == [[97], [98, 99]]
    assert batch.attention_mask == [[1], [1, 1]]
    with pytest.raises(AttributeError):
        single.token_type_ids  # noqa: B018


def test_special_tokens_can_be_set_as_scripts_do() -> None:
    tokenizer = LightTokenizer.from_directory(tok._BYTE_TOKENIZER_DIR)
    tokenizer.pad_token = tokenizer.eos_token
    assert tokenizer.pad_token_id == 257
    tokenizer.pad_token_id = 256
    assert tokenizer.pad_token == "<|bos|>"
    with pytest.raises(TypeError, match="pad_token"):
        tokenizer.pad_token = 5  # type: ignore[assignment]


def test_options_it_does_not_implement_are_refused_by_name() -> None:
    tokenizer = light_byte_tokenizer()
    assert tokenizer.encode("hi", truncation=False, return_tensors=None) == [104, 105]
    with pytest.raises(TypeError, match=r"truncation=True\).*install transformers"):
        tokenizer.encode("hello", truncation=True, max_length=4)
    with pytest.raises(TypeError, match="return_tensors='np'"):
        tokenizer(["a"], return_tensors="np")
    with pytest.raises(TypeError, match="not an argument"):
        tokenizer.encode("hi", add_bos=True)
    with pytest.raises(TypeError, match="text must be a string"):
        tokenizer.encode(["a", "b"])  # type: ignore[arg-type]


def test_config_tokens_missing_from_tokenizer_json_are_added(tmp_path: Path) -> None:
    build_tokenizer(["hello"]).save(str(tmp_path / "tokenizer.json"))
    config = {
        "unk_token": "[UNK]",
        "eos_token": {"content": "<end>", "lstrip": False, "rstrip": False},
        "additional_special_tokens": ["<tool>"],
        "image_token": "<img>",
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tokenizer = LightTokenizer.from_directory(tmp_path)
    assert tokenizer.eos_token == "<end>"
    assert tokenizer.additional_special_tokens == ["<tool>"]
    assert tokenizer.image_token == "<img>"
    assert tokenizer.image_token_id == tokenizer.convert_tokens_to_ids("<img>")
    ids = tokenizer.encode("hello<end><tool><img>")
    assert ids[0] == 1
    assert len(ids) == 4
    assert 0 not in ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == "hello"
    assert tokenizer.convert_tokens_to_ids("nope") == 0  # the unknown token
    with pytest.raises(AttributeError, match="video_token"):
        tokenizer.video_token  # noqa: B018


# ------------------------------------------------------------------------------------------------
# chat templates


def test_apply_chat_template_renders_the_models_template() -> None:
    pytest.importorskip("jinja2")
    tokenizer = light_byte_tokenizer()
    messages = [{"role": "user", "content": "hi"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == "<|bos|>user\nhi<|eos|>\n<|bos|>assistant\n"
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    assert isinstance(encoded, BatchEncoding)  # transformers 5's default: return_dict=True
    assert encoded["input_ids"] == tokenizer.encode(text, add_special_tokens=False)
    ids = tokenizer.apply_chat_template(messages, return_dict=False)
    assert ids == encoded["input_ids"][: len(ids)]
    assert ids[0] == tokenizer.bos_token_id
    batch = tokenizer.apply_chat_template([messages, messages], tokenize=False)
    assert batch == ["<|bos|>user\nhi<|eos|>\n"] * 2


def test_apply_chat_template_options(tmp_path: Path) -> None:
    pytest.importorskip("jinja2")
    build_tokenizer(["x"]).save(str(tmp_path / "tokenizer.json"))
    template = (
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}"
        "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
        "{% if m.tool_calls is defined %}TOOLCALLS{% endif %}{{ '\\n' }}{% endfor %}"
        "{% if tools %}{{ tools | tojson }}{% endif %}{{ today | default('') }}"
        "{% generation %}{% if add_generation_prompt %}[assistant]{% endif %}{% endgeneration %}"
    )
    config = {
        "chat_template": [
            {"name": "default", "template": template},
            {"name": "short", "template": "S"},
        ]
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tokenizer = LightTokenizer.from_directory(tmp_path)
    messages = [
        {"role": "user", "content": "héllo", "tool_calls": None},
        {"role": "assistant", "content": "ok", "thinking": "hmm"},
    ]
    text = tokenizer.apply_chat_template(
        messages, tokenize=False, tools=[{"name": "f", "note": "é"}], today="Monday"
    )
    # None values are dropped; "thinking" also reaches the template as reasoning_content;
    # tojson keeps non-ASCII text.
    assert (
        text == '[user]héllo\n[assistant]ok<think>hmm</think>\n[{"name": "f", "note": "é"}]Monday'
    )
    assert tokenizer.apply_chat_template(messages, tokenize=False, chat_template="short") == "S"
    assert (
        tokenizer.apply_chat_template(messages, tokenize=False, chat_template="{{ 1 + 1 }}") == "2"
    )
    cont = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "par"}]
    assert tokenizer.apply_chat_template(cont, tokenize=False, continue_final_message=True) == (
        "[user]hi\n[assistant]par"
    )
    with pytest.raises(ValueError, match="cannot be used together"):
        tokenizer.apply_chat_template(cont, continue_final_message=True, add_generation_prompt=True)
    with pytest.raises(NotImplementedError, match="return_assistant_tokens_mask"):
        tokenizer.apply_chat_template(cont, return_assistant_tokens_mask=True)
    with pytest.raises(TypeError, match="JSON schemas"):
        tokenizer.apply_chat_template(cont, tools=[print])


def test_a_template_file_wins_over_the_config(tmp_path: Path) -> None:
    pytest.importorskip("jinja2")
    build_tokenizer(["x"]).save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "config"}))
    (tmp_path / "chat_template.jinja").write_text("file")
    tokenizer = LightTokenizer.from_directory(tmp_path)
    assert (
        tokenizer.apply_chat_template([{"role": "user", "content": ""}], tokenize=False) == "file"
    )


def test_templates_raise_their_own_errors() -> None:
    jinja2 = pytest.importorskip("jinja2")
    tokenizer = light_byte_tokenizer()
    template = "{{ raise_exception('only user messages') }}"
    with pytest.raises(jinja2.exceptions.TemplateError, match="only user messages"):
        tokenizer.apply_chat_template([{"role": "x", "content": ""}], chat_template=template)
    # the sandbox keeps templates away from Python internals
    with pytest.raises(jinja2.exceptions.SecurityError):
        tokenizer.apply_chat_template(
            [{"role": "x", "content": ""}], chat_template="{{ messages.append(1) }}"
        )


def test_no_template_is_a_clear_error(tmp_path: Path) -> None:
    build_tokenizer(["x"]).save(str(tmp_path / "tokenizer.json"))
    tokenizer = LightTokenizer.from_directory(tmp_path)
    with pytest.raises(ValueError, match="no chat template"):
        tokenizer.apply_chat_template([{"role": "user", "content": "x"}])


def test_without_jinja2_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinker_lite._tokenizer import chat_template as _chat_template

    _chat_template._compile.cache_clear()
    monkeypatch.setitem(sys.modules, "jinja2", None)
    tokenizer = light_byte_tokenizer()
    with pytest.raises(ImportError, match=r"pip install 'tinker-lite\[chat\]'"):
        tokenizer.apply_chat_template([{"role": "user", "content": "hi"}])
    _chat_template._compile.cache_clear()


def test_importing_the_tokenizer_loads_neither_jinja2_nor_transformers() -> None:
    code = (
        "import sys\n"
        "from tinker_lite.tokenizer import load_tokenizer, BYTE_TOKENIZER_ID\n"
        "t = load_tokenizer(BYTE_TOKENIZER_ID)\n"
        "t.decode(t.encode('x'))\n"
        "print(sorted(m for m in ('jinja2', 'transformers', 'numpy') if m in sys.modules))\n"
    )
    env_code = "import tinker_lite.tokenizer as tok; tok._transformers_available = lambda: False\n"
    result = subprocess.run(
        [sys.executable, "-c", env_code + code],
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    )
    assert result.stdout.strip() == "[]"


# ------------------------------------------------------------------------------------------------
# ModelInput.from_ints given what a raw tokenizer returns


def test_from_ints_with_an_encoding_hints_at_ids() -> None:
    raw = light_byte_tokenizer().backend_tokenizer
    with pytest.raises(TinkerError, match=r"got Encoding.*pass encoding\.ids"):
        types.ModelInput.from_ints(raw.encode("hi"))  # type: ignore[arg-type]
    with pytest.raises(TinkerError, match=r"pass its \['input_ids'\]"):
        types.ModelInput.from_ints(light_byte_tokenizer()("hi"))  # type: ignore[arg-type]
