"""No credential reaches another origin: a redirect to another port of loopback (a second server
that records what it got) carries none of ``X-API-Key``, ``Authorization``, the Cloudflare Access
pair or a header marked secret, for GET and POST, 302 and 307; a redirect within the origin keeps
them all."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import AbstractContextManager

import pytest

from tests.hostile.servers import HostileServer, Request, reply
from tests.support.holder import requests_over
from tinker_lite._api import Requestor

API_KEY = "tml-secret-test-key-0123456789"
CREDENTIALS = {
    "x-api-key": API_KEY,
    "authorization": "Bearer user-token-0123456789",
    "cf-access-client-id": "cf-id-0123.access",
    "cf-access-client-secret": "cf-secret-0123456789",
    "x-gateway-token": "gw-secret-0123456789",
}
ENVIRON = {
    "CLOUDFLARE_ACCESS_CLIENT_ID": CREDENTIALS["cf-access-client-id"],
    "CLOUDFLARE_ACCESS_CLIENT_SECRET": CREDENTIALS["cf-access-client-secret"],
    "TINKER_LITE_SECRET_HEADERS": "X-Gateway-Token",
}


@pytest.fixture
def origins() -> Iterator[tuple[HostileServer, HostileServer]]:
    """The service, which redirects, and another origin (another port), which answers 200."""
    elsewhere = HostileServer(lambda request, sock: reply(sock, 200, b"{}"))

    def service(request: Request, sock: socket.socket) -> None:
        if request.path.endswith("/client/config"):
            reply(sock, 404, b"{}")
        elif request.path.startswith("/api/v1/landed"):
            reply(sock, 200, b"{}")
        else:
            status, _, target = request.path.rpartition("/")[2].partition("-")
            location = "/api/v1/landed" if target == "same" else elsewhere.url + "/api/v1/away"
            reply(sock, int(status), b"", {"Location": location})

    with HostileServer(service) as server, elsewhere:
        yield server, elsewhere


def _client(url: str) -> AbstractContextManager[Requestor]:
    return requests_over(
        url,
        default_headers={
            "Authorization": CREDENTIALS["authorization"],
            "X-Gateway-Token": CREDENTIALS["x-gateway-token"],
            "X-Plain": "visible",
        },
        environ=ENVIRON,
    )


def _credentials(request: Request) -> dict[str, str]:
    return {name: value for name, value in request.headers.items() if name in CREDENTIALS}


@pytest.mark.parametrize("status", [302, 307])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_redirect_to_another_origin_carries_no_credential(
    origins: tuple[HostileServer, HostileServer], method: str, status: int
) -> None:
    service, elsewhere = origins
    with _client(service.url) as api:
        body = b"{}" if method == "POST" else None
        api.call(method, f"/api/v1/redirect/{status}-away", body=body)
    sent = [r for r in service.requests if "/redirect/" in r.path]
    assert len(sent) == 1
    assert _credentials(sent[0]) == CREDENTIALS  # the service got every one of them
    (arrived,) = elsewhere.requests
    # Before: CF-Access-Client-Id and -Secret (plain headers) went along.
    assert _credentials(arrived) == {}
    assert arrived.header("x-plain") == "visible"  # headers that are not credentials do
    assert arrived.method == (method if status == 307 else "GET")


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_redirect_within_the_origin_keeps_the_credentials(
    origins: tuple[HostileServer, HostileServer], method: str
) -> None:
    service, elsewhere = origins
    with _client(service.url) as api:
        api.call(method, "/api/v1/redirect/307-same", body=b"{}" if method == "POST" else None)
    (landed,) = [r for r in service.requests if r.path == "/api/v1/landed"]
    assert _credentials(landed) == CREDENTIALS
    assert elsewhere.requests == []
