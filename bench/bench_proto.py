"""Protobuf vs JSON for one forward_backward chunk of about 500,000 numbers.

128 datums of 1,302 tokens, each with ``model_input`` tokens, ``target_tokens`` and ``weights``
(3 x 1,302 x 128 = 499,968 numbers), built from numpy arrays. Measured in this process:

* encode the request: ``_proto.encode_forward_backward_request`` vs ``_wire.dumps`` of the JSON
  request, the latter with orjson (when installed) and with the stdlib ``json`` module;
* decode a result with ``logprobs`` for the same 128 x 1,302 positions: protobuf
  (``_proto.decode_forward_backward_output``) vs JSON (``_wire.loads`` and ``_wire.structure``).

Goal: protobuf encoding under 10 ms and at least 10x faster than the JSON path.

    python bench/bench_proto.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinker_lite import types
from tinker_lite._codec import proto as _proto
from tinker_lite.local.protocol import codecs as _codecs

N_DATUMS = 128
TOKENS_PER_DATUM = 500_000 // (3 * N_DATUMS)  # 1,302
VOCAB = 32_000
MODEL_ID = "bench-model"
ENCODE_GOAL_S = 0.010
SPEEDUP_GOAL = 10.0


def make_datums(seed: int = 0) -> list[types.Datum]:
    """Return 128 Datums built from numpy arrays (tokens, target_tokens int64, weights float32)."""
    rng = np.random.default_rng(seed)
    data = []
    for _ in range(N_DATUMS):
        tokens = rng.integers(0, VOCAB, TOKENS_PER_DATUM + 1, dtype=np.int64)
        weights = rng.random(TOKENS_PER_DATUM, dtype=np.float32)
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1]),
                loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights},
            )
        )
    return data


def make_output(seed: int = 1) -> types.ForwardBackwardOutput:
    """Return a cross_entropy result: float32 logprobs for every position of every datum."""
    rng = np.random.default_rng(seed)
    outputs = [
        {"logprobs": types.TensorData.from_numpy(-rng.random(TOKENS_PER_DATUM, dtype=np.float32))}
        for _ in range(N_DATUMS)
    ]
    return types.ForwardBackwardOutput(
        loss_fn_output_type="CrossEntropyLossReturn",
        loss_fn_outputs=outputs,
        metrics={"loss:sum": 1234.5},
    )


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Run ``fn`` ``repeat`` times after one warm-up; return (best, median) seconds and a result."""
    result = fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return min(samples), statistics.median(samples), result


@contextmanager
def stdlib_json(wire: Any) -> Iterator[None]:
    """Make tinker_lite._codec.wire use the stdlib json module (as without the ``fast`` extra)."""
    saved = wire._orjson
    wire._orjson = None
    try:
        yield
    finally:
        wire._orjson = saved


def run(repeat: int) -> dict[str, dict[str, float]]:
    """Measure every operation; return {label: {best, median, bytes}}."""
    data = make_datums()
    n_numbers = sum(
        d.model_input.length + sum(t.size for t in d.loss_fn_inputs.values()) for d in data
    )
    print(f"chunk: {N_DATUMS} datums, {n_numbers:,} numbers; {repeat} runs, best / median\n")
    results: dict[str, dict[str, float]] = {}

    def record(label: str, fn: Callable[[], Any], runs: int = repeat) -> Any:
        best, median, value = timed(fn, runs)
        size = float(len(value)) if isinstance(value, (bytes, bytearray)) else float("nan")
        results[label] = {"best": best, "median": median, "bytes": size}
        return value

    proto_body = record(
        "encode protobuf",
        lambda: _proto.encode_forward_backward_request(
            model_id=MODEL_ID,
            seq_id=1,
            data=data,
            loss_fn="cross_entropy",
            loss_fn_config=None,
            forward_only=False,
        ),
    )
    wire: Any
    try:
        from tinker_lite._codec import wire
    except ImportError:
        wire = None
    output = make_output()
    out_proto = _codecs.encode_forward_backward_output(output)
    record("decode result, protobuf", lambda: _proto.decode_forward_backward_output(out_proto))
    if wire is not None:
        request = types.ForwardBackwardRequest(
            forward_backward_input=types.ForwardBackwardInput(data=data, loss_fn="cross_entropy"),
            model_id=MODEL_ID,
            seq_id=1,
        )
        json_runs = max(3, repeat // 4)
        orjson_on = getattr(wire, "_orjson", None) is not None
        if orjson_on:
            record("encode JSON (orjson)", lambda: wire.dumps(request), json_runs)
        with stdlib_json(wire):
            record("encode JSON (stdlib json)", lambda: wire.dumps(request), json_runs)
        out_json = wire.dumps(output)
        results["result body, JSON"] = {"best": 0.0, "median": 0.0, "bytes": len(out_json)}
        if orjson_on:
            record(
                "decode result, JSON (orjson)",
                lambda: wire.structure(wire.loads(out_json), types.ForwardBackwardOutput),
                json_runs,
            )
        with stdlib_json(wire):
            record(
                "decode result, JSON (stdlib json)",
                lambda: wire.structure(wire.loads(out_json), types.ForwardBackwardOutput),
                json_runs,
            )
    else:
        print("tinker_lite._codec.wire is not available: protobuf figures only\n")
    results["result body, protobuf"] = {"best": 0.0, "median": 0.0, "bytes": len(out_proto)}

    print(f"{'operation':<36}{'best ms':>10}{'median ms':>11}{'body bytes':>14}")
    for label, row in results.items():
        timing = (
            "" if row["best"] == 0.0 else f"{row['best'] * 1e3:>10.2f}{row['median'] * 1e3:>11.2f}"
        )
        size = "" if row["bytes"] != row["bytes"] else f"{int(row['bytes']):>14,}"
        print(f"{label:<36}{timing:>21}{size:>14}")
    print()
    # Ratios and goals use the best run: the least disturbed by other work on the machine.
    proto = results["encode protobuf"]["best"]
    print(f"protobuf request: {len(proto_body):,} bytes")
    goals = [(f"protobuf encode < {ENCODE_GOAL_S * 1e3:.0f} ms", proto < ENCODE_GOAL_S)]
    for label in ("encode JSON (orjson)", "encode JSON (stdlib json)"):
        if label in results:
            ratio = results[label]["best"] / proto
            size_ratio = results[label]["bytes"] / len(proto_body)
            print(f"{label}: {ratio:.1f}x slower than protobuf, body {size_ratio:.2f}x larger")
            goals.append(
                (
                    f"protobuf encode >= {SPEEDUP_GOAL:.0f}x faster than {label}",
                    ratio >= SPEEDUP_GOAL,
                )
            )
    for label in ("decode result, JSON (orjson)", "decode result, JSON (stdlib json)"):
        if label in results:
            ratio = results[label]["best"] / results["decode result, protobuf"]["best"]
            print(f"{label}: {ratio:.1f}x slower than protobuf")
    print()
    for text, met in goals:
        print(f"goal: {text}: {'met' if met else 'NOT met'}")
    return results


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per operation")
    args = parser.parse_args(argv)
    repeat = args.repeat or (5 if args.quick else 30)
    run(repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
