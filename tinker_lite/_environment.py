"""The environment variables tinker_lite reads, one row each; README.rst and
docs/configuration.rst show them as tests/architecture/test_reference_tables.py renders them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["VARIABLES", "Variable"]


@dataclass(frozen=True)
class Variable:
    """One row: the variable (or a pair read together), what it does, where to read more."""

    names: tuple[str, ...]
    effect: str  # reST without Sphinx roles: the README shows the same text
    see: str | None = None  # a page of docs/ that says more


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
    ),
    Variable(
        ("TINKER_LITE_STALL_TIMEOUT",),
        "Seconds a future may wait without any answer from the service before it raises "
        "``APITimeoutError`` (default 300; also ``ServiceClient(stall_timeout=...)``).",
    ),
    Variable(
        ("TINKER_LITE_STARTUP_TIMEOUT",),
        "Seconds a connection that cannot be made (refused, DNS or TLS handshake failure, a "
        "connect timeout) is retried while this process never had an answer from the service "
        "(default 30, or the stall timeout when shorter; 5 in ``tinker-lite``; also "
        "``startup_timeout=`` and ``--startup-timeout``); then the call raises an "
        "``APIConnectionError`` naming the URL and the cause.",
    ),
    Variable(
        ("TINKER_LITE_EXIT_TIMEOUT",),
        "Seconds a ServiceClient that was never closed finishes its queued requests at "
        "interpreter exit before dropping the rest with a WARNING (default 60; ``0`` drops at "
        'once): "Closing and queued work".',
        "architecture",
    ),
    Variable(
        ("TINKER_TAGS", "TINKER_PROJECT_ID"), "Session tags (comma-separated) and project id."
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
    ),
    Variable(
        ("TINKER_LITE_MAX_ANSWER_BYTES",),
        "The largest answer read, in bytes after decompression (default 268435456, 256 MiB).",
        "configuration",
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
    ),
    Variable(
        ("TINKER_LITE_JOURNAL",),
        "Path of the run journal (one JSON line per completed operation; its keys are in "
        '"The run journal" of the configuration docs); ``ServiceClient(journal=...)`` wins.',
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
