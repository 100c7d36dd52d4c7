"""Strict reading over recorded bodies: every golden-0.38 JSON request reads back, strictly, as the
request tinker_lite builds for it; a key its model does not know is refused, named with its path
(and ignored when reading leniently).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.golden.test_golden_041 import BUILDERS_038
from tests.support.golden import GOLDEN_038_DIR, load_golden
from tinker_lite._codec import wire as _wire
from tinker_lite._errors import WireFormatError

pytestmark = pytest.mark.skipif(
    not GOLDEN_038_DIR.is_dir(), reason="golden-0.38 fixtures not found"
)

SURPRISE = "key_from_the_future"


def _objects(value: Any, path: str = "") -> Iterator[str]:
    """The path (``a.b[0]``) of every JSON object in ``value``, the outermost first."""
    if isinstance(value, dict):
        yield path
        for key, item in value.items():
            yield from _objects(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _objects(item, f"{path}[{index}]")


def _at(body: Any, path: str) -> Any:
    for step in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        body = body[int(step[1:-1])] if step.startswith("[") else body[step]
    return body


@pytest.mark.parametrize("name", sorted(BUILDERS_038))
def test_recorded_body_reads_back_strictly(name: str) -> None:
    fixture = load_golden(name, version="0.38")
    request = BUILDERS_038[name](fixture)
    assert _wire.structure(fixture["body"], type(request), strict=True) == request


@pytest.mark.parametrize("name", sorted(BUILDERS_038))
def test_unknown_keys_of_recorded_bodies_are_refused_strictly(name: str) -> None:
    fixture = load_golden(name, version="0.38")
    request = BUILDERS_038[name](fixture)
    cls = type(request)
    refused = 0
    for path in _objects(fixture["body"]):
        body = copy.deepcopy(fixture["body"])
        _at(body, path)[SURPRISE] = 1
        if _wire.structure(body, cls) != request:
            continue  # a map of the caller's (user_metadata, loss_fn_config...): the key is data
        with pytest.raises(WireFormatError) as info:
            _wire.structure(body, cls, strict=True)
        where = f" at {path}:" if path else ":"
        assert f"cannot read {cls.__name__}{where} unknown keys ['{SURPRISE}']" in str(info.value)
        refused += 1
    assert refused >= 1
