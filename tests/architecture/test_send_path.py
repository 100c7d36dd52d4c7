"""The send path has one seam per concern: a forward_backward reaches the socket through few
tinker_lite frames, entering each module once.

The frames are counted on the sending thread at the moment ``http.client.HTTPConnection.send``
writes ``POST /api/v1/forward_backward``: only frames whose file is in the package count.
"""

from __future__ import annotations

import http.client
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.support.paths import REPO
from tinker_lite import ServiceClient, types
from tinker_lite.local import LocalServer

PACKAGE = REPO / "tinker_lite"
MAX_FRAMES = 8


def _package_frames() -> list[tuple[str, str]]:
    """(module path, function) of the package's frames on this thread, outermost first."""
    frames: list[tuple[str, str]] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path.is_relative_to(PACKAGE):
            frames.append((str(path.relative_to(PACKAGE)), frame.f_code.co_name))
        frame = frame.f_back
    return frames[::-1]


@pytest.fixture
def stacks(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[str, str]]]:
    """The package frames seen when each request line is written (by method and path)."""
    seen: dict[str, list[tuple[str, str]]] = {}
    lock = threading.Lock()
    real_send = http.client.HTTPConnection.send

    def send(self: http.client.HTTPConnection, data: Any) -> None:
        if isinstance(data, bytes) and data[:5] in (b"POST ", b"GET /", b"PUT /", b"DELET"):
            line = data.split(b"\r\n", 1)[0].decode("latin-1").rsplit(" ", 1)[0]
            with lock:
                seen.setdefault(line, _package_frames())
        real_send(self, data)

    monkeypatch.setattr(http.client.HTTPConnection, "send", send)
    return seen


def _entries(frames: list[tuple[str, str]]) -> list[str]:
    """The modules in the order the call enters them (consecutive frames of one module: once)."""
    modules: list[str] = []
    for module, _ in frames:
        if not modules or modules[-1] != module:
            modules.append(module)
    return modules


def test_a_forward_backward_reaches_the_socket_through_few_frames_each_module_once(
    stacks: dict[str, list[tuple[str, str]]],
) -> None:
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3, 4]),
        loss_fn_inputs={"target_tokens": [2, 3, 4, 5], "weights": [1.0] * 4},
    )
    with LocalServer() as url, ServiceClient(base_url=url, telemetry=False) as service:
        trainer = service.create_lora_training_client("Qwen/Qwen3-8B", rank=8).result()
        trainer.forward_backward([datum], "cross_entropy").result(timeout=60)
    frames = stacks["POST /api/v1/forward_backward"]
    described = " -> ".join(f"{module}:{name}" for module, name in frames)
    assert len(frames) <= MAX_FRAMES, described
    entries = _entries(frames)
    assert len(entries) == len(set(entries)), described
    # The seams, in order: the client's ordered queue, its operation, the requestor's send,
    # the transport.
    assert entries == [
        "_training/queue.py",
        "_api/training.py",
        "_api/requestor.py",
        "_transport/http.py",
    ], described
