"""Chat templates of Hugging Face tokenizer configs, rendered with ``jinja2`` (the ``chat`` extra)
to the text ``transformers`` 5 renders for the same template and messages.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

__all__ = ["UNSUPPORTED", "render"]

# apply_chat_template arguments of transformers the light tokenizer does not implement.
UNSUPPORTED: Final = (
    "padding",
    "truncation",
    "max_length",
    "return_tensors",
    "return_assistant_tokens_mask",
    "sanitize_control_tokens",
    "tokenizer_kwargs",
)
# jinja2 releases before 3.1.6 have known sandbox escapes; templates come from model repos.
_MIN_JINJA: Final = (3, 1, 6)
_REASONING_FIELDS: Final = ("reasoning_content", "thinking", "reasoning")
_CONTINUE_TAG: Final = "CONTINUE_FINAL_MESSAGE_TAG "


def render(
    template: str,
    conversation: Any,
    *,
    tools: Sequence[Any] | None,
    documents: Sequence[Mapping[str, Any]] | None,
    add_generation_prompt: bool,
    continue_final_message: bool | str,
    variables: Mapping[str, Any],
) -> tuple[list[str], bool]:
    """The texts of one conversation or a batch, and whether it was a batch."""
    if isinstance(conversation, list | tuple) and not conversation:
        raise ValueError("Cannot apply a chat template to an empty conversation")
    if continue_final_message and add_generation_prompt:
        raise ValueError(
            "continue_final_message and add_generation_prompt cannot be used together: the "
            "first continues the last message, the second starts a new assistant message"
        )
    batched = isinstance(conversation, list | tuple) and (
        isinstance(conversation[0], list | tuple) or hasattr(conversation[0], "messages")
    )
    chats = list(conversation) if batched else [conversation]
    compiled = _compile(template)
    if tools is not None and not all(isinstance(tool, Mapping) for tool in tools):
        raise TypeError(
            "tools must be JSON schemas (dicts) with tinker_lite's light tokenizer; Python "
            "functions are turned into schemas by transformers, which it does not use"
        )
    if documents is not None and not all(isinstance(d, Mapping) for d in documents):
        raise TypeError("documents must be a list of dicts with 'title' and 'text' keys")
    context = {
        "tools": _plain(None if tools is None else list(tools)),
        "documents": _plain(documents),
        "add_generation_prompt": add_generation_prompt,
        **_plain(dict(variables)),
    }
    texts = []
    for chat in chats:
        messages = _messages(chat)
        final = None
        if continue_final_message:
            final = _tag_final_message(messages, continue_final_message, template)
        text = compiled.render(messages=messages, **context)
        if final is not None:
            text = _cut_after_final(text, final)
        texts.append(text)
    return texts, batched


@functools.lru_cache(maxsize=32)
def _compile(template: str) -> Any:
    try:
        import jinja2
        import jinja2.ext
        import jinja2.sandbox
    except ImportError:
        raise ImportError(
            "apply_chat_template needs jinja2: pip install 'tinker-lite[chat]' (or install "
            "transformers, whose tokenizer get_tokenizer() then returns)"
        ) from None
    version = tuple(int(part) for part in jinja2.__version__.split(".")[:3] if part.isdigit())
    if version < _MIN_JINJA:
        raise ImportError(
            f"apply_chat_template needs jinja2 >= 3.1.6 (older releases have sandbox escapes), "
            f"found {jinja2.__version__}: pip install -U 'tinker-lite[chat]'"
        )

    class GenerationBlock(jinja2.ext.Extension):
        """``{% generation %}`` marks assistant text: its body is rendered as it is."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(
                lineno
            )

        def _body(self, caller: Any) -> Any:
            return caller()

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            value,
            ensure_ascii=ensure_ascii,
            indent=indent,
            separators=separators,
            sort_keys=sort_keys,
        )

    def strftime_now(format: str) -> str:
        return datetime.now().strftime(format)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template)


def _messages(chat: Any) -> list[dict[str, Any]]:
    """A conversation as plain dicts without None values (templates expect missing keys), with
    the reasoning under each name templates read."""
    given = getattr(chat, "messages", chat)
    messages = _plain(given, tuples=list)
    if not isinstance(messages, list):
        raise TypeError(f"a conversation must be a list of messages, got {type(chat).__name__}")
    out = []
    for original, message in zip(given, messages, strict=True):
        if not isinstance(message, dict):
            raise TypeError(
                f"chat messages must be dicts, dataclasses or pydantic models, got {original!r}"
            )
        message = {key: value for key, value in message.items() if value is not None}
        reasoning = next((message[key] for key in _REASONING_FIELDS if key in message), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def _plain(value: Any, tuples: type[tuple[Any, ...] | list[Any]] = tuple) -> Any:
    """Only JSON-like data reaches a template (objects become an inert ``<TypeName>``); tuples
    become ``tuples`` (messages hold lists, as JSON would)."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(key): _plain(item, tuples) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item, tuples) for item in value]
    if isinstance(value, tuple):
        return tuples(_plain(item, tuples) for item in value)
    if type(value).__module__ == "numpy" and callable(getattr(value, "item", None)):
        return _plain(value.item())  # a numpy scalar
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), tuples) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump(), tuples)
    return f"<{type(value).__name__}>"


def _tag_final_message(messages: list[dict[str, Any]], field: bool | str, template: str) -> str:
    """Mark the end of the final message, where the rendered text is cut."""
    if not messages:
        raise ValueError("continue_final_message is set but the conversation is empty")
    name = field if isinstance(field, str) else "content"
    final = messages[-1].get(name)
    if final is None:
        raise ValueError(f'continue_final_message is set but the final message has no "{name}"')
    fields = [name]
    if name in _REASONING_FIELDS:
        fields = [key for key in _REASONING_FIELDS if messages[-1].get(key) == final]
    if not any(key in template for key in fields):
        raise ValueError(
            f'continue_final_message is set to "{name}", a field this chat template does not use'
        )
    if isinstance(final, list):
        for block in reversed(final):
            if isinstance(block, dict) and "text" in block:
                text = block["text"]
                block["text"] = text + _CONTINUE_TAG
                return str(text)
        raise ValueError("continue_final_message is set but the final message has no text")
    for key in fields:
        messages[-1][key] = messages[-1][key] + _CONTINUE_TAG
    return str(final)


def _cut_after_final(text: str, final: str) -> str:
    tag = _CONTINUE_TAG.strip()
    if final.strip() not in text or tag not in text:
        raise ValueError(
            "continue_final_message is set but the final message does not appear in the "
            "rendered chat (the chat template changes it)"
        )
    at = text.rindex(tag)
    if text[at : at + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
        return text[:at]
    return text[:at].rstrip()
