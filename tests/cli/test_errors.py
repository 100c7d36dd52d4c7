"""How failures read: one formatter for every error class, and the CLI's fast, plain failures."""

from __future__ import annotations

import concurrent.futures
import inspect
import pickle
import socket
import time
from typing import Any, TypeGuard

import pytest

import tinker_lite
from tinker_lite import _errors
from tinker_lite._errors import (
    APIStatusError,
    InvalidInputError,
    RequestErrorCategory,
    describe_error,
    format_status_error,
    service_message,
)
from tinker_lite._futures.future import APIFuture
from tinker_lite._transport.answers import HttpResponse, raise_for_status
from tinker_lite._transport.http import register_secret
from tinker_lite.cli import EXIT_CONNECTION, main
from tinker_lite.cli._exit import error_message

SECRET = "tml-formatter-secret-0123456789"
PATH = "/api/v1/training_runs/run-42"
REQUEST_ID = "req-7f3a"


def _exported_error_classes() -> list[type[BaseException]]:
    names = set(_errors.__all__) | set(tinker_lite.__all__)
    found = {getattr(_errors, n, None) or getattr(tinker_lite, n, None) for n in names}
    return sorted(
        (
            c
            for c in found
            if isinstance(c, type) and issubclass(c, BaseException) and not issubclass(c, Warning)
        ),
        key=lambda c: c.__name__,
    )


def _build(cls: type[BaseException]) -> BaseException:
    """An instance of ``cls`` as the library raises it: a body echoing the key, the request."""
    body = {"detail": f"Training run not found: run-42 (key {SECRET})"}
    values: dict[str, Any] = {
        "message": f"Connection refused by 127.0.0.1:9 (GET {PATH}): nothing is listening there.",
        "status_code": 404,
        "body": body,
        "request_id": REQUEST_ID,
        "category": RequestErrorCategory.USER,
        "details": body,
        "field": "limit",
        "problem": "must be >= 1, got 0",
    }
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for name, param in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        value = values.get(name, param.default if param.default is not param.empty else "x")
        if param.kind == param.KEYWORD_ONLY:
            kwargs[name] = value
        else:
            args.append(value)
    error = cls(*args, **kwargs)
    if _answered(error):
        error.request = f"GET {PATH}"
    return error


def _answered(error: BaseException) -> TypeGuard[APIStatusError]:
    """Whether ``error`` stands for an answer of the service (an InvalidInputError is also a
    BadRequestError, but one refused before sending: there is no request or status to tell)."""
    return isinstance(error, APIStatusError) and not isinstance(error, InvalidInputError)


ERROR_CLASSES = _exported_error_classes()


def test_every_exported_error_class_is_covered() -> None:
    names = {c.__name__ for c in ERROR_CLASSES}
    assert {"APIStatusError", "NotFoundError", "APIConnectionError", "RequestFailedError"} <= names
    assert {"InvalidInputError", "TinkerError", "APIResponseValidationError"} <= names


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_class_renders_through_the_formatter(cls: type[BaseException]) -> None:
    register_secret(SECRET)
    error = _build(cls)
    text = describe_error(error)
    assert text == " ".join(text.split()), "one line, no runs of blanks"
    assert "{'" not in text, "no Python dict repr"
    assert SECRET not in text
    if getattr(error, "request_id", None):
        assert f"request id {REQUEST_ID}" in text
        assert text.count(REQUEST_ID) == 1
    if PATH in str(error) or _answered(error):
        assert text.count(PATH) == 1, text
    if _answered(error):
        assert "Training run not found: run-42" in text
        assert str(error.status_code) in text
    # The CLI prints the same sentence (exit codes and hints aside).
    assert error_message(error) == text
    # Errors still pickle with everything the formatter reads.
    assert describe_error(pickle.loads(pickle.dumps(error))) == text


def test_status_error_from_a_response_reads_as_one_sentence() -> None:
    resp = HttpResponse(
        404,
        {"Content-Type": "application/json", "x-request-id": REQUEST_ID},
        b'{"detail": "Training run not found: run-42"}',
    )
    with pytest.raises(tinker_lite.NotFoundError) as info:
        raise_for_status(resp, what=f"GET {PATH}")
    assert str(info.value) == (
        f"GET {PATH} failed with HTTP 404 Not Found: Training run not found: run-42 "
        f"(request id {REQUEST_ID}). Check the id or tinker:// path."
    )
    assert info.value.request == f"GET {PATH}"
    assert describe_error(info.value) == str(info.value)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"detail": "nope"}, "nope"),
        ({"message": "slow down"}, "slow down"),
        ({"error": {"message": "nested"}}, "nested"),
        (
            {"detail": [{"loc": ["body", "limit"], "msg": "must be >= 1", "type": "x"}]},
            "limit: must be >= 1",
        ),
        ("<html>bad   gateway</html>", "<html>bad gateway</html>"),
        (b"plain", "plain"),
        ({"unrelated": 1}, None),
        (None, None),
        ("", None),
    ],
)
def test_service_message_takes_the_services_words(body: object, expected: str | None) -> None:
    assert service_message(body) == expected


def test_status_without_a_body_or_request_still_says_what_to_try() -> None:
    assert format_status_error(503) == (
        "The service answered HTTP 503 Service Unavailable. "
        "A fault on the service side; try again later."
    )
    assert format_status_error(499, "?") == "The service answered HTTP 499: ?."


def test_reading_a_result_field_on_the_future_says_call_result_first() -> None:
    future: APIFuture[Any] = APIFuture("req-1", request_type="TrainingClient.forward_backward")
    with pytest.raises(AttributeError, match=r"call \.result\(\) first \(\.result\(\)\.metrics\)"):
        future.metrics  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError) as info:
        future.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
    assert "result()" not in str(info.value)
    # The protocols that probe attributes keep working.
    assert not hasattr(future, "metrics")
    assert not hasattr(future, "__getstate_extra__")
    done = APIFuture.completed(3)
    assert done.result() == 3


def test_timeout_before_submission_names_no_request() -> None:
    future: APIFuture[Any] = APIFuture(request_type="TrainingClient.optim_step")
    with pytest.raises(concurrent.futures.TimeoutError) as info:
        future.result(timeout=0.01)
    text = str(info.value)
    assert "None" not in text
    assert "continues on the service" not in text
    assert "before the TrainingClient.optim_step request was accepted by the service" in text


# -- the CLI against a service that is not there ----------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def _quiet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "TINKER_BASE_URL",
        "TINKER_LITE_JOURNAL",
        "TINKER_LOG",
        "TINKER_LITE_STARTUP_TIMEOUT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINKER_API_KEY", SECRET)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")


@pytest.mark.usefixtures("_quiet_env")
@pytest.mark.parametrize("budget_from", ["flag", "env"])
def test_refused_port_fails_within_the_startup_budget(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, budget_from: str
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    argv = ["--base-url", url, "run", "list"]
    if budget_from == "flag":
        argv += ["--startup-timeout", "0.3"]
    else:
        monkeypatch.setenv("TINKER_LITE_STARTUP_TIMEOUT", "0.3")
    started = time.monotonic()
    code = main(argv)
    elapsed = time.monotonic() - started  # reported, not asserted: tests are no timing checks
    captured = capsys.readouterr()
    assert code == EXIT_CONNECTION, f"after {elapsed:.1f}s: {captured.err}"
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"tinker-lite: error: Connection refused by {url[7:]}")
    assert "check the base URL" in lines[0]
    assert "start-up budget of 0.3 s" in lines[0]
    assert "--startup-timeout or TINKER_LITE_STARTUP_TIMEOUT" in lines[0]
    assert SECRET not in captured.err


@pytest.mark.usefixtures("_quiet_env")
def test_dns_failure_says_so_plainly(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_such_host(host: Any, *args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    url = "http://tinker.nonexistent.invalid:8000"
    code = main(["run", "list", "--base-url", url, "--startup-timeout", "0.3"])
    err = capsys.readouterr().err
    assert code == EXIT_CONNECTION
    assert err.startswith(
        "tinker-lite: error: Cannot resolve the host name tinker.nonexistent.invalid "
        "(POST /api/v1/client/config): check the base URL"
    )
    assert "urllib3" not in err
    assert "NameResolutionError" not in err
    assert "Max retries" not in err
    assert len(err.splitlines()) == 1


@pytest.mark.usefixtures("_quiet_env")
def test_check_reports_a_refused_port_through_the_clients_transport(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = _closed_port()
    code = main(["check", "--base-url", f"http://127.0.0.1:{port}", "--startup-timeout", "1"])
    out = capsys.readouterr().out
    assert code == EXIT_CONNECTION
    server = next(line for line in out.splitlines() if line.startswith("Server:"))
    assert f"unreachable: Connection refused by 127.0.0.1:{port} (GET /api/v1/healthz)" in server
    assert "urllib3" not in out
    assert "HTTPConnectionPool" not in out


@pytest.mark.usefixtures("_quiet_env")
@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_bad_startup_budget_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    code = main(["run", "list", "--base-url", "http://127.0.0.1:9", "--startup-timeout", value])
    assert code == 2
    assert "--startup-timeout" in capsys.readouterr().err
    monkeypatch.setenv("TINKER_LITE_STARTUP_TIMEOUT", value)
    code = main(["run", "list", "--base-url", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("tinker-lite: error: TINKER_LITE_STARTUP_TIMEOUT: must be a positive")
