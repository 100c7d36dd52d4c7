"""A TrainingClient no longer used gives back its submit thread, while its connection lives on.

A long-lived ServiceClient that creates training clients again and again (a loop resuming from
its last checkpoint after an error, a sweep) must not keep one thread per client it created.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest

import tinker_lite as tinker
from tinker_lite.local import LocalServer

BASE_MODEL = "tinker-lite/tiny-64"
DATUM = tinker.types.Datum(
    model_input=tinker.types.ModelInput.from_ints([1, 2, 3]),
    loss_fn_inputs={"target_tokens": [2, 3, 4]},
)


@pytest.fixture
def service() -> Iterator[tinker.ServiceClient]:
    with LocalServer(stub_model=True) as url:
        client = tinker.ServiceClient(base_url=url, telemetry=False)
        yield client
        client.close()


def _train_threads(baseline: set[threading.Thread]) -> list[threading.Thread]:
    return [
        t
        for t in threading.enumerate()
        if t not in baseline and t.name.startswith("tinker-lite-train")
    ]


def test_dropped_training_clients_end_their_threads(service: tinker.ServiceClient) -> None:
    baseline = set(threading.enumerate())
    for _ in range(4):
        trainer = service.create_lora_training_client(BASE_MODEL, rank=8).result()
        trainer.forward_backward([DATUM], "cross_entropy").result(timeout=30)
        del trainer
    gc.collect()
    deadline = time.monotonic() + 10.0
    for thread in _train_threads(baseline):
        thread.join(max(0.0, deadline - time.monotonic()))
    assert [t.name for t in _train_threads(baseline)] == []
    # the connection goes on: a new training client trains as before
    trainer = service.create_lora_training_client(BASE_MODEL, rank=8).result()
    assert trainer.forward_backward([DATUM], "cross_entropy").result(timeout=30).metrics
    assert len(_train_threads(baseline)) == 1


def test_a_submit_queued_by_a_dropped_client_is_still_sent(
    service: tinker.ServiceClient,
) -> None:
    trainer = service.create_lora_training_client(BASE_MODEL, rank=8).result()
    future = trainer.forward_backward([DATUM], "cross_entropy")
    del trainer
    gc.collect()  # the TrainingClient is gone; its queued submit is not
    assert future.result(timeout=30).loss_fn_outputs
