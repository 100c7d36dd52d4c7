"""Connection settings: explicit arguments > environment variables > defaults, resolved once
into one frozen :class:`Settings` (docs/architecture.rst, "How options flow").
"""

from __future__ import annotations

import logging
import math
import os
import urllib.parse
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from tinker_lite._errors import InvalidInputError
from tinker_lite._logging import warn_once
from tinker_lite._repr import tolerant_repr
from tinker_lite._secrets import redact_url, register_url_credentials
from tinker_lite._session.credentials import ENV_API_KEY, CredentialSource, resolve_credential
from tinker_lite._session.journal import ENV_VAR as ENV_JOURNAL
from tinker_lite._transport.answers import DEFAULT_MAX_ANSWER_BYTES
from tinker_lite._transport.http import is_loopback_url, register_secret
from tinker_lite._transport.retry import DEFAULT_RETRY_POLICY
from tinker_lite._version import WIRE_SDK_VERSION
from tinker_lite.telemetry import is_telemetry_enabled

if TYPE_CHECKING:
    import requests

    from tinker_lite._session.journal import Journal

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_SAMPLE_WORKERS",
    "DEFAULT_STALL_TIMEOUT",
    "DEFAULT_STARTUP_TIMEOUT",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_JOURNAL",
    "ENV_MAX_ANSWER_BYTES",
    "ENV_SECRET_HEADERS",
    "ENV_STALL_TIMEOUT",
    "ENV_STARTUP_TIMEOUT",
    "LOCAL_BASE_URL",
    "Settings",
    "WireMode",
    "parse_seconds",
    "resolve_settings",
]

logger = logging.getLogger("tinker_lite.session")

DEFAULT_BASE_URL = "https://tinker.thinkingmachines.dev/services/tinker-prod"
LOCAL_BASE_URL = "local://"  # runs the offline local server in this process

ENV_BASE_URL = "TINKER_BASE_URL"
ENV_CF_CLIENT_ID = "CLOUDFLARE_ACCESS_CLIENT_ID"
ENV_CF_CLIENT_SECRET = "CLOUDFLARE_ACCESS_CLIENT_SECRET"
ENV_TAGS = "TINKER_TAGS"
ENV_PROJECT_ID = "TINKER_PROJECT_ID"
ENV_SDK_VERSION = "TINKER_LITE_SDK_VERSION"
ENV_STALL_TIMEOUT = "TINKER_LITE_STALL_TIMEOUT"
ENV_STARTUP_TIMEOUT = "TINKER_LITE_STARTUP_TIMEOUT"
ENV_MAX_ANSWER_BYTES = "TINKER_LITE_MAX_ANSWER_BYTES"
ENV_SECRET_HEADERS = "TINKER_LITE_SECRET_HEADERS"

DEFAULT_STALL_TIMEOUT = 300.0
DEFAULT_STARTUP_TIMEOUT = 30.0  # docs/protocol.rst §6.7
DEFAULT_SAMPLE_WORKERS = 16
"""Threads submitting samples: 16 keep the service's in-flight cap full (bench/, figure 3)."""

WireMode = Literal["auto", "protobuf", "json"]


@dataclass(frozen=True, repr=False)
class Settings:
    """The resolved options of one connection, handed down whole; credentials stay out of repr."""

    base_url: str
    api_key: str | None
    cloudflare_headers: Mapping[str, str] = field(default_factory=dict)
    project_id: str | None = None
    tags: tuple[str, ...] = ()
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    wire: WireMode = "auto"
    sdk_version: str = WIRE_SDK_VERSION
    telemetry: bool = True
    verify: bool | str = True
    user_metadata: Mapping[str, Any] = field(default_factory=dict)
    display_name: str | None = None
    default_headers: Mapping[str, str] = field(default_factory=dict)
    sample_workers: int = DEFAULT_SAMPLE_WORKERS
    max_retries: int | None = None
    journal: str | os.PathLike[str] | Journal | None = None
    credential_command: str | None = None
    credential_source: CredentialSource | None = None
    requests_session: requests.Session | None = None
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    secret_headers: frozenset[str] = frozenset()  # names of default_headers holding credentials

    @property
    def is_local(self) -> bool:
        """Whether this connection runs the offline local server (``base_url="local://"``)."""
        return self.base_url == LOCAL_BASE_URL

    def with_base_url(self, base_url: str) -> Settings:
        """These settings with another base URL (the local server's)."""
        return replace(self, base_url=base_url)

    @tolerant_repr
    def __repr__(self) -> str:
        return (
            f"Settings(base_url={redact_url(self.base_url)!r}, "
            f"api_key={'***' if self.api_key else None}, "
            f"credential_source={self.credential_source!r}, "
            f"project_id={self.project_id!r}, tags={self.tags!r}, "
            f"stall_timeout={self.stall_timeout!r}, startup_timeout={self.startup_timeout!r}, "
            f"wire={self.wire!r}, "
            f"sdk_version={self.sdk_version!r}, telemetry={self.telemetry!r}, "
            f"verify={self.verify!r}, display_name={self.display_name!r}, "
            f"default_headers={sorted(self.default_headers)!r}, "
            f"sample_workers={self.sample_workers!r}, max_retries={self.max_retries!r}, "
            f"journal={self.journal!r}, requests_session={self._session_name()}, "
            f"max_answer_bytes={self.max_answer_bytes!r}, "
            f"secret_headers={sorted(self.secret_headers)!r})"
        )

    def _session_name(self) -> str | None:
        session = self.requests_session
        return None if session is None else type(session).__name__


def _nonempty(value: str | None) -> str | None:
    return value if value else None


def parse_seconds(value: object, source: str) -> float:
    """``value`` as a positive number of seconds; InvalidInputError naming ``source`` if not."""
    try:
        number = math.nan if isinstance(value, bool) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if math.isnan(number) or number <= 0:
        raise InvalidInputError(source, f"must be a positive number of seconds, got {value!r}")
    return number


def _seconds(
    value: float | None, name: str, env: Mapping[str, str], env_name: str, default: float
) -> float:
    if value is not None:
        return parse_seconds(value, name)
    if _nonempty(env.get(env_name)) is not None:
        return parse_seconds(env[env_name], env_name)
    return default


def _answer_cap(value: int | None, env: Mapping[str, str]) -> int:
    source = "max_answer_bytes"
    if value is None:
        raw = _nonempty(env.get(ENV_MAX_ANSWER_BYTES, "").strip())
        if raw is None:
            return DEFAULT_MAX_ANSWER_BYTES
        source = ENV_MAX_ANSWER_BYTES
        try:
            value = int(raw)
        except ValueError:
            raise InvalidInputError(
                source, f"must be a whole number of bytes, got {raw!r}", "e.g. 536870912"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(source, f"must be a positive number of bytes, got {value!r}")
    return value


def _secret_names(value: Collection[str] | None, env: Mapping[str, str]) -> frozenset[str]:
    if value is None:
        value = [name.strip() for name in env.get(ENV_SECRET_HEADERS, "").split(",")]
    elif isinstance(value, str):
        raise InvalidInputError("secret_headers", "must be a list of header names, not a string")
    return frozenset(name for name in value if name)


def resolve_settings(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    project_id: str | None = None,
    tags: Sequence[str] | None = None,
    stall_timeout: float | None = None,
    startup_timeout: float | None = None,
    wire: str = "auto",
    verify: bool | str = True,
    telemetry: bool | None = None,
    sdk_version: str | None = None,
    user_metadata: Mapping[str, Any] | None = None,
    display_name: str | None = None,
    default_headers: Mapping[str, str] | None = None,
    sample_workers: int = DEFAULT_SAMPLE_WORKERS,
    max_retries: int | None = None,
    journal: str | os.PathLike[str] | Journal | None = None,
    requests_session: requests.Session | None = None,
    max_answer_bytes: int | None = None,
    secret_headers: Collection[str] | None = None,
    allow_local: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every option once: explicit argument > environment variable > default.

    InvalidInputError names the argument or variable at fault; ``allow_local`` accepts
    ``local://``.
    """
    env = os.environ if environ is None else environ

    if isinstance(sample_workers, bool) or not isinstance(sample_workers, int):
        raise InvalidInputError("sample_workers", f"must be an int, got {sample_workers!r}")
    if sample_workers < 1:
        raise InvalidInputError("sample_workers", f"must be >= 1, got {sample_workers}")

    url_source = ENV_BASE_URL if not base_url and env.get(ENV_BASE_URL) else "base_url"
    url = str(base_url or env.get(ENV_BASE_URL) or DEFAULT_BASE_URL).strip()
    register_url_credentials(url)  # a user:password@ in the URL is never shown
    local = url.lower().startswith(LOCAL_BASE_URL)
    if local and allow_local:
        url = LOCAL_BASE_URL
    elif not url.lower().startswith(("http://", "https://")):
        raise InvalidInputError(
            url_source,
            f"must be an http:// or https:// URL, got {redact_url(url)!r}",
            "base_url='local://' is resolved by ServiceClient",
        )
    elif not urllib.parse.urlsplit(url).hostname:
        raise InvalidInputError(url_source, f"names no host, got {url!r}", "e.g. http://HOST:PORT")
    loopback = local or is_loopback_url(url)
    credential = resolve_credential(api_key, env)
    if credential.source is None and not loopback:
        raise InvalidInputError(
            "api_key",
            f"no API key for {url} ({credential.origin})",
            f"pass api_key=... or set {ENV_API_KEY}, or store a key with `tinker-lite auth login`",
        )
    if url.lower().startswith("http://") and not loopback:
        message = "Connecting to %s over plain http://: the API key travels unencrypted"
        warn_once(logger, ("http", url), message, redact_url(url))

    cf_headers: dict[str, str] = {}
    cf_id = _nonempty(env.get(ENV_CF_CLIENT_ID))
    cf_secret = _nonempty(env.get(ENV_CF_CLIENT_SECRET))
    if cf_id:
        cf_headers["CF-Access-Client-Id"] = cf_id
    if cf_secret:
        register_secret(cf_secret)
        cf_headers["CF-Access-Client-Secret"] = cf_secret
    secret_names = _secret_names(secret_headers, env)
    lowered = {name.lower() for name in secret_names}
    for name, value in (default_headers or {}).items():
        if isinstance(name, str) and name.lower() in lowered and isinstance(value, str) and value:
            register_secret(value)

    stall = _seconds(stall_timeout, "stall_timeout", env, ENV_STALL_TIMEOUT, DEFAULT_STALL_TIMEOUT)
    startup = _seconds(
        startup_timeout,
        "startup_timeout",
        env,
        ENV_STARTUP_TIMEOUT,
        min(DEFAULT_STARTUP_TIMEOUT, stall),
    )

    if wire not in ("auto", "protobuf", "json"):
        raise InvalidInputError("wire", f"must be 'auto', 'protobuf' or 'json', got {wire!r}")

    if tags is not None:
        if isinstance(tags, str):
            raise InvalidInputError("tags", "must be a list of strings, not a string")
        resolved_tags = tuple(dict.fromkeys(str(t) for t in tags))
    elif ENV_TAGS in env:
        # docs/protocol.rst §2.2: comma-separated, de-duplicated in order, empty ones dropped.
        resolved_tags = tuple(
            dict.fromkeys(t.strip() for t in env[ENV_TAGS].split(",") if t.strip())
        )
    else:
        resolved_tags = ()

    # requests treats any false value (0, "") as "do not verify": only False may say so.
    if not isinstance(verify, (bool, str)) or (isinstance(verify, str) and not verify.strip()):
        raise InvalidInputError(
            "verify",
            f"must be True, False or the path of a CA bundle, got {verify!r}",
            "keep the default (True); verify=False turns TLS verification off, with a warning",
        )
    if verify is False:
        logger.warning(
            "TLS certificate verification is disabled (verify=False) for %s", redact_url(url)
        )

    if user_metadata is not None and not isinstance(user_metadata, Mapping):
        raise InvalidInputError("user_metadata", "must be a dict of str to JSON values")
    if display_name is not None and not isinstance(display_name, str):
        raise InvalidInputError("display_name", f"must be a string, got {display_name!r}")
    if max_retries is not None:
        replace(DEFAULT_RETRY_POLICY, max_retries=max_retries)  # checks it, naming the field
    if journal is None:
        journal = _nonempty(env.get(ENV_JOURNAL, "").strip())
    if requests_session is not None:
        import requests

        if not isinstance(requests_session, requests.Session):
            raise InvalidInputError(
                "requests_session",
                f"must be a requests.Session, got {type(requests_session).__name__}",
                "e.g. a session with your proxies, certificates or mounted adapters",
            )

    return Settings(
        base_url=url,
        api_key=credential.key,
        cloudflare_headers=cf_headers,
        project_id=project_id if project_id is not None else _nonempty(env.get(ENV_PROJECT_ID)),
        tags=resolved_tags,
        stall_timeout=stall,
        startup_timeout=startup,
        wire=wire,  # type: ignore[arg-type]
        sdk_version=sdk_version or _nonempty(env.get(ENV_SDK_VERSION)) or WIRE_SDK_VERSION,
        telemetry=is_telemetry_enabled(env) if telemetry is None else telemetry,
        verify=verify,
        user_metadata=dict(user_metadata or {}),
        display_name=display_name,
        default_headers=dict(default_headers or {}),
        sample_workers=sample_workers,
        max_retries=max_retries,
        journal=journal,
        credential_command=credential.command,
        credential_source=credential.source,
        requests_session=requests_session,
        max_answer_bytes=_answer_cap(max_answer_bytes, env),
        secret_headers=secret_names,
    )
