"""Numbers for the foundation layer: import cost and JSON encoding speed.

Run: ``.venv/bin/python bench/bench_foundation.py``. Prints, without asserting anything:

* ``import tinker_lite`` (and of the wire layer) wall time and peak RSS, median of fresh
  subprocesses (goals: <= 0.35 s, <= 50 MB);
* encoding one forward_backward request of 500,000 numbers in 128 datums built from numpy
  arrays, with orjson and with the stdlib json fallback, and their ratio (goal: <= 40 ms with
  orjson);
* decoding a forward_backward result of 128 x 1024 float32 logprobs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from tinker_lite import types  # noqa: E402
from tinker_lite._codec import wire as _wire  # noqa: E402

IMPORT_RUNS = 7
ENCODE_RUNS = 7

_IMPORT_PROBE = """
import resource, sys, time
start = time.perf_counter()
{statement}
elapsed = time.perf_counter() - start
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:  # ru_maxrss can carry the parent's peak over fork+exec; VmHWM is this process's own
    with open("/proc/self/status") as status:
        peak_kb = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    pass
print(elapsed, peak_kb)
"""


def _import_cost(statement: str) -> tuple[float, float, float]:
    """Median (import seconds, process wall seconds, peak RSS MB) over fresh interpreters."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    imports, walls, peaks = [], [], []
    for _ in range(IMPORT_RUNS):
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", _IMPORT_PROBE.format(statement=statement)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=REPO,
        ).stdout.split()
        walls.append(time.perf_counter() - start)
        imports.append(float(out[0]))
        peaks.append(float(out[1]) / 1024)
    return statistics.median(imports), statistics.median(walls), statistics.median(peaks)


def _median_seconds(func: Callable[[], Any], runs: int = ENCODE_RUNS) -> float:
    func()  # warm up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _build_request(total_numbers: int = 500_000, datums: int = 128) -> types.ForwardBackwardRequest:
    # Each datum carries L input tokens, L target tokens and L float weights: 3 * L numbers.
    length = total_numbers // (3 * datums)
    rng = np.random.default_rng(0)
    data = []
    for _ in range(datums):
        tokens = rng.integers(0, 150_000, size=length + 1, dtype=np.int64)
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1]),
                loss_fn_inputs={
                    "target_tokens": tokens[1:],
                    "weights": rng.random(length, dtype=np.float32),
                },
            )
        )
    return types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(data=data, loss_fn="cross_entropy"),
        model_id="bench-model",
        seq_id=1,
    )


def main() -> None:
    print(f"== import cost (median of {IMPORT_RUNS} fresh interpreters)")
    for statement in ("import tinker_lite", "import tinker_lite.types, tinker_lite._codec.wire"):
        seconds, wall, peak = _import_cost(statement)
        print(
            f"{statement:<45} import {seconds * 1000:7.1f} ms   process {wall * 1000:7.1f} ms"
            f"   peak RSS {peak:6.1f} MB   (goal <= 350 ms, <= 50 MB)"
        )

    print("\n== encode one forward_backward chunk (128 datums, ~500,000 numbers, numpy inputs)")
    build_seconds = _median_seconds(_build_request, runs=3)
    request = _build_request()
    numbers = sum(3 * datum.model_input.length for datum in request.forward_backward_input.data)
    print(
        f"numbers in the request: {numbers:,}; building 128 Datums: {build_seconds * 1000:.1f} ms"
    )

    saved = _wire._orjson
    results: dict[str, float] = {}
    sizes: dict[str, int] = {}
    if saved is not None:
        results["orjson"] = _median_seconds(lambda: _wire.dumps(request))
        sizes["orjson"] = len(_wire.dumps(request))
    _wire._orjson = None
    try:
        results["stdlib json"] = _median_seconds(lambda: _wire.dumps(request))
        sizes["stdlib json"] = len(_wire.dumps(request))
        naive = _median_seconds(
            lambda: json.dumps(_wire.to_builtins(request), separators=(",", ":")).encode()
        )
    finally:
        _wire._orjson = saved
    for name, seconds in results.items():
        goal = "   (goal <= 40 ms)" if name == "orjson" else ""
        print(f"dumps with {name:<12} {seconds * 1000:8.1f} ms   {sizes[name] / 1e6:6.2f} MB{goal}")
    print(f"to_builtins + json.dumps {naive * 1000:8.1f} ms   (reference)")
    if "orjson" in results:
        ratio = results["stdlib json"] / results["orjson"]
        print(f"ratio stdlib / orjson: {ratio:.1f}x (same run)")
    else:
        print("orjson is not installed: install the `fast` extra for the fast path")

    print("\n== decode a forward_backward result (128 x 1024 float32 logprobs)")
    logprobs = np.random.default_rng(1).standard_normal(1024).astype(np.float32)
    output = types.ForwardBackwardOutput(
        loss_fn_output_type="ArrayRecord",
        loss_fn_outputs=[{"logprobs": types.TensorData.from_numpy(logprobs)} for _ in range(128)],
        metrics={"loss:sum": 1.0},
    )
    body = _wire.dumps(output)
    decode_seconds = _median_seconds(
        lambda: _wire.structure(_wire.loads(body), types.ForwardBackwardOutput)
    )
    print(f"decode {len(body) / 1e6:.2f} MB: {decode_seconds * 1000:.1f} ms")


if __name__ == "__main__":
    main()
