"""Drive the official Tinker SDK for the benchmarks; run with the official venv's python.

Never imports tinker_lite: the parent process starts the local server and passes its URL. Each
command measures this process's own wall time (perf_counter), CPU (getrusage RUSAGE_SELF) and
peak RSS (VmHWM) and prints one JSON report line (see _common.emit_report).

    <official-venv>/bin/python bench/official_driver.py encoding --payloads JSON --inner 5
    <official-venv>/bin/python bench/official_driver.py sampling --base-url URL --base-model M ...
    <official-venv>/bin/python bench/official_driver.py training --base-url URL --base-model M ...
    <official-venv>/bin/python bench/official_driver.py latency --base-url URL --base-model M ...
    <official-venv>/bin/python bench/official_driver.py async_hold --base-url URL --base-model M
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import _common as c

MODEL_ID = "bench-model"


# --------------------------------------------------------------------------- encoding


def encoding(args: argparse.Namespace) -> dict[str, Any]:
    """Figure 2 for the official SDK: build + protobuf-encode, and decode a result."""
    from bench_encoding import SAMPLE_RESULTS, make_arrays
    from tinker import types
    from tinker.proto.request_conv import forward_backward_request_to_proto
    from tinker.proto.response_conv import (
        deserialize_forward_backward_output,
        deserialize_sample_response,
    )
    from tinker.types.forward_backward_input import ForwardBackwardInput
    from tinker.types.forward_backward_request import ForwardBackwardRequest

    arrays = make_arrays()
    payload = json.loads(args.payloads)
    proto_body = Path(payload["proto"]).read_bytes()
    sample_proto = Path(payload["sample_proto"]).read_bytes()

    def build() -> list[Any]:
        # ModelInput.from_ints wants a list (its pydantic model rejects an ndarray).
        return [
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens.tolist()),
                loss_fn_inputs={"target_tokens": targets, "weights": weights},
            )
            for tokens, targets, weights in arrays
        ]

    data = build()

    def encode_proto(datums: list[Any] = data) -> bytes:
        # What AsyncTrainingResource.forward_backward does before sending.
        request = ForwardBackwardRequest(
            forward_backward_input=ForwardBackwardInput(data=datums, loss_fn="cross_entropy"),
            model_id=MODEL_ID,
            seq_id=1,
        )
        msg = forward_backward_request_to_proto(request)
        msg.forward_only = False
        body: bytes = msg.SerializeToString()
        return body

    def decode_proto() -> Any:
        return deserialize_forward_backward_output(proto_body)

    def decode_sample_proto() -> Any:
        return [deserialize_sample_response(sample_proto) for _ in range(SAMPLE_RESULTS)]

    # 0.38 decodes ForwardBackwardOutput only from protobuf: its JSON path
    # (lib._pydantic_conv.deserialize_json_response) hands back the plain dict.
    assert len(decode_proto().loss_fn_outputs) == 128
    times = {
        name: c.time_repeated(fn, repeat=args.inner, warmup=1)
        for name, fn in {
            "build": build,
            "encode_proto": encode_proto,
            "build_encode_proto": lambda: encode_proto(build()),
            # 0.38 validates no values; its chunking of the batch is not timed here.
            "build_validate_encode_proto": lambda: encode_proto(build()),
            "decode_proto": decode_proto,
            "decode_sample_proto": decode_sample_proto,
        }.items()
    }
    return {"times": times, "request_bytes": {"proto": len(encode_proto())}}


# --------------------------------------------------------------------------- main


def _encoding_workload(sdk: Any, args: argparse.Namespace) -> dict[str, Any]:
    del sdk
    return encoding(args)


def _latency_workload(sdk: Any, args: argparse.Namespace) -> dict[str, Any]:
    from bench_latency import latency_workload

    return latency_workload(sdk, args)


def _async_hold_workload(sdk: Any, args: argparse.Namespace) -> dict[str, Any]:
    from bench_async_hold import hold_workload

    return hold_workload(sdk, args)


COMMANDS = {
    "encoding": _encoding_workload,
    "sampling": c.sampling_workload,
    "training": c.training_workload,
    "latency": _latency_workload,
    "async_hold": _async_hold_workload,
}


def main(argv: list[str] | None = None) -> int:
    """Run one command with the official SDK and print its report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=sorted(COMMANDS))
    parser.add_argument("--payloads")
    parser.add_argument("--inner", type=int, default=5)
    c.client_args(parser)
    args = parser.parse_args(argv)
    return c.run_client_command("tinker", COMMANDS[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
