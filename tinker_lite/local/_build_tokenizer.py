"""Regenerate ``tokenizer.json``, the byte-level tokenizer shipped with the local model.

Run ``python -m tinker_lite.local._build_tokenizer`` after changing the layout below; the output is
deterministic, so an unchanged layout rewrites an identical file.

Layout: ids 0..255 are the 256 byte values (id == byte value), followed by the special tokens
``<|bos|>`` (256), ``<|eos|>`` (257) and ``<|pad|>`` (258). The model is a BPE without merges over
the byte-level alphabet, so every UTF-8 string encodes to its bytes and decodes back unchanged.
"""

from __future__ import annotations

import sys
from pathlib import Path

SPECIAL_TOKENS = ("<|bos|>", "<|eos|>", "<|pad|>")
TOKENIZER_FILE = Path(__file__).with_name("tokenizer.json")


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


def main(argv: list[str] | None = None) -> int:
    """Write ``tokenizer.json`` (or the path given as the only argument)."""
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else TOKENIZER_FILE
    target.write_text(build_tokenizer_json() + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
