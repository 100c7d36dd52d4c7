"""Load the captured official-SDK requests and compare tinker_lite bodies with them.

The fixtures live next to the repository in ``../shared/wire/golden/`` (official SDK 0.4.1) and
``../shared/wire/golden-0.38/`` (0.38.0). tinker_lite follows docs/protocol.rst §1.2, which
departs from 0.4.1 on purpose, so both sides are normalised before comparing (the rules of the last
section of ``shared/wire/README.md``):

1. values of server-assigned / volatile keys are masked (presence still compared), and so is
   the run id inside ``tinker://<run>/...``;
2. keys whose value is ``null`` are dropped (tinker_lite never sends null);
3. documented defaults are filled where a body omits them: ``type`` discriminators at the top
   level and on every chunk, AdamParams, SamplingParams, LoraConfig, ``num_samples``,
   ``topk_prompt_logprobs``, plus the keys the profile always sends (``optimizer`` on
   load_weights, ``process_uuid`` on telemetry);
4. float32 tensors compare as float32 values, int64 tensors exactly.

Typical use from a client test::

    fixture = load_golden("optim_step_lr")
    assert_body_matches(fixture, recorded_request_body_bytes)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from tests.support.paths import SHARED

WIRE_DIR = SHARED / "wire"
GOLDEN_DIR = WIRE_DIR / "golden"
GOLDEN_038_DIR = WIRE_DIR / "golden-0.38"

VOLATILE = "<volatile>"

# README "Comparing": keys whose values the server assigned or that are random/time dependent.
VOLATILE_KEYS = frozenset(
    {
        "session_id",
        "model_id",
        "request_id",
        "sampling_session_id",
        "event_id",
        "timestamp",
        "platform",
        "process_uuid",
    }
)

# The `type` literal of each endpoint's request model (absent: the model has none).
ENDPOINT_TYPES: Mapping[str, str] = {
    "create_session": "create_session",
    "session_heartbeat": "session_heartbeat",
    "create_sampling_session": "create_sampling_session",
    "join_sampling_session": "join_sampling_session",
    "create_model": "create_model",
    "get_info": "get_info",
    "unload_model": "unload_model",
    "optim_step": "optim_step",
    "save_weights": "save_weights",
    "load_weights": "load_weights",
    "save_weights_for_sampler": "save_weights_for_sampler",
    "asample": "sample",
}

# Keys the tinker_lite profile always sends although 0.4.1 did not (docs/protocol.rst §3.1).
PROFILE_ALWAYS_SENT: Mapping[str, Mapping[str, Any]] = {
    "load_weights": {"optimizer": False},
    "create_model": {"optimizer_config": {"type": "adamw"}},
    "save_weights": {"overwrite": False},
    "save_weights_for_sampler": {"kind": "snapshot"},
    "retrieve_future": {"allow_metadata_only": False},
    "telemetry": {"process_uuid": VOLATILE},
}

NESTED_DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "adam_params": {
        "learning_rate": 0.0001,
        "beta1": 0.9,
        "beta2": 0.95,
        "eps": 1e-12,
        "weight_decay": 0.0,
        "grad_clip_norm": 0.0,
    },
    "sampling_params": {"temperature": 1.0, "top_k": -1, "top_p": 1.0},
    "lora_config": {"rank": 32, "train_unembed": True, "train_mlp": True, "train_attn": True},
}

TOP_LEVEL_DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "asample": {"num_samples": 1, "topk_prompt_logprobs": 0},
}

_TINKER_RUN = re.compile(r"^tinker://[^/]+/")


def golden_names(version: str = "0.4.1") -> list[str]:
    """Names (file stems) of every fixture of ``version`` ("0.4.1" or "0.38")."""
    directory = GOLDEN_DIR if version == "0.4.1" else GOLDEN_038_DIR
    return sorted(path.stem for path in directory.glob("*.json"))


@cache
def _load(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def load_golden(name: str, *, version: str = "0.4.1") -> dict[str, Any]:
    """Return one fixture (a fresh dict each call) by file stem."""
    directory = GOLDEN_DIR if version == "0.4.1" else GOLDEN_038_DIR
    fixture: dict[str, Any] = json.loads(_load(str(directory / f"{name}.json")))
    return fixture


def endpoint_of(path: str) -> str:
    """``/api/v1/optim_step`` -> ``optim_step``; REST paths keep their full tail."""
    return path.split("?", 1)[0].removeprefix("/api/v1/")


def _chunk_type(chunk: Mapping[str, Any]) -> str:
    if "tokens" in chunk and isinstance(chunk["tokens"], list):
        return "encoded_text"
    if "location" in chunk:
        return "image_asset_pointer"
    return "image"


def _mask_tinker_path(value: str) -> str:
    return _TINKER_RUN.sub("tinker://<run>/", value)


def _normalise(value: Any, key: str | None, volatile: frozenset[str]) -> Any:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for item_key, item in value.items():
            if item is None:
                continue
            if item_key in volatile:
                out[item_key] = VOLATILE
                continue
            out[item_key] = _normalise(item, item_key, volatile)
        if key is not None and key in NESTED_DEFAULTS:
            for default_key, default in NESTED_DEFAULTS[key].items():
                out.setdefault(default_key, default)
        if "dtype" in out and isinstance(out.get("data"), list):
            out["data"] = _tensor_values(out["data"], out["dtype"])
        return out
    if isinstance(value, list):
        items = [_normalise(item, None, volatile) for item in value]
        if key == "chunks":
            for chunk in items:
                if isinstance(chunk, dict):
                    chunk.setdefault("type", _chunk_type(chunk))
        return items
    if isinstance(value, str):
        return _mask_tinker_path(value)
    return value


def _tensor_values(data: list[Any], dtype: str) -> list[Any]:
    if dtype == "float32":
        values: list[Any] = np.asarray(data, dtype=np.float32).astype(np.float64).tolist()
        return values
    if dtype == "int64":
        ints = np.asarray(data)
        if ints.dtype.kind == "f":
            # A float list labelled int64 must hold integral values to be comparable.
            assert bool(np.all(ints == np.trunc(ints))), f"non-integral int64 tensor {data}"
        return [int(v) for v in ints.tolist()]
    return data


def normalise_body(
    body: Any, *, endpoint: str | None = None, volatile_keys: Iterable[str] = ()
) -> Any:
    """Return ``body`` (parsed JSON, or None) normalised for comparison (see module docstring).

    ``endpoint`` (e.g. ``"optim_step"``) lets the endpoint's ``type`` discriminator and the
    profile's always-sent keys be filled in.
    """
    if body is None:
        return None
    volatile = VOLATILE_KEYS | frozenset(volatile_keys)
    out = _normalise(body, None, volatile)
    if isinstance(out, dict) and endpoint is not None:
        if endpoint in ENDPOINT_TYPES:
            out.setdefault("type", ENDPOINT_TYPES[endpoint])
        for default_key, default in TOP_LEVEL_DEFAULTS.get(endpoint, {}).items():
            out.setdefault(default_key, default)
        for default_key, default in PROFILE_ALWAYS_SENT.get(endpoint, {}).items():
            out.setdefault(default_key, default)
    return out


def _parse(ours: Any) -> Any:
    if isinstance(ours, (bytes, bytearray, memoryview)):
        return json.loads(bytes(ours))
    if isinstance(ours, str):
        return json.loads(ours)
    return ours


def assert_body_matches(
    fixture: Mapping[str, Any] | Any, ours: Any, *, endpoint: str | None = None
) -> None:
    """Assert that ``ours`` (JSON bytes/str, parsed JSON or None) matches a fixture's body.

    ``fixture`` is a whole fixture dict (from :func:`load_golden`; its path and
    ``volatile_body_keys`` are used) or a bare body (then pass ``endpoint`` to fill the
    endpoint's ``type``).
    """
    volatile: Iterable[str] = ()
    if isinstance(fixture, Mapping) and "call" in fixture and "path" in fixture:
        expected_body = fixture["body"]
        endpoint = endpoint or endpoint_of(fixture["path"])
        volatile = fixture.get("volatile_body_keys", ())
    else:
        expected_body = fixture
    ours_body = _parse(ours)
    if expected_body is None or ours_body is None:
        if expected_body is not None or ours_body is not None:
            raise AssertionError(
                f"body presence differs: fixture {expected_body!r:.200}, ours {ours_body!r:.200}"
            )
        return
    expected = normalise_body(expected_body, endpoint=endpoint, volatile_keys=volatile)
    actual = normalise_body(ours_body, endpoint=endpoint, volatile_keys=volatile)
    if expected != actual:
        raise AssertionError(
            "body differs from the fixture after normalisation:\n"
            + _diff(expected, actual)
            + f"\nfixture: {json.dumps(expected, sort_keys=True)[:2000]}"
            + f"\nours:    {json.dumps(actual, sort_keys=True)[:2000]}"
        )


def _diff(expected: Any, actual: Any, path: str = "$") -> str:
    if isinstance(expected, dict) and isinstance(actual, dict):
        lines = []
        for key in sorted(set(expected) | set(actual)):
            if key not in actual:
                lines.append(f"  {path}.{key}: missing in ours (fixture {expected[key]!r:.80})")
            elif key not in expected:
                lines.append(f"  {path}.{key}: extra in ours ({actual[key]!r:.80})")
            elif expected[key] != actual[key]:
                lines.append(_diff(expected[key], actual[key], f"{path}.{key}"))
        return "\n".join(lines)
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return "\n".join(
            _diff(e, a, f"{path}[{i}]")
            for i, (e, a) in enumerate(zip(expected, actual, strict=False))
            if e != a
        )
    return f"  {path}: fixture {expected!r:.120} != ours {actual!r:.120}"
