"""Numeric kernels of the tiny model: RMS norm, GELU, softmax, single-threaded matrix products."""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "GELU_C",
    "PARTIAL_SUM_ELEMENTS",
    "RMS_EPS",
    "SINGLE_THREAD_MNK",
    "bmm",
    "gelu",
    "gelu_parts",
    "gelu_with_derivative",
    "log_softmax",
    "mm",
    "mm_tn",
    "rms_norm",
    "rms_norm_backward",
    "softmax_inplace",
]

Array = npt.NDArray[Any]


RMS_EPS: Final = 1e-5
GELU_C: Final = math.sqrt(2.0 / math.pi)


# ---------------------------------------------------------------------------------------------
# Numerics


def rms_norm(x: Array) -> tuple[Array, Array]:
    inv = 1.0 / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + RMS_EPS)
    return x * inv, inv


def rms_norm_backward(dy: Array, y: Array, inv: Array) -> Array:
    mean_dy_y = np.mean(dy * y, axis=-1, keepdims=True)
    result: Array = inv * (dy - y * mean_dy_y)
    return result


def gelu_parts(u: Array) -> tuple[Array, Array, Array]:
    """Return (gelu(u), t, u²) for the tanh approximation, where t = tanh(c·(u + 0.044715·u³))."""
    u_sq = u * u
    t = u_sq * 0.044715
    t += 1.0
    t *= u
    t *= GELU_C
    np.tanh(t, out=t)
    g = t + 1.0
    g *= u
    g *= 0.5
    return g, t, u_sq


def gelu(u: Array) -> Array:
    return gelu_parts(u)[0]


def gelu_with_derivative(u: Array) -> tuple[Array, Array]:
    """Return gelu(u) and d gelu/du, reusing the forward's buffers (in place)."""
    g, t, u_sq = gelu_parts(u)
    # d/du = 0.5(1 + t) + 0.5·u·(1 - t²)·c·(1 + 3·0.044715·u²)
    u_sq *= 3.0 * 0.044715 * GELU_C
    u_sq += GELU_C
    second = t * t
    np.subtract(1.0, second, out=second)
    second *= u
    second *= u_sq
    second *= 0.5
    t += 1.0
    t *= 0.5
    t += second
    return g, t


def log_softmax(logits: Array) -> Array:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    result: Array = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return result


def softmax_inplace(scores: Array) -> Array:
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    return scores


# ---------------------------------------------------------------------------------------------
# Matrix products that stay single-threaded inside OpenBLAS
#
# OpenBLAS runs one GEMM on one thread when M·N·K is small and spreads larger ones over every
# core. On a busy machine those threads wait on each other for whole scheduler slices and a
# training step becomes several times slower than on one core, so every product here is cut
# into stacked GEMMs below that size: numpy runs the stack in one C loop, each on one thread.

SINGLE_THREAD_MNK: Final = 1 << 18
PARTIAL_SUM_ELEMENTS: Final = 1 << 19


def mm(a: Array, b: Array) -> Array:
    """Return ``a @ b`` for a (n, k) and b (k, m), as stacked single-threaded GEMMs."""
    n, k = a.shape
    m = b.shape[1]
    rows = max(1, SINGLE_THREAD_MNK // (k * m))
    if n <= rows:
        result: Array = a @ b
        return result
    out = np.empty((n, m), dtype=np.result_type(a.dtype, b.dtype))
    main = n - n % rows
    np.matmul(
        a[:main].reshape(main // rows, rows, k), b, out=out[:main].reshape(main // rows, rows, m)
    )
    if main < n:
        np.matmul(a[main:], b, out=out[main:])
    return out


def mm_tn(a: Array, b: Array) -> Array:
    """Return ``a.T @ b`` for a (n, m) and b (n, k): stacked GEMMs over row blocks, then summed."""
    n, m = a.shape
    k = b.shape[1]
    rows = max(1, SINGLE_THREAD_MNK // (m * k))
    if n <= rows:
        result: Array = a.T @ b
        return result
    chunks = n // rows
    main = chunks * rows
    a_blocks = a[:main].reshape(chunks, rows, m).transpose(0, 2, 1)
    b_blocks = b[:main].reshape(chunks, rows, k)
    step = max(1, PARTIAL_SUM_ELEMENTS // (m * k))
    out = np.zeros((m, k), dtype=np.result_type(a.dtype, b.dtype))
    for start in range(0, chunks, step):
        out += np.matmul(a_blocks[start : start + step], b_blocks[start : start + step]).sum(axis=0)
    if main < n:
        out += a[main:].T @ b[main:]
    return out


def bmm(a: Array, b: Array) -> Array:
    """Return ``a @ b`` for stacks of matrices (attention), splitting rows of large products."""
    rows_a, inner = a.shape[-2:]
    cols = b.shape[-1]
    rows = max(1, SINGLE_THREAD_MNK // (inner * cols))
    if rows_a <= rows:
        result: Array = a @ b
        return result
    shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), rows_a, cols)
    out = np.empty(shape, dtype=np.result_type(a.dtype, b.dtype))
    for start in range(0, rows_a, rows):
        np.matmul(a[..., start : start + rows, :], b, out=out[..., start : start + rows, :])
    return out
