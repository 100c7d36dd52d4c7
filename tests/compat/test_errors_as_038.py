"""The errors built the way code written for 0.38 builds them (in its tests, mostly).

0.38 builds its status errors from an ``httpx.Response`` (``BadRequestError(message,
response=..., body=None)``), its connection errors from an ``httpx.Request``. httpx is not a
dependency of tinker_lite: these tests use a stand-in with httpx's attributes (its ``request``
raises ``RuntimeError`` when unset, as httpx's does) and requests' own ``Response``; with the
official SDK's virtualenv (``make test-official``), one script runs on both SDKs with the real
httpx.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
from requests.structures import CaseInsensitiveDict

import tinker_lite as tinker
from tests.support.paths import REPO
from tinker_lite._errors import describe_error, status_error_class

SECRET = "tml-never-shown-0123456789abcdef"
COOKIE = "session=opaque-cookie-value-42"
URL = "http://backend/sample"

# Every status error class of 0.38 with its status (InternalServerError: any 5xx).
STATUS_CLASSES: list[tuple[type[tinker.APIStatusError], int]] = [
    (tinker.BadRequestError, 400),
    (tinker.AuthenticationError, 401),
    (tinker.BillingError, 402),
    (tinker.PermissionDeniedError, 403),
    (tinker.NotFoundError, 404),
    (tinker.ConflictError, 409),
    (tinker.UnprocessableEntityError, 422),
    (tinker.RateLimitError, 429),
    (tinker.InternalServerError, 503),
]


class Request:
    """An ``httpx.Request`` as the errors read it."""

    def __init__(self, method: str, url: str, headers: dict[str, str] | None = None) -> None:
        self.method = method
        self.url = url
        self.headers = headers or {}


class Response:
    """An ``httpx.Response`` as the errors read it; ``request`` raises when unset, as in httpx."""

    def __init__(
        self,
        status_code: int,
        headers: dict[str, str] | None = None,
        request: Request | None = None,
    ) -> None:
        self.status_code = status_code
        self.headers = headers or {}
        self._request = request

    @property
    def request(self) -> Request:
        if self._request is None:
            raise RuntimeError("The request instance has not been set on this response.")
        return self._request


def _secret_headers() -> dict[str, str]:
    return {
        "content-type": "application/json",
        "x-request-id": "req-038",
        "x-api-key": SECRET,
        "Authorization": f"Bearer {SECRET}",
        "set-cookie": COOKIE,
    }


def _standin(status: int = 400) -> Response:
    return Response(status, _secret_headers(), Request("POST", URL, {"X-API-Key": SECRET}))


def _requests_response(status: int = 400) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.headers = CaseInsensitiveDict(_secret_headers())
    response.request = requests.Request("POST", URL, headers={"X-API-Key": SECRET}).prepare()
    return response


RESPONSES = [
    pytest.param(_standin, id="httpx-like"),
    pytest.param(_requests_response, id="requests"),
]


def _assert_shows_no_secret(error: BaseException) -> None:
    for text in (str(error), repr(error), describe_error(error), repr(vars(error))):
        assert SECRET not in text
        assert COOKIE not in text
    data = pickle.dumps(error)
    assert SECRET.encode() not in data
    assert COOKIE.encode() not in data


# -- status errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("make", RESPONSES)
def test_the_cookbook_form_builds_a_bad_request(make: Any) -> None:
    response = make(400)
    error = tinker.BadRequestError("backend refused", response=response, body=None)
    assert isinstance(error, tinker.BadRequestError)
    assert isinstance(error, tinker.APIStatusError)
    assert isinstance(error, tinker.APIError)
    assert (error.status_code, error.request_id, error.body) == (400, "req-038", None)
    assert error.request is response.request
    assert error.response is response
    assert (error.message, str(error)) == ("backend refused", "backend refused")
    assert error.headers["content-type"] == "application/json"
    # A credential or cookie a response carries is masked; the names stay.
    assert error.headers["x-api-key"] == "***"
    assert error.headers["Authorization"] == "***"
    assert error.headers["set-cookie"] == "***"
    _assert_shows_no_secret(error)


@pytest.mark.parametrize(("cls", "status"), STATUS_CLASSES, ids=lambda c: getattr(c, "__name__", c))
def test_every_status_error_takes_message_response_body_positionally(
    cls: type[tinker.APIStatusError], status: int
) -> None:
    response = _standin(status)
    error = cls("no", response, {"detail": "no"})
    assert type(error) is cls
    assert (error.status_code, error.body, error.response) == (status, {"detail": "no"}, response)
    assert status_error_class(status) is cls
    # Without a response nor a status, each class has its own.
    assert cls("no").status_code == (500 if status >= 500 else status)
    assert cls.status_code == error.status_code or status >= 500


def test_the_status_classes_carry_0_38s_statuses() -> None:
    assert [cls.status_code for cls, _ in STATUS_CLASSES[:-1]] == [
        400,
        401,
        402,
        403,
        404,
        409,
        422,
        429,
    ]
    assert tinker.PromiseExpiredError.status_code == 410
    assert tinker.InvalidInputError("limit", "must be >= 1").status_code == 400
    with pytest.raises(TypeError, match="needs a status_code or a response"):
        tinker.APIStatusError("which status?")


def test_a_response_without_its_request_and_the_keywords_given_win() -> None:
    response = Response(404, {"X-Request-ID": "req-7"})
    error = tinker.NotFoundError("gone", response=response, body=None)
    assert (error.status_code, error.request_id, error.request) == (404, "req-7", None)
    # tinker_lite's keywords over what the response says.
    given = tinker.APIStatusError("gone", response, status_code=410, request_id="req-8")
    assert (given.status_code, given.request_id, given.headers) == (
        410,
        "req-8",
        {"X-Request-ID": "req-7"},
    )


def test_tinker_lite_keywords_are_unchanged() -> None:
    error = tinker.RateLimitError(
        "slow down", status_code=429, body={"detail": "slow"}, request_id="r", headers={"a": "b"}
    )
    assert (error.status_code, error.body, error.request_id, error.headers) == (
        429,
        {"detail": "slow"},
        "r",
        {"a": "b"},
    )
    assert (error.response, error.request) == (None, None)


@pytest.mark.parametrize("make", RESPONSES)
def test_a_built_error_pickles_with_its_status_headers_and_id(make: Any) -> None:
    error = tinker.ConflictError("taken", make(409), {"detail": "taken"})
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is tinker.ConflictError
    assert (copy.status_code, copy.request_id, copy.body, str(copy)) == (
        409,
        "req-038",
        {"detail": "taken"},
        "taken",
    )
    assert copy.headers == error.headers
    assert copy.headers["x-api-key"] == "***"
    # The response and request objects stay behind: they hold the credentials unredacted.
    assert (copy.response, copy.request) == (None, None)
    assert repr(copy) == repr(error)
    assert describe_error(copy) == describe_error(error)


def test_a_built_error_reads_with_its_own_words() -> None:
    error = tinker.BadRequestError("the prompt is too long", response=_standin(400), body=None)
    assert describe_error(error) == (
        "the prompt is too long (HTTP 400 Bad Request) (request id req-038). "
        "Check the arguments of the call."
    )


# -- connection, timeout, validation errors ------------------------------------------------------


def test_connection_and_timeout_errors_take_the_request() -> None:
    request = Request("POST", URL, {"X-API-Key": SECRET})
    connection = tinker.APIConnectionError(request=request)
    timeout = tinker.APITimeoutError(request=request)
    assert (connection.message, connection.request) == ("Connection error.", request)
    assert (timeout.message, timeout.request) == ("Request timed out.", request)
    assert isinstance(timeout, tinker.APIConnectionError)
    base = tinker.APIError("failed", request, body={"detail": "x"})
    assert (base.message, base.request, base.body) == ("failed", request, {"detail": "x"})
    for error in (connection, timeout, base):
        _assert_shows_no_secret(error)
        copy = pickle.loads(pickle.dumps(error))
        assert (type(copy), copy.message, copy.request) == (type(error), error.message, None)


@pytest.mark.parametrize("make", RESPONSES)
def test_a_validation_error_takes_the_response_and_body(make: Any) -> None:
    response = make(200)
    error = tinker.APIResponseValidationError(response=response, body={"unexpected": 1})
    assert (error.status_code, error.request_id, error.body) == (200, "req-038", {"unexpected": 1})
    assert (error.response, error.request) == (response, response.request)
    assert error.message
    _assert_shows_no_secret(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.status_code, copy.request_id, copy.response) == (200, "req-038", None)


# -- the real httpx, on both SDKs ----------------------------------------------------------------

OFFICIAL_VENV = Path(
    os.environ.get("TINKER_OFFICIAL_VENV")
    or Path.home() / ".cache" / "tinker-lite-bench" / "official-venv"
)
OFFICIAL_PYTHON = OFFICIAL_VENV / "bin" / "python"
# httpx and what it imports, lent from the official venv to this one's Python (the same version).
HTTPX_PACKAGES = ("httpx", "httpcore", "h11", "anyio", "sniffio")

BUILD_SCRIPT = """
import json, pickle

import httpx
import tinker

request = httpx.Request("POST", "http://backend/sample")
out = {}
for name, status in [("BadRequestError", 400), ("AuthenticationError", 401),
                     ("BillingError", 402), ("PermissionDeniedError", 403),
                     ("NotFoundError", 404), ("ConflictError", 409),
                     ("UnprocessableEntityError", 422), ("RateLimitError", 429),
                     ("InternalServerError", 503)]:
    cls = getattr(tinker, name)
    response = httpx.Response(status, headers={"x-request-id": "req-1"}, request=request)
    error = cls("refused", response=response, body=None)
    copy = pickle.loads(pickle.dumps(cls("refused", response, {"detail": "x"})))
    out[name] = [
        type(error).__name__, error.status_code, error.message, str(error), error.body,
        error.response is response, error.request is request,
        isinstance(error, tinker.APIStatusError), isinstance(error, tinker.APIError),
        cls.status_code if status < 500 else "5xx",
        [type(copy).__name__, copy.status_code, copy.message, copy.body],
    ]
connection = tinker.APIConnectionError(request=request)
timeout = tinker.APITimeoutError(request=request)
out["connection"] = [connection.message, connection.request is request]
out["timeout"] = [timeout.message, timeout.request is request]
response = httpx.Response(200, request=request)
validation = tinker.APIResponseValidationError(response=response, body={"a": 1})
out["validation"] = [validation.status_code, validation.body, validation.response is response]
error = tinker.APIError("failed", request, body=None)
out["api"] = [error.message, error.request is request, error.body]
print(json.dumps(out))
"""


def _official_site_packages() -> Path | None:
    found = sorted(OFFICIAL_VENV.glob("lib/python*/site-packages"))
    return found[0] if found else None


@pytest.mark.skipif(
    os.environ.get("TINKER_LITE_OFFICIAL") != "1"
    or not OFFICIAL_PYTHON.exists()
    or not (OFFICIAL_VENV / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}").exists(),
    reason="opt-in: make test-official (needs the official SDK 0.38 venv, on this Python)",
)
def test_the_same_construction_reads_the_same_on_both_sdks_with_httpx(tmp_path: Path) -> None:
    site = _official_site_packages()
    assert site is not None
    lent = tmp_path / "httpx-only"
    lent.mkdir()
    for name in HTTPX_PACKAGES:
        (lent / name).symlink_to(site / name)
    script = tmp_path / "build_errors.py"
    script.write_text(BUILD_SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINKER", "PYTHONPATH"))}
    outputs = []
    for command, path in (
        ([str(OFFICIAL_PYTHON), str(script)], ""),
        ([sys.executable, "-m", "tinker_lite.as_tinker", str(script)], f"{REPO}{os.pathsep}{lent}"),
    ):
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env={**env, "PYTHONPATH": path},
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        outputs.append(json.loads(result.stdout))
    official, lite = outputs
    assert lite == official
    assert lite["BadRequestError"][:2] == ["BadRequestError", 400]
