"""``tinker-lite version`` and ``check``: what is installed, configured and reachable."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import urllib.parse
from typing import Any

from tinker_lite._errors import InvalidInputError, TinkerError, describe_error
from tinker_lite._secrets import redact_url
from tinker_lite._session.credentials import ResolvedCredential, resolve_credential
from tinker_lite._version import WIRE_SDK_VERSION, __version__
from tinker_lite.cli._context import LOCAL_URL, Context
from tinker_lite.cli._exit import EXIT_AUTH, EXIT_CONNECTION, EXIT_OK, EXIT_SERVICE, PROG
from tinker_lite.cli._parser import leaf

__all__ = ["cmd_check", "cmd_version", "not_a_tinker_url", "probe_service", "register"]


def cmd_version(ctx: Context) -> int:
    """Print the version of tinker-lite."""
    info = {
        "version": __version__,
        "wire_sdk_version": os.environ.get("TINKER_LITE_SDK_VERSION") or WIRE_SDK_VERSION,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }
    if ctx.output.json:
        ctx.output.document(info)
    else:
        ctx.output.line(f"{PROG} {__version__}")
        ctx.output.record(
            [
                ("wire", f"official SDK {info['wire_sdk_version']}"),
                ("python", info["python"]),
                ("platform", info["platform"]),
            ]
        )
    return EXIT_OK


def _env_flag(name: str, default: str) -> str:
    value = os.environ.get(name)
    return f"{value} (from {name})" if value is not None else f"{default} (default)"


def cmd_check(ctx: Context) -> int:
    """Report the configuration, the service's reachability and its client-config flags."""
    from tinker_lite._progress import ENV_VAR as PROGRESS_ENV
    from tinker_lite._session.journal import ENV_VAR as JOURNAL_ENV

    base_url, source = ctx.service_url()
    try:
        credential = resolve_credential()
    except InvalidInputError as e:  # a broken credentials file: report it, check the rest
        credential = ResolvedCredential(None, None, None, str(e))
    if credential.key is not None:
        api_key = f"set (from {credential.origin})"
    elif credential.command is not None:
        api_key = f"from {credential.origin} (run when a client connects)"
    else:
        api_key = f"not set ({credential.origin})"
    report: dict[str, Any] = {
        "version": __version__,
        "base_url": redact_url(base_url),
        "base_url_source": source,
        "api_key": api_key,
        "api_key_set": credential.key is not None,
        "api_key_source": credential.source,
        "cloudflare_access": bool(os.environ.get("CLOUDFLARE_ACCESS_CLIENT_ID")),
        "journal": os.environ.get(JOURNAL_ENV) or None,
        "progress": _env_flag(PROGRESS_ENV, "auto"),
        "telemetry": _env_flag("TINKER_TELEMETRY", "1"),
        "log": _env_flag("TINKER_LOG", "warning"),
        "startup_timeout_s": ctx.startup_timeout,
        "timeout_s": ctx.timeout,
        "project_id": os.environ.get("TINKER_PROJECT_ID") or None,
    }
    if base_url.startswith(LOCAL_URL):
        from tinker_lite.local import LocalServer

        with LocalServer() as local_url:
            probe = probe_service(
                local_url,
                api_key=None,
                timeout=ctx.timeout,
                connect_timeout=ctx.startup_timeout,
            )
        probe["server"] = "local (in-process server started for this check)"
    else:
        probe = probe_service(
            base_url,
            api_key=credential.key,
            timeout=ctx.timeout,
            connect_timeout=ctx.startup_timeout,
        )
    report.update(probe)
    code = EXIT_OK
    if not report["reachable"]:
        code = EXIT_CONNECTION
    elif report["auth"] == "API key required" or report["auth"].startswith("rejected"):
        code = EXIT_AUTH
    elif report["auth"] not in ("ok", "not needed"):
        code = EXIT_SERVICE  # reachable, but its answers did not tell whether the key works
    if ctx.output.json:
        report["exit_code"] = code
        ctx.output.document(report)
        return code
    ctx.output.record(
        [
            ("tinker-lite", f"{__version__} (Python {platform.python_version()})"),
            ("Base URL", f"{redact_url(base_url)} (from {source})"),
            ("API key", report["api_key"]),
            ("Server", report["server"]),
            ("Auth", report["auth"]),
            ("Models", report.get("models") or None),
            ("Journal", report["journal"] or f"off (set {JOURNAL_ENV} to turn on)"),
            ("Progress", report["progress"]),
            ("Telemetry", report["telemetry"]),
            ("Log level", report["log"]),
            ("Start-up", f"{ctx.startup_timeout:g} s budget (--startup-timeout)"),
            ("Timeout", f"{ctx.timeout:g} s per request (--timeout)"),
        ]
    )
    flags = report.get("client_config")
    if isinstance(flags, dict):
        ctx.output.line("Client config:")
        for name, value in flags.items():
            ctx.output.line(f"  {name} = {json.dumps(value)}")
    else:
        ctx.output.line("Client config: not offered by the server (built-in defaults apply)")
    return code


def probe_service(
    base_url: str, *, api_key: str | None, timeout: float, connect_timeout: float
) -> dict[str, Any]:
    """Ask the service for health, client config, capabilities and an authenticated listing.

    Each question is one attempt through tinker_lite's own transport (its headers, its error
    messages); ``connect_timeout`` is the start-up budget, ``timeout`` bounds each answer.
    """
    from tinker_lite._api import endpoints
    from tinker_lite._transport.http import PoolKind, Timeout, Transport, register_secret

    register_secret(api_key)
    headers: dict[str, str] = {}
    for name in ("CLOUDFLARE_ACCESS_CLIENT_ID", "CLOUDFLARE_ACCESS_CLIENT_SECRET"):
        if os.environ.get(name):
            header = "CF-Access-Client-Id" if name.endswith("_ID") else "CF-Access-Client-Secret"
            headers[header] = os.environ[name]
    result: dict[str, Any] = {"reachable": False, "auth": "unknown"}
    limit = Timeout(connect=min(timeout, connect_timeout), read=min(timeout, 30.0))
    transport = Transport(base_url, headers=headers, auth=lambda: api_key)
    try:
        started = time.monotonic()
        try:
            resp = transport.send(PoolKind.SESSION, "GET", endpoints.HEALTHZ_PATH, timeout=limit)
        except TinkerError as exc:
            result["server"] = f"unreachable: {describe_error(exc)}"
            return result
        elapsed_ms = (time.monotonic() - started) * 1000.0
        result["reachable"] = True
        result["server"] = f"reachable (healthz HTTP {resp.status} in {elapsed_ms:.0f} ms)"
        if resp.status == 404:
            result["server"] += f"; {not_a_tinker_url(base_url)}"
        try:
            body = json.dumps({"sdk_version": WIRE_SDK_VERSION}).encode()
            resp = transport.send(
                PoolKind.SESSION, "POST", endpoints.CLIENT_CONFIG_PATH, body=body, timeout=limit
            )
            if resp.status == 200 and isinstance(resp.json(), dict):
                result["client_config"] = resp.json()
            capabilities = endpoints.GET_SERVER_CAPABILITIES
            resp = transport.send(PoolKind.SESSION, "GET", capabilities.path, timeout=limit)
            if resp.status == 200:
                models = resp.json().get("supported_models") or []
                result["models"] = [m.get("model_name") for m in models if isinstance(m, dict)]
            resp = transport.send(
                PoolKind.SESSION,
                "GET",
                endpoints.LIST_TRAINING_RUNS.path,
                query={"limit": "1", "offset": "0"},
                timeout=limit,
            )
        except (TinkerError, AttributeError) as exc:
            result["auth"] = f"unknown ({type(exc).__name__})"
            return result
        if resp.status in (401, 403):
            result["auth"] = f"rejected (HTTP {resp.status})" if api_key else "API key required"
        elif resp.status < 400:
            result["auth"] = "ok" if api_key else "not needed"
        else:
            result["auth"] = f"unknown (HTTP {resp.status})"
    finally:
        transport.close()
    return result


def not_a_tinker_url(base_url: str) -> str:
    """What to check when ``GET /api/v1/healthz`` is 404 at ``base_url``: the base URL itself."""
    from tinker_lite._api import endpoints

    health = f"GET {endpoints.HEALTHZ_PATH} is 404 there"
    parts = urllib.parse.urlsplit(base_url)
    path = parts.path.rstrip("/")
    if not path:
        return f"no Tinker service answers at {base_url} ({health}): check the base URL"
    root = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    return (
        f"the base URL's path {path} looks wrong: no Tinker service answers under {base_url} "
        f"({health}); the base URL is the address before {endpoints.API}, "
        f"e.g. {root}"
    )


def health_status(base_url: str, *, timeout: float, connect_timeout: float) -> int | None:
    """The HTTP status of ``GET /api/v1/healthz`` at ``base_url`` (``None``: no answer)."""
    from tinker_lite._api import endpoints
    from tinker_lite._transport.http import PoolKind, Timeout, Transport

    transport = Transport(base_url, headers={}, auth=lambda: None)
    try:
        limit = Timeout(connect=min(timeout, connect_timeout), read=min(timeout, 30.0))
        return transport.send(PoolKind.SESSION, "GET", endpoints.HEALTHZ_PATH, timeout=limit).status
    except TinkerError:
        return None
    finally:
        transport.close()


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``version`` and ``check`` to the parser."""
    leaf(
        commands,
        "version",
        cmd_version,
        "print the version",
        common=common,
        examples=["tinker-lite version", "tinker-lite version --format json"],
    )
    leaf(
        commands,
        "check",
        cmd_check,
        "report base URL, API key presence, server reachability and client config flags",
        common=common,
        examples=[
            "tinker-lite check",
            "tinker-lite check --base-url local://",
            "tinker-lite check --format json --startup-timeout 3   # in CI: fail fast",
        ],
    )
