"""The environment variables tinker_lite reads, one row each, and how a setting is resolved
from its row: explicit argument > environment variable > default. README.rst and
docs/configuration.rst show the rows as tests/architecture/test_reference_tables.py renders them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tinker_lite._errors import InvalidInputError

__all__ = ["VARIABLES", "Variable", "resolve"]


def _number(value: object) -> float:
    try:
        return math.nan if isinstance(value, bool) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _seconds(value: object, source: str) -> float:
    """``value`` as a positive number of seconds; InvalidInputError naming ``source`` if not."""
    number = _number(value)
    if math.isnan(number) or number <= 0:
        raise InvalidInputError(source, f"must be a positive number of seconds, got {value!r}")
    return number


def _wait_seconds(value: object, source: str) -> float:
    """``value`` as a finite number of seconds >= 0 (0: no wait)."""
    number = _number(value)
    if not math.isfinite(number) or number < 0:
        raise InvalidInputError(source, f"must be a number of seconds >= 0, got {value!r}")
    return number


def _byte_count(value: object, source: str) -> int:
    if isinstance(value, str) and source in _ROWS:
        try:
            value = int(value)
        except ValueError:
            raise InvalidInputError(
                source, f"must be a whole number of bytes, got {value!r}", "e.g. 536870912"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(source, f"must be a positive number of bytes, got {value!r}")
    return value


def _names(noun: str) -> Callable[[object, str], tuple[str, ...]]:
    """A parser of a list, de-duplicated in order; a variable's is comma-separated, and its
    empty items are dropped (docs/protocol.rst §2.2).
    """

    def parse(value: object, source: str) -> tuple[str, ...]:
        if isinstance(value, str):
            if source not in _ROWS:
                raise InvalidInputError(source, f"must be a list of {noun}, not a string")
            value = [part.strip() for part in value.split(",") if part.strip()]
        return tuple(dict.fromkeys(str(item) for item in value))  # type: ignore[attr-defined]

    return parse


def _switch(value: object, source: str) -> bool | None:
    """``1``/``true``/``yes``/``on``: True; ``0``/``false``/``no``/``off``: False; else None."""
    text = str(value).lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    return False if text in {"0", "false", "no", "off"} else None


def _text(value: object, source: str) -> object:
    return value


@dataclass(frozen=True)
class Variable:
    """One row: the variable (or a pair read together), what it does, where to read more, and
    for a setting the parser of its values (``parse(value, source)``) and its default.
    """

    names: tuple[str, ...]
    effect: str  # reST without Sphinx roles: the README shows the same text
    see: str | None = None  # a page of docs/ that says more
    parse: Callable[[Any, str], Any] | None = None
    default: object = None


VARIABLES: tuple[Variable, ...] = (
    Variable(
        ("TINKER_API_KEY",),
        "API key; an explicit ``api_key=`` argument wins. Never logged or shown (``tinker-lite "
        "check`` and ``tinker-lite auth status`` only say where it comes from); pickled only "
        "when asked for (``carry_api_key``).",
        "scaling",
    ),
    Variable(
        ("TINKER_CREDENTIAL_CMD",),
        "A shell command printing a fresh credential, for services that exchange credentials "
        "for tokens; it comes after ``TINKER_API_KEY`` and before the stored login "
        "(``~/.tinker/credentials.json``, written by ``tinker-lite auth login``).",
    ),
    Variable(
        ("TINKER_BASE_URL",),
        "Service URL; ``local://`` starts the offline server in-process.",
        "local",
        _text,
        "https://tinker.thinkingmachines.dev/services/tinker-prod",
    ),
    Variable(
        ("TINKER_LITE_STALL_TIMEOUT",),
        "Seconds a future may wait without any answer from the service before it raises "
        "``APITimeoutError`` (default 300; also ``ServiceClient(stall_timeout=...)``).",
        None,
        _seconds,
        300.0,
    ),
    Variable(
        ("TINKER_LITE_STARTUP_TIMEOUT",),
        "Seconds a connection that cannot be made (refused, DNS or TLS handshake failure, a "
        "connect timeout) is retried while this process never had an answer from the service "
        "(default 30, or the stall timeout when shorter; 5 in ``tinker-lite``; also "
        "``startup_timeout=`` and ``--startup-timeout``); then the call raises an "
        "``APIConnectionError`` naming the URL and the cause.",
        None,
        _seconds,
        30.0,  # docs/protocol.rst §6.7
    ),
    Variable(
        ("TINKER_LITE_EXIT_TIMEOUT",),
        "Seconds a ServiceClient that was never closed finishes its queued requests at "
        "interpreter exit before dropping the rest with a WARNING (default 60; ``0`` drops at "
        'once): "Closing and queued work".',
        "architecture",
        _wait_seconds,
        60.0,
    ),
    Variable(
        ("TINKER_TAGS", "TINKER_PROJECT_ID"),
        "Session tags (comma-separated) and project id.",
        None,
        _names("strings"),
    ),
    Variable(
        ("CLOUDFLARE_ACCESS_CLIENT_ID", "CLOUDFLARE_ACCESS_CLIENT_SECRET"),
        "Cloudflare Access headers: credentials, so never sent across origins.",
        "configuration",
    ),
    Variable(
        ("TINKER_LITE_SECRET_HEADERS",),
        "Names of ``default_headers`` that hold credentials, comma-separated (e.g. "
        "``X-Gateway-Token``): sent like the API key, never across origins, redacted from "
        "messages.",
        "configuration",
        _names("header names"),
    ),
    Variable(
        ("TINKER_LITE_MAX_ANSWER_BYTES",),
        "The largest answer read, in bytes after decompression (default 268435456, 256 MiB).",
        "configuration",
        _byte_count,
        268435456,
    ),
    Variable(("TINKER_TELEMETRY",), "``0`` disables telemetry."),
    Variable(
        ("TINKER_LOG",),
        "``debug`` or ``info`` turns on logging to stderr; ``debug`` also makes ``tinker-lite`` "
        "print tracebacks.",
    ),
    Variable(
        ("TINKER_LITE_PROGRESS",),
        "``0`` turns every progress bar and progress line off; ``1`` turns them on where they "
        "would be off (plain lines when the output is not a terminal).",
        None,
        _switch,
    ),
    Variable(
        ("TINKER_LITE_JOURNAL",),
        "Path of the run journal (one JSON line per completed operation; its keys are in "
        '"The run journal" of the configuration docs); ``ServiceClient(journal=...)`` wins.',
        None,
        _text,
    ),
    Variable(
        ("TINKER_LITE_TOKENIZER_DIR",),
        "Directory searched for tokenizers offline (``<dir>/<org>/<name>/tokenizer.json``, "
        "then ``<dir>/tokenizer.json``, each with its ``tokenizer_config.json`` beside it).",
        "api",
    ),
    Variable(
        ("TINKER_LITE_ALLOW_UNKNOWN_LOSS",),
        "``1`` lets a loss name unknown to this version through to the service.",
    ),
    Variable(
        ("TINKER_LITE_SDK_VERSION",),
        "Overrides the protocol version sent as ``sdk_version``.",
        None,
        _text,
    ),
    Variable(
        ("TINKER_LITE_LOCAL_FAULTS",),
        "Fault rules of the local server (its ``--faults``): 429/5xx answers, dropped "
        "connections, delays.",
        "local",
    ),
    Variable(
        ("TINKER_LITE_LOCAL_MODELS",),
        "More base model names the local server serves with its tiny model (comma-separated; "
        "also ``serve --model``).",
        "local",
    ),
)
"""Every environment variable tinker_lite reads (the HF_* variables are huggingface_hub's)."""

_ROWS = {name: row for row in VARIABLES for name in row.names}


def resolve(
    name: str, explicit: object, argument: str, env: Mapping[str, str], default: object = None
) -> Any:
    """Variable ``name``'s setting: ``explicit`` if not None, else the (stripped, non-empty)
    environment value, else ``default`` or the row's; errors name the argument or variable.
    """
    row = _ROWS[name]
    assert row.parse is not None
    if explicit is not None:
        return row.parse(explicit, argument)
    raw = env.get(name, "").strip()
    if not raw:
        return row.default if default is None else default
    return row.parse(raw, name)
