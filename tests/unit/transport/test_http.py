"""Transport tests: URL joining, headers, pools, timeouts and the response -> exception mapping."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import requests.adapters
import urllib3
import urllib3.exceptions

from tests.support.holder import requests_over
from tests.support.scripted_server import (  # noqa: F401 - fixtures are used by name
    API_KEY,
    Drop,
    DropMidBody,
    Hang,
    Reply,
    ScriptedServer,
    TruncatedJSON,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite._api.endpoints import checkpoint_segments, segment
from tinker_lite._codec.decoding import decode_json
from tinker_lite._errors import (
    APIConnectionError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    BillingError,
    ConflictError,
    InternalServerError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    PromiseExpiredError,
    RateLimitError,
    UnprocessableEntityError,
    WireFormatError,
)
from tinker_lite._transport.answers import HttpResponse, raise_for_status
from tinker_lite._transport.http import (
    DEFAULT_TIMEOUT,
    HEARTBEAT_TIMEOUT,
    RETRIEVE_FUTURE_TIMEOUT,
    TELEMETRY_TIMEOUT,
    ClientClosedError,
    PoolKind,
    Timeout,
    Transport,
    is_loopback_url,
    redact,
    register_secret,
    user_agent,
)

IDEMPOTENCY = re.compile(
    r"^tinker-lite-retry-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$"
)


@pytest.fixture
def transport(server: ScriptedServer) -> Iterator[Transport]:
    t = Transport(server.url, headers={}, auth=lambda: API_KEY)
    yield t
    t.close()


def test_base_url_prefix_kept_and_checkpoint_ids_stay_segments(server: ScriptedServer) -> None:
    server.default(
        "GET",
        "/services/tinker-prod/api/v1/training_runs/run-1/checkpoints/weights/ckpt-1",
        Reply(200, {}),
    )
    for base in (server.url + "/services/tinker-prod", server.url + "/services/tinker-prod/"):
        t = Transport(base, headers={}, auth=lambda: API_KEY)
        try:
            assert t.url("/api/v1/x") == server.url + "/services/tinker-prod/api/v1/x"
            resp = t.send(
                PoolKind.TRAIN,
                "GET",
                "/api/v1/training_runs/run-1/checkpoints/"
                + checkpoint_segments("checkpoint_id", "weights/ckpt-1"),
                query={"limit": "20", "offset": "0"},
            )
        finally:
            t.close()
        assert resp.status == 200
    recorded = server.requests()
    assert [r.path for r in recorded] == [
        "/services/tinker-prod/api/v1/training_runs/run-1/checkpoints/weights/ckpt-1"
    ] * 2
    assert recorded[0].query == {"limit": "20", "offset": "0"}


def test_path_segments_escape_only_what_they_must() -> None:
    assert checkpoint_segments("checkpoint_id", "weights/ckpt-1") == "weights/ckpt-1"
    assert segment("id", "a b?c#d") == "a%20b%3Fc%23d"
    assert segment("id", "a/b") == "a%2Fb"
    assert segment("id", "sess:sample:1") == "sess:sample:1"


def test_headers_on_post_get_delete_and_bodyless_post(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The connection's headers are the transport's; the service's are the requestor's.
    for method, path in [("POST", "/p"), ("GET", "/g"), ("DELETE", "/d"), ("POST", "/publish")]:
        server.default(method, path, Reply(204))
    monkeypatch.setenv("CLOUDFLARE_ACCESS_CLIENT_ID", "cf-id")
    monkeypatch.setenv("CLOUDFLARE_ACCESS_CLIENT_SECRET", "cf-secret")
    with requests_over(server.url) as api:
        api.call("POST", "/p", body=b'{"a":1}', sdk_method="X.y", operation_retries=False)
        api.call("GET", "/g", operation_retries=False)
        api.call("DELETE", "/d", operation_retries=False)
        api.call("POST", "/publish", operation_retries=False)
    (post,), (get,), (delete,), (publish,) = (
        server.requests(path) for path in ("/p", "/g", "/d", "/publish")
    )
    for r in (post, get, delete, publish):
        assert r.header("X-API-Key") == API_KEY
        assert r.header("Accept") == "application/json"
        assert r.header("User-Agent") == user_agent()
        assert r.header("CF-Access-Client-Id") == "cf-id"
        assert r.header("CF-Access-Client-Secret") == "cf-secret"
        assert r.header("x-stainless-retry-count") == "0"
    assert user_agent().startswith("tinker_lite/")
    assert "(Python " in user_agent()
    assert post.header("Content-Type") == "application/json"
    assert post.body == b'{"a":1}'
    assert (post.header("x-sdk-method"), post.header("x-sdk-version")) == ("X.y", "0.38.0")
    assert IDEMPOTENCY.match(post.header("X-Idempotency-Key") or "")
    assert post.header("x-stainless-read-timeout") == "60"
    # docs/protocol.rst §2.3: no Content-Type and no idempotency key on GET; both on DELETE /
    # bodyless POST.
    assert get.header("Content-Type") is None
    assert get.header("X-Idempotency-Key") is None
    for r in (delete, publish):
        assert r.header("Content-Type") == "application/json"
        assert IDEMPOTENCY.match(r.header("X-Idempotency-Key") or "")
        assert r.body == b""
    keys = {r.header("X-Idempotency-Key") for r in (post, delete, publish)}
    assert len(keys) == 3


def test_no_key_header_when_auth_is_empty_and_explicit_key_wins(server: ScriptedServer) -> None:
    server.default("POST", "/p", Reply(200, {}))
    t = Transport(server.url, headers={}, auth=lambda: "")
    try:
        t.send(PoolKind.SESSION, "POST", "/p", body=b"{}")
        t.send(PoolKind.SESSION, "POST", "/p", body=b"{}", headers={"X-API-Key": "explicit"})
    finally:
        t.close()
    first, second = server.requests()
    assert first.header("X-API-Key") is None
    assert second.header("X-API-Key") == "explicit"


@pytest.mark.parametrize("value", ["caf\u00e9\u20ac", "cf-secret\n", " cf-secret", "cf\r\nX-B: 1"])
def test_a_bad_header_value_is_an_input_error_and_nothing_is_sent(
    server: ScriptedServer, value: str
) -> None:
    t = Transport(server.url, headers={"CF-Access-Client-Secret": value}, auth=lambda: API_KEY)
    try:
        with pytest.raises(InvalidInputError) as info:
            t.send(PoolKind.TRAIN, "POST", "/p", body=b"{}")
    finally:
        t.close()
    assert info.value.field == "headers"
    assert value.strip() not in str(info.value)
    assert server.requests() == []


def test_timeouts_are_never_none() -> None:
    assert (DEFAULT_TIMEOUT.connect, DEFAULT_TIMEOUT.read) == (5.0, 60.0)
    assert RETRIEVE_FUTURE_TIMEOUT.read == 45.0
    assert HEARTBEAT_TIMEOUT.read == 10.0
    assert TELEMETRY_TIMEOUT.read == 5.0
    for bad in (None, 0, -1.0, "5", True):
        with pytest.raises(InvalidInputError):
            Timeout(read=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError):
            Timeout(connect=bad)  # type: ignore[arg-type]


def test_one_requests_session_per_pool_kind_sized_as_asked() -> None:
    # docs/protocol.rst §2.5: a session per pool kind, its adapter sized to the pool's
    # concurrency and urllib3's own retries off (requests' default, kept).
    t = Transport(
        "https://example.invalid/x",
        headers={},
        auth=lambda: API_KEY,
        pool_sizes={PoolKind.SAMPLE: 500},
    )
    try:
        sessions = dict(t.sessions)
        assert set(sessions) == set(PoolKind)
        assert len({id(s) for s in sessions.values()}) == len(PoolKind)
        for kind, session in sessions.items():
            adapter = session.get_adapter("https://example.invalid/x")
            assert isinstance(adapter, requests.adapters.HTTPAdapter)
            assert adapter.max_retries.total == 0
            pool = adapter.poolmanager.connection_from_url("https://example.invalid/")
            assert pool.pool.maxsize >= 1
            if kind is PoolKind.SAMPLE:
                assert pool.pool.maxsize == 500
            if kind is PoolKind.RETRIEVE_PROMISE:
                assert pool.pool.maxsize >= 400
    finally:
        t.close()


def test_urllib3_never_retries_a_dropped_request(server: ScriptedServer) -> None:
    # docs/protocol.rst §6.1: one retry layer (tinker_lite's); even an idempotent GET is sent once.
    server.on("GET", "/once", Drop(), Drop(), Drop(), Drop())
    t = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        with pytest.raises(APIConnectionError):
            t.send(PoolKind.TRAIN, "GET", "/once")
    finally:
        t.close()
    assert len(server.requests("/once")) == 1


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (408, APIStatusError),
        (409, ConflictError),
        (410, PromiseExpiredError),
        (422, UnprocessableEntityError),
        (429, RateLimitError),
        (500, InternalServerError),
        (503, InternalServerError),
        (302, APIStatusError),
        (402, BillingError),
    ],
)
def test_raise_for_status_maps_each_status(status: int, cls: type[APIStatusError]) -> None:
    resp = HttpResponse(status, {"Content-Type": "application/json"}, b'{"detail":"nope"}')
    with pytest.raises(cls) as info:
        raise_for_status(resp, request_id="req-1")
    err = info.value
    assert type(err) is cls
    assert err.status_code == status
    assert err.body == {"detail": "nope"}
    assert err.request_id == "req-1"
    assert str(err).startswith(f"The service answered HTTP {status}")
    assert ": nope (request id req-1)." in str(err)
    assert "{" not in str(err)


def test_raise_for_status_passes_2xx_and_keeps_text_bodies() -> None:
    for status in (200, 201, 204):
        raise_for_status(HttpResponse(status, {}, b""))
    with pytest.raises(InternalServerError) as info:
        raise_for_status(HttpResponse(502, {"x-request-id": "rid-9"}, b"<html>bad gateway</html>"))
    assert info.value.body == "<html>bad gateway</html>"
    assert info.value.request_id == "rid-9"


def test_dropped_connection_becomes_api_connection_error(
    server: ScriptedServer, transport: Transport
) -> None:
    server.on("POST", "/p", Drop(), DropMidBody())
    for _ in range(2):
        with pytest.raises(APIConnectionError) as info:
            transport.send(PoolKind.TRAIN, "POST", "/p", body=b"{}")
        assert not isinstance(info.value, APITimeoutError)
        assert isinstance(info.value.__cause__, urllib3.exceptions.HTTPError)
        assert "POST /p" in str(info.value)


def test_read_timeout_becomes_api_timeout_error(
    server: ScriptedServer, transport: Transport
) -> None:
    server.on("POST", "/slow", Hang())
    with pytest.raises(APITimeoutError) as info:
        transport.send(
            PoolKind.TRAIN, "POST", "/slow", body=b"{}", timeout=Timeout(connect=1.0, read=0.2)
        )
    assert info.value.elapsed is not None
    assert info.value.elapsed >= 0.2
    assert isinstance(info.value.__cause__, urllib3.exceptions.TimeoutError)


def test_refused_connection_and_tls_mismatch_are_connection_errors(
    server: ScriptedServer,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = Transport(f"http://127.0.0.1:{port}", headers={}, auth=lambda: API_KEY)
    tls = Transport(server.url.replace("http://", "https://"), headers={}, auth=lambda: API_KEY)
    try:
        with pytest.raises(APIConnectionError):
            refused.send(PoolKind.TRAIN, "GET", "/x", timeout=Timeout(1.0, 1.0))
        with pytest.raises(APIConnectionError) as info:
            tls.send(PoolKind.TRAIN, "GET", "/x", timeout=Timeout(1.0, 1.0))
        assert isinstance(info.value.__cause__, urllib3.exceptions.SSLError)
    finally:
        refused.close()
        tls.close()


def test_truncated_json_body_is_a_wire_format_error(
    server: ScriptedServer, transport: Transport
) -> None:
    server.on("GET", "/j", TruncatedJSON())
    resp = transport.send(PoolKind.TRAIN, "GET", "/j")
    assert resp.status == 200
    assert resp.content_type == "application/json"
    with pytest.raises(WireFormatError):
        resp.json()
    with pytest.raises(APIResponseValidationError) as info:
        decode_json(resp, what="get_j")
    assert isinstance(info.value.__cause__, WireFormatError)


def test_response_json_is_parsed_once() -> None:
    resp = HttpResponse(200, {"content-type": "application/json; charset=utf-8"}, b'{"a": [1]}')
    assert resp.content_type == "application/json"
    assert resp.json() is resp.json()
    assert HttpResponse(200, {"Content-Type": "application/x-protobuf"}, b"").is_protobuf


def test_close_aborts_a_request_in_flight_and_later_sends_fail(server: ScriptedServer) -> None:
    server.on("POST", "/hang", Hang())
    t = Transport(server.url, headers={}, auth=lambda: API_KEY)
    errors: list[BaseException] = []

    def blocked() -> None:
        try:
            t.send(PoolKind.RETRIEVE_PROMISE, "POST", "/hang", body=b"{}", timeout=Timeout(5, 60))
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=blocked)
    thread.start()
    server.wait_for("/hang", 1)
    t.close()
    thread.join(5)
    assert not thread.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], ClientClosedError)
    with pytest.raises(ClientClosedError):
        t.send(PoolKind.TRAIN, "GET", "/x")
    t.close()  # idempotent


def test_401_triggers_one_reauth_and_one_resend(server: ScriptedServer) -> None:
    creds = ["old-token-abc"]
    calls: list[str] = []

    def reauth(rejected: str) -> bool:
        calls.append(rejected)
        creds[0] = f"new-token-{len(calls)}"
        return True

    server.on("POST", "/p", Reply(401, {"detail": "expired"}), Reply(200, {"ok": True}))
    server.on("POST", "/q", Reply(401, {}), Reply(401, {}))
    t = Transport(server.url, headers={}, auth=lambda: creds[0], reauth=reauth)
    try:
        key = {"X-Idempotency-Key": "tinker-lite-retry-1"}
        assert t.send(PoolKind.TRAIN, "POST", "/p", body=b"{}", headers=key).status == 200
        assert t.send(PoolKind.TRAIN, "POST", "/q", body=b"{}").status == 401
    finally:
        t.close()
    p1, p2 = server.requests("/p")
    assert (p1.header("X-API-Key"), p2.header("X-API-Key")) == ("old-token-abc", "new-token-1")
    # The same request again: the key the requestor gave it too.
    assert p1.header("X-Idempotency-Key") == p2.header("X-Idempotency-Key") == "tinker-lite-retry-1"
    # A second 401 after the re-send is returned as is: one refresh per request, no loop.
    q1, q2 = server.requests("/q")
    assert (q1.header("X-API-Key"), q2.header("X-API-Key")) == ("new-token-1", "new-token-2")
    assert calls == ["old-token-abc", "new-token-1"]


def test_api_key_never_reaches_messages_or_reprs(
    server: ScriptedServer, transport: Transport, caplog: pytest.LogCaptureFixture
) -> None:
    register_secret(API_KEY)
    server.on("POST", "/echo", Reply(400, {"detail": f"bad key {API_KEY}"}))
    resp = transport.send(PoolKind.TRAIN, "POST", "/echo", body=b"{}")
    with pytest.raises(BadRequestError) as info:
        raise_for_status(resp)
    assert API_KEY not in str(info.value)
    assert "***" in str(info.value)
    assert API_KEY not in repr(transport)
    assert API_KEY not in repr(resp)
    assert redact(f"x{API_KEY}y") == "x***y"
    assert all(API_KEY not in r.getMessage() for r in caplog.records)


def test_is_loopback_url() -> None:
    assert is_loopback_url("http://127.0.0.1:8000")
    assert is_loopback_url("http://localhost/x")
    assert is_loopback_url("http://[::1]:80")
    assert not is_loopback_url("http://example.com")
    assert not is_loopback_url("https://10.0.0.1")


def test_invalid_base_url_is_rejected() -> None:
    for bad in ("ftp://x", "local://", "example.com", "http://"):
        with pytest.raises(InvalidInputError):
            Transport(bad, headers={}, auth=lambda: None)


def test_https_proxy_and_ca_bundle_from_the_environment_are_honoured(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests' own rules: HTTP(S)_PROXY routes the request through the proxy ...
    server.default("GET", "/prefix/api/v1/healthz", Reply(200, {"status": "ok"}))
    monkeypatch.setenv("HTTP_PROXY", server.url)
    proxied = Transport("http://tinker.invalid/prefix", headers={}, auth=lambda: API_KEY)
    try:
        assert proxied.send(PoolKind.TRAIN, "GET", "/api/v1/healthz").json() == {"status": "ok"}
    finally:
        proxied.close()
    (request,) = server.requests()
    assert request.header("Host") == "tinker.invalid"
    # ... and REQUESTS_CA_BUNDLE replaces the default trust store when verify=True.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/nonexistent/ca.pem")
    tls = Transport("https://tinker.invalid", headers={}, auth=lambda: API_KEY)
    try:
        with pytest.raises(APIConnectionError) as info:
            tls.send(PoolKind.TRAIN, "GET", "/x", timeout=Timeout(1.0, 1.0))
    finally:
        tls.close()
    assert "/nonexistent/ca.pem" in str(info.value)


def test_every_request_header_is_checked_and_a_bad_one_is_named(server: ScriptedServer) -> None:
    # Checked on every request (no memory of pairs found fit): a bad value is refused before
    # anything is sent, the error names the header and never shows its value.
    server.default("POST", "/p", Reply(204))
    t = Transport(server.url, headers={}, auth=lambda: API_KEY)
    try:
        for attempt in range(3):
            for index in range(6):
                t.send(PoolKind.TRAIN, "POST", "/p", body=b"{}", headers={"X-Step": str(index)})
            bad_values: list[Any] = ["1\n", " 1", "caf\u20ac", 1]
            for bad in bad_values:
                with pytest.raises(InvalidInputError) as info:
                    t.send(PoolKind.TRAIN, "POST", "/p", body=b"{}", headers={"X-Step": bad})
                assert info.value.field == "headers", attempt
                assert "'X-Step'" in str(info.value)
    finally:
        t.close()
    assert [r.header("X-Step") for r in server.requests()] == [str(i) for i in range(6)] * 3


def test_a_request_copied_from_the_template_keeps_its_hooks_to_itself(
    server: ScriptedServer,
) -> None:
    # PreparedRequest.copy() shares the template's hook lists: each request gets lists of its
    # own, so the auth handler's and the redirect hooks of one request never reach the next.
    server.default("GET", "/p", Reply(204))
    session = requests.Session()
    seen: list[int] = []
    session.hooks["response"].append(lambda r, **kwargs: seen.append(r.status_code))
    t = Transport(server.url, headers={}, auth=lambda: API_KEY, session=session)
    try:
        template = t._templates[PoolKind.TRAIN]
        before = {event: list(hooks) for event, hooks in template.hooks.items()}
        prepared = t.prepare(PoolKind.TRAIN, "GET", "/p")
        assert len(prepared.hooks["response"]) == 2  # the session's, then the auth handler's
        prepared.register_hook("response", lambda r, **kwargs: r)  # type: ignore[no-untyped-call]
        for _ in range(3):
            assert t.send(PoolKind.TRAIN, "GET", "/p").status == 204
        assert template.hooks == before
    finally:
        t.close()
    assert seen == [204] * 3


def test_request_targets_are_the_ones_urllib3_sends(server: ScriptedServer) -> None:
    # Requests without a proxy go straight to the origin's pool with the path as urllib3's
    # PoolManager would send it (normalised once per URL, then kept).
    paths = ["/api/v1/x", "/a b/c", "/caf\u00e9", "/a/./b/../c", "/q"]
    t = Transport(server.url, headers={}, auth=lambda: API_KEY)
    manager = urllib3.PoolManager()
    try:
        for path in paths * 2:
            t.send(PoolKind.SESSION, "GET", path, query={"k": "v w"} if path == "/q" else None)
        for path in paths:
            url = server.url + path + ("?k=v+w" if path == "/q" else "")
            manager.urlopen("GET", url, retries=False, redirect=False)
    finally:
        t.close()
        manager.clear()
    recorded = [(r.path, r.query) for r in server.requests()]
    assert recorded[: len(paths)] == recorded[len(paths) : 2 * len(paths)]
    assert recorded[: len(paths)] == recorded[2 * len(paths) :]


def test_cookies_are_read_from_the_session_on_every_request(server: ScriptedServer) -> None:
    # The template never keeps the cookies its session held when it was made.
    server.default("GET", "/p", Reply(204))
    session = requests.Session()
    session.cookies.set("early", "1")
    t = Transport(server.url, headers={}, auth=lambda: API_KEY, session=session)
    try:
        t.send(PoolKind.TRAIN, "GET", "/p")
        session.cookies.clear()
        t.send(PoolKind.TRAIN, "GET", "/p")
        session.cookies.set("late", "2")
        t.send(PoolKind.TRAIN, "GET", "/p")
    finally:
        t.close()
    assert [r.header("Cookie") for r in server.requests()] == ["early=1", None, "late=2"]
