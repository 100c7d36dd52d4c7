"""The official 0.38 REST surface: RestClient's new calls, AdminClient, ServiceClient's REST-side
methods, deprecations, and the top-level helpers (Timeout, RequestOptions, auth).

End to end against the local server (real state: runs, checkpoints, sessions, audit log,
billing ledger), plus a scripted server where the exact request matters (idempotency key,
query parameters, create_model's optimizer, trace export polling).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests

import tinker_lite
from tests.support.clients import API_KEY, RUN, SESSION, FakeTinker, ce_datum
from tests.support.local_server import Api
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Recorded,
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import (
    AdminClient,
    APIError,
    APITimeoutError,
    AuthenticationError,
    ExperimentalWarning,
    InvalidInputError,
    NotFoundError,
    RestClient,
    ServiceClient,
    TinkerError,
    types,
)
from tinker_lite._context import ClientContext
from tinker_lite._session.settings import resolve_settings
from tinker_lite.local import LocalServer
from tinker_lite.local.service.identity import LOCAL_ORG_ID, LOCAL_USER_URN

MODEL = "tinker-lite/tiny-64"
HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def local() -> Iterator[dict[str, Any]]:
    """One local server with a session that trained, saved a state and a sampler checkpoint."""
    with ServiceClient(
        base_url="local://",
        project_id="proj-a",
        display_name="nightly sweep",
        user_metadata={"team": "blue"},
        telemetry=False,
    ) as service:
        trainer = service.create_lora_training_client(MODEL, rank=2).result()
        trainer.forward_backward([ce_datum([1, 2, 3, 4])], "cross_entropy")
        trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result(timeout=60)
        state = trainer.save_state("step-1").result(timeout=60).path
        yield {"service": service, "trainer": trainer, "state": state}


# -- RestClient construction ----------------------------------------------------------------------


def test_rest_client_takes_the_official_keyword_order(local: dict[str, Any]) -> None:
    service = local["service"]
    # Old tinker_lite order: a key passed first names the parameter and is never echoed.
    with pytest.raises(InvalidInputError, match="_holder") as caught:
        RestClient("tml-secret-key")
    assert "tml-secret-key" not in str(caught.value)
    with pytest.raises(InvalidInputError, match="base_url"):
        RestClient(service, base_url="http://127.0.0.1:1")
    with pytest.raises(TypeError, match="service"):
        RestClient(service=service)  # type: ignore[call-arg]
    with RestClient(service) as rest:  # shares the connection: closing it leaves service open
        assert rest.get_training_run(local["trainer"].model_id).result(timeout=60).base_model
    assert not service.closed


# -- whoami -------------------------------------------------------------------------------------


def test_whoami_reads_the_jwt_claims(clean_env: None) -> None:
    with LocalServer(jwt=True) as url, RestClient(base_url=url, api_key="tml-jwt") as rest:
        who = rest.whoami().result(timeout=60)
    assert isinstance(who, types.WhoamiResponse)
    assert who.user_urn == LOCAL_USER_URN
    assert who.org_urn == f"tml:organization:{LOCAL_ORG_ID}"
    assert who.email == "local@tinker-lite.invalid"


def test_whoami_without_jwt_auth_says_why(local: dict[str, Any]) -> None:
    future = RestClient(local["service"]).whoami()
    assert isinstance(future, tinker_lite.APIFuture)
    with pytest.raises(APIError, match="requires JWT auth"):
        future.result(timeout=60)


# -- sessions: trace export, search, projects ---------------------------------------------------


def test_export_session_trace_gives_a_downloadable_trace(local: dict[str, Any]) -> None:
    service = local["service"]
    url = RestClient(service).export_session_trace(str(service.session_id)).result(timeout=60)
    trace = requests.get(url, timeout=30).json()
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert local["trainer"].model_id in names
    kinds = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert {"forward_backward", "optim_step"} <= kinds


def _scripted_rest(server: ScriptedServer, sleeps: list[float]) -> RestClient:
    def sleep(seconds: float) -> bool:
        sleeps.append(seconds)
        return False

    context = ClientContext(
        resolve_settings(base_url=server.url, api_key=API_KEY, telemetry=False, stall_timeout=12.0),
        session=False,
        holder_options={"sleep": sleep},
    )
    return RestClient(context)


def test_export_session_trace_polls_a_pending_build(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    FakeTinker(server)
    path = f"/api/v1/sessions/{SESSION}/trace_export"
    server.on("GET", path, Reply(200, {"status": "pending"}), Reply(200, {"status": "pending"}))
    server.default("GET", path, Reply(200, {"status": "ready", "url": "https://x.invalid/t"}))
    sleeps: list[float] = []
    rest = _scripted_rest(server, sleeps)
    try:
        with caplog.at_level(logging.WARNING, logger="tinker_lite"):
            assert rest.export_session_trace(SESSION).result(timeout=30) == "https://x.invalid/t"
        assert sleeps == [5.0, 5.0]
        assert len(server.requests(path)) == 3
        assert sum("Building the trace export" in r.getMessage() for r in caplog.records) == 1

        server.default("GET", path, Reply(200, {"status": "failed", "error": "disk full"}))
        with pytest.raises(APIError, match="disk full"):
            rest.export_session_trace(SESSION).result(timeout=30)

        # A build that never finishes ends within the stall timeout (12 s here), not forever.
        server.default("GET", path, Reply(200, {"status": "pending"}))
        sleeps.clear()
        with pytest.raises(APITimeoutError, match="still being built"):
            rest.export_session_trace(SESSION).result(timeout=30)
    finally:
        rest.close()


def test_search_sessions_is_experimental_and_filters(local: dict[str, Any]) -> None:
    service = local["service"]
    rest = RestClient(service)
    request = types.SessionSearchRequest(display_name="nightly")
    with pytest.warns(ExperimentalWarning, match="experimental"):
        future = rest.search_sessions(request)
    page = future.result(timeout=60)
    assert isinstance(page, types.SessionSearchResponse)
    assert [s.session_id for s in page.sessions] == [service.session_id]
    assert page.sessions[0].user_metadata == {"team": "blue"}
    with pytest.warns(ExperimentalWarning):
        none = rest.search_sessions(types.SessionSearchRequest(display_name="weekly"))
    assert none.result(timeout=60).sessions == []
    with pytest.warns(ExperimentalWarning), pytest.raises(InvalidInputError, match="request"):
        rest.search_sessions({"display_name": "nightly"})  # type: ignore[arg-type]


def test_assign_session_project_moves_the_session(clean_env: None) -> None:
    with ServiceClient(base_url="local://", project_id="proj-1", telemetry=False) as service:
        trainer = service.create_lora_training_client(MODEL, rank=2).result()
        trainer.save_state("s").result(timeout=60)
        rest = RestClient(service)
        session_id = str(service.session_id)
        assert rest.assign_session_project(session_id, "proj-2").result(timeout=60) is None
        with pytest.warns(ExperimentalWarning):
            found = rest.search_sessions(types.SessionSearchRequest(project_ids=["proj-2"]))
        assert [s.session_id for s in found.result(timeout=60).sessions] == [session_id]
        admin = AdminClient(service)
        usage = admin.get_current_checkpoint_storage_usage("proj-2").result(timeout=60)
        assert [(i.project_id, i.checkpoint_count) for i in usage.data] == [("proj-2", 1)]
        assert admin.get_current_checkpoint_storage_usage("proj-1").result(timeout=60).data == []
        with pytest.raises(InvalidInputError, match="project_id"):
            rest.assign_session_project(session_id, "")
        with pytest.raises(NotFoundError):
            rest.assign_session_project("no-such-session", "proj-2").result(timeout=60)


# -- weights: copies, external weights -----------------------------------------------------------


def test_copy_weights_makes_a_loadable_copy(local: dict[str, Any]) -> None:
    service = local["service"]
    rest = RestClient(service)
    copied = rest.copy_weights(local["state"], "proj-archive", ttl_seconds=7200).result(timeout=60)
    parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(copied)
    assert parsed.training_run_id != local["trainer"].model_id
    listing = rest.list_checkpoints(parsed.training_run_id).result(timeout=60)
    assert [c.tinker_path for c in listing.checkpoints] == [copied]
    # The ServiceClient's copy lands in its own project (proj-a).
    mine = service.copy_weights(local["state"]).result(timeout=60)
    assert mine != copied
    audit = AdminClient(service).get_audit_log("checkpoints").result(timeout=60)
    copies = [e.event_details for e in audit.entries if e.event == "checkpoint.copied"]
    destinations = [d.get("destination_project_id") for d in copies if isinstance(d, dict)]
    assert destinations[-2:] == ["proj-archive", "proj-a"]


def test_copy_weights_needs_a_project(
    local: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_PROJECT_ID", raising=False)
    with pytest.raises(InvalidInputError, match="destination_project_id"):
        RestClient(local["service"]).copy_weights(local["state"])
    with pytest.raises(InvalidInputError, match="source_path"):
        RestClient(local["service"]).copy_weights("not-a-path", "proj")


def test_copy_weights_resends_with_one_idempotency_key(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    FakeTinker(server)
    path = "/api/v1/copy_weights"
    copied = f"tinker://{RUN}:copy/weights/ckpt-001"
    server.on("POST", path, Reply(503, {"detail": "busy"}), Reply(200, {"tinker_path": copied}))
    rest = _scripted_rest(server, [])
    source = f"tinker://{RUN}/weights/ckpt-001"
    try:
        with caplog.at_level(logging.DEBUG, logger="tinker_lite"):
            future = rest.copy_weights(source, "proj-b", weights_access_token="wat-secret-123")
            assert future.result(timeout=30) == copied
    finally:
        rest.close()
    first, second = server.requests(path)
    assert first.header("X-Idempotency-Key") == second.header("X-Idempotency-Key")
    assert first.header("X-Idempotency-Key")
    assert first.header("X-Tinker-Weights-Access-Token") == "wat-secret-123"
    assert first.json() == {
        "source_path": source,
        "destination_project_id": "proj-b",
    }
    assert first.header("x-sdk-method") == "RestClient.copy_weights"
    assert all("wat-secret-123" not in r.getMessage() for r in caplog.records)


def test_copy_weights_keeps_its_idempotency_key_across_operation_retries(
    server: ScriptedServer,
) -> None:
    # With no HTTP retries, each 503 ends one operation try: the operation layer re-sends, and
    # a copy re-sent under a new key could be applied twice.
    FakeTinker(server)
    path = "/api/v1/copy_weights"
    copied = f"tinker://{RUN}:copy/weights/ckpt-001"
    busy = Reply(503, {"detail": "busy"})
    server.on("POST", path, busy, busy, Reply(200, {"tinker_path": copied}))
    sleeps: list[float] = []

    def sleep(seconds: float) -> bool:
        sleeps.append(seconds)
        return False

    context = ClientContext(
        resolve_settings(
            base_url=server.url, api_key=API_KEY, telemetry=False, stall_timeout=12.0, max_retries=0
        ),
        session=False,
        holder_options={"sleep": sleep},
    )
    rest = RestClient(context)
    try:
        assert rest.copy_weights(f"tinker://{RUN}/weights/ckpt-001", "proj-b").result(30) == copied
    finally:
        rest.close()
    keys = {r.header("X-Idempotency-Key") for r in server.requests(path)}
    assert len(server.requests(path)) == 3
    assert len(keys) == 1
    assert None not in keys
    assert sleeps  # the re-sends were the operation layer's


def test_get_external_weights_urls_lists_downloadable_files(local: dict[str, Any]) -> None:
    service = local["service"]
    api = Api(service.base_url)
    try:
        model_id = api.model(api.session(), rank=2)
        body = {"model_id": model_id, "path": "ext-1", "seq_id": 1}
        saved = api.run("/api/v1/save_weights_external", body)
    finally:
        api.close()
    rest = RestClient(service)
    answer = rest.get_external_weights_urls(saved["path"]).result(timeout=60)
    assert isinstance(answer, types.ExternalWeightsUrlsResponse)
    assert answer.urls
    assert answer.expires > datetime.now(timezone.utc)
    for url in answer.urls.values():
        assert requests.get(url, timeout=30).content
    with pytest.raises(InvalidInputError, match="external_weights"):
        rest.get_external_weights_urls(local["state"])


# -- list_training_runs(project_id=) --------------------------------------------------------------


def test_list_training_runs_sends_project_id(server: ScriptedServer) -> None:
    FakeTinker(server)
    rest = _scripted_rest(server, [])
    try:
        rest.list_training_runs(project_id="proj-x").result(timeout=30)
        rest.list_training_runs(5, 10, "accessible").result(timeout=30)
        with pytest.raises(InvalidInputError, match="project_id"):
            rest.list_training_runs(project_id="")
    finally:
        rest.close()
    with_project, positional = server.requests("/api/v1/training_runs")
    assert with_project.query == {
        "limit": "20",
        "offset": "0",
        "access_scope": "owned",
        "project_id": "proj-x",
    }
    assert positional.query == {"limit": "5", "offset": "10", "access_scope": "accessible"}


# -- AdminClient and the deprecated RestClient admin calls ----------------------------------------


def test_admin_client_reads_the_ledger(local: dict[str, Any]) -> None:
    service = local["service"]
    with AdminClient(service) as admin:
        audit = admin.get_audit_log("checkpoints", day=datetime.now(timezone.utc).date())
        entries = audit.result(timeout=60).entries
        assert any(e.tinker_path == local["state"] for e in entries)
        assert all(e.event.startswith("checkpoint.") for e in entries)
        now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
        start = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        usage = admin.get_billing_usage(start, now + timedelta(hours=1)).result(timeout=60)
        kinds = {event.event_info.type for event in usage.data}
        assert "training" in kinds
        assert usage.sessions[str(service.session_id)].user_metadata == {"team": "blue"}
        storage = admin.get_current_checkpoint_storage_usage().result(timeout=60)
        assert sum(item.checkpoint_count for item in storage.data) >= 1
        with pytest.raises(InvalidInputError, match="event_type"):
            admin.get_audit_log("sessions")  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="day"):
            admin.get_audit_log(day=datetime.now())
        with pytest.raises(InvalidInputError, match="starting_on"):
            admin.get_billing_usage("yesterday", now)
        with pytest.raises(InvalidInputError, match="ending_before"):
            admin.get_billing_usage(now, now)
    assert not service.closed  # an AdminClient over a ServiceClient leaves it open


def test_rest_client_admin_calls_are_deprecated(local: dict[str, Any]) -> None:
    rest = RestClient(local["service"])
    with pytest.warns(FutureWarning, match="AdminClient.get_audit_log"):
        old = rest.get_audit_log("checkpoints").result(timeout=60)
    new = AdminClient(local["service"]).get_audit_log("checkpoints").result(timeout=60)
    assert old.entries == new.entries
    with pytest.warns(FutureWarning, match="AdminClient.get_current_checkpoint_storage_usage"):
        rest.get_current_checkpoint_storage_usage().result(timeout=60)
    with pytest.warns(FutureWarning, match="AdminClient.get_billing_usage"):
        rest.get_billing_usage("2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z").result(timeout=60)


def test_standalone_admin_client_opens_no_session(clean_env: None) -> None:
    with LocalServer() as url, AdminClient(base_url=url, api_key="k", telemetry=False) as admin:
        assert admin.get_audit_log().result(timeout=60).entries == []
    with pytest.raises(InvalidInputError, match="_holder"):
        AdminClient("k")


# -- ServiceClient ------------------------------------------------------------------------------


def test_console_url_follows_the_session(clean_env: None) -> None:
    with ServiceClient(base_url="local://", telemetry=False) as service:
        assert service.get_console_url() == "https://tinker.thinkingmachines.ai/sessions"
        assert service.session_id  # starts the session
        assert service.get_console_url() == (
            f"https://tinker.thinkingmachines.ai/sessions/{service.session_id}"
        )


def test_create_lora_training_client_sends_the_optimizer(server: ScriptedServer) -> None:
    FakeTinker(server)
    with ServiceClient(base_url=server.url, api_key=API_KEY, telemetry=False) as service:
        service.create_lora_training_client(
            "Qwen/Qwen3-8B", optimizer=types.DimuonOptimizerConfig()
        ).result()
        service.create_lora_training_client("Qwen/Qwen3-8B").result()
        with pytest.raises(InvalidInputError, match="optimizer"):
            # 8 positional arguments: the eighth is the optimizer, not a stray flag.
            service.create_lora_training_client(
                "Qwen/Qwen3-8B",
                8,
                None,
                True,
                True,
                True,
                None,
                "adam",  # type: ignore[arg-type]
            ).result()
    dimuon, default = (r.json() for r in server.requests("/api/v1/create_model"))
    assert dimuon["optimizer_config"] == {"type": "dimuon", "version": 1}
    assert default["optimizer_config"] == {"type": "adamw"}


def test_deprecated_service_calls_warn_and_work(local: dict[str, Any]) -> None:
    service = local["service"]
    with pytest.warns(FutureWarning, match="create_rest_client"):
        rest = service.create_rest_client()
    assert rest.get_training_run(local["trainer"].model_id).result(timeout=60).lora_rank == 2
    with pytest.warns(FutureWarning, match="get_server_capabilities"):
        capabilities = service.get_server_capabilities()
    assert MODEL in {m.model_name for m in capabilities.supported_models}


def neg_ll(logprobs: Any, weights: Any) -> Any:
    loss = -(logprobs * weights).sum()
    return loss, {"custom/neg_ll:sum": loss}


def test_create_custom_loss_checks_the_function(local: dict[str, Any]) -> None:
    service = local["service"]
    with pytest.raises(InvalidInputError, match="input_ranks"):
        service.create_custom_loss(neg_ll, {"logprobs": 1})
    with pytest.raises(InvalidInputError, match="logprobs as its first parameter"):
        service.create_custom_loss(lambda weights: weights, {"weights": 1})
    with pytest.raises(InvalidInputError, match="rank 1"):
        service.create_custom_loss(neg_ll, {"logprobs": 0, "weights": 1})


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed")
def test_create_custom_loss_needs_torch(local: dict[str, Any]) -> None:
    with pytest.raises(ImportError, match="install torch"):
        local["service"].create_custom_loss(neg_ll, {"logprobs": 1, "weights": 1})


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
@pytest.mark.parametrize("server_side", [False, True])
def test_create_custom_loss_where_the_service_supports_it(
    clean_env: None, server_side: bool
) -> None:
    overrides = {"custom_loss_server_side": server_side}
    with LocalServer(config_overrides=overrides) as url:
        with ServiceClient(base_url=url, api_key="k", telemetry=False) as service:
            future = service.create_custom_loss(neg_ll, {"logprobs": 1, "weights": 1})
            if not server_side:
                handle = future.result(timeout=60)
                assert isinstance(handle, tinker_lite.LossHandle)
                assert (handle.name, handle.loss_id) == ("neg_ll", None)
                assert handle.input_names == ("weights",)
                assert handle.session_id == service.session_id
            else:
                # The local server has no create_custom_loss endpoint: its answer is the error.
                with pytest.raises(NotFoundError, match="create_custom_loss"):
                    future.result(timeout=60)


# -- top-level helpers ------------------------------------------------------------------------


def test_timeout_takes_httpx_call_shape() -> None:
    timeout = tinker_lite.Timeout
    assert timeout(10.0).as_dict() == {"connect": 10.0, "read": 10.0, "write": 10.0, "pool": 10.0}
    assert timeout(10.0, connect=5.0).connect == 5.0
    assert timeout(None).read is None
    assert timeout((1, 2, 3, 4)).as_dict() == {"connect": 1, "read": 2, "write": 3, "pool": 4}
    full = timeout(connect=1, read=2, write=3, pool=4)
    assert timeout(full) == full
    with pytest.raises(InvalidInputError, match="timeout"):
        timeout(connect=1.0)
    with pytest.raises(InvalidInputError, match="read"):
        timeout(5.0, read=-1)
    options: tinker_lite.RequestOptions = {"max_retries": 2, "timeout": full}
    assert options["timeout"] is full


def test_auth_helpers(clean_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    auth = tinker_lite.auth
    assert auth.get_tinker_token() is None
    assert not auth.tinker_has_credentials()
    with LocalServer(api_key="right-key") as url:
        monkeypatch.setenv("TINKER_BASE_URL", url)
        monkeypatch.setenv("TINKER_API_KEY", "wrong-key")
        assert auth.get_tinker_token() == "wrong-key"
        with pytest.raises(AuthenticationError):
            auth.raise_if_tinker_not_accessible()
        monkeypatch.setenv("TINKER_API_KEY", "right-key")
        auth.raise_if_tinker_not_accessible()  # returns None: it does not raise
    monkeypatch.setenv("TINKER_BASE_URL", "https://tinker.invalid")
    monkeypatch.delenv("TINKER_API_KEY")
    with pytest.raises(TinkerError, match="API key"):
        auth.raise_if_tinker_not_accessible()


def test_official_type_aliases_are_the_types_ones() -> None:
    for name in ("AdamOptimizerConfig", "DimuonParams", "DmelChunk", "SampledProvenanceSpan"):
        assert getattr(tinker_lite, name) is getattr(types, name)
    assert tinker_lite.ModelID is str
    assert tinker_lite.__all__ == sorted(set(tinker_lite.__all__))
