"""A SamplingClient handed to worker processes: one connection per worker, a join per copy, the
step's weights, and the API key left out of the pickle unless the driver opts in.

The worker is a fresh Python process (``WORKER`` below) given pickled clients on stdin, with an
environment of its own, against the local server over HTTP; the server's counters say what it
sent. ``tests/loopback/test_rl_ray.py`` checks the same on a Ray cluster.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.handover import (  # noqa: F401 - fixtures used by name
    KEY,
    MODEL,
    keyed_fixture,
    server_fixture,
)
from tests.support.paths import REPO
from tinker_lite import InvalidInputError, SamplingClient, ServiceClient, types
from tinker_lite.local import LocalServer
from tinker_lite.sampling_client import carry_api_key

PROMPT = [85, 115, 101, 114, 58, 32, 104, 105]

# Unpickles each client it is given, samples with it ``repeat`` times and reports per client:
# the clone number the service gave the copy and the last sample, or the error's type and text.
WORKER = """
import base64, json, pickle, sys
from tinker_lite import types
job = json.load(sys.stdin)
out = []
for blob in job["pickles"]:
    try:
        sampler = pickle.loads(base64.b64decode(blob))
        params = types.SamplingParams(max_tokens=6, seed=job["seed"])
        prompt = types.ModelInput.from_ints(job["prompt"])
        for _ in range(job["repeat"]):
            seq = sampler.sample(prompt, 1, params).result(timeout=60).sequences[0]
        out.append({"clone": sampler._cloned_sampler_id, "tokens": list(seq.tokens),
                    "logprobs": list(seq.logprobs)})
    except Exception as e:
        out.append({"error": type(e).__name__, "message": str(e)})
print(json.dumps(out))
"""


def run_worker(
    pickles: list[bytes], *, env: Mapping[str, str] | None = None, repeat: int = 1, seed: int = 5
) -> list[dict[str, Any]]:
    """Run ``WORKER`` in a new process (no TINKER_* variable but those in ``env``)."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    child_env.update(TINKER_TELEMETRY="0", PYTHONPATH=str(REPO), **(env or {}))
    job = {
        "pickles": [base64.b64encode(p).decode() for p in pickles],
        "repeat": repeat,
        "seed": seed,
        "prompt": PROMPT,
    }
    done = subprocess.run(
        [sys.executable, "-c", WORKER],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=child_env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result


def requests_delta(before: Mapping[str, int], after: Mapping[str, int], path: str) -> int:
    return after.get(path, 0) - before.get(path, 0)


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No credential anywhere, for this process and the workers it starts: a HOME of its own."""
    for name in [n for n in os.environ if n.startswith("TINKER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_a_worker_connects_once_and_joins_each_steps_sampler(server: LocalServer) -> None:
    with ServiceClient(base_url=server.base_url) as service:
        training = service.create_lora_training_client(MODEL, rank=4, seed=0).result()
        steps = [training.save_weights_and_get_sampling_client().result() for _ in range(3)]
        before = server.stats()["requests"]
        results = run_worker([pickle.dumps(s) for s in steps], repeat=2)
        after = server.stats()["requests"]
    assert [r.get("error") for r in results] == [None] * 3
    # One connection for the three steps, one join per step's sampler, no session of its own.
    assert requests_delta(before, after, "/api/v1/client/config") == 1
    assert requests_delta(before, after, "/api/v1/join_sampling_session") == 3
    assert requests_delta(before, after, "/api/v1/create_session") == 0
    assert requests_delta(before, after, "/api/v1/asample") == 6
    assert server.stats()["sessions"] == 1
    # Each step's sampler is a sampling session of its own: the worker is its first copy.
    assert [r["clone"] for r in results] == [1, 1, 1]


def test_a_worker_samples_the_weights_of_the_step_it_was_given(server: LocalServer) -> None:
    with ServiceClient(base_url=server.base_url) as service:
        training = service.create_lora_training_client(MODEL, rank=4, seed=0).result()
        given = training.save_weights_and_get_sampling_client().result()
        handed = pickle.dumps(given)
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(PROMPT[:-1]),
            loss_fn_inputs={"target_tokens": PROMPT[1:]},
        )
        for _ in range(3):
            training.forward_backward([datum], "cross_entropy").result()
            training.optim_step(types.AdamParams(learning_rate=0.1)).result()
        replaced = training.save_weights_and_get_sampling_client().result()
        (result,) = run_worker([handed])  # sampled after the weights were replaced
        full = types.ModelInput.from_ints(PROMPT + result["tokens"])
        n = len(result["tokens"])
        as_given = given.compute_logprobs(full).result()[-n:]
        as_replaced = replaced.compute_logprobs(full).result()[-n:]
    assert max(abs(a - b) for a, b in zip(as_given, result["logprobs"], strict=True)) < 1e-4
    assert max(abs(a - b) for a, b in zip(as_replaced, result["logprobs"], strict=True)) > 1e-2


def test_the_key_stays_out_of_the_pickle_and_the_worker_uses_its_own(keyed: LocalServer) -> None:
    with ServiceClient(base_url=keyed.base_url, api_key=KEY) as service:
        sampler = service.create_sampling_client(base_model=MODEL).result()
        plain = pickle.dumps(sampler)
        handle = sampler.get_sampler_handle()
        assert KEY.encode() not in plain
        assert KEY not in base64.urlsafe_b64decode(handle).decode()
        without, own = (
            run_worker([plain])[0],
            run_worker([plain], env={"TINKER_API_KEY": KEY})[0],
        )
        other = run_worker([plain], env={"TINKER_API_KEY": "tml-someone-else"})[0]
        carried = pickle.dumps(carry_api_key(sampler))
        assert KEY.encode() in carried
        assert run_worker([carried])[0].get("error") is None
        assert KEY.encode() not in pickle.dumps(sampler)  # the client itself still carries none
    # No key of its own: the service refuses the worker (a typed error), it never borrows one.
    assert without["error"] == "AuthenticationError"
    assert own.get("error") is None
    assert other["error"] == "AuthenticationError"
    assert "tml-someone-else" not in other["message"]


def test_a_worker_uses_every_credential_source_of_service_client(
    keyed: LocalServer, tmp_path: Path
) -> None:
    # The worker's credential is resolved as ServiceClient() resolves it: here a stored login,
    # ~/.tinker/credentials.json in the format `tinker auth login` writes.
    pytest.importorskip(
        "tinker_lite._session.credentials_file", reason="no stored-login credential source"
    )
    stored = tmp_path / ".tinker" / "credentials.json"
    stored.parent.mkdir(mode=0o700)
    details = {"org_details": {"name": "Acme"}, "user_details": {"email": "ada@acme.example"}}
    login = {"type": "manual", "key": KEY, "name": "worker", "note": "", "details": details}
    stored.write_text(json.dumps({"version": 1, "default": "1", "keys": {"1": login}}))
    stored.chmod(0o600)
    with ServiceClient(base_url=keyed.base_url, api_key=KEY) as service:
        plain = pickle.dumps(service.create_sampling_client(base_model=MODEL).result())
        assert KEY.encode() not in plain
        (result,) = run_worker([plain])
    assert result.get("error") is None


def _remote_copy(carry: bool) -> bytes:
    """A pickled client of a remote service, made without sending anything."""
    service = ServiceClient(base_url="https://tinker.invalid", api_key=KEY)
    try:
        sampler = SamplingClient(service._context, "session:sample:0", base_model=MODEL)
        return pickle.dumps(carry_api_key(sampler) if carry else sampler)
    finally:
        service.close()


def test_a_worker_without_credentials_is_told_how_to_give_it_some(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blob = _remote_copy(carry=False)
    with pytest.raises(InvalidInputError) as raised:
        pickle.loads(blob)
    assert raised.value.field == "api_key"
    assert "TINKER_API_KEY" in str(raised.value)
    assert "carry_api_key" in str(raised.value)
    # Its own credentials, resolved as ServiceClient() resolves them.
    monkeypatch.setenv("TINKER_API_KEY", "tml-worker-key")
    copy = pickle.loads(blob)
    try:
        assert copy._context.holder.settings.api_key == "tml-worker-key"
    finally:
        copy._context.close()


def test_a_carried_key_wins_and_its_connection_is_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-worker-key")
    blob = _remote_copy(carry=True)
    first, second = pickle.loads(blob), pickle.loads(blob)
    handle = first.get_sampler_handle()
    by_handle = SamplingClient.from_sampler_handle(handle, api_key=KEY)
    try:
        assert isinstance(first, SamplingClient)
        assert first._context.holder.settings.api_key == KEY
        assert second._context is first._context
        assert by_handle._context is first._context
        assert "tml-" not in repr(first._context.holder.settings)
        assert KEY not in repr(carry_api_key(first))
        # A copy passes the key on only when handed over the same way again.
        assert KEY.encode() not in pickle.dumps(first)
    finally:
        first._context.close()


def test_a_connection_without_a_key_has_none_to_carry(server: LocalServer) -> None:
    with ServiceClient(base_url=server.base_url) as service:
        sampler = service.create_sampling_client(base_model=MODEL).result()
        with pytest.raises(InvalidInputError, match="no API key to carry"):
            carry_api_key(sampler)
    with pytest.raises(InvalidInputError, match="must be a SamplingClient"):
        carry_api_key("not a client")  # type: ignore[arg-type]


def test_record_stability_info_travels_with_the_copy(server: LocalServer) -> None:
    with ServiceClient(base_url=server.base_url) as service:
        creating = service.create_sampling_client(base_model=MODEL, record_stability_info=True)
        sampler = creating.result()
        copies = [
            pickle.loads(pickle.dumps(sampler)),
            SamplingClient.from_sampler_handle(sampler.get_sampler_handle()),
        ]
        assert [c.record_stability_info for c in copies] == [True, True]
