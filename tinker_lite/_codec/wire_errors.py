"""Why the wire's JSON cannot be read: cattrs' exception groups -> a WireFormatError naming the
path (``at data[0].loss_fn_inputs``) and what was expected there."""

from __future__ import annotations

import typing
from typing import Any

import cattrs

from tinker_lite._errors import InvalidInputError, WireFormatError

__all__ = ["wire_error"]


def _first_problem(
    exc: BaseException, path: str = "", tp: Any = None
) -> tuple[str, str, BaseException]:
    """The path, description and exception of a cattrs exception group's first error."""
    if isinstance(exc, cattrs.BaseValidationError):
        for inner in exc.exceptions:
            for note in getattr(inner, "__notes__", ()):
                if isinstance(note, cattrs.AttributeValidationNote):
                    if isinstance(inner, KeyError) and inner.args == (note.name,):
                        return path, f"missing required key {note.name!r}", inner
                    return _first_problem(inner, f"{path}.{note.name}", note.type)
                if isinstance(note, cattrs.IterableValidationNote):
                    return _first_problem(inner, f"{path}[{note.index!r}]", note.type)
        return _first_problem(exc.exceptions[0], path, tp)
    return path, _describe_error(exc, tp), exc


def _describe_error(exc: BaseException, tp: Any) -> str:
    if isinstance(exc, (WireFormatError, InvalidInputError)):
        return str(exc)
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown keys {sorted(exc.extra_fields)} for {exc.cl.__name__}"
    if isinstance(exc, KeyError):
        return f"missing required key {exc.args[0]!r}"
    if isinstance(exc, AttributeError):
        return "expected an object"
    if typing.get_origin(tp) is typing.Literal:
        return f"expected one of {list(typing.get_args(tp))}"
    return f"expected {_type_name(tp)}: {exc}" if tp is not None else str(exc)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)


def wire_error(
    checking: cattrs.Converter, data: Any, cls: Any, fast_error: Exception
) -> WireFormatError:
    """Read ``data`` again with the detailed ``checking`` converter, to name where it fails."""
    try:
        checking.structure(data, cls)
    except Exception as exc:  # cattrs' exception group, or an error before any field
        path, problem, cause = _first_problem(exc)
    else:  # pragma: no cover - both modes run the same hooks
        path, problem, cause = "", _describe_error(fast_error, None), fast_error
    where = f" at {path.lstrip('.')}" if path else ""
    error = WireFormatError(f"cannot read {_type_name(cls)}{where}: {problem}")
    error.__cause__ = cause
    return error
