"""The local server's API surface: golden bodies accepted, strict validation, auth, REST basics."""

from __future__ import annotations

import base64
import io
import json
import socket
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.local_server import Api, datum, fb_body
from tinker_lite._codec import proto as _proto
from tinker_lite.local import LocalServer

GOLDEN_DIRS = ("golden", "golden-0.38")
# 0.38 endpoints used only behind server flags this server never turns on
UNSUPPORTED = {"/api/v1/retrieve_futures", "/api/v1/sessions/search"}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with LocalServer(stub_model=True) as url:
        yield url


@pytest.fixture
def api(base_url: str) -> Iterator[Api]:
    client = Api(base_url)
    yield client
    client.close()


def _golden_files(shared_dir: Path) -> list[Path]:
    files: list[Path] = []
    for name in GOLDEN_DIRS:
        files.extend(sorted((shared_dir / "wire" / name).glob("*.json")))
    return files


def test_every_golden_request_is_accepted(shared_dir: Path, base_url: str) -> None:
    """Every captured 0.4.1 / 0.38 body passes schema validation and reaches a real route."""
    http = requests.Session()
    checked = 0
    for path in _golden_files(shared_dir):
        fixture = json.loads(path.read_text())
        headers = {
            k: v
            for k, v in fixture["headers"].items()
            if k.lower() in ("content-type", "accept", "content-encoding")
        }
        data: bytes | None = None
        if fixture.get("body_base64"):
            data = base64.b64decode(fixture["body_base64"])
            if headers.get("content-encoding") == "zstd" and not _proto.zstd_available():
                data = base64.b64decode(fixture["body_decompressed_base64"])
                headers.pop("content-encoding")
        elif fixture["body"] is not None:
            data = json.dumps(fixture["body"]).encode()
        url = base_url + fixture["path"]
        response = http.request(
            fixture["method"],
            url,
            params=fixture["query"],
            data=data,
            headers=headers,
            allow_redirects=False,
            timeout=30,
        )
        where = f"{path.parent.name}/{path.name}: {response.status_code} {response.text[:300]}"
        assert response.status_code not in (401, 415, 422), where
        assert response.status_code < 500, where
        if response.status_code == 404:
            detail = response.json()["detail"]
            assert not detail.startswith("Not found:") or fixture["path"] in UNSUPPORTED, where
        if response.status_code == 400:
            assert response.json()["detail"].startswith("Invalid checkpoint tinker path"), where
        checked += 1
    http.close()
    assert checked > 150


@pytest.mark.parametrize(
    ("mutate", "field", "kind"),
    [
        (lambda b: b.update(surprise=1), "surprise", "extra_forbidden"),
        (lambda b: b.update(model_seq_id="zero"), "model_seq_id", "type_error"),
        (lambda b: b.pop("base_model"), "base_model", "missing"),
        (lambda b: b["lora_config"].update(rank="8"), "rank", "type_error"),
        (lambda b: b["lora_config"].update(dropout=0.1), "dropout", "extra_forbidden"),
    ],
)
def test_schema_errors_name_the_field(api: Api, mutate: Any, field: str, kind: str) -> None:
    body: dict[str, Any] = {
        "session_id": api.session(),
        "model_seq_id": 0,
        "base_model": "tinker-lite/tiny-64",
        "lora_config": {"rank": 8},
    }
    mutate(body)
    response = api.post("/api/v1/create_model", body)
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert field in error["loc"]
    assert field in error["msg"]
    assert error["type"] == kind


def test_nested_datum_error_names_the_path(api: Api) -> None:
    session_id = api.session()
    model_id = api.model(session_id)
    body = fb_body(model_id, 1, [datum([1, 2, 3])], "forward_backward_input")
    body["forward_backward_input"]["data"][0]["loss_fn_inputs"]["weights"]["dtype"] = "float16"
    response = api.post("/api/v1/forward_backward", body)
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"][:4] == ["body", "forward_backward_input", "data", 0]
    assert "dtype" in error["msg"]


def test_an_empty_text_chunk_in_a_datum_is_a_user_error(api: Api) -> None:
    # docs/service.rst §2: the service fails such a datum; the local server says why.
    model_id = api.model(api.session())
    sent = datum([1, 2, 3])
    sent["model_input"]["chunks"].append({"tokens": [], "type": "encoded_text"})
    answer = api.poll(
        api.ok("/api/v1/forward_backward", fb_body(model_id, 1, [sent], "forward_backward_input"))[
            "request_id"
        ]
    )
    error = answer.json()
    assert error["category"] == "user"
    assert "data[0].model_input.chunks[1]: an empty encoded_text chunk" in error["error"]


def test_invalid_json_and_non_object(api: Api) -> None:
    response = api.http.post(api.base_url + "/api/v1/create_session", data=b"{nope", timeout=10)
    assert response.status_code == 400
    assert "JSON" in response.json()["detail"]
    response = api.post("/api/v1/create_session", [1, 2])
    assert response.status_code == 422


def test_api_key_required_when_configured() -> None:
    with LocalServer(api_key="secret-key", stub_model=True) as url:
        anonymous = Api(url)
        assert anonymous.get("/api/v1/healthz").status_code == 200
        assert anonymous.get("/api/v1/get_server_capabilities").status_code == 401
        wrong = Api(url, api_key="not-it")
        response = wrong.post("/api/v1/create_session", {"tags": [], "sdk_version": "x"})
        assert response.status_code == 401
        assert "secret-key" not in response.text
        good = Api(url, api_key="secret-key")
        assert good.session().startswith("sess-")
        for client in (anonymous, wrong, good):
            client.close()


def test_jwt_exchange() -> None:
    now = [1_000_000.0]
    with LocalServer(api_key="k", jwt=True, stub_model=True, clock=lambda: now[0]) as url:
        api = Api(url, api_key="k")
        config = api.ok("/api/v1/client/config", {"sdk_version": "0.38.0"})
        assert config["pjwt_auth_enabled"] is True
        token = api.ok("/api/v1/auth/token", {})["jwt"]
        assert token.count(".") == 2
        with_jwt = Api(url, api_key=token)
        assert with_jwt.session().startswith("sess-")
        # the token is not accepted to mint new tokens, and a tampered one is rejected
        assert with_jwt.post("/api/v1/auth/token", {}).status_code == 401
        tampered = Api(url, api_key=token[:-2] + ("AA" if token[-2:] != "AA" else "BB"))
        assert (
            tampered.post("/api/v1/create_session", {"tags": [], "sdk_version": "x"}).status_code
            == 401
        )
        now[0] += 7200
        assert (
            with_jwt.post("/api/v1/create_session", {"tags": [], "sdk_version": "x"}).status_code
            == 401
        )
        for client in (api, with_jwt, tampered):
            client.close()


def test_client_config_overrides_and_defaults() -> None:
    overrides = {"fwdbwd_max_chunk_len": 2, "sample_max_concurrent_requests": 7, "new_flag": True}
    with LocalServer(stub_model=True, config_overrides=overrides) as url:
        api = Api(url)
        config = api.ok("/api/v1/client/config", {"sdk_version": "0.4.1"})
        assert config["pjwt_auth_enabled"] is False
        assert config["fwdbwd_max_chunk_len"] == 2
        assert config["sample_max_concurrent_requests"] == 7
        assert config["new_flag"] is True
        assert config["parallel_fwdbwd_chunks"] is True
        dynamic = api.ok("/api/v1/client/dynamic_config", {"sdk_version": "0.38.0"})
        assert dynamic["refresh_interval_sec"] == 300.0
        assert api.post("/api/v1/auth/token", {}).status_code == 404
        api.close()


def test_sessions_capabilities_telemetry_and_stats(api: Api) -> None:
    caps = api.get("/api/v1/get_server_capabilities").json()
    names = [m["model_name"] for m in caps["supported_models"]]
    assert "tinker-lite/tiny-64" in names
    assert "Qwen/Qwen3-8B" in names
    assert api.get("/api/v1/healthz").json() == {"status": "ok"}

    session_id = api.session()
    assert api.ok("/api/v1/session_heartbeat", {"session_id": session_id}) == {
        "type": "session_heartbeat"
    }
    model_id = api.model(session_id)
    info = api.ok("/api/v1/get_info", {"model_id": model_id, "type": "get_info"})
    assert info["model_data"]["tokenizer_id"] == "tinker-lite/byte-tokenizer"
    assert info["lora_rank"] == 8
    assert info["model_name"] == "tinker-lite/tiny-64"
    before = api.get("/_local/stats").json()
    event = {
        "event": "SESSION_START",
        "event_id": "e1",
        "event_session_index": 0,
        "severity": "INFO",
        "timestamp": "2026-01-02T03:04:05Z",
    }
    batch = {"events": [event, {**event, "event_id": "e2"}], "platform": "Linux"}
    batch |= {"sdk_version": "0.4.1", "session_id": session_id}
    assert api.ok("/api/v1/telemetry", batch) == {"status": "accepted"}
    listed = api.get("/api/v1/sessions", params={"limit": 100, "offset": 0}).json()
    assert session_id in listed["sessions"]
    detail = api.get(f"/api/v1/sessions/{session_id}").json()
    assert detail == {
        "training_run_ids": [model_id],
        "sampler_ids": [],
        "user_metadata": {},
        "display_name": None,
    }
    finish = api.post(
        f"/api/v1/sessions/{session_id}/finish", {"reason": {"type": "success"}, "detail": None}
    )
    assert finish.status_code == 204
    after = api.get("/_local/stats").json()
    assert after["telemetry_events"] == before["telemetry_events"] + 2
    assert after["active_sessions"] == before["active_sessions"] - 1
    assert after["requests"]["/api/v1/telemetry"] >= 1
    assert after["models"][model_id]["applied"][0]["kind"] == "create_model"
    assert api.post("/api/v1/session_heartbeat", {"session_id": "sess-nope"}).status_code == 404


def test_many_concurrent_keepalive_connections(base_url: str) -> None:
    """More than 400 open connections are all served (one thread per connection)."""
    host, port = base_url.removeprefix("http://").split(":")
    request = f"GET /api/v1/healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    sockets = [socket.create_connection((host, int(port)), timeout=30) for _ in range(420)]
    try:
        for sock in sockets:
            sock.sendall(request)
        for sock in sockets:
            reply = b""
            while b'"ok"' not in reply:
                chunk = sock.recv(4096)
                assert chunk, "connection closed early"
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 200")
        # keep-alive: the same connections serve a second request
        sockets[0].sendall(request)
        assert sockets[0].recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        for sock in sockets:
            sock.close()


def test_stub_model_keeps_the_requested_lora_rank(api: Api) -> None:
    model_id = api.model(api.session(), rank=8)
    path = api.run(
        "/api/v1/save_weights_for_sampler", {"model_id": model_id, "path": "r8", "seq_id": 1}
    )["path"]
    archive = api.get(
        f"/api/v1/training_runs/{model_id}/checkpoints/sampler_weights/r8/archive",
        allow_redirects=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.content), mode="r:gz") as tar:
        member = tar.extractfile("adapter_config.json")
        assert member is not None
        assert json.loads(member.read())["r"] == 8
    sample = {
        "prompt": {"chunks": [{"tokens": [1, 2, 3]}]},
        "sampling_params": {"max_tokens": 2},
        "model_path": path,
    }
    assert "sequences" in api.run("/api/v1/asample", sample)


def test_stop_ends_every_connection_and_its_thread() -> None:
    before = set(threading.enumerate())
    server = LocalServer(stub_model=True, long_poll_s=30)
    url = server.start()
    host, port = url.removeprefix("http://").split(":")
    idle = socket.create_connection((host, int(port)), timeout=30)
    api = Api(url)
    model_id = api.model(api.session())
    held = api.ok("/api/v1/optim_step", {"model_id": model_id, "seq_id": 5, "adam_params": {}})
    answers: list[object] = []

    def poll() -> None:
        try:
            answers.append(api.poll(held["request_id"]).status_code)
        except requests.ConnectionError:
            answers.append("closed")

    poller = threading.Thread(target=poll)
    poller.start()
    while not server.stats()["requests"].get("/api/v1/retrieve_future"):
        poller.join(0.01)
    server.stop()
    assert set(threading.enumerate()) - before - {poller} == set()
    poller.join(30)
    # the waiting poll ends at once: answered 503, or cut off if the close came first
    assert answers in ([503], ["closed"])
    assert idle.recv(1) == b""  # the idle keep-alive connection was closed
    idle.close()
    api.close()
