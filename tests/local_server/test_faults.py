"""Fault injection of the local server: every fault kind fires as the spec says."""

from __future__ import annotations

import email.utils
import http.client
import logging
import time
from collections.abc import Iterator

import pytest
import requests

from tests.support.local_server import Api
from tinker_lite.local import LocalServer
from tinker_lite.local.http.faults import (
    FaultInjector,
    FaultSpecError,
    fault_plan,
    parse_fault_spec,
)

SAMPLE = {
    "prompt": {"chunks": [{"tokens": [1, 2, 3]}]},
    "sampling_params": {"max_tokens": 2},
    "base_model": "tinker-lite/tiny-64",
}


@pytest.fixture
def server() -> Iterator[LocalServer]:
    srv = LocalServer(stub_model=True, faults="", long_poll_s=0.2)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def api(server: LocalServer) -> Iterator[Api]:
    client = Api(server.base_url)
    yield client
    client.close()


def test_429_with_each_retry_after_form(server: LocalServer, api: Api) -> None:
    server.set_faults(
        "path=/api/v1/asample,status=429,retry_after=2,count=1;"
        "path=/api/v1/asample,status=429,retry_after=1.5,count=1;"
        "path=/api/v1/asample,status=429,retry_after_ms=1500,count=1;"
        "path=/api/v1/asample,status=429,retry_after_date=30,count=1"
    )
    answers = [api.post("/api/v1/asample", SAMPLE) for _ in range(5)]
    assert [r.status_code for r in answers] == [429, 429, 429, 429, 200]
    assert answers[0].headers["Retry-After"] == "2"
    assert answers[1].headers["Retry-After"] == "1.5"
    assert answers[2].headers["retry-after-ms"] == "1500"
    when = email.utils.parsedate_to_datetime(answers[3].headers["Retry-After"])
    assert 20 < when.timestamp() - time.time() <= 31
    stats = server.stats()
    assert stats["samples_submitted"] == 1
    assert stats["responses"]["/api/v1/asample"] == {"200": 1, "429": 4}
    assert [rule["fired"] for rule in stats["faults"]] == [1, 1, 1, 1]


def test_5xx_burst_then_recovery(server: LocalServer, api: Api) -> None:
    server.set_faults("path=/api/v1/create_session,status=503,count=3")
    body = {"tags": [], "sdk_version": "0.4.1"}
    codes = [api.post("/api/v1/create_session", body).status_code for _ in range(4)]
    assert codes == [503, 503, 503, 200]
    assert server.stats()["sessions"] == 1


def test_every_after_and_probability_counting() -> None:
    injector = FaultInjector("path=/x,status=500,after=1,every=2,count=2")
    fired = [injector.decide("request", "GET", "/x").rule is not None for _ in range(8)]
    assert fired == [False, False, True, False, True, False, False, False]
    spec = "path=/x,status=500,probability=0.5,seed=7"
    first = FaultInjector(spec)
    second = FaultInjector(spec)
    run1 = [first.decide("request", "GET", "/x").rule is not None for _ in range(40)]
    run2 = [second.decide("request", "GET", "/x").rule is not None for _ in range(40)]
    assert run1 == run2
    assert 5 < sum(run1) < 35
    glob = FaultInjector("path=/api/v1/*,method=POST,status=500")
    assert glob.decide("request", "POST", "/api/v1/asample").rule is not None
    assert glob.decide("request", "GET", "/api/v1/asample").rule is None


@pytest.mark.parametrize(
    "spec",
    [
        "path=/x",
        "path=/x,status=abc",
        "path=/x,status=700",
        "path=/x,action=explode",
        "path=/x,status=500,colour=red",
        "path=/x,action=try_again,queue_state=sleepy",
        "path=/x,status=500,probability=2",
    ],
)
def test_bad_specs_are_rejected(spec: str) -> None:
    with pytest.raises(FaultSpecError):
        parse_fault_spec(spec)


def test_408_and_try_again_polls(server: LocalServer, api: Api) -> None:
    request_id = api.ok("/api/v1/asample", SAMPLE)["request_id"]
    api.result(request_id)
    server.set_faults(
        "path=/api/v1/retrieve_future,action=try_again,status=408,queue_state=paused_capacity,"
        "reason=busy,count=2;"
        "path=/api/v1/retrieve_future,action=try_again,queue_state=paused_rate_limit,count=1"
    )
    polls = [api.post("/api/v1/retrieve_future", {"request_id": request_id}) for _ in range(4)]
    assert [p.status_code for p in polls] == [408, 408, 200, 200]
    assert polls[0].json()["queue_state"] == "paused_capacity"
    assert polls[0].json()["queue_state_reason"] == "busy"
    assert polls[2].json() == {
        "type": "try_again",
        "request_id": request_id,
        "queue_state": "paused_rate_limit",
    }
    assert "sequences" in polls[3].json()


def test_410_for_a_future(server: LocalServer, api: Api) -> None:
    keep = api.ok("/api/v1/asample", SAMPLE)["request_id"]
    lose = api.ok("/api/v1/asample", SAMPLE)["request_id"]
    server.set_faults(f"path=/api/v1/retrieve_future,action=expire,request_id={lose}")
    assert api.poll(lose).status_code == 410
    assert api.poll(lose).status_code == 410
    assert api.poll(keep).status_code == 200


def test_drop_before_and_drop_after(server: LocalServer, api: Api) -> None:
    body = {"tags": [], "sdk_version": "0.4.1"}
    server.set_faults("path=/api/v1/create_session,action=drop_before,count=1")
    with pytest.raises(requests.ConnectionError):
        requests.post(server.base_url + "/api/v1/create_session", json=body, timeout=10)
    assert server.stats()["sessions"] == 0
    server.set_faults("path=/api/v1/create_session,action=drop_after,count=1")
    with pytest.raises(requests.ConnectionError):
        requests.post(server.base_url + "/api/v1/create_session", json=body, timeout=10)
    stats = server.stats()
    assert stats["sessions"] == 1  # processed, answer lost
    assert stats["responses"]["/api/v1/create_session"] == {"0": 2}
    assert api.post("/api/v1/create_session", body).status_code == 200


def test_truncated_body(server: LocalServer) -> None:
    server.set_faults("path=/api/v1/get_server_capabilities,action=truncate,truncate_at=0.25")
    host, port = server.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/api/v1/get_server_capabilities")
    response = conn.getresponse()
    declared = int(response.headers["Content-Length"])
    with pytest.raises(http.client.IncompleteRead) as info:
        response.read()
    assert 0 < len(info.value.partial) < declared
    conn.close()


def test_added_latency(server: LocalServer, api: Api) -> None:
    server.set_faults("path=/api/v1/healthz,delay=0.3,count=1")
    started = time.perf_counter()
    assert api.get("/api/v1/healthz").status_code == 200
    assert time.perf_counter() - started >= 0.3
    assert server.stats()["faults"][0]["fired"] == 1


def test_control_endpoint_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINKER_LITE_LOCAL_FAULTS", raising=False)
    with LocalServer(stub_model=True) as url:
        api = Api(url)
        assert api.post("/_local/faults", {"spec": ""}).status_code == 404
        assert api.get("/_local/stats").status_code == 200
        api.close()
    monkeypatch.setenv("TINKER_LITE_LOCAL_FAULTS", "path=/api/v1/healthz,status=500,count=1")
    with LocalServer(stub_model=True) as url:
        api = Api(url)
        assert api.get("/api/v1/healthz").status_code == 500
        assert api.get("/api/v1/healthz").status_code == 200
        rules = api.get("/_local/faults").json()["rules"]
        assert rules[0]["fired"] == 1
        assert api.post("/_local/faults", {"spec": "path=/x,status=nope"}).status_code == 422
        replaced = api.post("/_local/faults", {"spec": "path=/api/v1/healthz,status=502"})
        assert replaced.json()["rules"][0]["fired"] == 0
        assert api.get("/api/v1/healthz").status_code == 502
        api.post("/_local/faults", {"spec": "path=*,status=500"})
        assert api.get("/api/v1/healthz").status_code == 500
        assert api.get("/_local/stats").status_code == 200  # the control plane is never broken
        assert api.post("/_local/faults", {"spec": ""}).json() == {"rules": []}
        assert api.get("/api/v1/healthz").status_code == 200
        api.close()


def test_a_burst_fires_on_the_matches_that_follow() -> None:
    injector = FaultInjector("path=/x,status=503,every=4,burst=3,count=5")
    fired = [injector.decide("request", "GET", "/x").rule is not None for _ in range(12)]
    # match 4 starts a burst (4, 5, 6), match 8 another, cut short by count=5 (8, 9)
    assert [m for m, hit in enumerate(fired, start=1) if hit] == [4, 5, 6, 8, 9]
    with pytest.raises(FaultSpecError, match="burst"):
        parse_fault_spec("path=/x,status=503,burst=0")


def test_each_rule_names_its_kind() -> None:
    spec = ";".join(
        [
            "status=503,burst=2",
            "status=429,retry_after_ms=250",
            "status=429,retry_after=1",
            "status=429,retry_after=1.5",
            "status=429,retry_after_date=2",
            "status=408,queue_state=paused_capacity",
            "action=try_again,queue_state=paused_rate_limit",
            "action=try_again,status=408,queue_state=active",
            "action=expire",
            "action=drop_before",
            "action=drop_after",
            "action=truncate",
            "delay=0.5",
        ]
    )
    assert [rule.kind for rule in parse_fault_spec(spec)] == [
        "503",
        "429:retry-after-ms",
        "429:retry-after-s",
        "429:retry-after-s",
        "429:retry-after-date",
        "408:paused_capacity",
        "try_again:paused_rate_limit",
        "try_again-408:active",
        "expire",
        "drop_before",
        "drop_after",
        "truncate",
        "delay",
    ]


def test_the_fault_plan_is_reproducible_and_drawn_per_rule() -> None:
    spec = (
        "path=/a,status=503,probability=0.1,seed=3;path=/b,action=drop_after,probability=0.1,seed=3"
    )
    plan = fault_plan(spec, 400)
    assert plan == fault_plan(spec, 400)  # same spec, same plan
    (_, on_a), (_, on_b) = plan
    assert 10 < len(on_a) < 80
    assert on_a != on_b  # the same seed in two rules does not make them fire together
    assert fault_plan(spec.replace("seed=3", "seed=4"), 400)[0][1] != on_a
    # a server evaluating the spec injects exactly the plan, whatever the order of requests
    injector = FaultInjector(spec)
    hits: dict[str, list[int]] = {"/a": [], "/b": []}
    order = ["/a", "/b", "/b", "/a", "/a", "/b", "/a"] * 200
    seen = {"/a": 0, "/b": 0}
    for path in order:
        seen[path] += 1
        if seen[path] > 400:
            continue
        if injector.decide("request", "POST", path).rule is not None:
            hits[path].append(seen[path])
    assert (hits["/a"], hits["/b"]) == (on_a, on_b)


def test_injected_faults_are_logged_with_their_kind(
    server: LocalServer, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tinker_lite.local.faults")
    server.set_faults(
        "path=/api/v1/healthz,status=429,retry_after_ms=100,count=1;"
        "path=/api/v1/healthz,delay=0.01,count=1"
    )
    assert api.get("/api/v1/healthz").status_code == 429
    assert api.get("/api/v1/healthz").status_code == 200
    logged = [r.getMessage() for r in caplog.records if r.name == "tinker_lite.local.faults"]
    assert logged == [
        "injected fault 429:retry-after-ms on GET /api/v1/healthz "
        "(rule 'path=/api/v1/healthz,status=429,retry_after_ms=100,count=1', match 1)",
        "injected fault delay on GET /api/v1/healthz "
        "(rule 'path=/api/v1/healthz,delay=0.01,count=1', match 1)",
    ]
    rules = api.get("/_local/faults").json()["rules"]
    assert [(r["kind"], r["fired"]) for r in rules] == [("429:retry-after-ms", 1), ("delay", 1)]


def test_requests_are_counted_per_client_tag(server: LocalServer, api: Api) -> None:
    before = time.time()
    for tag in ("wave-1", "wave-1", "train", None):
        headers = {"X-Local-Client": tag} if tag else {}
        assert api.get("/api/v1/healthz", headers=headers).status_code == 200
    clients = server.stats()["clients"]
    assert {tag: seen["requests"] for tag, seen in clients.items()} == {"wave-1": 2, "train": 1}
    assert before <= clients["wave-1"]["last_request_at"] <= clients["train"]["last_request_at"]
    assert clients["train"]["last_request_at"] <= time.time()
