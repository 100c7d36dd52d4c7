"""The transport runs on urllib3 alone: no client path imports requests.

A first use (``ServiceClient`` + a sample) runs in a fresh interpreter against
``python -m tinker_lite.local serve`` in a process of its own, with ``import requests`` made to
fail there; a static check covers every module of the package (CLI and local server included).
Also here: what the transport does itself now that requests does not do it (redirects,
truncated bodies, gzip).
"""

from __future__ import annotations

import ast
import gzip
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._scripted_server import (  # noqa: F401 - fixtures are used by name
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
from tests._served import served
from tinker_lite._errors import APIConnectionError, APITimeoutError
from tinker_lite._transport.http import PoolKind, Transport
from tinker_lite._transport.retry import RetryPolicy, send_with_retries

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tinker_lite"


def test_no_module_of_the_package_imports_requests() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            if any(name == "requests" or name.startswith("requests.") for name in names):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


@pytest.fixture(scope="module")
def served_url() -> Iterator[str]:
    """``python -m tinker_lite.local serve`` in its own process; yields its base URL."""
    with served("--stub-model") as url:
        yield url


FIRST_USE = textwrap.dedent(
    """
    import sys

    class NoRequests:
        def find_spec(self, name, path=None, target=None):
            if name == "requests" or name.startswith("requests."):
                raise ImportError("requests must not be imported by tinker_lite")
            return None

    sys.meta_path.insert(0, NoRequests())

    import tinker_lite as tinker

    service = tinker.ServiceClient(base_url=sys.argv[1], telemetry=False)
    sampler = service.create_sampling_client(base_model="tinker-lite/tiny-64")
    prompt = tinker.types.ModelInput.from_ints([1, 2, 3])
    params = tinker.types.SamplingParams(max_tokens=2)
    result = sampler.sample(prompt=prompt, num_samples=1, sampling_params=params).result()
    print(len(result.sequences[0].tokens))
    service.close()
    print(sorted(m for m in sys.modules if m == "requests" or m.startswith("requests.")))
    """
)


def test_first_use_and_a_sample_never_import_requests(served_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-c", FIRST_USE, served_url],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    tokens, loaded = done.stdout.strip().splitlines()
    assert tokens == "2"
    assert loaded == "[]"


# -- what the transport does itself ---------------------------------------------------------


def test_a_truncated_body_is_retried_then_raised_as_a_connection_error(
    server: ScriptedServer,
) -> None:
    # Content-Length promises more than arrives: urllib3's IncompleteRead becomes an
    # APIConnectionError (not a timeout), which the one retry layer retries.
    server.on("GET", "/cut", DropMidBody(), DropMidBody())
    server.on("GET", "/cut-always", *[DropMidBody()] * 3)
    server.default("GET", "/cut", Reply(200, {"whole": True}))
    transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
    policy = RetryPolicy(max_retries=2)
    try:
        resp = send_with_retries(
            transport, PoolKind.TRAIN, "GET", "/cut", policy=policy, sleep=lambda _: None
        )
        assert resp.json() == {"whole": True}
        with pytest.raises(APIConnectionError) as info:
            send_with_retries(
                transport, PoolKind.TRAIN, "GET", "/cut-always", policy=policy, sleep=lambda _: None
            )
    finally:
        transport.close()
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
        assert transport.send(PoolKind.TRAIN, "POST", "/old", body=b"{}").json() == {"at": "new"}
        assert transport.send(PoolKind.TRAIN, "POST", "/keep", body=b"{}").json() == {"at": "kept"}
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


def test_a_redirect_to_another_origin_drops_authorization_and_cookies(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with ScriptedServer() as other:
        netrc = tmp_path / "netrc"
        netrc.write_text("machine 127.0.0.1 login user password pw\n", encoding="utf-8")
        netrc.chmod(0o600)
        monkeypatch.setenv("NETRC", str(netrc))
        server.on("GET", "/a", Reply(200, {}, headers={"Set-Cookie": "lb=1"}))
        server.on("GET", "/b", _redirect_to(other.url.rstrip("/") + "/c"))
        other.default("GET", "/c", Reply(200, {"at": "c"}))
        transport = Transport(server.url, headers={}, auth=lambda: API_KEY)
        try:
            transport.send(PoolKind.TRAIN, "GET", "/a")
            assert transport.send(PoolKind.TRAIN, "GET", "/b").json() == {"at": "c"}
        finally:
            transport.close()
        (b,) = server.requests("/b")
        assert b.header("Cookie") == "lb=1"
        assert b.header("Authorization") is not None
        (c,) = other.requests("/c")
    # Both servers listen on 127.0.0.1: another port is another origin.
    assert c.header("Authorization") is None
    assert c.header("Cookie") is None


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
