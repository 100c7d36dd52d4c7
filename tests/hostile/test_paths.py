"""Ids and names are URL path segments: encoded, and never ``.`` or ``..``.

A scripted loopback server records the path each request arrived with. ``.``/``..`` ids are
refused with :class:`~tinker_lite.InvalidInputError` naming the argument before anything is
sent (urllib3 would remove them: ``list_checkpoints("..")`` would list every checkpoint of the
user); every other character that cannot stand in a segment arrives percent-encoded; and an
error names the path the server received.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import InvalidInputError, NotFoundError, RestClient, types
from tinker_lite._transport.http import PoolKind, Timeout, Transport

KEY = "tml-paths-test-key-0123456789"
CONFIG = "/api/v1/client/config"


@pytest.fixture
def rest(server: ScriptedServer) -> Iterator[RestClient]:
    server.default("POST", CONFIG, Reply(404, {"detail": "Not Found"}))
    client = RestClient(base_url=server.url, api_key=KEY, telemetry=False, max_retries=0)
    yield client
    client.close()


def _sent(server: ScriptedServer) -> list[str]:
    """The paths of the requests the server received, start-up aside."""
    return [r.path for r in server.requests() if r.path != CONFIG]


Call = Callable[[RestClient], Any]

REFUSED: list[tuple[str, Call, str]] = [
    ("list_checkpoints ..", lambda r: r.list_checkpoints(".."), "training_run_id"),
    ("list_checkpoints .", lambda r: r.list_checkpoints("."), "training_run_id"),
    ("get_training_run ..", lambda r: r.get_training_run(".."), "training_run_id"),
    ("get_session ..", lambda r: r.get_session(".."), "session_id"),
    ("get_sampler .", lambda r: r.get_sampler("."), "sampler_id"),
    ("export_session_trace ..", lambda r: r.export_session_trace(".."), "session_id"),
    ("assign_session_project ..", lambda r: r.assign_session_project("..", "p"), "session_id"),
    ("delete run ..", lambda r: r.delete_checkpoint("..", "weights/x"), "training_run_id"),
    ("delete name ..", lambda r: r.delete_checkpoint("run", "weights/.."), "checkpoint_id"),
    ("delete name .", lambda r: r.delete_checkpoint("run", "weights/."), "checkpoint_id"),
    ("publish name ..", lambda r: r.publish_checkpoint("run", "weights/.."), "checkpoint_id"),
    (
        "ttl name ..",
        lambda r: r.set_checkpoint_ttl("run", "sampler_weights/..", 3600),
        "checkpoint_id",
    ),
    (
        "archive run ..",
        lambda r: r.get_checkpoint_archive_url("..", "sampler_weights/x"),
        "training_run_id",
    ),
    (
        "tinker path run ..",
        lambda r: r.delete_checkpoint_from_tinker_path("tinker://../weights/x"),
        "tinker_path",
    ),
    (
        "tinker path name ..",
        lambda r: r.get_checkpoint_archive_url_from_tinker_path("tinker://run/weights/.."),
        "tinker_path",
    ),
    (
        "tinker path run of get_training_run_by_tinker_path",
        lambda r: r.get_training_run_by_tinker_path("tinker://./weights/x"),
        "tinker_path",
    ),
]


@pytest.mark.parametrize(
    ("call", "argument"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_dot_segments_are_refused_before_anything_is_sent(
    server: ScriptedServer, rest: RestClient, call: Call, argument: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        call(rest)
    assert caught.value.field == argument
    assert "'.' or '..'" in str(caught.value)
    assert caught.value.hint  # says what to pass instead
    assert server.requests() == []


def test_ids_arrive_as_encoded_segments(server: ScriptedServer, rest: RestClient) -> None:
    server.default("GET", "/api/v1/samplers/sess-1:sample:2", Reply(404, {"detail": "gone"}))
    hostile = "a/b?c#d %e"
    calls: list[tuple[Call, str]] = [
        (lambda r: r.get_training_run(hostile), "/api/v1/training_runs/a%2Fb%3Fc%23d%20%25e"),
        (
            lambda r: r.list_checkpoints("%2E%2E"),  # percent-encoded dots stay literal
            "/api/v1/training_runs/%252E%252E/checkpoints",
        ),
        (
            lambda r: r.delete_checkpoint("run 1", "weights/x..y z"),
            "/api/v1/training_runs/run%201/checkpoints/weights/x..y%20z",
        ),
        (lambda r: r.get_session("s\u00e9ss"), "/api/v1/sessions/s%C3%A9ss"),
        # RFC 3986 pchar stays as 0.38 sends it (sampler ids hold ':').
        (lambda r: r.get_sampler("sess-1:sample:2"), "/api/v1/samplers/sess-1:sample:2"),
    ]
    for call, path in calls:
        with pytest.raises(NotFoundError) as caught:
            call(rest).result(timeout=30)
        assert _sent(server)[-1] == path
        # The error names the path the server received.
        assert isinstance(caught.value.request, str)
        assert caught.value.request.endswith(f" {path}")
        assert path in str(caught.value)
    assert len(_sent(server)) == len(calls)


def test_a_tinker_path_with_dots_is_not_a_checkpoint() -> None:
    for path in ("tinker://../weights/x", "tinker://run/sampler_weights/.", "tinker://./weights/x"):
        with pytest.raises(InvalidInputError) as caught:
            types.ParsedCheckpointTinkerPath.from_tinker_path(path)
        assert caught.value.field == "tinker_path"


def test_errors_name_the_path_that_was_sent(server: ScriptedServer, rest: RestClient) -> None:
    # A path given with dot segments (by code below the clients) is normalised by requests
    # before sending; the error says what went out, not what was asked.
    with pytest.raises(NotFoundError) as caught:
        rest._api.call("GET", "/api/v1/training_runs/x/../../checkpoints", retry=False)
    assert _sent(server) == ["/api/v1/checkpoints"]
    assert "GET /api/v1/checkpoints failed" in str(caught.value)
    assert "training_runs" not in str(caught.value)


def test_a_connection_error_names_the_path_sent(server: ScriptedServer) -> None:
    transport = Transport(server.url, headers={}, auth=lambda: KEY)
    server.close()  # nothing listens any more: the attempt is refused
    try:
        with pytest.raises(Exception) as caught:
            transport.send(PoolKind.SESSION, "GET", "/api/v1/a/./b/../c", timeout=Timeout(2.0, 2.0))
    finally:
        transport.close()
    assert "/api/v1/a/c" in str(caught.value)
    assert "/./" not in str(caught.value)


def test_finish_session_encodes_and_checks_the_session_id(
    server: ScriptedServer, rest: RestClient
) -> None:
    request = types.SessionFinishRequest(reason=types.SessionFinishReason(type="success"))
    with pytest.raises(InvalidInputError) as caught:
        rest._api.finish_session("..", request, sdk_method=None, read_timeout=2.0)
    assert caught.value.field == "session_id"
    assert _sent(server) == []
    with pytest.raises(NotFoundError):
        rest._api.finish_session("a/b", request, sdk_method=None, read_timeout=2.0)
    assert _sent(server) == ["/api/v1/sessions/a%2Fb/finish"]
