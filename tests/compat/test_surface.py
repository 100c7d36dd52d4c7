"""tinker_lite's public surface against the official SDK 0.38, read from the recorded facts.

``../shared/api/official-0.38-surface.json`` lists every top-level name of ``tinker`` and every
public method of its classes, with parameters in order, their kinds and defaults. This test
compares each of them with tinker_lite through ``inspect`` (the ``types`` section is checked by
``test_types_surface.py``). Every difference must be listed here:

* ``ALLOWED``: permanent, documented differences, each with its reason. The README section
  "Differences from the official SDK" is generated from this list (``python -m
  tests.compat.test_surface --write-readme``) and checked against it, so it cannot drift.
* ``PENDING``: not implemented yet, each with a one-line reason. The test fails when a pending
  item is actually present, so the list only shrinks.

A key is a top-level name or ``Class.member``; ``Class.*`` covers every member of a class.

Rules of the comparison, per official method:

* the official parameters come first, in the official order, with the official names, kinds
  (positional-or-keyword / keyword-only) and defaults; tinker_lite-only parameters may follow
  them when they have defaults (or are ``*args``/``**kwargs``);
* an official ``(*args, **kwargs)`` signature is a pass-through and accepts any signature;
* the ``x_async`` twin of a method ``x`` takes ``x``'s parameters: while ``x`` differs, only ``x``
  is reported;
* a method returns a future where the official one does, and a plain value where it does not;
* ``async`` methods must be coroutine functions, properties properties; a method the official
  SDK marks deprecated (it warns with ``FutureWarning``) carries ``__deprecated__`` here too.

``python -m tests.compat.test_surface`` (from the repository) prints every difference and the
counts.
"""

from __future__ import annotations

import ast
import concurrent.futures
import inspect
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tests.support.paths import REPO, SHARED

SURFACE_FILE = SHARED / "api" / "official-0.38-surface.json"
README = REPO / "README.rst"

# Permanent differences: key -> (topic for the README, reason). Keys are a top-level name or
# ``Class.member`` exactly as the diff reports them.
ALLOWED: dict[str, tuple[str, str]] = {
    "RestClient.get_telemetry": (
        "Telemetry object",
        "``get_telemetry()`` belongs to the official SDK's async internals; tinker_lite reports "
        "telemetry itself (see Configuration) and exposes no telemetry object.",
    ),
    "AdminClient.get_telemetry": ("Telemetry object", "As above."),
    "SamplingClient.get_telemetry": ("Telemetry object", "As above."),
    "ServiceClient.get_telemetry": ("Telemetry object", "As above."),
    "TrainingClient.get_telemetry": ("Telemetry object", "As above."),
    "SamplingClient.__init__": (
        "Client constructors",
        "Training and sampling clients are made by ``ServiceClient`` (or "
        "``SamplingClient.from_sampler_handle``). The official calls over a holder work "
        "(``TrainingClient(service_client.holder, model_seq_id=..., model_id=...)``, "
        "``SamplingClient(service_client.holder, sampling_session_id=..., base_model=...)``); "
        "the signatures differ in defaults and in tinker_lite's own keywords.",
    ),
    "TrainingClient.__init__": ("Client constructors", "As above."),
    "BackcompatTrainingClientFuture.get_telemetry": ("Telemetry object", "As above."),
    "BackcompatSamplingClientFuture.get_telemetry": ("Telemetry object", "As above."),
    "ServiceClient.close": (
        "Closing",
        '``close()`` may be called without arguments: ``status`` defaults to ``"success"`` '
        "(the official SDK requires it), so code written for either SDK runs unchanged.",
    ),
    "TrainingClient.save_weights_and_get_sampling_client": (
        "Deprecated parameters",
        "Only its ``name`` parameter is deprecated (a ``DeprecationWarning``, no effect), as in "
        "0.38, whose method itself does not warn; the surface file marks the whole method.",
    ),
    "SamplingClient.create": (
        "Client constructors",
        "``SamplingClient.create(holder, ...)`` takes the official internal holder; use "
        "``ServiceClient.create_sampling_client``.",
    ),
    "BackcompatSamplingClientFuture.create": ("Client constructors", "As above."),
}

# Not implemented yet: key -> one-line reason. Remove an entry when its item lands.
PENDING: dict[str, str] = {}

# Behavioural differences that no signature shows; emitted first in the README section.
NOTES: tuple[tuple[str, str], ...] = (
    (
        "Engine",
        "Sync: no event loop and no asyncio in the request path. ``APIFuture`` is a "
        "``concurrent.futures.Future``; it is also awaitable and the official ``*_async`` "
        "methods exist as thin adapters over the same futures (``asyncio`` is imported only "
        "when one is used). ``python -m tinker_lite.as_tinker script.py`` runs a script written "
        "with ``import tinker`` unchanged.",
    ),
    ("Streaming sampling", "Not supported: the service documents no streaming endpoint."),
    (
        "Tokenizer",
        "``get_tokenizer()`` returns ``transformers``' tokenizer when ``transformers`` is "
        "installed, as the official SDK does; otherwise tinker_lite's light tokenizer, built from "
        "the same files with the same ids (``encode``, ``decode``, the special tokens, "
        "``apply_chat_template`` with ``jinja2``: the ``chat`` extra). Padding, truncation and "
        "tensors need ``transformers``.",
    ),
    (
        "``forward_backward_custom``",
        "Works without torch: the loss function gets numpy logprobs and returns "
        "``(loss, grads, metrics)``. With torch installed it gets torch tensors, as in the "
        "official SDK, and its loss is differentiated with autograd; either way it is called "
        "once per call. As in the official SDK it returns at once, with the backward pass's place "
        "in the client's order taken. A loss function that fails makes the future raise and "
        "sends the backward with zero weights, so the client stays usable (the official SDK "
        "fails the client's later calls). Metrics are the official ones: ``loss:sum`` is the "
        "custom loss, ``surrogate_loss:sum`` the service's cross-entropy surrogate.",
    ),
    ("Local server", '``base_url="local://"`` runs an offline, Tinker-compatible server.'),
    (
        "Result objects",
        "The wire types (``SampleResponse``, ``SampledSequence``, ``ForwardBackwardOutput``, "
        "...) are attrs classes with slots, which keeps a large fan-out's results small (96 "
        "bytes less per object): they have no ``__dict__``, so ``vars(result)`` fails where "
        "0.38's dataclasses and pydantic models answer it. "
        "Read the fields by name, or use ``attrs.asdict(result)``.",
    ),
)


@dataclass(frozen=True)
class Difference:
    """One official item that tinker_lite lacks (``missing``) or has otherwise (``different``)."""

    key: str
    status: str
    details: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.key}: {self.status}: " + "; ".join(self.details)


def load_surface() -> dict[str, Any]:
    """The recorded official surface."""
    data: dict[str, Any] = json.loads(SURFACE_FILE.read_text(encoding="utf-8"))
    return data


# ---------------------------------------------------------------------------------------------
# comparison


def surface_differences(surface: Mapping[str, Any], package: ModuleType) -> list[Difference]:
    """Every top-level item of ``surface`` that ``package`` lacks or has otherwise, sorted."""
    out: list[Difference] = []
    exported = set(getattr(package, "__all__", ()))
    for name, fact in sorted(surface["top_level"].items()):
        try:
            ours = getattr(package, name)
        except AttributeError:
            members = len(fact.get("methods", ()))
            what = f"tinker_lite has no {fact['kind']}" + (
                f" (with {members} official members)" if members else ""
            )
            out.append(Difference(name, "missing", (what,)))
            continue
        details = _top_level_details(name, fact, ours)
        types_module = getattr(package, "types", None)
        if "fields" in fact and getattr(types_module, name, ours) is not ours:
            details.append(f"not the same object as types.{name}")
        if name not in exported:
            details.append("not in tinker_lite.__all__")
        if details:
            out.append(Difference(name, "different", tuple(details)))
        methods: dict[str, Difference] = {}
        for method, method_fact in sorted(fact.get("methods", {}).items()):
            diff = _method_difference(f"{name}.{method}", ours, method, method_fact)
            if diff is not None:
                methods[method] = diff
        # An ``x_async`` twin is derived from ``x``: while ``x`` differs, it is reported alone.
        for method, diff in methods.items():
            base = method.removesuffix("_async")
            if base == method or base not in methods:
                out.append(diff)
    return out


def _top_level_details(name: str, fact: Mapping[str, Any], ours: object) -> list[str]:
    kind = fact["kind"]
    if kind == "exception":
        if not (isinstance(ours, type) and issubclass(ours, BaseException)):
            return [f"official exception class, tinker_lite has {type(ours).__name__}"]
        mro = {cls.__name__ for cls in ours.__mro__}
        lacking = [base for base in fact["bases"] if base not in mro]
        return [f"does not derive from {', '.join(lacking)}"] if lacking else []
    if kind == "class" and not isinstance(ours, type):
        return [f"official class, tinker_lite has {type(ours).__name__}"]
    if kind == "module" and not isinstance(ours, ModuleType):
        return [f"official module, tinker_lite has {type(ours).__name__}"]
    if kind == "str" and not isinstance(ours, str):
        return [f"official str, tinker_lite has {type(ours).__name__}"]
    return []


def _method_difference(
    key: str, cls: Any, method: str, fact: Mapping[str, Any]
) -> Difference | None:
    static = inspect.getattr_static(cls, method, None)
    if static is None:
        return Difference(key, "missing", (f"no {fact['kind']}",))
    details: list[str] = []
    if fact["kind"] == "property":
        if not isinstance(static, property):
            details.append("official property, tinker_lite has no property")
        return Difference(key, "different", tuple(details)) if details else None
    member = getattr(cls, method)
    if fact["kind"] == "async" and not inspect.iscoroutinefunction(member):
        details.append("official coroutine function (async def), tinker_lite's is not")
    official_deprecated = bool(fact.get("deprecated"))
    if official_deprecated != bool(getattr(member, "__deprecated__", None)):
        details.append(
            "official warns as deprecated (FutureWarning), tinker_lite does not"
            if official_deprecated
            else "tinker_lite marks it deprecated, the official SDK does not"
        )
    details += _parameter_details(static, member, fact["params"])
    if not method.endswith("_async"):  # a twin's annotation is its sync method's
        details += _return_details(fact.get("returns"), member)
    return Difference(key, "different", tuple(details)) if details else None


def _return_details(official: str | None, member: Any) -> list[str]:
    """A future where the official SDK returns one, a plain value where it does not."""
    try:
        ours = inspect.signature(member).return_annotation
    except (TypeError, ValueError):
        return []
    if not official or ours is inspect.Signature.empty:
        return []
    ours = ours if isinstance(ours, str) else getattr(ours, "__name__", repr(ours))
    if ("Future" in official) != ("Future" in ours):
        return [f"returns {ours}, official {official}"]
    return []


def _parameter_details(static: object, member: Any, official: list[dict[str, Any]]) -> list[str]:
    try:
        params = list(inspect.signature(member).parameters.values())
    except (TypeError, ValueError):
        return ["signature not inspectable"]
    if params and not isinstance(static, (staticmethod, classmethod)):
        params = params[1:]  # an instance method read off the class still has self
    official_kinds = [p["kind"] for p in official]
    if official_kinds == ["VAR_POSITIONAL", "VAR_KEYWORD"]:
        return []  # a pass-through: the official SDK fixes no parameters here
    details: list[str] = []
    for var_kind, label in (("VAR_POSITIONAL", "*args"), ("VAR_KEYWORD", "**kwargs")):
        if var_kind in official_kinds and all(p.kind.name != var_kind for p in params):
            details.append(f"no {label}")
    wanted = [p for p in official if p["kind"] not in ("VAR_POSITIONAL", "VAR_KEYWORD")]
    have = [p for p in params if p.kind.name not in ("VAR_POSITIONAL", "VAR_KEYWORD")]
    for index, spec in enumerate(wanted):
        ours = have[index] if index < len(have) else None
        problem = _parameter_problem(spec, index, ours, have)
        if problem:
            details.append(problem)
    for extra in have[len(wanted) :]:
        if extra.default is inspect.Parameter.empty:
            details.append(f"extra required parameter {extra.name!r}")
    if details:
        details.append(
            f"official ({_format_official(official)}) vs tinker_lite ({_format_ours(params)})"
        )
    return details


def _parameter_problem(
    spec: Mapping[str, Any],
    index: int,
    ours: inspect.Parameter | None,
    have: list[inspect.Parameter],
) -> str | None:
    name = spec["name"]
    if ours is None or ours.name != name:
        names = [p.name for p in have]
        if name not in names:
            return f"missing parameter {name!r}"
        return f"parameter {name!r} out of order (#{names.index(name) + 1}, official #{index + 1})"
    if ours.kind.name != spec["kind"]:
        return f"parameter {name!r} is {ours.kind.name}, official {spec['kind']}"
    if not _same_default(spec["default"], ours.default):
        ours_default = "required" if ours.default is inspect.Parameter.empty else repr(ours.default)
        official_default = "required" if spec["default"] is None else spec["default"]
        return f"parameter {name!r} default {ours_default}, official {official_default}"
    return None


def _same_default(official: str | None, ours: object) -> bool:
    if official is None or ours is inspect.Parameter.empty:
        return official is None and ours is inspect.Parameter.empty
    try:
        value = ast.literal_eval(official)
    except (ValueError, SyntaxError):
        return repr(ours) == official
    if isinstance(value, bool) or isinstance(ours, bool):
        return type(value) is type(ours) and value == ours
    return bool(value == ours)


def _format_official(official: list[dict[str, Any]]) -> str:
    parts: list[str] = []
    star_done = False
    for p in official:
        if p["kind"] == "KEYWORD_ONLY" and not star_done:
            parts.append("*")
            star_done = True
        prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(p["kind"], "")
        if p["kind"] == "VAR_POSITIONAL":
            star_done = True
        default = f"={p['default']}" if p["default"] is not None else ""
        parts.append(f"{prefix}{p['name']}{default}")
    return ", ".join(parts)


def _format_ours(params: list[inspect.Parameter]) -> str:
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in params]
    return str(inspect.Signature(bare))[1:-1]


# ---------------------------------------------------------------------------------------------
# the tests


def _differences() -> list[Difference]:
    import tinker_lite

    return surface_differences(load_surface(), tinker_lite)


def test_surface_file_is_the_038_one() -> None:
    surface = load_surface()
    assert surface["version"] == "0.38.0"
    assert "ServiceClient" in surface["top_level"]


def listed(key: str, table: Mapping[str, object]) -> str | None:
    """The entry of ``table`` that covers ``key`` (itself, or ``Class.*`` for a member)."""
    if key in table:
        return key
    wildcard = key.split(".", 1)[0] + ".*"
    return wildcard if "." in key and wildcard in table else None


def test_every_official_item_is_present_or_listed() -> None:
    unlisted = [
        d
        for d in _differences()
        if listed(d.key, ALLOWED) is None and listed(d.key, PENDING) is None
    ]
    assert not unlisted, (
        f"{len(unlisted)} official items missing or different (add them, or list them in "
        "ALLOWED/PENDING with a reason):\n" + "\n".join(d.describe() for d in unlisted)
    )


def test_allowed_and_pending_lists_are_not_stale() -> None:
    used = {listed(d.key, table) for d in _differences() for table in (ALLOWED, PENDING)}
    stale = sorted(key for key in (*ALLOWED, *PENDING) if key not in used)
    assert not stale, (
        "these items match the official SDK now: remove them from ALLOWED/PENDING: "
        + ", ".join(stale)
    )
    assert not set(ALLOWED) & set(PENDING)


def test_comparison_reports_what_differs() -> None:
    """The checker itself, on a made-up surface: each kind of difference, and what passes."""

    class Ours:
        def sample(self, prompt: int, num: int = 2, *, seed: int | None = None) -> None: ...

        def fine(self, a: int, b: int = 1, *, c: bool = False, extra: int = 0) -> None: ...

        def flag(self, on: int = 1, needed: int = 0, *, more: int) -> None: ...

        def coro(self) -> None: ...

        def prop(self) -> None: ...

        def old(self) -> None: ...

        def passthrough(self, x: int) -> None: ...

        def sample_async(self, prompt: int, num: int = 2) -> None: ...

        def info(self) -> concurrent.futures.Future[int]:
            raise NotImplementedError

    def param(name: str, kind: str, default: str | None = None) -> dict[str, Any]:
        return {"name": name, "kind": kind, "default": default, "annotation": None}

    pok, kwo = "POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"
    method = {"kind": "method", "deprecated": False, "params": []}
    surface = {
        "top_level": {
            "Absent": {"kind": "class"},
            "Unlisted": {"kind": "class"},
            "Client": {
                "kind": "class",
                "methods": {
                    "sample": {**method, "params": [param("num", pok), param("prompt", pok)]},
                    "sample_async": {**method, "params": []},
                    "fine": {
                        **method,
                        "params": [param("a", pok), param("b", pok, "1"), param("c", kwo, "False")],
                    },
                    "flag": {**method, "params": [param("on", pok, "True"), param("needed", pok)]},
                    "coro": {**method, "kind": "async"},
                    "prop": {**method, "kind": "property"},
                    "old": {**method, "deprecated": True},
                    "passthrough": {
                        **method,
                        "params": [param("a", "VAR_POSITIONAL"), param("k", "VAR_KEYWORD")],
                    },
                    "info": {**method, "returns": "types.GetInfoResponse"},
                    "gone": method,
                },
            },
        }
    }
    package = ModuleType("fake")
    package.Client = Ours  # type: ignore[attr-defined]
    package.Unlisted = Ours  # type: ignore[attr-defined]
    package.__all__ = ["Client"]  # type: ignore[attr-defined]
    diffs = {d.key: d for d in surface_differences(surface, package)}
    assert set(diffs) == {
        "Absent",
        "Unlisted",
        "Client.sample",
        "Client.flag",
        "Client.coro",
        "Client.prop",
        "Client.old",
        "Client.info",
        "Client.gone",
    }
    assert diffs["Absent"].status == "missing"
    assert diffs["Client.gone"].status == "missing"
    assert diffs["Unlisted"].details == ("not in tinker_lite.__all__",)
    sample = " ".join(diffs["Client.sample"].details)
    assert "'num' out of order" in sample
    assert "'prompt' out of order" in sample
    assert "official (num, prompt) vs tinker_lite (prompt, num=2, *, seed=None)" in sample
    flag = diffs["Client.flag"].details
    assert "parameter 'on' default 1, official True" in flag
    assert "parameter 'needed' default 0, official required" in flag
    assert "extra required parameter 'more'" in flag
    assert "async def" in diffs["Client.coro"].details[0]
    assert "property" in diffs["Client.prop"].details[0]
    assert "deprecated" in diffs["Client.old"].details[0]
    assert diffs["Client.info"].details == (
        "returns concurrent.futures.Future[int], official types.GetInfoResponse",
    )


def test_readme_section_is_generated_from_the_lists() -> None:
    text = README.read_text(encoding="utf-8")
    assert readme_section() in text, (
        "README.rst 'Differences from the official SDK' is out of date: regenerate it with "
        "`python -m tests.compat.test_surface --write-readme`"
    )


# ---------------------------------------------------------------------------------------------
# report and README generation


def readme_section() -> str:
    """The README section "Differences from the official SDK", built from NOTES and ALLOWED."""
    texts: dict[str, list[str]] = {}
    keys: dict[str, list[str]] = {}
    for topic, text in NOTES:
        texts.setdefault(topic, []).append(text)
    for key, (topic, reason) in sorted(ALLOWED.items()):
        if reason != "As above.":
            texts.setdefault(topic, []).append(reason)
        keys.setdefault(topic, []).append(f"``{key}``")
    lines = [
        "Differences from the official SDK",
        "---------------------------------",
        "",
        "Generated from ``tests/compat/test_surface.py``, which compares tinker_lite with the",
        "official SDK 0.38 name by name and parameter by parameter; official items not provided",
        "yet are listed there in ``PENDING``.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - Topic",
        "     - tinker_lite",
    ]
    for topic, paragraphs in texts.items():
        body = " ".join(paragraphs)
        if topic in keys:
            body += f" ({', '.join(keys[topic])})"
        lines += [f"   * - {topic}", f"     - {body}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if "--readme" in argv:
        sys.stdout.write(readme_section())
        return 0
    if "--write-readme" in argv:
        text = README.read_text(encoding="utf-8")
        start = text.index("Differences from the official SDK\n")
        end = text.index("\n\n", text.index("   * - Topic", start)) + 1  # the table's end
        README.write_text(text[:start] + readme_section() + text[end:], encoding="utf-8")
        return 0
    diffs = _differences()
    for diff in diffs:
        tag = (
            "allowed"
            if listed(diff.key, ALLOWED)
            else "pending"
            if listed(diff.key, PENDING)
            else "NEW"
        )
        print(f"[{tag}] {diff.describe()}")
    missing = sum(d.status == "missing" for d in diffs)
    print(
        f"{len(diffs)} differences: {missing} missing, {len(diffs) - missing} different; "
        f"{len(ALLOWED)} allowed, {len(PENDING)} pending"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
