"""The light tokenizer gives what ``transformers`` gives for the same tokenizer files.

Runs where ``transformers`` (and ``jinja2``) are installed: ``make test-transformers``. Each case
builds a tokenizer directory offline (the shipped byte-level one, a byte-level BPE with added
special tokens and a BOS post-processor, a WordPiece whose decode cleans up spaces, a config whose
special tokens are ordinary vocabulary entries or missing from ``tokenizer.json``), loads it with
``transformers`` as ``get_tokenizer()`` does and as tinker_lite's light tokenizer, and compares
every call scripts make, chat templates included.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

from tinker_lite import tokenizer as tok
from tinker_lite.tokenizer import LightTokenizer

transformers = pytest.importorskip("transformers")
pytest.importorskip("jinja2")

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! It's a test: don't panic; we're fine, aren't we?",
    "Ünïcödé text — 日本語 and emoji 🤖 are bytes too.",
    "def f(x):\n    return x * 2  # code\n",
    "question: what is 2 + 2 ? answer: 4 .",
]
TEXTS = [
    "",
    "hello world",
    "The lazy dog jumps; the fox doesn't.",
    "  leading  and trailing spaces  \n\ttabs\n",
    "Ünïcödé 日本語 🤖",
    "question : is it ok ? yes , it 's fine .",
    "<|im_start|>user\nhi<|im_end|>\n<tool_call>{}</tool_call>",
    "[CLS] special in text [SEP] [MASK]",
    "</s> end marker </s>",
]
QWEN_LIKE_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\nTools: ' + (tools | tojson) + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' }}"
    "{%- if message.reasoning_content %}{{- '<think>' + message.reasoning_content + '</think>' }}"
    "{%- endif %}"
    "{%- if message.content is string %}{{- message.content }}"
    "{%- else %}{%- for block in message.content %}{{- block.text }}{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if documents %}{% for d in documents %}[{{ d.title }}]{% endfor %}{% endif %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{% generation %}"
    "{% endgeneration %}{%- endif %}"
)
CONVERSATIONS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "hello"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What's 2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "easy", "tool_calls": None},
        {"role": "user", "content": [{"type": "text", "text": "Ünïcödé?"}]},
    ],
]


def byte_level_bpe(directory: Path) -> None:
    """A trained byte-level BPE with special tokens, a BOS post-processor and a chat template."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<s>", "<|endoftext|>"],
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 5, trainer=trainer)
    tokenizer.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    tokenizer.add_tokens([AddedToken("<think>", special=False), AddedToken("</think>")])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A",
        pair="<s> $A <s> $B",
        special_tokens=[("<s>", tokenizer.token_to_id("<s>"))],
    )
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "bos_token": "<s>",
        "eos_token": {"__type": "AddedToken", "content": "<|im_end|>", "lstrip": False},
        "pad_token": "<|endoftext|>",
        # not in tokenizer.json: added by both
        "additional_special_tokens": ["<tool_call>", "</tool_call>"],
        # ignored for BPE by both (it would remove real spaces)
        "clean_up_tokenization_spaces": True,
        "model_max_length": 4096,
        "chat_template": QWEN_LIKE_TEMPLATE,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config))


def wordpiece(directory: Path) -> None:
    """A BERT-like WordPiece whose decode cleans up spaces before punctuation."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=300,
        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 5, trainer=trainer)
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "unk_token": "[UNK]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
        "clean_up_tokenization_spaces": True,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    (directory / "chat_template.jinja").write_text(
        "{% for m in messages %}{{ cls_token }}{{ m.role }}: {{ m.content }}{{ sep_token }}"
        "{% endfor %}"
    )


def plain_vocab_specials(directory: Path) -> None:
    """A word-level tokenizer whose config names ordinary vocabulary entries as special."""
    words = ["hello", "world", "</s>", "<s>", "end", "marker", "[UNK]"]
    vocab = {word: index for index, word in enumerate(words)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(directory / "tokenizer.json"))
    special_map = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "[UNK]"}
    (directory / "special_tokens_map.json").write_text(json.dumps(special_map))
    (directory / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 64}))


def shipped_byte_tokenizer(directory: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (directory / name).write_bytes((tok._BYTE_TOKENIZER_DIR / name).read_bytes())


BUILDERS: dict[str, Callable[[Path], None]] = {
    "shipped-byte-level": shipped_byte_tokenizer,
    "bpe-added-special-tokens": byte_level_bpe,
    "wordpiece-clean-up": wordpiece,
    "vocabulary-specials": plain_vocab_specials,
}


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(tok.TOKENIZER_DIR_ENV, raising=False)
    tok.clear_tokenizer_cache()
    yield
    tok.clear_tokenizer_cache()


@pytest.fixture(params=sorted(BUILDERS))
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, LightTokenizer]:
    """(transformers' tokenizer as get_tokenizer() loads it, the light one) for one case."""
    directory = tmp_path / "acme" / request.param
    directory.mkdir(parents=True)
    BUILDERS[request.param](directory)
    official = tok.load_tokenizer(str(directory))
    assert isinstance(official, transformers.PreTrainedTokenizerBase)
    light = LightTokenizer.from_directory(directory, name_or_path=str(directory))
    return official, light


def test_get_tokenizer_gives_transformers_tokenizer(tmp_path: Path) -> None:
    tokenizer = tok.load_tokenizer(tok.BYTE_TOKENIZER_ID)
    assert isinstance(tokenizer, transformers.PreTrainedTokenizerFast)
    assert tokenizer.name_or_path == tok.BYTE_TOKENIZER_ID
    assert tokenizer.encode("ab") + tokenizer.encode("c") == [97, 98, 99]


def test_attributes_match(pair: tuple[Any, LightTokenizer]) -> None:
    official, light = pair
    for name in (
        "bos_token",
        "eos_token",
        "unk_token",
        "sep_token",
        "pad_token",
        "cls_token",
        "mask_token",
        "bos_token_id",
        "eos_token_id",
        "unk_token_id",
        "sep_token_id",
        "pad_token_id",
        "cls_token_id",
        "mask_token_id",
        "all_special_tokens",
        "all_special_ids",
        "special_tokens_map",
        "vocab_size",
        "model_max_length",
        "clean_up_tokenization_spaces",
        "name_or_path",
    ):
        assert getattr(light, name) == getattr(official, name), name
    assert light.extra_special_tokens == official.extra_special_tokens
    assert len(light) == len(official)
    assert light.get_vocab() == official.get_vocab()
    assert light.get_added_vocab() == official.get_added_vocab()


def test_encode_decode_match(pair: tuple[Any, LightTokenizer]) -> None:
    official, light = pair
    for text in TEXTS:
        for special in (True, False):
            ids = official.encode(text, add_special_tokens=special)
            assert light.encode(text, add_special_tokens=special) == ids, (text, special)
            for skip in (False, True):
                assert light.decode(ids, skip_special_tokens=skip) == official.decode(
                    ids, skip_special_tokens=skip
                ), (text, skip)
        assert light.encode(text, "and a pair") == official.encode(text, "and a pair")
        assert light.tokenize(text) == official.tokenize(text)
        assert dict(light(text)) == dict(official(text))
        ids = official.encode(text)
        tokens = official.convert_ids_to_tokens(ids)
        assert light.convert_ids_to_tokens(ids) == tokens
        assert light.convert_ids_to_tokens(ids, skip_special_tokens=True) == (
            official.convert_ids_to_tokens(ids, skip_special_tokens=True)
        )
        assert light.convert_tokens_to_ids(tokens) == official.convert_tokens_to_ids(tokens)
        assert light.convert_tokens_to_string(tokens) == official.convert_tokens_to_string(tokens)
    batch = [official.encode(text) for text in TEXTS]
    assert light.batch_decode(batch, skip_special_tokens=True) == official.batch_decode(
        batch, skip_special_tokens=True
    )
    assert light.decode(batch) == official.decode(batch)
    assert dict(light(TEXTS)) == dict(official(TEXTS))
    assert light.convert_tokens_to_ids("not-in-any-vocabulary") == official.convert_tokens_to_ids(
        "not-in-any-vocabulary"
    )


def same_result(call: Callable[[Any], Any], official: Any, light: LightTokenizer) -> None:
    """``call`` gives the same value (a dict for a BatchEncoding), or the same error type."""
    try:
        expected = call(official)
    except Exception as e:  # a template that rejects the input must reject it in both
        with pytest.raises(type(e)):
            call(light)
        return
    got = call(light)
    assert (dict(got) if isinstance(got, dict) else got) == (
        dict(expected) if isinstance(expected, dict) else expected
    )


def test_chat_templates_match(pair: tuple[Any, LightTokenizer]) -> None:
    official, light = pair
    if official.chat_template is None:
        assert light.chat_template is None
        return
    tools = [{"type": "function", "function": {"name": "add", "description": "Ädd"}}]
    documents = [{"title": "doc", "text": "body"}]
    for messages in CONVERSATIONS:
        for options in (
            {"tokenize": False},
            {"tokenize": False, "add_generation_prompt": True},
            {"tokenize": False, "tools": tools, "documents": documents},
            {},
            {"add_generation_prompt": True, "return_dict": False},
        ):
            same_result(
                operator.methodcaller("apply_chat_template", messages, **options), official, light
            )
    if "message.content" in light.get_chat_template():
        partial = [*CONVERSATIONS[0], {"role": "assistant", "content": "The answer is"}]
        assert light.apply_chat_template(
            partial, tokenize=False, continue_final_message=True
        ) == official.apply_chat_template(partial, tokenize=False, continue_final_message=True)
    same_result(lambda t: t.apply_chat_template(CONVERSATIONS, tokenize=False), official, light)
    same_result(lambda t: t.apply_chat_template(CONVERSATIONS[:1] * 2), official, light)


def test_training_client_hands_out_transformers_tokenizer() -> None:
    """Against the local server, get_tokenizer() gives transformers' tokenizer, as the official."""
    import tinker_lite

    with tinker_lite.ServiceClient(base_url="local://") as service:
        training = service.create_lora_training_client(base_model="Qwen/Qwen3-8B", rank=4).result()
        tokenizer = training.get_tokenizer()
        assert isinstance(tokenizer, transformers.PreTrainedTokenizerFast)
        prompt = tokenizer.encode("Q: hi", add_special_tokens=True)
        completion = tokenizer.encode(" A\n", add_special_tokens=False)
        assert tokenizer.decode(prompt + completion) == "Q: hi A\n"
