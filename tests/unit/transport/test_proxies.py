"""Proxies, NO_PROXY, the CA bundle and netrc: requests' behaviour, resolved once per session.

tinker_lite hands them to requests (``Session.merge_environment_settings``, ``get_netrc_auth``)
when a transport is made, then sends with what they said: routing is checked end to end with
two loopback servers, one of them playing the proxy, and the environment reads are counted.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import requests.auth
import requests.sessions
import requests.utils

from tests.support.scripted_server import (  # noqa: F401 - fixtures are used by name
    API_KEY,
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite._errors import APIConnectionError, InvalidInputError
from tinker_lite._transport.http import PoolKind, Timeout, Transport

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
def test_a_transport_resolves_what_requests_resolves_per_request(
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
    transport = Transport(url, headers={}, auth=lambda: API_KEY, verify=verify)
    try:
        assert transport.verify == expected["verify"]
        assert transport.proxies == expected["proxies"]
    finally:
        transport.close()


NO_PROXY_VALUES = [
    "",
    "*",
    "tinker.example",
    ".example",
    "example",
    "xample",
    "tinker.example:8000",
    "tinker.example:9000",
    " other.example , .tinker.example ",
    "10.0.0.0/8",
    "10.1.2.3",
    "10.1.2.3/33",
    "127.0.0.1/32,localhost",
    "::1",
    "sub.tinker.example",
]
HOSTS = [
    "http://tinker.example:8000/api/v1/",
    "https://sub.tinker.example/",
    "https://10.1.2.3/prefix/",
    "http://127.0.0.1:8000/",
    "http://localhost/",
    "http://[::1]:8000/",
    "http://notexample/",
]


@pytest.mark.parametrize("no_proxy", NO_PROXY_VALUES)
@pytest.mark.parametrize("url", HOSTS)
def test_no_proxy_decides_the_route_as_requests_decides_it(
    no_proxy: str, url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("NETRC", str(tmp_path / "absent-netrc"))
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.test:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3129")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    route = requests.utils.select_proxy(
        url, requests.Session().merge_environment_settings(url, {}, None, True, None)["proxies"]
    )
    transport = Transport(url, headers={}, auth=lambda: API_KEY)
    try:
        assert requests.utils.select_proxy(url, dict(transport.proxies)) == route
    finally:
        transport.close()


@pytest.mark.parametrize(
    "content",
    [
        "machine 127.0.0.1 login user password pass-word\n",
        "machine 127.0.0.1 account acct password pw\n",
        "default login anyone password any\n",
        "machine other.example login u password p\n",
        "machine 127.0.0.1 login\n",  # malformed: ignored, as requests ignores it
    ],
)
def test_netrc_credentials_are_the_ones_requests_sends(
    content: str, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(content, encoding="utf-8")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    server.default("GET", "/api/v1/healthz", Reply(200, {"status": "ok"}))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    plain = requests.Session()
    try:
        transport.send(PoolKind.TRAIN, "GET", "/api/v1/healthz")
        plain.get(server.url.rstrip("/") + "/api/v1/healthz", timeout=5)
    finally:
        transport.close()
        plain.close()
    ours, theirs = server.requests()
    assert ours.header("Authorization") == theirs.header("Authorization")


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


def test_the_environment_is_read_once_per_transport_not_per_request(
    server: ScriptedServer,
    proxy: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "other.example")
    monkeypatch.setenv("NETRC", str(tmp_path / "absent-netrc"))
    proxy.default("GET", "/api/v1/healthz", Reply(200, {"status": "proxied"}))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    lookups: list[str] = []

    def counting(module: Any, name: str) -> None:
        original = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            lookups.append(name)
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    # Where requests reads the environment for a request (sessions.py imports them by name).
    for module in (requests.utils, requests.sessions):
        for name in ("get_environ_proxies", "should_bypass_proxies", "get_netrc_auth"):
            if hasattr(module, name):
                counting(module, name)
    # Changed after the sessions were made: not seen (the proxy keeps being used).
    monkeypatch.setenv("NO_PROXY", "*")
    try:
        for _ in range(3):
            transport.send(PoolKind.TRAIN, "GET", "/api/v1/healthz")
    finally:
        transport.close()
    assert lookups == []
    assert len(proxy.requests()) == 3
    assert server.requests() == []


def test_proxy_credentials_are_sent_to_the_proxy_only(
    server: ScriptedServer, proxy: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    host_port = proxy.url.split("//", 1)[1].rstrip("/")
    monkeypatch.setenv("HTTP_PROXY", f"http://proxy%40user:s%3Acret@{host_port}")
    proxy.default("GET", "/api/v1/healthz", Reply(200, {"status": "proxied"}))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        transport.send(PoolKind.TRAIN, "GET", "/api/v1/healthz")
    finally:
        transport.close()
    (request,) = proxy.requests()
    assert request.header("Proxy-Authorization") == requests.auth._basic_auth_str(
        "proxy@user", "s:cret"
    )
    assert request.header("Authorization") is None


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


def test_cookies_set_by_the_service_are_sent_back_per_pool(server: ScriptedServer) -> None:
    # A load balancer may pin a client with a cookie: each pool kind keeps its own jar
    # (requests'), where Max-Age=0 with the same name and path removes one.
    server.on(
        "POST",
        "/api/v1/thing",
        Reply(200, {}, headers={"Set-Cookie": "lb=abc; Path=/; HttpOnly"}),
        Reply(200, {}, headers={"Set-Cookie": "lb=gone; Path=/; Max-Age=0"}),
    )
    server.default("POST", "/api/v1/thing", Reply(200, {}))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        for kind in (PoolKind.TRAIN, PoolKind.TRAIN, PoolKind.SAMPLE, PoolKind.TRAIN):
            transport.send(kind, "POST", "/api/v1/thing", body=b"{}")
    finally:
        transport.close()
    cookies = [r.header("Cookie") for r in server.requests()]
    assert cookies == [None, "lb=abc", None, None]


def test_a_socks_proxy_without_pysocks_is_named_before_anything_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    try:
        import socks  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("PySocks is installed")
    _clear(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", "socks5://user:s3cret@socks.test:1080")
    with pytest.raises(InvalidInputError) as info:
        Transport("http://tinker.example/", headers={}, auth=lambda: API_KEY)
    assert info.value.field == "proxy"
    assert "pip install pysocks" in str(info.value)
    assert "s3cret" not in str(info.value)
