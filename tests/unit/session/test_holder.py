"""Session holder tests: settings, start-up sequence, JWT, heartbeat, counters, gate, close."""

from __future__ import annotations

import base64
import gc
import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.holder import holder_from, requestor_of
from tests.support.scripted_server import (  # noqa: F401 - fixtures are used by name
    API_KEY,
    FakeClock,
    Hang,
    Reply,
    Respond,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import types
from tinker_lite._errors import (
    AuthenticationError,
    BadRequestError,
    InternalServerError,
    InvalidInputError,
)
from tinker_lite._session.credentials import jwt_expiry
from tinker_lite._session.holder import SessionHolder
from tinker_lite._session.sample_gate import SampleGate, sample_gate_for
from tinker_lite._session.settings import DEFAULT_BASE_URL, resolve_settings
from tinker_lite._transport.http import ClientClosedError, PoolKind, Timeout

CONFIG = "/api/v1/client/config"
TOKEN = "/api/v1/auth/token"
CREATE = "/api/v1/create_session"
DYNAMIC = "/api/v1/client/dynamic_config"
HEARTBEAT = "/api/v1/session_heartbeat"
TELEMETRY = "/api/v1/telemetry"
FINISH = "/api/v1/sessions/sess-1/finish"
WALL = 1_795_654_882.0


def make_jwt(exp: float, jti: str = "1") -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part({'exp': exp, 'jti': jti})}."


def script_service(
    server: ScriptedServer,
    *,
    config: Reply | None = None,
    session: dict[str, Any] | None = None,
) -> None:
    server.default("POST", CONFIG, config or Reply(200, {"proto_write_fwdbwd": False}))
    server.default("POST", DYNAMIC, Reply(200, {"refresh_interval_sec": 300.0}))
    server.default("POST", CREATE, Reply(200, session or {"session_id": "sess-1"}))
    server.default("POST", HEARTBEAT, Reply(200, {"type": "session_heartbeat"}))
    server.default("POST", TELEMETRY, Reply(200, {"status": "accepted"}))
    server.default("POST", FINISH, Reply(204))


_OUR_THREADS = (
    "tinker-lite-poll",
    "tinker-lite-heartbeat",
    "tinker-lite-telemetry",
    "tinker-lite-dynamic-config",
)


def new_transport_threads(before: set[threading.Thread]) -> list[str]:
    """Names of transport threads started since ``before`` that are still alive."""
    return [
        t.name for t in threading.enumerate() if t not in before and t.name.startswith(_OUR_THREADS)
    ]


@pytest.fixture
def make_holder(server: ScriptedServer) -> Iterator[Callable[..., SessionHolder]]:
    made: list[SessionHolder] = []
    before = set(threading.enumerate())

    def make(**kwargs: Any) -> SessionHolder:
        options: dict[str, Any] = {
            "api_key": API_KEY,
            "base_url": server.url,
            "telemetry": False,
            "sleep": lambda s: None,
        }
        options.update(kwargs)
        holder = holder_from(**options)
        made.append(holder)
        return holder

    yield make
    for holder in made:
        holder.close(timeout=5)
    assert new_transport_threads(before) == []


# -- settings -------------------------------------------------------------------------------


def test_explicit_arguments_beat_environment_beat_defaults() -> None:
    env = {
        "TINKER_API_KEY": "tml-env-key",
        "TINKER_BASE_URL": "https://env.example/prefix",
        "TINKER_PROJECT_ID": "proj-env",
        "TINKER_TAGS": "a,b,a, ,c",
        "TINKER_LITE_SDK_VERSION": "0.99.0",
        "TINKER_LITE_STALL_TIMEOUT": "12.5",
        "CLOUDFLARE_ACCESS_CLIENT_ID": "cf-id",
        "CLOUDFLARE_ACCESS_CLIENT_SECRET": "cf-secret",
        "TINKER_TELEMETRY": "0",
    }
    from_env = resolve_settings(environ=env)
    assert from_env.api_key == "tml-env-key"
    assert from_env.base_url == "https://env.example/prefix"
    assert from_env.project_id == "proj-env"
    assert from_env.tags == ("a", "b", "c")
    assert from_env.sdk_version == "0.99.0"
    assert from_env.stall_timeout == 12.5
    assert from_env.telemetry is False
    assert from_env.cloudflare_headers == {
        "CF-Access-Client-Id": "cf-id",
        "CF-Access-Client-Secret": "cf-secret",
    }
    explicit = resolve_settings(
        api_key="tml-arg-key",
        base_url="https://arg.example",
        project_id="proj-arg",
        tags=["x"],
        stall_timeout=3,
        telemetry=True,
        environ=env,
    )
    # docs/protocol.rst §2.2: api_key= wins over TINKER_API_KEY.
    assert explicit.api_key == "tml-arg-key"
    assert explicit.base_url == "https://arg.example"
    assert (explicit.project_id, explicit.tags, explicit.stall_timeout) == ("proj-arg", ("x",), 3.0)
    defaults = resolve_settings(environ={"TINKER_API_KEY": "k", "TINKER_BASE_URL": ""})
    assert defaults.base_url == DEFAULT_BASE_URL
    assert defaults.stall_timeout == 300.0
    assert defaults.tags == ()
    assert defaults.project_id is None
    assert defaults.telemetry is True
    assert defaults.wire == "auto"
    assert "tml-env-key" not in repr(from_env)
    assert "cf-secret" not in repr(from_env)


def test_bad_keys_and_missing_keys_are_rejected() -> None:
    with pytest.raises(InvalidInputError) as info:
        resolve_settings(api_key="tml abc", environ={})
    assert info.value.field == "api_key"
    assert "tml abc" not in str(info.value)
    with pytest.raises(InvalidInputError) as info:
        resolve_settings(environ={"TINKER_API_KEY": "tml-abc\n"})
    assert info.value.field == "TINKER_API_KEY"
    with pytest.raises(InvalidInputError) as info:
        resolve_settings(environ={})
    assert "TINKER_API_KEY" in str(info.value)
    assert "api_key" in str(info.value)
    local = resolve_settings(base_url="http://127.0.0.1:9", environ={})
    assert local.api_key is None


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "nan", ""])
def test_stall_timeout_env_is_validated(raw: str) -> None:
    env = {"TINKER_API_KEY": "k", "TINKER_LITE_STALL_TIMEOUT": raw}
    if raw == "":
        assert resolve_settings(environ=env).stall_timeout == 300.0
        return
    with pytest.raises(InvalidInputError) as info:
        resolve_settings(environ=env)
    assert info.value.field == "TINKER_LITE_STALL_TIMEOUT"


@pytest.mark.parametrize("value", [0, -5.0, "soon", float("nan"), True])
def test_stall_timeout_argument_is_validated(value: Any) -> None:
    with pytest.raises(InvalidInputError) as info:
        resolve_settings(api_key="k", stall_timeout=value, environ={})
    assert info.value.field == "stall_timeout"


def test_the_whole_options_value_never_shows_secrets() -> None:
    env = {"CLOUDFLARE_ACCESS_CLIENT_SECRET": "cf-secret-value", "TINKER_LITE_JOURNAL": " j.jsonl "}
    settings = resolve_settings(
        api_key="tml-secret-key",
        base_url="https://arg.example",
        default_headers={"Authorization": "Bearer header-secret"},
        user_metadata={"team": "a"},
        display_name="run-1",
        sample_workers=3,
        max_retries=2,
        environ=env,
    )
    shown = repr(settings)
    for secret in ("tml-secret-key", "cf-secret-value", "header-secret"):
        assert secret not in shown
    assert "'Authorization'" in shown
    assert "sample_workers=3" in shown
    assert settings.default_headers == {"Authorization": "Bearer header-secret"}
    assert (settings.user_metadata, settings.display_name) == ({"team": "a"}, "run-1")
    assert (settings.sample_workers, settings.max_retries) == (3, 2)
    assert settings.journal == "j.jsonl"  # TINKER_LITE_JOURNAL, read here once


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"sample_workers": 0}, "sample_workers"),
        ({"sample_workers": True}, "sample_workers"),
        ({"max_retries": -1}, "max_retries"),
        ({"user_metadata": ["a"]}, "user_metadata"),
        ({"display_name": 3}, "display_name"),
    ],
)
def test_bad_client_options_name_their_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        resolve_settings(api_key="k", environ={}, **options)
    assert info.value.field == field


def test_local_base_url_is_kept_for_the_context_to_start() -> None:
    settings = resolve_settings(base_url=" LOCAL://x ", allow_local=True, environ={})
    assert settings.is_local
    assert settings.base_url == "local://"
    assert settings.api_key is None
    started = settings.with_base_url("http://127.0.0.1:9")
    assert not started.is_local
    assert started.base_url == "http://127.0.0.1:9"
    from_env = resolve_settings(allow_local=True, environ={"TINKER_BASE_URL": "local://"})
    assert from_env.is_local


def test_invalid_wire_and_urls() -> None:
    with pytest.raises(InvalidInputError):
        resolve_settings(api_key="k", wire="xml", environ={})
    with pytest.raises(InvalidInputError):
        resolve_settings(api_key="k", base_url="local://", environ={})


def test_plain_http_to_a_remote_host_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tinker_lite.session"):
        resolve_settings(api_key="k", base_url="http://remote.example/once", environ={})
        resolve_settings(api_key="k", base_url="http://remote.example/once", environ={})
        resolve_settings(api_key="k", base_url="http://127.0.0.1:1", environ={})
        resolve_settings(api_key="k", verify=False, environ={})
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("plain http://" in m for m in messages) == 1
    assert sum("verification is disabled" in m for m in messages) == 1


def test_jwt_expiry() -> None:
    assert jwt_expiry(make_jwt(123.0)) == 123.0
    assert jwt_expiry("not-a-jwt") is None
    assert jwt_expiry("a.!!!.c") is None


# -- start-up ---------------------------------------------------------------------------------


def test_startup_sends_client_config_then_create_session(
    server: ScriptedServer,
    make_holder: Callable[..., SessionHolder],
    caplog: pytest.LogCaptureFixture,
) -> None:
    script_service(
        server,
        config=Reply(200, {"sample_max_concurrent_requests": 123, "fwdbwd_max_chunk_len": 64}),
        session={
            "session_id": "sess-1",
            "info_message": "hello",
            "warning_message": "careful",
            "error_message": "broken",
        },
    )
    with caplog.at_level(logging.INFO, logger="tinker_lite.session"):
        holder = make_holder(
            user_metadata={"run": "r1"}, tags=["t1"], project_id="proj-1", sdk_version="0.38.0"
        )
    assert holder.session_id == "sess-1"
    assert [r.path for r in server.requests()][:3] == [CONFIG, DYNAMIC, CREATE]
    config, _, create = server.requests()[:3]
    assert config.body == b'{"sdk_version":"0.38.0"}'
    assert create.json() == {
        "tags": ["t1"],
        "user_metadata": {"run": "r1"},
        "sdk_version": "0.38.0",
        "project_id": "proj-1",
        "type": "create_session",
    }
    for r in (config, create):
        assert r.header("X-API-Key") == API_KEY
        assert r.header("Content-Type") == "application/json"
        key = r.header("X-Idempotency-Key")
        assert key is not None
        assert key.startswith("tinker-lite-retry-")
    assert holder.client_config.fwdbwd_max_chunk_len == 64
    assert holder.client_config_from_server
    assert holder.wire_format == "protobuf"
    assert holder.sample_gate.limit == 123
    assert holder.poller.max_workers == 123 + 32
    levels = {r.getMessage(): r.levelno for r in caplog.records}
    assert levels["hello"] == logging.INFO
    assert levels["careful"] == logging.WARNING
    assert levels["broken"] == logging.ERROR


def test_default_create_session_body_matches_golden(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    script_service(server)
    make_holder(sdk_version="0.38.0")
    assert server.requests(CREATE)[0].json() == {
        "tags": [],
        "user_metadata": {},
        "sdk_version": "0.38.0",
        "type": "create_session",
    }


@pytest.mark.parametrize("answer", [Reply(404, {"detail": "Not Found"}), Reply(500)])
def test_missing_client_config_falls_back_to_defaults(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder], answer: Reply
) -> None:
    script_service(server, config=answer)
    holder = make_holder(wire="auto")
    assert holder.client_config == types.ClientConfigResponse()
    assert not holder.client_config_from_server
    assert holder.wire_format == "json"
    assert holder.session_id == "sess-1"
    expected = 1 if answer.status == 404 else 3  # 500: two start-up retries
    assert len(server.requests(CONFIG)) == expected


def test_session_less_and_lazy_holders(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    script_service(server)
    lazy = make_holder(lazy=True)
    assert server.requests() == []
    rest = make_holder(create_session=False)
    assert rest.session_id is None
    assert [r.path for r in server.requests()] == [CONFIG, DYNAMIC]
    assert lazy.session_id == "sess-1"
    assert [r.path for r in server.requests()] == [CONFIG, DYNAMIC, CONFIG, DYNAMIC, CREATE]
    rest.close()
    assert server.requests(FINISH) == []


def test_failed_startup_leaves_no_thread(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    script_service(server)
    server.on("POST", CREATE, Reply(400, {"detail": "sdk too old"}))
    before = set(threading.enumerate())
    with pytest.raises(BadRequestError):
        make_holder()
    assert new_transport_threads(before) == []


# -- JWT --------------------------------------------------------------------------------------


def test_jwt_exchange_refresh_before_expiry_and_after_401(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    first, second, third = (
        make_jwt(WALL + 3600, "1"),
        make_jwt(WALL + 7200, "2"),
        make_jwt(WALL + 9000, "3"),
    )
    script_service(server, config=Reply(200, {"pjwt_auth_enabled": True}))
    server.on(
        "POST",
        TOKEN,
        Reply(200, {"jwt": first}),
        Reply(200, {"jwt": second}),
        Reply(200, {"jwt": third}),
    )
    server.on(
        "POST", "/api/v1/get_info", Reply(200, {}), Reply(401, {"detail": "stale"}), Reply(200, {})
    )
    wall = [WALL]
    holder = make_holder(wall_clock=lambda: wall[0])
    assert holder.uses_jwt
    config, token, dynamic, create = server.requests()[:4]
    assert (config.path, token.path, dynamic.path, create.path) == (CONFIG, TOKEN, DYNAMIC, CREATE)
    assert config.header("X-API-Key") == API_KEY
    assert token.header("X-API-Key") == API_KEY
    assert token.body == b"{}"
    assert dynamic.header("X-API-Key") == first
    assert create.header("X-API-Key") == first

    # Within 5 minutes of `exp` the JWT is refreshed before the request is sent.
    wall[0] = WALL + 3600 - 200
    requestor_of(holder).call(
        "POST", "/api/v1/get_info", body_obj={"model_id": "m"}, operation_retries=False
    )
    assert server.requests(TOKEN)[1].header("X-API-Key") == API_KEY
    assert server.requests("/api/v1/get_info")[0].header("X-API-Key") == second

    # A 401 refreshes once and re-sends once.
    requestor_of(holder).call(
        "POST", "/api/v1/get_info", body_obj={"model_id": "m"}, operation_retries=False
    )
    infos = server.requests("/api/v1/get_info")
    assert [r.header("X-API-Key") for r in infos[1:]] == [second, third]
    assert len(server.requests(TOKEN)) == 3


def test_jwt_401_that_persists_surfaces_as_authentication_error(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    script_service(server, config=Reply(200, {"pjwt_auth_enabled": True}))
    issued = iter(range(1, 100))
    server.default(
        "POST",
        TOKEN,
        Respond(lambda _: Reply(200, {"jwt": make_jwt(WALL + 3600, str(next(issued)))})),
    )
    server.default("POST", "/api/v1/get_info", Reply(401, {"detail": "no"}))
    holder = make_holder(wall_clock=lambda: WALL)
    with pytest.raises(AuthenticationError) as info:
        requestor_of(holder).call(
            "POST", "/api/v1/get_info", body_obj={"model_id": "m"}, operation_retries=False
        )
    assert API_KEY not in str(info.value)
    assert len(server.requests("/api/v1/get_info")) == 2


def test_jwt_refresh_without_an_api_key_sends_no_credential_and_does_not_hang(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    first, second = make_jwt(WALL + 3600, "1"), make_jwt(WALL + 7200, "2")
    script_service(server, config=Reply(200, {"pjwt_auth_enabled": True}))
    server.on("POST", TOKEN, Reply(200, {"jwt": first}), Reply(200, {"jwt": second}))
    server.default("POST", "/api/v1/get_info", Reply(200, {}))
    wall = [WALL]
    holder = make_holder(api_key=None, wall_clock=lambda: wall[0])
    wall[0] = WALL + 3600 - 200
    sender = threading.Thread(
        target=requestor_of(holder).call,
        args=("POST", "/api/v1/get_info"),
        kwargs={"body_obj": {"model_id": "m"}, "operation_retries": False},
        daemon=True,
    )
    sender.start()
    sender.join(30)
    try:
        assert not sender.is_alive(), "the JWT refresh hung"
    finally:
        wall[0] = WALL
    # The refresh is authenticated like the first exchange (no API key here), never by the JWT.
    assert [r.header("X-API-Key") for r in server.requests(TOKEN)] == [None, None]
    assert server.requests("/api/v1/get_info")[0].header("X-API-Key") == second


# -- requests -------------------------------------------------------------------------------


def test_request_and_submit(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    script_service(server)
    clock = FakeClock()
    holder = make_holder(sleep=clock.sleep, clock=clock, rand=lambda: 0.0)
    server.on("POST", "/api/v1/optim_step", *[Reply(503)] * 11, Reply(200, {"request_id": "r1"}))
    resp = requestor_of(holder).call(
        "POST",
        "/api/v1/optim_step",
        body_obj={"model_id": "m", "seq_id": 3},
        sdk_method="TrainingClient.optim_step",
    )
    assert resp.json() == {"request_id": "r1"}
    sent = server.requests("/api/v1/optim_step")
    assert len(sent) == 12
    assert {r.body for r in sent} == {b'{"model_id":"m","seq_id":3}'}
    # Layer A reuses its key for its 11 attempts; the Layer-B re-send has a new one.
    assert len({r.header("X-Idempotency-Key") for r in sent[:11]}) == 1
    assert sent[11].header("X-Idempotency-Key") != sent[0].header("X-Idempotency-Key")
    assert sent[0].header("x-sdk-method") == "TrainingClient.optim_step"
    assert sent[0].header("x-sdk-version") == holder.settings.sdk_version
    assert clock.sleeps == [0.5, 1, 2, 4, 8, 10, 10, 10, 10, 10, 1]

    server.on("POST", "/api/v1/heartbeatish", Reply(503))
    with pytest.raises(InternalServerError):
        requestor_of(holder).call(
            "POST", "/api/v1/heartbeatish", pool=PoolKind.SESSION, body=b"{}", retry=False
        )
    assert len(server.requests("/api/v1/heartbeatish")) == 1
    with pytest.raises(InvalidInputError):
        requestor_of(holder).call("POST", "/x", body=b"{}", body_obj={})


def test_counters_are_thread_safe(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    script_service(server)
    holder = make_holder()
    got: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        values = [holder.get_training_client_id() for _ in range(500)]
        with lock:
            got.extend(values)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(4000))
    assert [holder.next_sampling_session_seq_id() for _ in range(3)] == [0, 1, 2]


def test_sample_gate_is_shared_per_base_url_and_key() -> None:
    a = sample_gate_for("http://h:1/", "k1")
    assert sample_gate_for("http://h:1", "k1") is a
    assert sample_gate_for("http://h:1", "k2") is not a
    assert sample_gate_for("http://h:2", "k1") is not a
    clock = FakeClock()
    gate = SampleGate(2, clock=clock)
    gate.hold(2.5)
    gate.hold(1.0)  # a shorter hold never shortens the window
    assert gate.backoff_remaining() == 2.5
    clock.advance(2.5)
    assert gate.backoff_remaining() == 0
    assert gate.acquire(timeout=0)
    assert gate.acquire(timeout=0)
    assert not gate.acquire(timeout=0)
    gate.release()
    assert gate.in_flight == 1


# -- heartbeat ------------------------------------------------------------------------------


def test_heartbeat_keeps_its_cadence_while_400_samples_are_in_flight(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    script_service(server)
    release = threading.Event()
    server.default("POST", "/api/v1/asample", Hang(release))
    holder = make_holder(heartbeat_interval=0.02)
    errors: list[BaseException] = []

    def sample() -> None:
        try:
            requestor_of(holder).call(
                "POST",
                "/api/v1/asample",
                pool=PoolKind.SAMPLE,
                body_obj={"num_samples": 1},
                headers={"X-Tinker-Sampling-Backpressure": "1"},
                retry=False,
                timeout=Timeout(connect=5, read=30),
            )
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=sample) for _ in range(400)]
    for t in threads:
        t.start()
    try:
        server.wait_for("/api/v1/asample", 400, timeout=60)
        before = len(server.requests(HEARTBEAT))
        server.wait_for(HEARTBEAT, before + 10, timeout=30)
    finally:
        release.set()
        for t in threads:
            t.join(30)
    beats = server.requests(HEARTBEAT)
    assert beats[0].json() == {"session_id": "sess-1", "type": "session_heartbeat"}
    assert beats[0].header("x-stainless-read-timeout") == "10"
    assert all(isinstance(e, Exception) for e in errors)  # hung samples end with an error


def test_heartbeat_warns_after_120_seconds_of_failures(
    server: ScriptedServer,
    make_holder: Callable[..., SessionHolder],
    caplog: pytest.LogCaptureFixture,
) -> None:
    script_service(server)
    server.default("POST", HEARTBEAT, Reply(500))
    clock = FakeClock()
    waits: list[float] = []
    done = threading.Event()

    def fake_wait(delay: float) -> bool:
        waits.append(delay)
        if len(waits) > 14:
            done.set()
            return True  # stop the heartbeat thread
        clock.advance(delay)
        return False

    with caplog.at_level(logging.WARNING, logger="tinker_lite.session"):
        holder = make_holder(clock=clock, heartbeat_wait=fake_wait)
        assert done.wait(10)
        hb = holder._heartbeat_ref[0]
        assert hb is not None
        hb.thread.join(5)
    assert waits[:14] == [10.0] * 14  # the 10 s cadence
    assert len(server.requests(HEARTBEAT)) == 14
    warnings = [r.getMessage() for r in caplog.records if "heartbeat failed" in r.getMessage()]
    assert [w.split(" seconds")[0][-3:] for w in warnings] == ["130", "140"]
    assert "sess-1" in warnings[0]
    assert "HTTP 500" in warnings[0]


def test_heartbeat_stops_on_410(
    server: ScriptedServer,
    make_holder: Callable[..., SessionHolder],
    caplog: pytest.LogCaptureFixture,
) -> None:
    script_service(server)
    server.default("POST", HEARTBEAT, Reply(410, {"detail": "gone"}))
    with caplog.at_level(logging.WARNING, logger="tinker_lite.session"):
        holder = make_holder(heartbeat_interval=0.01)
        hb = holder._heartbeat_ref[0]
        assert hb is not None
        hb.thread.join(10)
    assert not hb.thread.is_alive()
    assert hb.expired
    assert len(server.requests(HEARTBEAT)) == 1
    assert any("expired" in r.getMessage() for r in caplog.records)


# -- close ----------------------------------------------------------------------------------


def test_close_finishes_the_session_and_joins_every_thread(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    script_service(server)
    server.default("POST", "/api/v1/retrieve_future", Hang())
    before = set(threading.enumerate())
    holder = make_holder(telemetry=True, heartbeat_interval=0.01)
    server.wait_for(HEARTBEAT, 1)
    future = holder.poller.poll("req-1", "OptimStep", lambda r: r.json(), created_at=0.0)
    server.wait_for("/api/v1/retrieve_future", 1)
    holder.close(sdk_method="ServiceClient.close")
    holder.close()
    finish = server.requests(FINISH)
    assert len(finish) == 1
    assert finish[0].body == b'{"reason":{"type":"success"},"detail":null}'
    assert finish[0].header("x-sdk-method") == "ServiceClient.close"
    assert isinstance(future.exception(timeout=5), ClientClosedError)
    assert new_transport_threads(before) == []
    events = [e["event"] for r in server.requests(TELEMETRY) for e in r.json()["events"]]
    assert events == ["SESSION_START", "SESSION_END"]
    with pytest.raises(ClientClosedError):
        requestor_of(holder).call("GET", "/api/v1/healthz", operation_retries=False)


def test_close_during_startup_starts_no_thread(
    server: ScriptedServer,
    make_holder: Callable[..., SessionHolder],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script_service(server)
    before = set(threading.enumerate())
    holder = make_holder(lazy=True, telemetry=True)
    create_session = holder._create_session

    def create_then_close() -> str:
        session_id = create_session()
        holder.close()
        return session_id

    monkeypatch.setattr(holder, "_create_session", create_then_close)
    with pytest.raises(ClientClosedError):
        holder.ensure_session()
    assert new_transport_threads(before) == []


def test_close_reports_errors_and_404_finish_is_ignored(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    script_service(server)
    server.default("POST", FINISH, Reply(404, {"detail": "Not Found"}))
    holder = make_holder()
    holder.close("errored", "RuntimeError")
    assert server.requests(FINISH)[0].json() == {
        "reason": {"type": "errored"},
        "detail": "RuntimeError",
    }
    with pytest.raises(InvalidInputError):
        make_holder().close("done")  # type: ignore[arg-type]


def test_holders_for_different_base_urls_coexist(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder]
) -> None:
    script_service(server)
    with ScriptedServer() as other:
        script_service(other, session={"session_id": "sess-2"})
        other.default("POST", "/api/v1/sessions/sess-2/finish", Reply(204))
        a = make_holder()
        b = make_holder(base_url=other.url, api_key="tml-other-key")
        assert (a.session_id, b.session_id) == ("sess-1", "sess-2")
        assert a.sample_gate is not b.sample_gate
        b.close()
    assert [r.header("X-API-Key") for r in server.requests(CREATE)] == [API_KEY]


def test_an_unclosed_holder_can_be_collected(server: ScriptedServer) -> None:
    script_service(server)
    before = set(threading.enumerate())
    holder = holder_from(api_key=API_KEY, base_url=server.url, telemetry=True)
    assert "tinker-lite-heartbeat" in new_transport_threads(before)
    del holder
    gc.collect()
    assert new_transport_threads(before) == []


def test_api_key_never_in_logs_reprs_or_errors(
    server: ScriptedServer,
    make_holder: Callable[..., SessionHolder],
    caplog: pytest.LogCaptureFixture,
) -> None:
    script_service(server, config=Reply(500, {"detail": f"boom {API_KEY}"}))
    server.on("POST", CREATE, Reply(401, {"detail": f"key {API_KEY} is not valid"}))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AuthenticationError) as info:
        make_holder()
    texts = [str(info.value), repr(info.value)] + [r.getMessage() for r in caplog.records]
    script_service(server)
    holder = make_holder()
    texts += [
        repr(holder),
        repr(holder.settings),
        repr(holder._api),
        repr(requestor_of(holder).transport),
        repr(holder.poller),
    ]
    assert all(API_KEY not in text for text in texts)


# -- golden fixtures ------------------------------------------------------------------------


def _golden(shared_dir: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((shared_dir / "wire" / name).read_text())
    return data


def test_startup_poll_and_close_match_the_golden_requests(
    server: ScriptedServer, make_holder: Callable[..., SessionHolder], shared_dir: Path
) -> None:
    script_service(server)
    server.on("POST", "/api/v1/retrieve_future", Reply(200, {"model_id": "m"}))
    holder = make_holder(sdk_version="0.38.0", heartbeat_interval=0.01)
    future = holder.poller.poll("req-000001", "CreateModel", lambda r: r.json(), created_at=0.0)
    future.result(timeout=10)
    server.wait_for(HEARTBEAT, 1)
    holder.close(sdk_method="ServiceClient.close")
    sent = {r.path: r for r in server.requests()}
    for name, path in [
        ("golden-0.38/create_lora_training_client_defaults__client_config.json", CONFIG),
        ("golden-0.38/create_lora_training_client_defaults__create_session.json", CREATE),
        ("golden-0.38/create_lora_training_client_defaults__retrieve_future.json", None),
        ("golden-0.38/service_client_close.json", FINISH),
        ("golden-0.38/background_heartbeat_telemetry__session_heartbeat.json", None),
    ]:
        golden = _golden(shared_dir, name)
        request = sent[path or golden["path"]]
        assert request.method == golden["method"]
        if "retrieve_future" in name:
            # docs/protocol.rst §5.4: the first poll allows a metadata-only answer, as 0.38's does.
            assert request.json() == golden["body"]
        elif "heartbeat" in name:
            assert request.json() == {**golden["body"], "session_id": "sess-1"}
        else:
            assert request.json() == golden["body"]
        # User-Agent is tinker_lite's own; x-sdk-* are the clients' business (except on close);
        # close() bounds its finish request, so its read timeout differs from 0.38's 60 s.
        skipped = {"user-agent", "x-sdk-version"}
        if path != FINISH:
            skipped.add("x-sdk-method")
        else:
            skipped.add("x-stainless-read-timeout")
        volatile = {h.lower() for h in golden["volatile_headers"]}
        for header, value in golden["headers"].items():
            lower = header.lower()
            if lower in skipped:
                continue
            got = request.header(header)
            assert got is not None, (name, header)
            if lower == "x-api-key":
                assert got == API_KEY
            elif lower not in volatile:
                assert got == value, (name, header)
