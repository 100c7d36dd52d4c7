"""``TensorDtype`` (official module ``tinker.types.tensor_dtype``)."""

from __future__ import annotations

from typing import Literal

TensorDtype = Literal["int64", "float32"]
