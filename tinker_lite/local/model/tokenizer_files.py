"""Regenerate ``tokenizer.json`` and ``tokenizer_config.json``, the local model's tokenizer files.

Run ``python -m tinker_lite.local.model.tokenizer_files`` after changing the layout below; the
output is deterministic, so an unchanged layout rewrites identical files.

Layout: ids 0..255 are the 256 byte values (id == byte value), followed by the special tokens
``<|bos|>`` (256), ``<|eos|>`` (257) and ``<|pad|>`` (258). The model is a BPE without merges over
the byte-level alphabet, so every UTF-8 string encodes to its bytes and decodes back unchanged.
The config names the special tokens and carries a chat template, as a model repository's does
(``get_tokenizer()`` reads both files, with or without ``transformers``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SPECIAL_TOKENS = ("<|bos|>", "<|eos|>", "<|pad|>")
TOKENIZER_FILE = Path(__file__).parent.with_name("tokenizer.json")
CONFIG_FILE = Path(__file__).parent.with_name("tokenizer_config.json")
# One line per message: <|bos|>role, newline, content, <|eos|>, newline.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ bos_token + message['role'] + '\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ bos_token + 'assistant\\n' }}{% endif %}"
)


def byte_to_unicode() -> dict[int, str]:
    """Map each byte to the printable character that stands for it in a byte-level vocabulary.

    Printable Latin-1 bytes stand for themselves; the others (controls, space, a few more) are
    shifted to code points 256 and up, in byte order. This is the convention of the HF
    ``ByteLevel`` pre-tokenizer and decoder, which must agree with the vocabulary.
    """
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("\N{INVERTED EXCLAMATION MARK}"), ord("\N{NOT SIGN}") + 1),
        *range(ord("\N{REGISTERED SIGN}"), ord("\N{LATIN SMALL LETTER Y WITH DIAERESIS}") + 1),
    ]
    mapping: dict[int, str] = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shifted)
            shifted += 1
    return mapping


def build_tokenizer_json() -> str:
    """Build the tokenizer and return its JSON serialisation."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {char: byte for byte, char in byte_to_unicode().items()}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    for offset, token in enumerate(SPECIAL_TOKENS):
        if tokenizer.token_to_id(token) != 256 + offset:
            raise RuntimeError(f"special token {token!r} did not get id {256 + offset}")
    result: str = tokenizer.to_str(pretty=True)
    return result


def build_config_json() -> str:
    """The ``tokenizer_config.json``: special tokens, context length and chat template."""
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIAL_TOKENS[0],
        "eos_token": SPECIAL_TOKENS[1],
        "pad_token": SPECIAL_TOKENS[2],
        "model_max_length": 512,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    return json.dumps(config, indent=2)


def main(argv: list[str] | None = None) -> int:
    """Write both files (into the directory given as the only argument, else the package)."""
    args = sys.argv[1:] if argv is None else argv
    directory = Path(args[0]) if args else TOKENIZER_FILE.parent
    (directory / TOKENIZER_FILE.name).write_text(build_tokenizer_json() + "\n", encoding="utf-8")
    (directory / CONFIG_FILE.name).write_text(build_config_json() + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
