"""``LightTokenizer``: what ``get_tokenizer()`` returns when ``transformers`` is not installed.

The calls scripts make on ``transformers``' tokenizer, with the same results from the same files;
docs/api.rst, "Tokenizers", lists them and what is left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, overload

from tinker_lite._repr import tolerant_repr
from tinker_lite._tokenizer import chat_template as _chat_template

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["NAMED_SPECIAL_TOKENS", "BatchEncoding", "LightTokenizer"]

T = TypeVar("T")

# The special tokens transformers names (its SPECIAL_TOKENS_ATTRIBUTES), in its order.
NAMED_SPECIAL_TOKENS: Final = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
# transformers' "no limit" for model_max_length when the config gives none.
_NO_MAX_LENGTH: Final = int(1e30)
# decode's clean-up of tokenization spaces: the pairs transformers replaces, in its order.
_CLEAN_UP: Final = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


class BatchEncoding(dict[str, Any]):
    """A tokenizer call's result: ``input_ids`` and ``attention_mask``, as keys or attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _SpecialToken(Generic[T]):
    """A named special token (``eos_token``) or its id (``eos_token_id``); assignable."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name.removesuffix("_id")
        self.is_id = name.endswith("_id")

    def __get__(self, tokenizer: LightTokenizer | None, owner: type) -> Any:
        if tokenizer is None:
            return self
        token = tokenizer._named.get(self.name)
        return tokenizer.convert_tokens_to_ids(token) if self.is_id and token is not None else token

    def __set__(self, tokenizer: LightTokenizer, value: T | None) -> None:
        token: Any = value
        if self.is_id and value is not None:
            token = tokenizer.convert_ids_to_tokens(int(token))
        elif value is not None and not isinstance(value, str):
            raise TypeError(f"{self.name} must be a string or None, got {type(value).__name__}")
        tokenizer._named[self.name] = token


class LightTokenizer:
    """A Hugging Face tokenizer with the calls of ``transformers``' fast tokenizer that scripts use.

    Built by :func:`tinker_lite.tokenizer.load_tokenizer` (or :meth:`from_directory`).
    """

    bos_token: _SpecialToken[str] = _SpecialToken()
    eos_token: _SpecialToken[str] = _SpecialToken()
    unk_token: _SpecialToken[str] = _SpecialToken()
    sep_token: _SpecialToken[str] = _SpecialToken()
    pad_token: _SpecialToken[str] = _SpecialToken()
    cls_token: _SpecialToken[str] = _SpecialToken()
    mask_token: _SpecialToken[str] = _SpecialToken()
    bos_token_id: _SpecialToken[int] = _SpecialToken()
    eos_token_id: _SpecialToken[int] = _SpecialToken()
    unk_token_id: _SpecialToken[int] = _SpecialToken()
    sep_token_id: _SpecialToken[int] = _SpecialToken()
    pad_token_id: _SpecialToken[int] = _SpecialToken()
    cls_token_id: _SpecialToken[int] = _SpecialToken()
    mask_token_id: _SpecialToken[int] = _SpecialToken()

    def __init__(
        self,
        backend: Tokenizer,
        config: Mapping[str, Any] | None = None,
        *,
        name_or_path: str = "",
        chat_template: str | dict[str, str] | None = None,
    ) -> None:
        """Wrap ``backend`` (modified in place) with the settings of ``tokenizer_config.json``."""
        config = dict(config or {})
        self._backend = backend
        self.name_or_path = name_or_path
        self.model_max_length: int = int(config.get("model_max_length") or _NO_MAX_LENGTH)
        self.padding_side: str = str(config.get("padding_side", "right"))
        self.clean_up_tokenization_spaces = bool(config.get("clean_up_tokenization_spaces", False))
        self._clean_up_bpe = bool(
            config.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output")
        )
        self._named: dict[str, str | None] = dict.fromkeys(NAMED_SPECIAL_TOKENS)
        self._model_specific: dict[str, str] = {}
        self._extra: list[str] = []
        self._read_special_tokens(config)
        template = chat_template if chat_template is not None else config.get("chat_template")
        if isinstance(template, list):
            template = {item["name"]: item["template"] for item in template}
        self.chat_template: str | dict[str, str] | None = template

    @classmethod
    def from_directory(cls, directory: str | Path, *, name_or_path: str = "") -> LightTokenizer:
        """Load ``tokenizer.json`` and the other tokenizer files present (docs/protocol.rst §10)."""
        from tokenizers import Tokenizer

        root = Path(directory)
        backend = Tokenizer.from_file(str(root / "tokenizer.json"))
        config = _read_json(root / "tokenizer_config.json") or {}
        special_map = _read_json(root / "special_tokens_map.json")
        # transformers reads special_tokens_map.json only for configs without added_tokens_decoder.
        if special_map and "added_tokens_decoder" not in config:
            config.update(special_map)
        return cls(
            backend,
            config,
            name_or_path=name_or_path or str(root),
            chat_template=_template_files(root),
        )

    def _read_special_tokens(self, config: Mapping[str, Any]) -> None:
        from tokenizers import AddedToken

        extra = config.get("extra_special_tokens") or config.get("additional_special_tokens")
        named_extra = extra if isinstance(extra, Mapping) else {}
        for key, value in config.items():
            if key in NAMED_SPECIAL_TOKENS:
                self._named[key] = _content(value)
            elif key.endswith("_token") and isinstance(value, str):
                self._model_specific[key] = value
        self._model_specific.update({k: str(_content(v)) for k, v in named_extra.items()})
        if isinstance(extra, list | tuple):
            self._extra = [str(_content(token)) for token in extra]
        # As transformers does: declared tokens tokenizer.json lacks are added, and named and extra
        # special tokens registered as special, even when they are ordinary vocabulary entries.
        declared = config.get("added_tokens_decoder") or {}
        present = set(self._backend.get_vocab(with_added_tokens=True))
        for _, entry in sorted(declared.items(), key=lambda item: int(item[0])):
            if isinstance(entry, Mapping) and entry.get("content") not in present:
                self._backend.add_tokens([AddedToken(**_added_token_fields(entry))])
        specials: list[AddedToken] = []
        raw_values = [config.get(key) for key in NAMED_SPECIAL_TOKENS]
        raw_values += list(named_extra.values()) + (list(extra) if isinstance(extra, list) else [])
        raw_values += [config[key] for key in self._model_specific if key in config]
        for value in raw_values:
            if isinstance(value, Mapping) and "content" in value:
                specials.append(AddedToken(**{**_added_token_fields(value), "special": True}))
            elif isinstance(value, str):
                specials.append(AddedToken(value, special=True, normalized=False))
        self._backend.add_special_tokens(specials)

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """The named special tokens that are set, model-specific ones included."""
        named = {key: value for key, value in self._named.items() if value is not None}
        return {**named, **self._model_specific}

    @property
    def extra_special_tokens(self) -> list[str]:
        """The unnamed special tokens of the config (``additional_special_tokens``)."""
        return list(self._extra)

    additional_special_tokens = extra_special_tokens

    @property
    def all_special_tokens(self) -> list[str]:
        """Every special token (named, then extra), each once."""
        return list(dict.fromkeys([*self.special_tokens_map.values(), *self._extra]))

    @property
    def all_special_ids(self) -> list[int | None]:
        """The ids of :attr:`all_special_tokens`."""
        return [self._token_id(token) for token in self.all_special_tokens]

    def __getattr__(self, name: str) -> Any:
        # The config's model-specific special tokens: image_token, image_token_id, ...
        specific = self.__dict__.get("_model_specific", {})
        if name in specific:
            return specific[name]
        if name.endswith("_id") and name.removesuffix("_id") in specific:
            return self.convert_tokens_to_ids(specific[name.removesuffix("_id")])
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def backend_tokenizer(self) -> Tokenizer:
        """The raw ``tokenizers.Tokenizer``."""
        return self._backend

    @property
    def vocab_size(self) -> int:
        """Size of the vocabulary without added tokens."""
        return int(self._backend.get_vocab_size(with_added_tokens=False))

    def __len__(self) -> int:
        return int(self._backend.get_vocab_size(with_added_tokens=True))

    def get_vocab(self) -> dict[str, int]:
        """Token -> id, added tokens included."""
        return dict(self._backend.get_vocab(with_added_tokens=True))

    def get_added_vocab(self) -> dict[str, int]:
        """The added tokens -> id, by id."""
        decoder = self._backend.get_added_tokens_decoder()
        return {token.content: index for index, token in sorted(decoder.items())}

    def _token_id(self, token: str) -> int | None:
        index: int | None = self._backend.token_to_id(token)
        if index is None:
            unk = self._named.get("unk_token")
            index = None if unk is None else self._backend.token_to_id(unk)
        return index

    @overload
    def convert_tokens_to_ids(self, tokens: str) -> int | None: ...
    @overload
    def convert_tokens_to_ids(self, tokens: list[str] | tuple[str, ...]) -> list[int | None]: ...
    def convert_tokens_to_ids(
        self, tokens: str | list[str] | tuple[str, ...]
    ) -> int | list[int | None] | None:
        """Id of a token (the unknown token's id, or None, when absent), or ids of tokens."""
        if isinstance(tokens, str):
            return self._token_id(tokens)
        return [self._token_id(token) for token in tokens]

    @overload
    def convert_ids_to_tokens(self, ids: int, skip_special_tokens: bool = False) -> str | None: ...
    @overload
    def convert_ids_to_tokens(
        self, ids: Sequence[int], skip_special_tokens: bool = False
    ) -> list[str | None]: ...
    def convert_ids_to_tokens(
        self, ids: int | Sequence[int], skip_special_tokens: bool = False
    ) -> str | list[str | None] | None:
        """Token of an id, or tokens of ids."""
        if not isinstance(ids, Sequence) and hasattr(ids, "__index__"):
            token: str | None = self._backend.id_to_token(int(ids))
            return token
        skip = set(self.all_special_ids) if skip_special_tokens else set()
        return [self._backend.id_to_token(int(i)) for i in _ids(ids) if int(i) not in skip]

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        """Tokens joined into text by the tokenizer's decoder."""
        decoder = self._backend.decoder
        return str(decoder.decode(list(tokens))) if decoder is not None else " ".join(tokens)

    def encode(
        self,
        text: str,
        text_pair: str | None = None,
        add_special_tokens: bool = True,
        **options: Any,
    ) -> list[int]:
        """Token ids of ``text`` (and ``text_pair``), with the model's special tokens by default."""
        _refuse_options("encode", options)
        return list(self._encoding(text, text_pair, add_special_tokens).ids)

    def __call__(
        self,
        text: str | Sequence[str],
        text_pair: str | Sequence[str] | None = None,
        add_special_tokens: bool = True,
        **options: Any,
    ) -> BatchEncoding:
        """``input_ids`` and ``attention_mask`` of a text or of a batch of texts."""
        _refuse_options("__call__", options)
        texts: list[Any] = [text] if isinstance(text, str) else list(text)
        if text_pair is None or isinstance(text, str):
            pairs: list[Any] = [text_pair] * len(texts)
        else:
            pairs = list(text_pair)
        if len(pairs) != len(texts):
            raise ValueError(f"text has {len(texts)} texts but text_pair has {len(pairs)}")
        encodings = [
            self._encoding(t, p, add_special_tokens) for t, p in zip(texts, pairs, strict=True)
        ]
        ids = [list(e.ids) for e in encodings]
        masks = [list(e.attention_mask) for e in encodings]
        if isinstance(text, str):
            return BatchEncoding(input_ids=ids[0], attention_mask=masks[0])
        return BatchEncoding(input_ids=ids, attention_mask=masks)

    def tokenize(
        self, text: str, pair: str | None = None, add_special_tokens: bool = False
    ) -> list[str]:
        """The tokens of ``text``, without special tokens by default."""
        return list(self._encoding(text, pair, add_special_tokens).tokens)

    def _encoding(self, text: str, pair: str | None, add_special_tokens: bool) -> Any:
        if not isinstance(text, str):
            raise TypeError(
                f"text must be a string, got {type(text).__name__}; encode one text per call"
            )
        if pair is not None and not isinstance(pair, str):
            raise TypeError(f"text_pair must be a string, got {type(pair).__name__}")
        return self._backend.encode(text, pair, add_special_tokens=add_special_tokens)

    @overload
    def decode(
        self,
        token_ids: int | Sequence[int],
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
    ) -> str: ...
    @overload
    def decode(
        self,
        token_ids: Sequence[Sequence[int]],
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
    ) -> list[str]: ...
    def decode(
        self,
        token_ids: Any,
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
    ) -> str | list[str]:
        """Text of token ids (a list, an array, a tensor); a list of texts for a batch."""
        ids = _py_obj(token_ids)
        if isinstance(ids, Mapping):
            ids = ids["input_ids"]
        if isinstance(ids, list) and ids and isinstance(ids[0], list | tuple):
            return self.batch_decode(ids, skip_special_tokens, clean_up_tokenization_spaces)
        return self._decode(ids, skip_special_tokens, clean_up_tokenization_spaces)

    def batch_decode(
        self,
        sequences: Any,
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
    ) -> list[str]:
        """The text of each sequence of ids."""
        return [
            self._decode(seq, skip_special_tokens, clean_up_tokenization_spaces)
            for seq in _py_obj(sequences)
        ]

    def _decode(self, ids: Any, skip_special_tokens: bool, clean_up: bool | None) -> str:
        ids = [ids] if isinstance(ids, int) else [int(i) for i in _ids(ids)]
        text = str(self._backend.decode(ids, skip_special_tokens=skip_special_tokens))
        clean_up = self.clean_up_tokenization_spaces if clean_up is None else clean_up
        # transformers skips the clean-up for BPE models: it would remove real spaces.
        is_bpe = type(self._backend.model).__name__ == "BPE"
        if clean_up and (not is_bpe or self._clean_up_bpe):
            for old, new in _CLEAN_UP:
                text = text.replace(old, new)
        return text

    def get_chat_template(
        self, chat_template: str | None = None, tools: Sequence[Any] | None = None
    ) -> str:
        """The template ``apply_chat_template`` uses: ``chat_template`` (or the name of one of the
        model's), else the model's (``tool_use`` with tools, else ``default``)."""
        own = self.chat_template
        if chat_template is not None:
            return (
                own.get(chat_template, chat_template) if isinstance(own, Mapping) else chat_template
            )
        if isinstance(own, Mapping):
            if tools and "tool_use" in own:
                return own["tool_use"]
            if "default" in own:
                return own["default"]
            raise ValueError(
                "this tokenizer has several chat templates and none is named 'default'; pass "
                f"chat_template= with one of {sorted(own)}"
            )
        if own is None:
            raise ValueError(
                "Cannot use apply_chat_template because this tokenizer has no chat template (its "
                "tokenizer_config.json has none) and no chat_template argument was passed"
            )
        return own

    def apply_chat_template(  # noqa: PLR0917 - transformers' signature, in its order
        self,
        conversation: Any,
        tools: Sequence[Any] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        chat_template: str | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool | str = False,
        tokenize: bool = True,
        return_dict: bool = True,
        **kwargs: Any,
    ) -> Any:
        """Render a conversation (or a batch) with the model's chat template, as transformers 5.

        A ``BatchEncoding`` by default, the ids with ``return_dict=False``, the text with
        ``tokenize=False``; ``**kwargs`` reach the template. Needs ``jinja2`` (the ``chat`` extra).
        """
        for name in _chat_template.UNSUPPORTED:
            if kwargs.pop(name, None) not in (None, False):
                raise NotImplementedError(
                    f"apply_chat_template({name}=...) is not supported by tinker_lite's light "
                    "tokenizer; install transformers to get its full tokenizer from get_tokenizer()"
                )
        template = self.get_chat_template(chat_template, tools)
        rendered, batched = _chat_template.render(
            template,
            conversation,
            tools=tools,
            documents=documents,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            variables={**self.special_tokens_map, **kwargs},
        )
        if not tokenize:
            return rendered if batched else rendered[0]
        encoded = self(rendered if batched else rendered[0], add_special_tokens=False)
        return encoded if return_dict else encoded["input_ids"]

    @tolerant_repr
    def __repr__(self) -> str:
        return (
            f"LightTokenizer(name_or_path={self.name_or_path!r}, vocab_size={self.vocab_size}, "
            f"special_tokens={self.special_tokens_map})"
        )


# The arguments of transformers' encode/__call__ accepted only at their defaults.
_OPTION_DEFAULTS: Final[dict[str, Any]] = {
    "padding": False,
    "truncation": None,
    "max_length": None,
    "stride": 0,
    "return_tensors": None,
    "is_split_into_words": False,
    "pad_to_multiple_of": None,
    "padding_side": None,
    "return_token_type_ids": None,
    "return_overflowing_tokens": False,
    "return_special_tokens_mask": False,
    "return_offsets_mapping": False,
    "return_length": False,
    "verbose": True,
}


def _refuse_options(call: str, options: Mapping[str, Any]) -> None:
    for name, value in options.items():
        if name == "return_attention_mask" and value in (None, True):
            continue
        if name in _OPTION_DEFAULTS and value in (_OPTION_DEFAULTS[name], False, None):
            continue
        known = name in _OPTION_DEFAULTS or name == "return_attention_mask"
        what = "is not supported by" if known else "is not an argument of"
        raise TypeError(
            f"{call}({name}={value!r}) {what} tinker_lite's light tokenizer; install "
            "transformers to get its full tokenizer from get_tokenizer()"
        )


def _content(value: Any) -> str | None:
    """A special token of the config: a string, or an AddedToken dict."""
    if isinstance(value, Mapping):
        value = value.get("content")
    return None if value is None else str(value)


def _added_token_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("content", "single_word", "lstrip", "rstrip", "normalized", "special")
    return {key: entry[key] for key in keys if key in entry}


def _py_obj(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, list | tuple):
        return tolist()
    if isinstance(value, tuple):
        return list(value)
    return value


def _ids(values: Any) -> list[Any]:
    values = _py_obj(values)
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise TypeError(f"token ids must be an int or a sequence of ints, got {values!r}")
    return list(values)


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    loaded = json.loads(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else None


def _template_files(root: Path) -> str | dict[str, str] | None:
    """The chat templates kept as files, which win over the config's (as in transformers)."""
    paths = [root / "chat_template.jinja", *sorted(root.glob("additional_chat_templates/*.jinja"))]
    templates = {
        "default" if path.parent == root else path.stem: path.read_text(encoding="utf-8")
        for path in paths
        if path.is_file()
    }
    if list(templates) == ["default"]:
        return templates["default"]
    return templates or None
