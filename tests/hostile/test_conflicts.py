"""A 409 for a checkpoint name that exists fails within seconds with ConflictError naming the
name, instead of being retried for the whole stall timeout (issue: 300 s by default)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from tests.hostile.servers import HostileServer, Request, reply
from tests.support.holder import requests_over
from tinker_lite import ConflictError, ServiceClient
from tinker_lite.local import LocalServer

SAVE = "/api/v1/save_weights"


def test_saving_under_an_existing_name_fails_within_seconds() -> None:
    with (
        LocalServer() as url,
        ServiceClient(base_url=url, telemetry=False, stall_timeout=30) as service,
    ):
        trainer = service.create_lora_training_client("tinker-lite/tiny-64", rank=8).result()
        trainer.save_state("ckpt-taken").result(timeout=30)
        started = time.monotonic()
        with pytest.raises(ConflictError) as info:
            trainer.save_state("ckpt-taken").result(timeout=60)
        elapsed = time.monotonic() - started
    # Before: the whole stall timeout (here 30 s; 300 s by default).
    assert elapsed < 5.0, elapsed
    assert "ckpt-taken" in str(info.value)
    assert info.value.status_code == 409


def test_a_409_is_tried_three_times_at_most() -> None:
    body = json.dumps({"detail": "Checkpoint already exists: tinker://run/weights/x"}).encode()

    def answer(request: Request, sock: socket.socket) -> None:
        if request.path.endswith("/client/config"):
            reply(sock, 404, b"{}")
        else:
            reply(sock, 409, body)

    with HostileServer(answer) as server, requests_over(server.url, stall_timeout=30) as api:
        started = time.monotonic()
        with pytest.raises(ConflictError) as info:
            api.call("POST", SAVE, body=b"{}")
        elapsed = time.monotonic() - started
    assert server.paths().count(f"POST {SAVE}") == 3  # the first try and two retries
    assert elapsed < 3.0, elapsed  # back-offs of about 0.5 s and 1 s
    assert "tinker://run/weights/x" in str(info.value)
