"""No secret in what an error, a repr or a log shows: URL userinfo, and the API key even when a
hostile service echoes it back whole or in part (any 16 characters of it).

Scripted loopback servers answer with the echoes; the tests read every text a user could see:
``str``/``repr`` of the exception and its causes, the formatted traceback, ``e.body``,
``e.headers``, the clients' reprs and every log record.
"""

from __future__ import annotations

import logging
import pickle
import socket
import traceback
from collections.abc import Iterator

import pytest

from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import (
    APIConnectionError,
    APIStatusError,
    BadRequestError,
    RestClient,
    ServiceClient,
    TinkerError,
)
from tinker_lite._secrets import PARTIAL_ECHO, redact, redact_url, register_secret
from tinker_lite._session.settings import resolve_settings
from tinker_lite._transport.http import PoolKind, Timeout, Transport

KEY = "tml-HOSTILE-0123456789abcdefghijklmnopqrstuvwxyz"
PASSWORD = "pa55-w0rd-in-the-url"
USER = "alice"
CONFIG = "/api/v1/client/config"
RUN_PATH = "/api/v1/training_runs/run-1"


def _leaks(text: str, secret: str = KEY) -> list[str]:
    """The runs of ``PARTIAL_ECHO`` characters of ``secret`` found in ``text``."""
    return [
        secret[i : i + PARTIAL_ECHO]
        for i in range(len(secret) - PARTIAL_ECHO + 1)
        if secret[i : i + PARTIAL_ECHO] in text
    ]


def _shown(error: BaseException) -> str:
    """Everything a user could see of ``error`` and its causes."""
    texts: list[str] = []
    current: BaseException | None = error
    while current is not None:
        texts += [str(current), repr(current), repr(vars(current))]
        current = current.__cause__ or current.__context__
    texts.append("".join(traceback.format_exception(type(error), error, error.__traceback__)))
    return "\n".join(texts)


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(caplog.text.splitlines() + [r.getMessage() for r in caplog.records])


@pytest.fixture
def rest(server: ScriptedServer) -> Iterator[RestClient]:
    server.default("POST", CONFIG, Reply(404, {"detail": "Not Found"}))
    client = RestClient(base_url=server.url, api_key=KEY, telemetry=False, max_retries=0)
    yield client
    client.close()


# -- the API key, echoed back --------------------------------------------------------------------


def test_an_echoed_key_is_not_kept_in_body_headers_or_message(
    server: ScriptedServer, rest: RestClient, caplog: pytest.LogCaptureFixture
) -> None:
    server.default(
        "GET",
        RUN_PATH,
        Reply(
            400,
            {
                "detail": f"key {KEY} is not allowed; truncated: {KEY[5:25]}",
                "echo": {"whole": KEY, "parts": [KEY[-20:], KEY[10:27]]},
                KEY[:18]: "a key as a key",
            },
            headers={"X-Echo-Key": KEY, "X-Echo-Part": f"..{KEY[20:40]}..", KEY: "name"},
        ),
    )
    with pytest.raises(BadRequestError) as caught:
        rest.get_training_run("run-1").result(timeout=30)
    error = caught.value
    assert _leaks(repr(error.body)) == []
    assert _leaks(repr(error.headers)) == []
    assert _leaks(_shown(error)) == []
    assert _leaks(_logged(caplog)) == []
    # What is not secret stays: the service's sentence and the header names.
    assert "is not allowed" in str(error)
    assert {"X-Echo-Key", "X-Echo-Part"} <= set(error.headers)
    assert error.headers["X-Echo-Key"] == "***"


def test_credential_and_cookie_headers_of_an_answer_are_masked(
    server: ScriptedServer, rest: RestClient
) -> None:
    """Credentials the client never sent (a session cookie, a bearer token) are masked by the
    header's name, in the error the client raises and in one built from a response."""
    cookie = "sid=unregistered-session-cookie-value"
    token = "Bearer unregistered-token-from-the-service"
    headers = {"Set-Cookie": cookie, "Authorization": token, "X-Request-ID": "req-h"}
    server.default("GET", RUN_PATH, Reply(400, {"detail": "no"}, headers=headers))
    with pytest.raises(BadRequestError) as caught:
        rest.get_training_run("run-1").result(timeout=30)

    class Answer:  # a response as code written for 0.38 passes one (httpx's)
        status_code = 400

        def __init__(self) -> None:
            self.headers = headers

    built = BadRequestError("no", response=Answer(), body=None)
    for error in (caught.value, built):
        assert error.headers["Set-Cookie"] == error.headers["Authorization"] == "***"
        assert error.request_id == "req-h"
        shown = _shown(error) + repr(error.headers) + str(pickle.dumps(error))
        assert "unregistered" not in shown


def test_a_truncated_echo_in_a_text_body_is_redacted(
    server: ScriptedServer, rest: RestClient
) -> None:
    echo = f"<html>bad credential {KEY[3:23]}</html>"
    server.default("GET", RUN_PATH, Reply(401, body=echo.encode(), content_type="text/html"))
    with pytest.raises(APIStatusError) as caught:
        rest.get_training_run("run-1").result(timeout=30)
    assert "bad credential ***" in str(caught.value)
    assert _leaks(_shown(caught.value)) == []
    assert _leaks(repr(caught.value.body)) == []


def test_a_malformed_answer_echoing_the_key_is_redacted(
    server: ScriptedServer, rest: RestClient
) -> None:
    server.default("GET", RUN_PATH, Reply(200, body=f'{{"oops": "{KEY[:30]}'.encode()))
    with pytest.raises(TinkerError) as caught:
        rest.get_training_run("run-1").result(timeout=30)
    assert _leaks(_shown(caught.value)) == []


def test_runs_shorter_than_the_window_are_left_alone() -> None:
    register_secret(KEY)
    short = KEY[7 : 7 + PARTIAL_ECHO - 1]
    assert redact(f"id {short}") == f"id {short}"
    assert redact(f"id {KEY[7 : 7 + PARTIAL_ECHO]}") == "id ***"
    assert redact(f"{KEY[:20]}|{KEY[30:]}") == "***|***"


# -- user:password@ in the base URL ----------------------------------------------------------------


def _with_userinfo(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{PASSWORD}@", 1)


def test_url_userinfo_is_not_shown_by_errors_reprs_or_logs(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.default("POST", CONFIG, Reply(404, {"detail": "Not Found"}))
    server.default("GET", RUN_PATH, Reply(404, {"detail": f"no run at {server.url}"}))
    url = _with_userinfo(server.url)
    with RestClient(base_url=url, api_key=KEY, telemetry=False, max_retries=0) as rest:
        with pytest.raises(APIStatusError) as caught:
            rest.get_training_run("run-1").result(timeout=30)
        shown = [
            _shown(caught.value),
            repr(rest),
            repr(rest._context),
            repr(rest._api),
            repr(rest._api.transport),
            repr(rest._context.holder),
            repr(rest._context.holder.settings),
        ]
        assert f"http://***@127.0.0.1:{server.url.rsplit(':', 1)[1]}" in repr(rest)
    with ServiceClient(base_url=url, api_key=KEY, telemetry=False) as service:
        shown.append(repr(service))  # nothing is sent before the first call
    shown.append(_logged(caplog))
    for text in shown:
        assert PASSWORD not in text
        assert f"{USER}:" not in text
    assert server.requests(RUN_PATH)  # the request went out: only its display is redacted


def test_a_connection_error_to_a_url_with_userinfo_does_not_show_it() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = Transport(
        f"http://{USER}:{PASSWORD}@127.0.0.1:{port}", headers={}, auth=lambda: KEY
    )
    try:
        with pytest.raises(APIConnectionError) as caught:
            transport.send(PoolKind.SESSION, "GET", "/api/v1/healthz", timeout=Timeout(2.0, 2.0))
    finally:
        transport.close()
    shown = _shown(caught.value) + repr(transport)
    assert PASSWORD not in shown
    assert f"{USER}:" not in shown


def test_the_plain_http_warning_does_not_show_userinfo(
    clean_env: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    settings = resolve_settings(
        base_url=f"http://{USER}:{PASSWORD}@tinker.example.invalid/x", api_key=KEY
    )
    assert "over plain http://" in caplog.text
    assert PASSWORD not in caplog.text + repr(settings)
    assert redact_url(settings.base_url) == "http://***@tinker.example.invalid/x"
