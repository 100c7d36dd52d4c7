"""float32 values as the shortest decimals that read back as the same float32
(docs/protocol.rst §3.2), for JSON bodies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["float32_values"]

# float(10**i) is exact for i <= 22.
_POW10 = [float(10**i) for i in range(23)]


def float32_values(arr: npt.NDArray[Any]) -> list[float]:
    """Python floats whose repr is the fewest digits (1-9) that read back as the same float32.

    A value too large or too small to scale exactly keeps its widened value.
    """
    import numpy as np

    pow10 = np.array(_POW10)
    wide = arr.astype(np.float64)
    result = wide.copy()
    index = np.flatnonzero(np.isfinite(wide) & (wide != 0))
    if index.size:
        values = wide[index]
        target = arr[index]
        magnitude = np.floor(np.log10(np.abs(values))).astype(np.int64)
        pending = np.ones(index.size, dtype=bool)
        for digits in range(1, 10):
            shift = digits - 1 - magnitude
            usable = pending & (np.abs(shift) <= 22)
            if not usable.any():
                break
            scale = pow10[np.clip(np.abs(shift), 0, 22)]
            up = shift >= 0
            # q / 10**k and q * 10**k are correctly rounded, so the double is the nearest one
            # to the decimal and its repr is that decimal.
            with np.errstate(over="ignore", invalid="ignore"):
                candidate = np.where(
                    up, np.round(values * scale) / scale, np.round(values / scale) * scale
                )
                good = usable & (candidate.astype(np.float32) == target)
            result[index[good]] = candidate[good]
            pending &= ~good
            if not pending.any():
                break
    values_list: list[float] = result.tolist()
    return values_list
