"""Proxies, NO_PROXY, the CA bundle and netrc are resolved once per pool, exactly as requests would.

Parity is checked against ``requests.Session.merge_environment_settings`` itself; routing is
checked end to end with two loopback servers, one of them playing the proxy.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import requests.sessions
import requests.utils

from tests._scripted_server import (  # noqa: F401 - fixtures are used by name
    API_KEY,
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite._errors import APIConnectionError
from tinker_lite._http import PoolKind, Timeout, Transport
from tinker_lite._proxies import environment_settings, pin_environment, send_pinned

PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
)


@pytest.fixture(name="proxy")
def proxy_fixture(clean_env: None) -> Iterator[ScriptedServer]:
    """A loopback server that records what is sent to it as a proxy."""
    with ScriptedServer() as recorder:
        yield recorder


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


ENVIRONMENTS = [
    {},
    {"HTTP_PROXY": "http://proxy.test:3128", "HTTPS_PROXY": "http://tls-proxy.test:3129"},
    {"http_proxy": "http://lower.test:1", "HTTP_PROXY": "http://upper.test:2"},
    {"ALL_PROXY": "http://all.test:8080"},
    {"HTTP_PROXY": "http://proxy.test:3128", "NO_PROXY": "tinker.example"},
    {"HTTP_PROXY": "http://proxy.test:3128", "NO_PROXY": ".example"},
    {"HTTP_PROXY": "http://proxy.test:3128", "no_proxy": "other.example, tinker.example:8000"},
    {"HTTP_PROXY": "http://proxy.test:3128", "NO_PROXY": "10.0.0.0/8"},
    {"HTTP_PROXY": "http://proxy.test:3128", "NO_PROXY": "127.0.0.0/8"},
    {"HTTP_PROXY": "http://proxy.test:3128", "NO_PROXY": "127.0.0.1"},
    {"HTTP_PROXY": "http://proxy.test:3128", "NO_PROXY": "*"},
    {"REQUESTS_CA_BUNDLE": "/etc/bundle.pem", "CURL_CA_BUNDLE": "/etc/curl.pem"},
    {"CURL_CA_BUNDLE": "/etc/curl.pem"},
]
URLS = [
    "http://tinker.example:8000/api/v1/",
    "https://tinker.example/",
    "http://127.0.0.1:8000/",
    "https://10.1.2.3/prefix/",
]


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda env: ",".join(env) or "empty")
@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("verify", [True, False, "/explicit/ca.pem"])
def test_settings_match_what_requests_resolves_per_request(
    env: dict[str, str],
    url: str,
    verify: bool | str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("NETRC", str(tmp_path / "absent-netrc"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    expected = requests.Session().merge_environment_settings(url, {}, None, verify, None)
    got = environment_settings(url, verify)
    assert got.proxies == expected["proxies"]
    assert got.verify == expected["verify"]
    assert got.netrc_auth is None


def test_nothing_is_read_when_the_session_does_not_trust_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/bundle.pem")
    session = requests.Session()
    session.trust_env = False
    assert pin_environment(session, "https://tinker.example/", True) is True
    assert session.proxies == {}


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "127.0.0.0/8", "localhost,127.0.0.1", "*"])
def test_no_proxy_sends_loopback_directly(
    no_proxy: str,
    server: ScriptedServer,
    proxy: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", no_proxy)
    server.default("GET", "/api/v1/healthz", Reply(200, {"status": "direct"}))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        assert transport.send(PoolKind.TRAIN, "GET", "/api/v1/healthz").json() == {
            "status": "direct"
        }
    finally:
        transport.close()
    assert len(server.requests()) == 1
    assert proxy.requests() == []


def test_a_host_outside_no_proxy_goes_through_the_proxy(
    server: ScriptedServer, proxy: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "10.0.0.0/8,other.example")
    proxy.default("GET", "/api/v1/healthz", Reply(200, {"status": "proxied"}))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        assert transport.send(PoolKind.TRAIN, "GET", "/api/v1/healthz").json() == {
            "status": "proxied"
        }
    finally:
        transport.close()
    assert server.requests() == []
    (request,) = proxy.requests()
    assert request.header("Host") == server.url.split("//", 1)[1].rstrip("/")


def test_the_environment_is_read_once_per_pool_not_per_request(
    server: ScriptedServer, proxy: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "other.example")
    proxy.default("GET", "/api/v1/healthz", Reply(200, {"status": "proxied"}))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    lookups: list[str] = []
    original = requests.utils.get_environ_proxies

    def counting(url: str, no_proxy: str | None = None) -> dict[str, str]:
        lookups.append(url)
        return original(url, no_proxy)

    monkeypatch.setattr(requests.utils, "get_environ_proxies", counting)
    monkeypatch.setattr(requests.sessions, "get_environ_proxies", counting)
    # Changed after the pools were made: not seen (the proxy keeps being used).
    monkeypatch.setenv("NO_PROXY", "*")
    try:
        for _ in range(3):
            transport.send(PoolKind.TRAIN, "GET", "/api/v1/healthz")
    finally:
        transport.close()
    assert lookups == []
    assert len(proxy.requests()) == 3
    assert server.requests() == []


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_the_ca_bundle_from_the_environment_is_used_when_verify_is_true(
    variable: str, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv(variable, "/nonexistent/env-ca.pem")
    tls = Transport(server.url.replace("http://", "https://"), headers={}, auth=lambda: API_KEY)
    try:
        with pytest.raises(APIConnectionError) as info:
            tls.send(PoolKind.TRAIN, "GET", "/x", timeout=Timeout(1.0, 1.0))
    finally:
        tls.close()
    assert "/nonexistent/env-ca.pem" in str(info.value)


def test_an_explicit_verify_path_wins_over_the_environment(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/nonexistent/env-ca.pem")
    tls = Transport(
        server.url.replace("http://", "https://"),
        headers={},
        auth=lambda: API_KEY,
        verify="/nonexistent/explicit-ca.pem",
    )
    try:
        with pytest.raises(APIConnectionError) as info:
            tls.send(PoolKind.TRAIN, "GET", "/x", timeout=Timeout(1.0, 1.0))
    finally:
        tls.close()
    assert "/nonexistent/explicit-ca.pem" in str(info.value)
    assert "env-ca.pem" not in str(info.value)


def test_netrc_credentials_are_sent_as_requests_would(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login user password pass-word\n", encoding="utf-8")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    server.default("GET", "/api/v1/healthz", Reply(200, {"status": "ok"}))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        transport.send(PoolKind.TRAIN, "GET", "/api/v1/healthz")
    finally:
        transport.close()
    plain = requests.Session()
    try:
        plain.get(server.url.rstrip("/") + "/api/v1/healthz", timeout=5)
    finally:
        plain.close()
    ours, theirs = server.requests()
    expected = "Basic " + base64.b64encode(b"user:pass-word").decode()
    assert ours.header("Authorization") == theirs.header("Authorization") == expected


def _recorded_view(request: Any) -> tuple[Any, ...]:
    return (request.method, request.path, request.query, request.body, sorted(request.raw_headers))


def test_send_pinned_sends_what_session_request_sends(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    server.default(
        "POST", "/api/v1/thing", Reply(200, {"ok": True}, headers={"Set-Cookie": "lb=abc; Path=/"})
    )
    url = server.url.rstrip("/") + "/api/v1/thing"
    sessions = []
    for _ in range(2):
        session = requests.Session()
        session.headers.update({"User-Agent": "bench-test", "X-Default": "d"})
        session.auth = ("user", "secret")
        pin_environment(session, url, True)
        sessions.append(session)
    ours, theirs = sessions
    try:
        for _ in range(2):  # the second request carries the cookie set by the first answer
            send_pinned(
                ours,
                "post",
                url,
                data=b'{"a": 1}',
                params={"q": "1"},
                headers={"Content-Type": "application/json", "X-Default": "override"},
                timeout=(5.0, 5.0),
                allow_redirects=True,
                verify=True,
            ).close()
            theirs.request(
                "POST",
                url,
                data=b'{"a": 1}',
                params={"q": "1"},
                headers={"Content-Type": "application/json", "X-Default": "override"},
                timeout=(5.0, 5.0),
                allow_redirects=True,
                verify=True,
            ).close()
    finally:
        ours.close()
        theirs.close()
    first_ours, first_theirs, second_ours, second_theirs = server.requests()
    assert _recorded_view(first_ours) == _recorded_view(first_theirs)
    assert _recorded_view(second_ours) == _recorded_view(second_theirs)
    assert second_ours.header("Cookie") == "lb=abc"
    assert second_ours.header("X-Default") == "override"
