"""Public surface: APIFuture.forward_from, lazy exports, and what the API docs show."""

from __future__ import annotations

import concurrent.futures
import inspect
import re
import subprocess
import sys

import pytest

import tinker_lite
from tests.support.paths import REPO
from tinker_lite import APIFuture

# -- APIFuture.forward_from / try_set_* -------------------------------------------------------


def test_forward_from_delivers_result_error_and_request_id() -> None:
    source: APIFuture[int] = APIFuture("req-1")
    order: list[str] = []
    # Added before forward_from: runs before ``out`` completes (how the journal hooks in).
    source.add_done_callback(lambda _: order.append("source callback"))
    out: APIFuture[int] = APIFuture(request_type="Thing")
    out.forward_from(source)
    assert out.request_id == "req-1"
    assert not out.done()
    out.add_done_callback(lambda _: order.append("out callback"))
    assert source.try_set_result(7)
    assert out.result(timeout=0) == 7
    assert order == ["source callback", "out callback"]
    assert not source.try_set_result(8)  # already done: no InvalidStateError

    failing: APIFuture[int] = APIFuture("req-2")
    out2: APIFuture[int] = APIFuture()
    out2.forward_from(failing)
    error = RuntimeError("boom")
    assert failing.try_set_exception(error)
    assert out2.exception(timeout=0) is error


def test_forward_from_cancellation_goes_both_ways() -> None:
    source: APIFuture[int] = APIFuture("req-1")
    out: APIFuture[int] = APIFuture()
    out.forward_from(source)
    assert out.cancel()
    assert source.cancelled()

    early: APIFuture[int] = APIFuture()
    assert early.cancel()
    later: APIFuture[int] = APIFuture("req-2")
    early.forward_from(later)  # cancelled before its request was even submitted
    assert later.cancelled()

    upstream: APIFuture[int] = APIFuture("req-3")
    downstream: APIFuture[int] = APIFuture()
    downstream.forward_from(upstream)
    upstream.cancel()
    assert downstream.cancelled()
    with pytest.raises(concurrent.futures.CancelledError):
        downstream.result(timeout=0)


def test_forward_from_an_already_completed_future() -> None:
    out: APIFuture[str] = APIFuture()
    out.forward_from(APIFuture.completed("done", request_id="req-9"))
    assert out.result(timeout=0) == "done"
    assert out.request_id == "req-9"


def test_clients_use_no_private_future_members() -> None:
    pattern = re.compile(r"\._(resolve|fail|sources|cancel_hook)\b")
    for name in ("service_client", "training_client", "sampling_client", "rest_client"):
        source = (REPO / "tinker_lite" / f"{name}.py").read_text(encoding="utf-8")
        assert not pattern.search(source), f"tinker_lite/{name}.py uses a private APIFuture member"


# -- lazy exports -----------------------------------------------------------------------------


def test_progress_gather_and_validation_report_are_public_and_lazy() -> None:
    from tinker_lite import Progress, ValidationReport, gather
    from tinker_lite._progress import Progress as RealProgress
    from tinker_lite._progress import gather as real_gather
    from tinker_lite._training.validate import ValidationReport as RealReport

    assert Progress is RealProgress
    assert gather is real_gather
    assert ValidationReport is RealReport
    for name in ("Progress", "gather", "ValidationReport"):
        assert name in tinker_lite.__all__
        assert name in dir(tinker_lite)
    assert tinker_lite.__all__ == sorted(tinker_lite.__all__)
    code = (
        "import sys, tinker_lite; "
        "print(sorted(m for m in ('tinker_lite._progress', 'tinker_lite._training.validate') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert out.strip() == "[]"


def test_examples_and_docs_import_progress_helpers_publicly() -> None:
    for path in (REPO / "examples" / "rl_loop.py", REPO / "docs" / "configuration.rst"):
        text = path.read_text(encoding="utf-8")
        assert "tinker_lite._progress" not in text, path
    assert "from tinker_lite import gather" in (REPO / "docs" / "configuration.rst").read_text()


# -- API docs ---------------------------------------------------------------------------------


def test_service_client_signature_hides_private_options() -> None:
    parameters = inspect.signature(tinker_lite.ServiceClient).parameters
    assert "_session_options" not in parameters
    assert parameters["journal"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["max_retries"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "journal" in (tinker_lite.ServiceClient.__doc__ or "")


def test_api_docs_name_validation_report_publicly() -> None:
    api = (REPO / "docs" / "api.rst").read_text(encoding="utf-8")
    assert ".. autoclass:: tinker_lite.ValidationReport" in api
    assert "tinker_lite._training.validate" not in api
