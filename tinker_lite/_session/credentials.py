"""Where the API key comes from, and the credential sent as ``X-API-Key``.

docs/configuration.rst, "Where the API key comes from", gives the order; docs/protocol.rst §8.3
the JWT exchange.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Literal

import attrs

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.decoding import decode_json
from tinker_lite._errors import (
    APIResponseValidationError,
    InvalidInputError,
    TinkerError,
    WireFormatError,
)
from tinker_lite._repr import tolerant_repr
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import redact, register_secret

__all__ = [
    "ENV_API_KEY",
    "ENV_CREDENTIAL_CMD",
    "CredentialSource",
    "Credentials",
    "ResolvedCredential",
    "jwt_expiry",
    "resolve_credential",
    "run_credential_command",
    "token_fetcher",
]

ENV_API_KEY = "TINKER_API_KEY"
ENV_CREDENTIAL_CMD = "TINKER_CREDENTIAL_CMD"
CREDENTIAL_CMD_TIMEOUT = 60.0
"""Seconds ``TINKER_CREDENTIAL_CMD`` may run before it counts as failed."""
_REFRESH_MARGIN_S = 300.0  # a JWT is refreshed this long before it expires
_RETRY_PAUSE_S = 60.0  # after a failed refresh, the next attempt waits this long

CredentialSource = Literal["argument", "environment", "command", "file"]

logger = logging.getLogger("tinker_lite.session")


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT in epoch seconds (the signature is not checked), or ``None``."""
    parts = token.split(".")
    if len(parts) < 2:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = _wire.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, TinkerError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(exp, (int, float)) and not isinstance(exp, bool):
        return float(exp)
    return None


@attrs.frozen
class ResolvedCredential:
    """Where a client's credential comes from: the key, ``TINKER_CREDENTIAL_CMD``, and in words
    where (or why none was found), never showing the key."""

    key: str | None = attrs.field(repr=False)
    source: CredentialSource | None
    command: str | None = attrs.field(default=None, repr=False)
    origin: str = ""


def resolve_credential(
    api_key: str | None = None, environ: Mapping[str, str] | None = None
) -> ResolvedCredential:
    """Find the credential in the official SDK 0.38's order; nothing is run or sent here."""
    env = os.environ if environ is None else environ
    command = env.get(ENV_CREDENTIAL_CMD) or None
    field = "api_key"
    if api_key:
        found = ResolvedCredential(api_key, "argument", command, "api_key=")
    elif env.get(ENV_API_KEY):
        field = ENV_API_KEY
        found = ResolvedCredential(env[ENV_API_KEY], "environment", command, ENV_API_KEY)
    elif command:
        found = ResolvedCredential(None, "command", command, ENV_CREDENTIAL_CMD)
    else:
        from tinker_lite._session.credentials_file import CredentialsFile

        store = CredentialsFile()
        default = store.default()
        if default is None:
            return ResolvedCredential(None, None, None, store.why_no_default())
        key_id, record = default
        field = str(store.path)
        found = ResolvedCredential(
            record.key, "file", None, f"{store.path}, key {record.name or key_id!r}"
        )
    if found.key is not None and any(ch.isspace() for ch in found.key):
        raise InvalidInputError(
            field, "the API key contains whitespace", "check for a stray newline or space"
        )
    register_secret(found.key)
    return found


def run_credential_command(
    command: str,
    *,
    timeout: float = CREDENTIAL_CMD_TIMEOUT,
    wall_clock: Callable[[], float] = time.time,
) -> str:
    """Run ``TINKER_CREDENTIAL_CMD`` in the shell; the credential it prints.

    InvalidInputError names the variable, never the command (it may hold secrets).
    """
    import subprocess

    try:
        done = subprocess.run(
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise InvalidInputError(
            ENV_CREDENTIAL_CMD,
            f"the command did not finish within {timeout:g} s",
            "run it yourself to see why it hangs",
        ) from None
    except OSError as e:
        raise InvalidInputError(
            ENV_CREDENTIAL_CMD, f"the command could not be started ({e.strerror})"
        ) from None
    credential = done.stdout.strip()
    register_secret(credential)
    exp = jwt_expiry(credential) if credential.startswith("eyJ") else None
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        said = f": {redact(lines[-1])[:200]}" if lines else ""
        problem = f"the command exited with status {done.returncode}{said}"
        hint = "run it yourself to see why it fails"
    elif not credential:
        problem = "the command printed an empty credential"
        hint = "it must print the credential on stdout"
    elif any(ch.isspace() for ch in credential):
        problem = "the command printed more than one word"
        hint = "it must print only the credential on stdout"
    elif exp is not None and exp <= wall_clock():
        problem, hint = "the command printed an expired JWT", "it must print a fresh one"
    else:
        return credential
    raise InvalidInputError(ENV_CREDENTIAL_CMD, problem, hint)


class Credentials:
    """The credential sent as ``X-API-Key``: the API key, or a JWT refreshed before it expires.

    ``command`` (``TINKER_CREDENTIAL_CMD``) stands in for a missing key, and authenticates the
    JWT exchange when the service asks for it (docs/protocol.rst §8.3).
    """

    def __init__(
        self,
        api_key: str | None,
        *,
        command: str | None = None,
        wall_clock: Callable[[], float],
    ) -> None:
        self.api_key = api_key
        self.command = command
        self._command_required = False
        self._command_error: InvalidInputError | None = None
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._jwt: str | None = None
        self._exp: float | None = None
        self._fetch: Callable[[], str] | None = None
        self._next_attempt = 0.0
        self._fetching = threading.local()

    @tolerant_repr
    def __repr__(self) -> str:
        return f"Credentials(jwt={'***' if self._jwt else None})"

    @property
    def uses_jwt(self) -> bool:
        return self._jwt is not None

    def use_client_config(
        self, config: types.ClientConfigResponse, *, from_server: bool = True
    ) -> None:
        """Check the credential suits the service's client config, before anything else is sent.

        ``from_server`` is false when the config could not be read (built-in defaults).
        """
        if self._command_error is not None:  # it failed before the client config was asked
            raise self._command_error
        if not config.pjwt_auth_enabled:
            if self.api_key is None and self.command is not None and not from_server:
                raise InvalidInputError(
                    ENV_CREDENTIAL_CMD,
                    "the service did not answer its client config to the credential the "
                    "command printed (the log says why), so it cannot be exchanged for a token",
                    "check that the command prints a valid credential",
                )
            if self.api_key is None and self.command is not None:
                raise InvalidInputError(
                    "api_key",
                    f"{ENV_CREDENTIAL_CMD} is set, but this service takes only API keys "
                    "(its client config does not enable token exchange)",
                    f"pass api_key=..., set {ENV_API_KEY}, or store a key with "
                    "`tinker-lite auth login`",
                )
            return
        self._command_required = config.credential_default_source == "credential_cmd"
        if self._command_required and self.command is None and not self._key_is_jwt():
            raise InvalidInputError(
                ENV_CREDENTIAL_CMD,
                "this service requires dynamic credentials (credential_default_source is "
                "'credential_cmd')",
                f"set {ENV_CREDENTIAL_CMD} to a command that prints a valid credential",
            )

    def _key_is_jwt(self) -> bool:
        return self.api_key is not None and self.api_key.startswith("eyJ")

    def exchange_credential(self) -> str | None:
        """The credential that authenticates a JWT exchange (the command runs each time)."""
        if self.command is not None and (
            (self._command_required and not self._key_is_jwt()) or self.api_key is None
        ):
            return run_credential_command(self.command, wall_clock=self._wall_clock)
        return self.api_key

    def enable_jwt(self, fetch: Callable[[], str]) -> None:
        """Exchange the API key for a JWT now; later requests carry the JWT."""
        token = self._fetch_token(fetch)
        with self._lock:
            self._fetch = fetch
            self._install(token)

    def _fetch_token(self, fetch: Callable[[], str]) -> str:
        """Call ``fetch``; requests this thread sends meanwhile carry the API key, not the JWT."""
        self._fetching.active = True
        try:
            return fetch()
        finally:
            self._fetching.active = False

    def _install(self, token: str) -> None:
        register_secret(token)
        self._jwt = token
        self._exp = jwt_expiry(token)

    def current(self) -> str | None:
        """The credential to send now: the API key, or the JWT (refreshed before it expires)."""
        token = self._jwt
        if token is None and self.api_key is None and self.command is not None:
            try:
                return run_credential_command(self.command, wall_clock=self._wall_clock)
            except InvalidInputError as e:
                self._command_error = e
                raise
        # auth/token itself carries the API key, never the JWT (docs/protocol.rst §8.3).
        if token is None or getattr(self._fetching, "active", False):
            return self.api_key
        exp = self._exp
        if exp is not None:
            now = self._wall_clock()
            if exp - now <= _REFRESH_MARGIN_S and now >= self._next_attempt:
                self._refresh(token, force=False)
        return self._jwt

    def reauth(self, rejected: str) -> bool:
        """After a 401: fetch a new JWT (once per rejected token); True if one is available."""
        if self._fetch is None:
            return False
        self._refresh(rejected, force=True)
        return self._jwt is not None and self._jwt != rejected

    def _refresh(self, stale: str, *, force: bool) -> None:
        with self._lock:
            if self._jwt != stale or self._fetch is None:
                return
            if not force and self._wall_clock() < self._next_attempt:
                return
            try:
                token = self._fetch_token(self._fetch)
            except TinkerError as e:
                self._next_attempt = self._wall_clock() + _RETRY_PAUSE_S
                logger.warning("Could not refresh the access token: %s", redact(str(e)))
                return
            self._install(token)


def token_fetcher(
    post: Callable[[bytes, Mapping[str, str]], HttpResponse],
    credential: Callable[[], str | None],
) -> Callable[[], str]:
    """A function exchanging ``credential()`` for a JWT: ``POST /api/v1/auth/token {}`` (§8.3)."""

    def fetch() -> str:
        api_key = credential()
        headers = {"X-API-Key": api_key} if api_key else {}
        resp = post(b"{}", headers)
        data = decode_json(resp, what="auth/token")
        try:
            return _wire.structure(data, types.AuthTokenResponse).jwt
        except WireFormatError as e:
            raise APIResponseValidationError(
                f"auth/token answered without a usable jwt: {e}", status_code=resp.status
            ) from e

    return fetch
