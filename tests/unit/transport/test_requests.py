"""requests is the transport: what requests does is what tinker_lite does.

Redirects, cookies across them, ``Content-Length``, gzip and truncated bodies, seen on a scripted
loopback server through :class:`~tinker_lite._transport.http.Transport`.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tests.support.holder import requests_over
from tests.support.scripted_server import (  # noqa: F401 - fixtures are used by name
    API_KEY,
    DropMidBody,
    Recorded,
    Reply,
    Respond,
    ScriptedServer,
    TruncatedJSON,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite._errors import APIConnectionError, APITimeoutError
from tinker_lite._transport.http import PoolKind, Transport
from tinker_lite._transport.retry import RetryPolicy


def test_a_truncated_body_is_retried_then_raised_as_a_connection_error(
    server: ScriptedServer,
) -> None:
    # Content-Length promises more than arrives: requests' ChunkedEncodingError becomes an
    # APIConnectionError (not a timeout), which the one retry layer retries.
    server.on("GET", "/cut", DropMidBody(), DropMidBody())
    server.on("GET", "/cut-always", *[DropMidBody()] * 3)
    server.default("GET", "/cut", Reply(200, {"whole": True}))
    policy = RetryPolicy(max_retries=2)
    with requests_over(server.url, retry_policy=policy, sleep=lambda _: None) as api:
        resp = api.call("GET", "/cut", operation_retries=False)
        assert resp.json() == {"whole": True}
        with pytest.raises(APIConnectionError) as info:
            api.call("GET", "/cut-always", operation_retries=False)
    assert len(server.requests("/cut")) == 3
    assert len(server.requests("/cut-always")) == 3
    assert not isinstance(info.value, APITimeoutError)
    assert "IncompleteRead" in str(info.value) or "Connection broken" in str(info.value)


def test_truncated_json_without_length_is_not_a_transport_error(server: ScriptedServer) -> None:
    server.on("GET", "/j", TruncatedJSON())
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        assert transport.send(PoolKind.TRAIN, "GET", "/j").status == 200
    finally:
        transport.close()


def test_gzip_answers_are_decoded(server: ScriptedServer) -> None:
    server.default(
        "GET",
        "/z",
        Reply(200, body=gzip.compress(b'{"packed": 1}'), headers={"Content-Encoding": "gzip"}),
    )
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        resp = transport.send(PoolKind.TRAIN, "GET", "/z")
    finally:
        transport.close()
    assert resp.json() == {"packed": 1}
    (request,) = server.requests("/z")
    assert request.header("Accept-Encoding") == "gzip, deflate"


def _redirect_to(location: str, status: int = 302) -> Reply:
    return Reply(status, headers={"Location": location})


def test_redirects_are_followed_as_requests_follows_them(server: ScriptedServer) -> None:
    server.default("POST", "/old", _redirect_to("/new"))
    server.on("POST", "/keep", _redirect_to("/kept", 307))
    server.default("GET", "/new", Reply(200, {"at": "new"}))
    server.default("POST", "/kept", Reply(200, {"at": "kept"}))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        json_body = {"Content-Type": "application/json"}
        answer = transport.send(PoolKind.TRAIN, "POST", "/old", body=b"{}", headers=json_body)
        assert answer.json() == {"at": "new"}
        answer = transport.send(PoolKind.TRAIN, "POST", "/keep", body=b"{}", headers=json_body)
        assert answer.json() == {"at": "kept"}
        # Not followed when asked not to: the 3xx is the answer.
        assert transport.send(PoolKind.TRAIN, "POST", "/old", allow_redirects=False).status == 302
    finally:
        transport.close()
    (new,) = server.requests("/new")
    assert (new.method, new.body, new.header("Content-Type")) == ("GET", b"", None)
    assert new.header("X-API-Key") == API_KEY
    (kept,) = server.requests("/kept")
    assert (kept.method, kept.body, kept.header("Content-Type")) == (
        "POST",
        b"{}",
        "application/json",
    )


def test_a_redirect_to_another_host_drops_every_credential_and_cookie(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # requests drops Authorization (here netrc's) for another host and sends cookies only to
    # the host that set them; the service key goes nowhere else either.
    with ScriptedServer() as other:
        netrc = tmp_path / "netrc"
        netrc.write_text("machine 127.0.0.1 login user password pw\n", encoding="utf-8")
        netrc.chmod(0o600)
        monkeypatch.setenv("NETRC", str(netrc))
        elsewhere = other.url.replace("127.0.0.1", "localhost")
        server.on("GET", "/a", Reply(200, {}, headers={"Set-Cookie": "lb=1"}))
        server.on("GET", "/b", _redirect_to(elsewhere + "/c"))
        server.on("GET", "/d", _redirect_to("/e"))
        server.default("GET", "/e", Reply(200, {"at": "e"}))
        other.default("GET", "/c", Reply(200, {"at": "c"}))
        transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
        try:
            transport.send(PoolKind.TRAIN, "GET", "/a")
            assert transport.send(PoolKind.TRAIN, "GET", "/b").json() == {"at": "c"}
            assert transport.send(PoolKind.TRAIN, "GET", "/d").json() == {"at": "e"}
        finally:
            transport.close()
        (b,) = server.requests("/b")
        assert b.header("Cookie") == "lb=1"
        assert b.header("Authorization") is not None
        assert b.header("X-API-Key") == API_KEY
        (c,) = other.requests("/c")
        # Kept on a redirect within the same origin.
        (e,) = server.requests("/e")
    assert c.header("Authorization") is None
    assert c.header("Cookie") is None
    assert c.header("X-API-Key") is None
    assert (e.header("X-API-Key"), e.header("Cookie")) == (API_KEY, "lb=1")


def test_a_redirect_loop_is_a_connection_error(server: ScriptedServer) -> None:
    server.default("GET", "/loop", _redirect_to("/loop"))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        with pytest.raises(APIConnectionError, match="redirects"):
            transport.send(PoolKind.TRAIN, "GET", "/loop")
    finally:
        transport.close()
    assert len(server.requests("/loop")) == 31


def test_content_length_on_every_request_that_may_carry_a_body(server: ScriptedServer) -> None:
    def echo(request: Recorded) -> Reply:
        return Reply(200, {"length": request.header("Content-Length")})

    for method in ("GET", "POST", "PUT", "DELETE"):
        server.default(method, "/len", Respond(echo))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        lengths = {
            method: transport.send(PoolKind.TRAIN, method, "/len").json()["length"]
            for method in ("GET", "POST", "PUT", "DELETE")
        }
        with_body = transport.send(PoolKind.TRAIN, "POST", "/len", body=b"12345").json()
    finally:
        transport.close()
    assert lengths == {"GET": None, "POST": "0", "PUT": "0", "DELETE": "0"}
    assert with_body == {"length": "5"}
