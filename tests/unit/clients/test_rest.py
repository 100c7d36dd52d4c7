"""RestClient: every call's request, the archive URL's 302 semantics, tinker:// path parsing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.support.clients import API_KEY, RUN, FakeTinker, ce_datum
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import (
    APIFuture,
    InvalidInputError,
    NotFoundError,
    RestClient,
    ServiceClient,
    types,
)
from tinker_lite._transport.http import ClientClosedError
from tinker_lite.local import LocalServer

parse_tinker_path = types.ParsedCheckpointTinkerPath.from_tinker_path
CKPT = f"tinker://{RUN}/weights/ckpt-001"
ARCHIVE = f"/api/v1/training_runs/{RUN}/checkpoints/weights/ckpt-001/archive"


@pytest.fixture
def fake(server: ScriptedServer) -> FakeTinker:
    return FakeTinker(server)


@pytest.fixture
def rest(fake: FakeTinker) -> Iterator[RestClient]:
    with ServiceClient(base_url=fake.server.url, api_key=API_KEY, telemetry=False) as client:
        yield RestClient(client)


def test_listing_calls_send_limit_and_offset(fake: FakeTinker, rest: RestClient) -> None:
    runs = rest.list_training_runs()
    assert isinstance(runs, APIFuture)
    assert runs.result(timeout=30).training_runs[0].training_run_id == RUN
    rest.list_training_runs(limit=5, offset=10).result(timeout=30)
    checkpoints = rest.list_user_checkpoints().result(timeout=30)
    assert checkpoints.cursor is not None
    assert checkpoints.cursor.total_count == 1
    assert checkpoints.checkpoints[0].time == datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    queries = [r.query for r in fake.server.requests("/api/v1/training_runs")]
    assert queries == [
        {"limit": "20", "offset": "0", "access_scope": "owned"},
        {"limit": "5", "offset": "10", "access_scope": "owned"},
    ]
    (user,) = fake.server.requests("/api/v1/checkpoints")
    assert user.query == {"limit": "100", "offset": "0"}
    assert user.method == "GET"
    assert user.header("Content-Type") is None


def test_run_and_checkpoint_calls(fake: FakeTinker, rest: RestClient) -> None:
    run = rest.get_training_run(RUN).result(timeout=30)
    assert run.base_model == "Qwen/Qwen3-8B"
    assert rest.get_training_run_by_tinker_path(CKPT).result(timeout=30) == run
    listed = rest.list_checkpoints(RUN).result(timeout=30)
    assert listed.checkpoints[0].tinker_path == CKPT
    assert listed.cursor is None
    assert rest.publish_checkpoint_from_tinker_path(CKPT).result(timeout=30) is None
    assert rest.unpublish_checkpoint_from_tinker_path(CKPT).result(timeout=30) is None
    assert rest.delete_checkpoint(RUN, "weights/ckpt-001").result(timeout=30) is None
    publish = fake.server.requests(ARCHIVE.replace("/archive", "/publish"))
    assert [r.method for r in publish] == ["POST", "DELETE"]
    assert publish[0].body == b""
    assert publish[0].header("Content-Length") == "0"
    assert publish[0].header("Content-Type") == "application/json"
    assert publish[0].header("X-Idempotency-Key")
    (delete,) = fake.server.requests(ARCHIVE.removesuffix("/archive"))
    assert delete.method == "DELETE"
    assert delete.body == b""


def test_archive_url_reads_the_redirect(fake: FakeTinker, rest: RestClient) -> None:
    answer = rest.get_checkpoint_archive_url(RUN, "weights/ckpt-001").result(timeout=30)
    assert answer.url == "https://storage.example/archive.tar?sig=1"
    assert answer.expires == datetime(2026, 10, 21, 7, 28, tzinfo=timezone.utc)
    (request,) = fake.server.requests(ARCHIVE)
    assert request.method == "GET"
    # The redirect is not followed (the signed URL must never see the API key).
    assert [r.path for r in fake.server.requests() if "storage" in r.path] == []


@pytest.mark.parametrize(
    "reply",
    [
        Reply(302, headers={"Location": "/files/a.tar"}),
        Reply(302, headers={"Location": "/files/a.tar", "Expires": "not a date"}),
    ],
)
def test_archive_url_without_expires_lasts_15_minutes(
    fake: FakeTinker, rest: RestClient, reply: Reply
) -> None:
    fake.server.on("GET", ARCHIVE, reply)
    before = datetime.now(timezone.utc)
    answer = rest.get_checkpoint_archive_url_from_tinker_path(CKPT).result(timeout=30)
    assert answer.url == fake.server.url + "/files/a.tar"
    assert before + timedelta(minutes=14) < answer.expires < before + timedelta(minutes=16)


def test_archive_url_accepts_a_json_answer(fake: FakeTinker, rest: RestClient) -> None:
    body = {"url": "https://x.example/a.tar", "expires": "2030-01-01T00:00:00Z"}
    fake.server.on("GET", ARCHIVE, Reply(200, body))
    answer = rest.get_checkpoint_archive_url(RUN, "weights/ckpt-001").result(timeout=30)
    assert answer.url == "https://x.example/a.tar"
    assert answer.expires == datetime(2030, 1, 1, tzinfo=timezone.utc)


def test_errors_arrive_through_the_future(fake: FakeTinker, rest: RestClient) -> None:
    fake.server.on("GET", f"/api/v1/training_runs/{RUN}", Reply(404, {"detail": "no such run"}))
    future = rest.get_training_run(RUN)
    with pytest.raises(NotFoundError, match="no such run"):
        future.result(timeout=30)


def test_a_call_racing_close_fails_with_client_closed(rest: RestClient) -> None:
    context = rest._context
    pool = context.rest_pool()
    pool.shutdown()  # what close() does between the open check and the submit
    future = context.run_in(pool, lambda: 1)
    assert isinstance(future.exception(timeout=30), ClientClosedError)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda r: r.list_training_runs(limit=0), "limit"),
        (lambda r: r.list_user_checkpoints(offset=-1), "offset"),
        (lambda r: r.delete_checkpoint(RUN, "ckpt-001"), "checkpoint_id"),
        (lambda r: r.delete_checkpoint("", "weights/x"), "training_run_id"),
        (lambda r: r.publish_checkpoint_from_tinker_path("tinker://run/x/y"), "tinker_path"),
        (lambda r: r.set_checkpoint_ttl_from_tinker_path(CKPT, 0), "ttl_seconds"),
        (lambda r: r.get_sampler(""), "sampler_id"),
    ],
)
def test_bad_arguments(fake: FakeTinker, rest: RestClient, call: Any, field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        call(rest)
    assert info.value.field == field


@pytest.mark.parametrize(
    ("path", "match"),
    [
        ("run/weights/x", "must be a tinker:// path"),
        ("tinker://run/weights", "expected 3"),
        ("tinker://run/weights/a/b", "expected 3"),
        ("tinker://run/checkpoints/x", "unknown checkpoint kind"),
    ],
)
def test_tinker_path_parser_explains_the_kinds(path: str, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match) as info:
        parse_tinker_path(path)
    if "kind" in match or "expected" in match:
        assert "sampler_weights" in str(info.value)
        assert "sampleable" in str(info.value)


def test_tinker_path_parser() -> None:
    parsed = parse_tinker_path("tinker://sess:train:0/sampler_weights/s1")
    assert (parsed.training_run_id, parsed.checkpoint_type, parsed.checkpoint_id) == (
        "sess:train:0",
        "sampler",
        "sampler_weights/s1",
    )


def test_every_call_on_the_local_server() -> None:
    with LocalServer() as url, ServiceClient(base_url=url, telemetry=False) as client:
        trainer = client.create_lora_training_client("tinker-lite/tiny-64", rank=2).result()
        trainer.forward_backward([ce_datum([1, 2, 3])], "cross_entropy")
        state = trainer.save_state("s").result(timeout=60).path
        weights = trainer.save_weights_for_sampler("w").result(timeout=60).path
        sampler = client.create_sampling_client(model_path=weights).result()
        rest = RestClient(client)
        run = rest.get_training_run(trainer.model_id).result(timeout=60)
        assert run.lora_rank == 2
        assert run.base_model == "tinker-lite/tiny-64"
        assert rest.list_training_runs().result(timeout=60).cursor.total_count >= 1
        ids = {
            c.checkpoint_id
            for c in rest.list_checkpoints(trainer.model_id).result(timeout=60).checkpoints
        }
        assert ids == {"weights/s", "sampler_weights/w"}
        assert len(rest.list_user_checkpoints().result(timeout=60).checkpoints) >= 2
        info = rest.get_weights_info_by_tinker_path(state).result(timeout=60)
        assert (info.base_model, info.lora_rank) == ("tinker-lite/tiny-64", 2)
        rest.publish_checkpoint_from_tinker_path(weights).result(timeout=60)
        rest.set_checkpoint_ttl_from_tinker_path(weights, 3600).result(timeout=60)
        listed = rest.list_checkpoints(trainer.model_id).result(timeout=60).checkpoints
        published = next(c for c in listed if c.checkpoint_id == "sampler_weights/w")
        assert published.public
        assert published.expires_at is not None
        rest.unpublish_checkpoint_from_tinker_path(weights).result(timeout=60)
        archive = rest.get_checkpoint_archive_url_from_tinker_path(weights).result(timeout=60)
        assert archive.url.startswith(url)
        assert archive.expires.tzinfo is not None
        session_id = client.session_id
        assert session_id is not None
        assert session_id in rest.list_sessions(limit=100).result(timeout=60).sessions
        session = rest.get_session(session_id).result(timeout=60)
        assert trainer.model_id in session.training_run_ids
        assert sampler.sampling_session_id in session.sampler_ids
        got = rest.get_sampler(sampler.sampling_session_id).result(timeout=60)
        assert got.model_path == weights
        rest.delete_checkpoint_from_tinker_path(state).result(timeout=60)
        with pytest.raises(NotFoundError):
            rest.get_weights_info_by_tinker_path(state).result(timeout=60)
        assert isinstance(run, types.TrainingRun)
