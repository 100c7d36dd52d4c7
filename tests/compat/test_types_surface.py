"""Every ``types`` class and field of the official 0.38 surface exists, with the official default.

The facts come from ``/work/shared/api/official-0.38-surface.json`` (its ``types`` section).
Where tinker_lite differs on purpose, the difference is in ``ALLOWED`` with its reason; an entry
that is no longer needed fails the test, so the list stays honest. (The top-level names and
method signatures are checked by ``test_surface.py``.)
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import json
import subprocess
import sys
from typing import Any

import attrs
import pytest

from tests.support.paths import SHARED
from tinker_lite import InvalidInputError, types

# The class of ``attrs.Factory(...)`` defaults (attrs' stubs type ``Factory`` as the value made).
FACTORY: Any = type(attrs.Factory(list))

SURFACE_PATH = SHARED / "api" / "official-0.38-surface.json"

needs_surface = pytest.mark.skipif(not SURFACE_PATH.is_file(), reason="surface facts not present")

# (class, field) -> why tinker_lite differs. field "" = the class itself.
_LENIENT = "responses are read leniently: a missing key takes this default instead of failing"
_SENT_BY_CLIENT = "None in the model; the client sends the 0.38 value (docs/protocol.rst §3.1)"
_OWN_CAP = "tinker_lite's own cap (docs/protocol.rst §6.4)"
_PRIVATE = "private storage of the official dataclass; tinker_lite keeps the lists as fields"
_CONVENIENCE = "a default for constructing it by hand; always sent, so the body is the same"
ALLOWED: dict[tuple[str, str], str] = {
    ("ClientConfigResponse", "sample_max_concurrent_requests"): _OWN_CAP,
    ("SampleRequest", "prompt_alt_tokens_k"): _SENT_BY_CLIENT,
    ("SampleRequest", "topk_sample_logprobs"): _SENT_BY_CLIENT,
    ("SampleRequest", "prompt_logprobs"): "a bool, False when not asked for (None in 0.38)",
    ("CreateModelRequest", "optimizer_config"): "kept as its wire dict {'type': 'adamw'}; "
    "an AdamOptimizerConfig is accepted and converted",
    ("CreateSessionRequest", "tags"): _CONVENIENCE,
    ("CreateSessionRequest", "user_metadata"): "None = not sent; the client sends {}",
    ("LoraConfig", "rank"): "32, the default rank of create_lora_training_client",
    ("SessionStartEvent", "event"): "the event tag is fixed by the class",
    ("SessionEndEvent", "event"): "the event tag is fixed by the class",
    ("UnhandledExceptionEvent", "event"): "the event tag is fixed by the class",
    ("SessionStartEvent", "severity"): _CONVENIENCE,
    ("SessionEndEvent", "severity"): _CONVENIENCE,
    ("UnhandledExceptionEvent", "severity"): _CONVENIENCE,
    ("Datum", "loss_fn_inputs"): "0.38 has default_factory=dict (the surface lists it required)",
    ("GetInfoResponse", "model_data"): _LENIENT,
    ("HealthResponse", "status"): _LENIENT,
    ("TelemetryResponse", "status"): _LENIENT,
    ("RequestFailedResponse", "category"): _LENIENT,
    ("SampledSequence", "sequence_id"): "the sample result does not carry it on every service",
    ("SampledSequence", "_tokens_list"): _PRIVATE,
    ("SampledSequence", "_logprobs_list"): _PRIVATE,
    ("SampledSequence", "_topk_logprobs_list"): _PRIVATE,
    ("SampleResponse", "_prompt_logprobs_list"): _PRIVATE,
    ("SampleResponse", "_topk_prompt_logprobs_list"): _PRIVATE,
}


def _surface() -> dict[str, Any]:
    types_section: dict[str, Any] = json.loads(SURFACE_PATH.read_text(encoding="utf-8"))["types"]
    return types_section


def _default_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        # e.g. "OwnSearchOwner(type='own')": a model of this package.
        return eval(text, {"__builtins__": {}}, dict(vars(types)))


def _problems(name: str, spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(class, field, what is wrong) for one class of the surface."""
    cls = getattr(types, name, None)
    if cls is None:
        return [(name, "", "missing from tinker_lite.types")]
    out: list[tuple[str, str, str]] = []
    fields = {f.name: f for f in attrs.fields(cls)} if attrs.has(cls) else {}
    for field_name, fact in spec.get("fields", {}).items():
        if "value" in fact:  # an enum member
            member = getattr(cls, field_name, None)
            if not isinstance(member, enum.Enum) or member.value != fact["value"]:
                out.append((name, field_name, f"no member with value {fact['value']!r}"))
            continue
        field = fields.get(field_name)
        if field is None:
            if not isinstance(getattr(cls, field_name, None), property):
                out.append((name, field_name, "no such field or property"))
            continue
        official_required = fact.get("default") is None
        if field.default is attrs.NOTHING:
            if not official_required:
                out.append((name, field_name, f"required here, official default {fact['default']}"))
            continue
        if official_required:
            out.append((name, field_name, "has a default here, required in 0.38"))
            continue
        ours = field.default.factory() if isinstance(field.default, FACTORY) else field.default
        expected = _default_value(fact["default"])
        if isinstance(ours, enum.Enum):
            ours = ours.value
        if ours != expected or (type(ours) is bool) != (type(expected) is bool):
            out.append((name, field_name, f"default {ours!r}, official {expected!r}"))
    return out


@needs_surface
def test_every_official_types_class_and_field_exists_with_its_default() -> None:
    found = [
        problem
        for name, spec in sorted(_surface().items())
        for problem in _problems(name, spec)
        if (problem[0], problem[1]) not in ALLOWED
    ]
    assert not found, "\n".join(f"{c}.{f}: {why}" for c, f, why in found)


@needs_surface
def test_allow_list_entries_are_still_needed() -> None:
    live = {(c, f) for name, spec in _surface().items() for c, f, _ in _problems(name, spec)}
    stale = sorted(set(ALLOWED) - live)
    assert not stale, f"no longer differs, drop from ALLOWED: {stale}"


OFFICIAL_MODULES = [
    "tensor_data",
    "model_input",
    "datum",
    "sample_response",
    "sampled_sequence",
    "sampling_params",
    "optimizer",
    "optim_step_response",
    "prompt_alt_tokens",
    "topk_logprobs",
    "provenance_spans",
    "session_status",
    "billing_usage_response",
    "shared.untyped_api_future",
]


@pytest.mark.parametrize("module", OFFICIAL_MODULES)
def test_official_module_paths_import(module: str) -> None:
    imported = importlib.import_module(f"tinker_lite.types.{module}")
    public = getattr(imported, "__all__", None) or [
        n
        for n in vars(imported)
        if n[:1].isupper() and getattr(types, n, None) is vars(imported)[n]
    ]
    assert public
    for export in public:
        if hasattr(types, export):
            assert getattr(types, export) is getattr(imported, export)


def test_every_exported_name_resolves_and_modules_load_on_first_use() -> None:
    code = (
        "import sys\n"
        "import tinker_lite.types as t\n"
        "eager = sorted(m for m in sys.modules if m.startswith('tinker_lite.types.'))\n"
        "t.Datum\n"
        "print(eager, 'tinker_lite.types.datum' in sys.modules)\n"
        "print([n for n in t.__all__ if getattr(t, n, None) is None])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    eager_line, missing_line = result.stdout.splitlines()
    assert eager_line == "[] True"
    assert missing_line == "[]"
    assert "Datum" in dir(types)
    with pytest.raises(AttributeError, match="NoSuchModel"):
        getattr(types, "NoSuchModel")  # noqa: B009


@needs_surface
def test_every_official_field_is_a_constructor_argument() -> None:
    """0.38 builds these models from their fields, ``*_np`` views and ``optim_params`` included.

    Only the fixed tags (``type``, ``event``: set by the class) are not arguments.
    """
    missing = []
    for name, spec in sorted(_surface().items()):
        cls = getattr(types, name, None)
        if cls is None or not attrs.has(cls):
            continue
        fixed = {f.name for f in attrs.fields(cls) if not f.init}
        parameters = inspect.signature(cls).parameters
        for field_name, fact in spec.get("fields", {}).items():
            if "value" in fact or field_name.startswith("_") or field_name in fixed:
                continue
            if field_name not in parameters:
                missing.append(f"{name}.{field_name}")
    assert not missing, missing


def test_sampled_results_built_from_arrays_read_back_as_lists_and_arrays() -> None:
    np = pytest.importorskip("numpy")
    from tinker_lite.types.topk_logprobs import MASK_LOGPROB, TopkLogprobs

    topk = TopkLogprobs(
        token_ids=np.array([[0, 0], [7, 9]], dtype=np.int32),
        logprobs=np.array([[MASK_LOGPROB, MASK_LOGPROB], [-0.5, -1.5]], dtype=np.float32),
    )
    sequence = types.SampledSequence(
        stop_reason="stop",
        sequence_id="seq-1",
        tokens_np=np.array([5, 6], dtype=np.int32),
        logprobs_np=np.array([-0.25, -2.0], dtype=np.float32),
        topk_logprobs_np=topk,
    )
    assert sequence.tokens == [5, 6]
    assert sequence.logprobs == [-0.25, -2.0]
    assert sequence.topk_logprobs == [None, [(7, -0.5), (9, -1.5)]]
    assert sequence.tokens_np.dtype == np.int32
    assert sequence.tokens_np.tolist() == [5, 6]
    assert sequence.logprobs_np is not None
    assert sequence.logprobs_np.tolist() == [-0.25, -2.0]
    assert types.SampledSequence("length").tokens == []  # as 0.38: no tokens given, none read
    response = types.SampleResponse(
        sequences=[sequence],
        prompt_logprobs_np=np.array([np.nan, -3.0], dtype=np.float32),
        topk_prompt_logprobs_np=topk,
    )
    assert response.prompt_logprobs == [None, -3.0]
    assert response.topk_prompt_logprobs == [None, [(7, -0.5), (9, -1.5)]]
    assert response.prompt_logprobs_np is not None
    assert np.isnan(response.prompt_logprobs_np[0])
    assert response.topk_prompt_logprobs_np is not None
    assert response.topk_prompt_logprobs_np.token_ids.tolist() == [[0, 0], [7, 9]]
    with pytest.raises(InvalidInputError, match="both tokens and tokens_np"):
        types.SampledSequence("stop", [1], tokens_np=np.array([1]))


def test_optim_step_request_takes_optim_params_and_sends_it_as_0_38_does() -> None:
    from tinker_lite._codec import wire

    adam = types.AdamParams(learning_rate=1e-3)
    request = types.OptimStepRequest(optim_params=adam, model_id="m", seq_id=2)
    assert request.optim_params is adam
    assert request == types.OptimStepRequest(adam_params=adam, model_id="m", seq_id=2)
    assert wire.to_builtins(request)["adam_params"]["learning_rate"] == 1e-3
    dimuon = types.DimuonParams(learning_rate=0.01)
    request = types.OptimStepRequest(optim_params=dimuon, model_id="m")
    body = wire.to_builtins(request)
    assert "adam_params" not in body
    assert body["optimizer_params"]["type"] == "dimuon"
    with pytest.raises(InvalidInputError, match="optim_params"):
        types.OptimStepRequest(model_id="m")
    with pytest.raises(InvalidInputError, match=r"given 2 times"):
        types.OptimStepRequest(model_id="m", optim_params=adam, adam_params=adam)
