"""Connection settings: explicit arguments > environment variables > defaults, resolved once
into one frozen :class:`Settings` (docs/architecture.rst, "How options flow").
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from tinker_lite._environment import resolve
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
    "DEFAULT_STARTUP_TIMEOUT",
    "LOCAL_BASE_URL",
    "Settings",
    "resolve_settings",
]

logger = logging.getLogger("tinker_lite.session")

DEFAULT_BASE_URL: str = resolve("TINKER_BASE_URL", None, "", {})
LOCAL_BASE_URL = "local://"  # runs the offline local server in this process
DEFAULT_STALL_TIMEOUT: float = resolve("TINKER_LITE_STALL_TIMEOUT", None, "", {})
DEFAULT_STARTUP_TIMEOUT: float = resolve("TINKER_LITE_STARTUP_TIMEOUT", None, "", {})
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
            f"journal={self.journal!r}, "
            f"requests_session={self.requests_session and type(self.requests_session).__name__}, "
            f"max_answer_bytes={self.max_answer_bytes!r}, "
            f"secret_headers={sorted(self.secret_headers)!r})"
        )


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

    url_source = "base_url" if base_url else "TINKER_BASE_URL"
    url = str(resolve("TINKER_BASE_URL", base_url or None, "base_url", env)).strip()
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
    cf_id = env.get("CLOUDFLARE_ACCESS_CLIENT_ID")
    cf_secret = env.get("CLOUDFLARE_ACCESS_CLIENT_SECRET")
    if cf_id:
        cf_headers["CF-Access-Client-Id"] = cf_id
    if cf_secret:
        register_secret(cf_secret)
        cf_headers["CF-Access-Client-Secret"] = cf_secret
    secret_names = frozenset(
        resolve("TINKER_LITE_SECRET_HEADERS", secret_headers, "secret_headers", env, ())
    )
    lowered = {name.lower() for name in secret_names}
    for name, value in (default_headers or {}).items():
        if isinstance(name, str) and name.lower() in lowered and isinstance(value, str) and value:
            register_secret(value)

    stall = resolve("TINKER_LITE_STALL_TIMEOUT", stall_timeout, "stall_timeout", env)
    startup = resolve(
        "TINKER_LITE_STARTUP_TIMEOUT",
        startup_timeout,
        "startup_timeout",
        env,
        min(DEFAULT_STARTUP_TIMEOUT, stall),
    )
    if wire not in ("auto", "protobuf", "json"):
        raise InvalidInputError("wire", f"must be 'auto', 'protobuf' or 'json', got {wire!r}")

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
        project_id=project_id if project_id is not None else env.get("TINKER_PROJECT_ID") or None,
        tags=resolve("TINKER_TAGS", tags, "tags", env, ()),
        stall_timeout=stall,
        startup_timeout=startup,
        wire=wire,  # type: ignore[arg-type]
        sdk_version=resolve(
            "TINKER_LITE_SDK_VERSION", sdk_version or None, "sdk_version", env, WIRE_SDK_VERSION
        ),
        telemetry=is_telemetry_enabled(env) if telemetry is None else telemetry,
        verify=verify,
        user_metadata=dict(user_metadata or {}),
        display_name=display_name,
        default_headers=dict(default_headers or {}),
        sample_workers=sample_workers,
        max_retries=max_retries,
        journal=resolve(ENV_JOURNAL, journal, "journal", env),
        credential_command=credential.command,
        credential_source=credential.source,
        requests_session=requests_session,
        max_answer_bytes=resolve(
            "TINKER_LITE_MAX_ANSWER_BYTES", max_answer_bytes, "max_answer_bytes", env
        ),
        secret_headers=secret_names,
    )
