"""``tinker-lite auth ...``: log in and out (the stored login), and say which credential is used.

``login`` and ``logout`` change ``~/.tinker/credentials.json``, the same file the official
``tinker auth login`` writes: either tool reads what the other stored. The key is read with
masked input (from stdin when it is not a terminal) and is never printed.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import socket
import sys
import tempfile
import urllib.parse
from typing import Any

import attrs

from tinker_lite._api.endpoints import API_KEY_SELF_PATH
from tinker_lite._session.credentials import (
    ENV_API_KEY,
    ENV_CREDENTIAL_CMD,
    ResolvedCredential,
    resolve_credential,
)
from tinker_lite._session.credentials_file import CredentialsFile, KeyDetails, StoredKey
from tinker_lite.cli._context import DEFAULT_BASE_URL, LOCAL_URL, Context
from tinker_lite.cli._exit import (
    EXIT_AUTH,
    EXIT_CONFLICT,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    CLIError,
    exit_code_for,
)
from tinker_lite.cli._parser import add_group, leaf

__all__ = [
    "add_default",
    "cmd_auth_login",
    "cmd_auth_logout",
    "cmd_auth_status",
    "cmd_auth_whoami",
    "register",
    "remove_default",
]

# The presented API key's own metadata (``GET``), or its deletion (``DELETE``).

_CONSOLE = "https://tinker.thinkingmachines.ai"


@attrs.frozen(kw_only=True)
class _ApiKeySelf:
    """The answer of ``GET /api/v1/auth/apikey/me``."""

    key_id: int
    name: str
    note: str | None = None
    details: KeyDetails


def _read_key(ctx: Context) -> str:
    """The API key typed (masked) at a terminal, or the first line of stdin otherwise."""
    if sys.stdin.isatty():
        try:
            key = getpass.getpass("Paste your API key: ", stream=ctx.output.err)
        except EOFError:
            key = ""
    else:
        key = sys.stdin.readline()
    key = key.strip()
    if not key:
        raise CLIError("no API key was given (paste it at the prompt, or pipe it in)", EXIT_USAGE)
    return key


def _api_key_request(ctx: Context, key: str, method: str) -> Any:
    """Send ``method`` ``/api/v1/auth/apikey/me`` authenticated by ``key``; the parsed answer."""
    from tinker_lite._codec import wire as _wire
    from tinker_lite._session.settings import resolve_settings
    from tinker_lite._transport.answers import raise_for_status
    from tinker_lite._transport.http import PoolKind, Timeout, Transport

    settings = resolve_settings(base_url=ctx.base_url, api_key=key)
    transport = Transport(
        settings.base_url,
        headers={**settings.cloudflare_headers},
        auth=lambda: key,
        verify=settings.verify,
        json_loads=_wire.loads,
    )
    limit = Timeout(connect=min(ctx.timeout, ctx.startup_timeout), read=ctx.timeout)
    try:
        resp = ctx.call(
            lambda: transport.send(PoolKind.SESSION, method, API_KEY_SELF_PATH, timeout=limit)
        )
        raise_for_status(resp, what=f"{method} {API_KEY_SELF_PATH}")
        return resp.json() if method == "GET" else None
    finally:
        transport.close()


def add_default(store: CredentialsFile, key_id: str, record: StoredKey) -> None:
    """Store ``record`` under ``key_id`` (replacing one of that id) and make it the default."""
    from tinker_lite._codec import wire as _wire

    raw = _read_for_update(store)
    raw.setdefault("keys", {})[key_id] = _wire.to_builtins(record)
    raw["default"] = key_id
    _write(store, raw)


def remove_default(store: CredentialsFile) -> tuple[str, StoredKey] | None:
    """Remove the default key (the default is cleared); return it, or ``None`` if none."""
    found = store.default()
    if found is None:
        return None
    raw = _read_for_update(store)
    raw.get("keys", {}).pop(found[0], None)
    raw.pop("default", None)
    _write(store, raw)
    return found


def _read_for_update(store: CredentialsFile) -> dict[str, Any]:
    """The raw file, checked (a broken file is not replaced); fields not known here stay."""
    raw = store.read()
    if raw is None:
        return {"version": 1, "keys": {}}
    store.checked(raw)
    return raw


def _write(store: CredentialsFile, raw: dict[str, Any]) -> None:
    """Replace the file atomically with ``raw``: mode 0600, in a directory of mode 0700."""
    directory = store.path.parent
    if not directory.is_dir():
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)  # mkdir's mode is reduced by the umask
    ordered = {name: raw[name] for name in ("version", "default", "keys") if name in raw}
    text = json.dumps(_without_none({**ordered, **raw}), indent=2) + "\n"
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{store.path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, store.path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _without_none(value: Any) -> Any:
    """``value`` with every ``None`` member left out (the official CLI writes no nulls)."""
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def cmd_auth_login(ctx: Context) -> int:
    """Ask for an API key, check it with the service, and store it as the default credential."""
    from tinker_lite._codec import wire as _wire

    store = CredentialsFile()
    stored = store.default()
    if stored is not None:
        raise CLIError(
            f"already logged in with key {stored[1].name!r} (stored in {store.path}); "
            f"run `{PROG} auth logout` first",
            EXIT_CONFLICT,
        )
    if (ctx.base_url or "").startswith("local://"):
        raise CLIError("log in to a service URL (http:// or https://), not local://", EXIT_USAGE)
    if ctx.service_url()[0] == DEFAULT_BASE_URL:
        name = f"tinker-cli-{socket.gethostname().split('.', 1)[0] or 'unknown'}"
        query = urllib.parse.urlencode({"new_key": "true", "key_name": name})
        ctx.output.note(f"Create an API key: {_CONSOLE}/keys?{query}")
    key = _read_key(ctx)
    answer = _wire.structure(_api_key_request(ctx, key, "GET"), _ApiKeySelf)
    key_id = str(answer.key_id)
    add_default(
        store,
        key_id,
        StoredKey(key=key, name=answer.name, note=answer.note, details=answer.details),
    )
    details = answer.details
    if ctx.output.json:
        ctx.output.document(
            {
                "key_id": key_id,
                "name": answer.name,
                "email": details.user_details.email,
                "organization": details.org_details.name,
                "path": store.path,
            }
        )
    else:
        ctx.output.line(
            f"Logged in as {details.user_details.email} ({details.org_details.name}). "
            f"Stored API key {answer.name!r} as the default credential in {store.path}."
        )
    return EXIT_OK


def cmd_auth_logout(ctx: Context) -> int:
    """Remove the default key from the credentials file (a generated key is revoked too)."""
    store = CredentialsFile()
    found = store.default()
    if found is None:
        raise CLIError(
            f"no default credential is stored ({store.why_no_default()}): nothing to log out",
            EXIT_NOT_FOUND,
        )
    key_id, record = found
    revoke_error: Exception | None = None
    if record.type == "generated":
        # Minted for this machine only: nobody else has it, so it is deleted on the service.
        try:
            _api_key_request(ctx, record.key, "DELETE")
        except Exception as e:
            revoke_error = e
    remove_default(store)
    revoked = record.type == "generated" and revoke_error is None
    console = f"{_CONSOLE}/keys/{urllib.parse.quote(key_id, safe='')}"
    if ctx.output.json:
        ctx.output.document(
            {"key_id": key_id, "name": record.name, "path": store.path, "revoked": revoked}
        )
    else:
        ctx.output.line(f"Removed credential {record.name!r} (key id {key_id}) from {store.path}.")
        if revoked:
            ctx.output.line("Its API key was deleted on the service.")
        else:
            ctx.output.line(f"The API key is still active; delete it at {console}")
    if revoke_error is not None:
        raise CLIError(
            f"removed the local credential, but could not delete its API key on the service "
            f"({revoke_error}); delete it at {console}",
            exit_code_for(revoke_error),
        )
    return EXIT_OK


def _describe(found: ResolvedCredential) -> str:
    if found.source == "file":
        return f"file: {found.origin}"
    if found.source == "command":
        return f"command: {ENV_CREDENTIAL_CMD} (run when a client connects)"
    return f"{found.source}: {found.origin}"


def cmd_auth_status(ctx: Context) -> int:
    """Say whether a credential is available and from where, then whether the service takes it."""
    found = resolve_credential()
    available = found.source is not None
    doc: dict[str, Any] = {
        "credentials_available": available,
        "source": found.source,
        "origin": found.origin,
        "accessible": None,
    }
    problem: Exception | None = None
    keyless = False
    if available:
        try:
            ctx.wait(ctx.rest().get_server_capabilities())
            doc["accessible"] = True
        except Exception as e:
            problem = e
            doc["accessible"] = False
    else:
        # A service that needs no key (a local server without --api-key) is accessible anyway;
        # the same probe as `check` decides, so the two commands agree.
        keyless = _needs_no_key(ctx)
        doc["accessible"] = True if keyless else None
    if ctx.output.json:
        ctx.output.document(doc)
    else:
        ctx.output.line(
            f"Credentials available: yes ({_describe(found)})"
            if available
            else f"Credentials available: no ({found.origin})"
        )
        if available:
            ctx.output.line(f"Tinker accessible: {'yes' if problem is None else 'no'}")
        elif keyless:
            ctx.output.line("Tinker accessible: yes (this service needs no API key)")
    if not available and not keyless:
        raise CLIError(
            f"no credential found: looked for {ENV_API_KEY}, {ENV_CREDENTIAL_CMD} and "
            f"{CredentialsFile().path}; run `{PROG} auth login` or set {ENV_API_KEY}",
            EXIT_AUTH,
        )
    if problem is not None:
        raise problem
    return EXIT_OK


def _needs_no_key(ctx: Context) -> bool:
    """Whether the service answers an authenticated listing without any credential."""
    from tinker_lite.cli.check import probe_service

    base_url = ctx.service_url()[0]
    if base_url.startswith(LOCAL_URL):
        return True  # the in-process local server takes no key
    probe = probe_service(
        base_url, api_key=None, timeout=ctx.timeout, connect_timeout=ctx.startup_timeout
    )
    return bool(probe["auth"] == "not needed")


def cmd_auth_whoami(ctx: Context) -> int:
    """Show the user and organization the credential in use belongs to."""
    from tinker_lite._errors import APIError

    try:
        identity = ctx.wait(ctx.rest().whoami())
    except APIError as e:
        if type(e) is not APIError:  # a failed start-up: its own message and exit code
            raise
        # Only the service's tokens (JWT) carry an identity; a service without them has none.
        raise CLIError(
            f"no identity to show: the service at {ctx.service_url()[0]} does not issue "
            "tokens (JWT auth is off), and only a token names the user and organization; "
            f"`{PROG} auth status` says whether the credential is accepted",
            EXIT_NOT_FOUND,
        ) from e
    if ctx.output.json:
        ctx.output.document(identity)
        return EXIT_OK
    ctx.output.record(
        [("Email", identity.email), ("User", identity.user_urn), ("Organization", identity.org_urn)]
    )
    return EXIT_OK


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``auth`` group to the parser."""
    group = add_group(
        commands,
        "auth",
        "credentials: log in and out, show which one is used",
        "The stored login (~/.tinker/credentials.json, shared with the official CLI) and the "
        "credential in use.",
    )
    leaf(
        group,
        "login",
        cmd_auth_login,
        "store an API key (checked with the service) as the default credential",
        common=common,
        examples=[
            f"{PROG} auth login",
            f'printf "%s\\n" "$KEY" | {PROG} auth login   # key from stdin, never echoed',
        ],
    )
    leaf(
        group,
        "logout",
        cmd_auth_logout,
        "remove the default stored API key",
        common=common,
        examples=[f"{PROG} auth logout"],
    )
    leaf(
        group,
        "status",
        cmd_auth_status,
        "say whether a credential is available, from where, and whether the service takes it",
        common=common,
        examples=[f"{PROG} auth status", f"{PROG} auth status --format json"],
    )
    leaf(
        group,
        "whoami",
        cmd_auth_whoami,
        "show the user and organization of the credential in use",
        common=common,
        examples=[f"{PROG} auth whoami --format json"],
    )
