"""RestClient without a ServiceClient, get_server_capabilities, and the ``access_scope`` query."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.clients import (  # noqa: F401 - fixtures used by name
    API_KEY,
    RUN,
    SESSION,
    FakeTinker,
    joined_threads_fixture,
)
from tests.support.golden import GOLDEN_038_DIR, load_golden
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Recorded,
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import APIFuture, InvalidInputError, RestClient, ServiceClient, types
from tinker_lite._transport.http import ClientClosedError
from tinker_lite.local import LocalServer

needs_golden = pytest.mark.skipif(
    not GOLDEN_038_DIR.is_dir(), reason="golden-0.38 fixtures not found"
)
CAPABILITIES = "/api/v1/get_server_capabilities"


@pytest.fixture
def fake(server: ScriptedServer) -> FakeTinker:
    fake = FakeTinker(server)
    server.default("GET", "/api/v1/sessions", Reply(200, {"sessions": [SESSION], "cursor": None}))
    server.default(
        "GET",
        f"/api/v1/sessions/{SESSION}",
        Reply(200, {"training_run_ids": [RUN], "sampler_ids": []}),
    )
    return fake


def _check_request(name: str, recorded: Recorded) -> None:
    """Method, query, body and x-sdk-method as in the golden-0.38 capture ``name``."""
    fixture = load_golden(name, version="0.38")
    assert recorded.method == fixture["method"], name
    assert recorded.query == fixture["query"], name
    assert recorded.body == b"", name
    assert fixture["body"] is None, name
    assert recorded.header("x-sdk-method") == fixture["headers"]["x-sdk-method"], name
    assert recorded.header("Content-Type") is None, name


@needs_golden
def test_standalone_client_opens_no_session(
    fake: FakeTinker, joined_threads: Callable[[], list[str]]
) -> None:
    rest = RestClient(base_url=fake.server.url, api_key=API_KEY, telemetry=False)
    assert fake.server.requests() == []  # nothing is sent before the first call
    future = rest.get_server_capabilities()
    assert isinstance(future, APIFuture)
    caps = future.result(timeout=30)
    assert isinstance(caps, types.GetServerCapabilitiesResponse)
    names = [m.model_name for m in caps.supported_models]
    assert names == ["Qwen/Qwen3-8B"]
    paths = [r.path for r in fake.server.requests()]
    assert paths == ["/api/v1/client/config", CAPABILITIES]
    (capabilities,) = fake.server.requests(CAPABILITIES)
    _check_request(
        "rest_client_init_get_server_capabilities__get_server_capabilities", capabilities
    )
    assert capabilities.header("X-API-Key") == API_KEY

    rest.close()
    rest.close()  # idempotent
    assert not any(r.path.endswith("/finish") for r in fake.server.requests())
    with pytest.raises(ClientClosedError):
        rest.list_training_runs()
    assert [t for t in joined_threads() if t.startswith("tinker-lite")] == []


def test_standalone_client_on_the_local_server(
    clean_env: None, joined_threads: Callable[[], list[str]]
) -> None:
    with LocalServer() as url:
        with ServiceClient(base_url=url, telemetry=False) as service:
            trainer = service.create_lora_training_client("tinker-lite/tiny-64", rank=2).result()
            path = trainer.save_state("first").result(timeout=60).path
        with RestClient(base_url=url) as rest:
            caps = rest.get_server_capabilities().result(timeout=60)
            assert "tinker-lite/tiny-64" in {m.model_name for m in caps.supported_models}
            runs = rest.list_training_runs().result(timeout=60).training_runs
            assert trainer.model_id in [r.training_run_id for r in runs]
            run = rest.get_training_run_by_tinker_path(path, access_scope="accessible")
            assert run.result(timeout=60).training_run_id == trainer.model_id
            sessions = rest.list_sessions(access_scope="accessible").result(timeout=60)
            assert service.session_id in sessions.sessions
            detail = rest.get_session(str(service.session_id)).result(timeout=60)
            assert detail.training_run_ids == [trainer.model_id]
            # A REST-only client is not a session: the server still knows only one.
            assert rest.list_sessions().result(timeout=60).sessions == sessions.sessions
    assert [t for t in joined_threads() if t.startswith("tinker-lite")] == []


def test_local_url_starts_and_stops_an_offline_server(
    clean_env: None, joined_threads: Callable[[], list[str]]
) -> None:
    rest = RestClient(base_url="local://")
    try:
        assert rest.get_server_capabilities().result(timeout=60).supported_models
        assert rest.list_training_runs().result(timeout=60).training_runs == []
    finally:
        rest.close()
    with pytest.raises(ClientClosedError):
        rest.get_server_capabilities()
    assert joined_threads() == []


def test_a_rest_client_of_a_service_client_leaves_it_open(fake: FakeTinker) -> None:
    with ServiceClient(base_url=fake.server.url, api_key=API_KEY, telemetry=False) as service:
        with RestClient(service) as rest:
            caps = rest.get_server_capabilities().result(timeout=30)
            assert caps.supported_models[0].model_name == "Qwen/Qwen3-8B"
        assert not service.closed
        RestClient(service).list_training_runs().result(timeout=30)
    (capabilities,) = fake.server.requests(CAPABILITIES)
    assert capabilities.header("x-sdk-method") == "RestClient.get_server_capabilities"
    # golden-0.38 README: REST calls of a ServiceClient create no session either.
    assert fake.server.requests("/api/v1/create_session") == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"api_key": "k"}, "api_key"),
        ({"base_url": "http://x"}, "base_url"),
        ({"verify": False}, "verify"),
    ],
)
def test_service_and_settings_do_not_mix(
    fake: FakeTinker, kwargs: dict[str, Any], field: str
) -> None:
    with ServiceClient(base_url=fake.server.url, api_key=API_KEY, telemetry=False) as service:
        with pytest.raises(InvalidInputError) as info:
            RestClient(service, **kwargs)
        assert info.value.field == field


def _rest(fake: FakeTinker) -> RestClient:
    return RestClient(base_url=fake.server.url, api_key=API_KEY, telemetry=False)


@needs_golden
def test_access_scope_defaults_to_owned(fake: FakeTinker) -> None:
    with _rest(fake) as rest:
        rest.list_training_runs().result(timeout=30)
        rest.get_training_run(RUN).result(timeout=30)
        rest.list_sessions().result(timeout=30)
        rest.get_session(SESSION).result(timeout=30)
    requests = fake.server.requests
    (list_runs,) = requests("/api/v1/training_runs")
    _check_request("rest_list_training_runs_default", list_runs)
    (get_run,) = requests(f"/api/v1/training_runs/{RUN}")
    _check_request("rest_get_training_run", get_run)
    (list_sessions,) = requests("/api/v1/sessions")
    _check_request("rest_list_sessions", list_sessions)
    (get_session,) = requests(f"/api/v1/sessions/{SESSION}")
    _check_request("rest_get_session", get_session)


def test_access_scope_accessible_and_none(fake: FakeTinker) -> None:
    with _rest(fake) as rest:
        rest.list_training_runs(5, 10, "accessible").result(timeout=30)
        rest.get_training_run(RUN, access_scope="accessible").result(timeout=30)
        rest.get_training_run_by_tinker_path(
            f"tinker://{RUN}/weights/ckpt-001", access_scope="accessible"
        ).result(timeout=30)
        rest.list_sessions(access_scope="accessible").result(timeout=30)
        rest.get_session(SESSION, access_scope="accessible").result(timeout=30)
        # None leaves the parameter out (services that predate access scopes).
        rest.list_training_runs(access_scope=None).result(timeout=30)
        rest.get_session(SESSION, access_scope=None).result(timeout=30)
    queries = [
        (r.path, r.query)
        for r in fake.server.requests()
        if r.path.startswith("/api/v1/") and r.method == "GET"
    ]
    assert queries == [
        ("/api/v1/training_runs", {"limit": "5", "offset": "10", "access_scope": "accessible"}),
        (f"/api/v1/training_runs/{RUN}", {"access_scope": "accessible"}),
        (f"/api/v1/training_runs/{RUN}", {"access_scope": "accessible"}),
        ("/api/v1/sessions", {"limit": "20", "offset": "0", "access_scope": "accessible"}),
        (f"/api/v1/sessions/{SESSION}", {"access_scope": "accessible"}),
        ("/api/v1/training_runs", {"limit": "20", "offset": "0"}),
        (f"/api/v1/sessions/{SESSION}", {}),
    ]


@pytest.mark.parametrize(
    "call",
    [
        lambda rest: rest.list_training_runs(access_scope="all"),
        lambda rest: rest.get_training_run(RUN, access_scope="Owned"),
        lambda rest: rest.list_sessions(access_scope=1),
        lambda rest: rest.get_session(SESSION, access_scope=""),
        lambda rest: rest.get_training_run_by_tinker_path(
            f"tinker://{RUN}/weights/ckpt-001", access_scope="mine"
        ),
    ],
)
def test_bad_access_scope_is_refused_before_sending(
    fake: FakeTinker, call: Callable[[RestClient], Any]
) -> None:
    with _rest(fake) as rest:
        with pytest.raises(InvalidInputError) as info:
            call(rest)
        assert info.value.field == "access_scope"
    assert fake.server.requests() == []
