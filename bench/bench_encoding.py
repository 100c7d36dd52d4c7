"""Figure 2: request encoding and result decoding.

* Build + encode a forward_backward chunk of about 500,000 numbers: 128 datums of 1,302 tokens,
  each with ``model_input`` tokens, ``target_tokens`` and ``weights`` (3 x 1,302 x 128 =
  499,968 numbers), built from numpy arrays the way each client's users would write it.
  tinker_lite: protobuf (``_proto.encode_forward_backward_request``) and JSON (``_wire.dumps``).
  Official SDK: its protobuf request conversion + ``SerializeToString`` (0.38 sends
  forward_backward only as protobuf).
* Decode a forward_backward result holding ``logprobs`` for 128 x 1,024 tokens, protobuf and
  JSON; both payloads are made once by the parent and read by both clients.
* Decode 1,000 ``sample`` results (one sequence of one token with its logprob, as the sampling
  fan-out of figure 3 gets them), protobuf and JSON (parse + structure into SampleResponse; the
  official SDK 0.38 keeps a JSON sample result as a plain dict).

Each client runs in its own child process (this script with ``--child`` for tinker_lite,
official_driver.py ``encoding`` for the official SDK), several times, in alternation. Each
operation is timed in CPU time (``time.process_time``; all of it is single-threaded).

    python bench/bench_encoding.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import _common as c

N_DATUMS = 128
TOKENS_PER_DATUM = 500_000 // (3 * N_DATUMS)  # 1,302
DECODE_DATUMS = 128
DECODE_TOKENS = 1024
SAMPLE_RESULTS = 1000
VOCAB = 32_000
MODEL_ID = "bench-model"

# Operations in table order: key, label, which clients have it.
OPS = [
    ("build", "build 128 Datums from numpy"),
    ("encode_proto", "encode protobuf request"),
    ("build_encode_proto", "build + encode protobuf"),
    ("build_validate_encode_proto", "build + validate + encode protobuf (forward_backward)"),
    ("encode_json", "encode JSON request"),
    ("build_encode_json", "build + encode JSON"),
    ("decode_proto", "decode result, protobuf (128 x 1024 logprobs)"),
    ("decode_json", "decode result, JSON (128 x 1024 logprobs)"),
    ("decode_sample_proto", "decode 1,000 sample results, protobuf"),
    ("decode_sample_json", "decode 1,000 sample results, JSON (parse + structure)"),
]


def make_arrays(seed: int = 0) -> list[tuple[Any, Any, Any]]:
    """Return the per-datum (tokens int64, target_tokens int64, weights float32) numpy arrays."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(N_DATUMS):
        tokens = rng.integers(0, VOCAB, TOKENS_PER_DATUM + 1, dtype=np.int64)
        weights = rng.random(TOKENS_PER_DATUM, dtype=np.float32)
        out.append((tokens[:-1], tokens[1:], weights))
    return out


def make_result_payloads(directory: Path) -> dict[str, str]:
    """Write the forward_backward result (protobuf and JSON) that both clients decode."""
    import numpy as np

    from tinker_lite import types
    from tinker_lite._codec import wire as _wire
    from tinker_lite.local.protocol import codecs as _codecs

    rng = np.random.default_rng(1)
    outputs = [
        {
            "logprobs": types.TensorData.from_numpy(
                -rng.random(DECODE_TOKENS, dtype=np.float32) * 10.0
            )
        }
        for _ in range(DECODE_DATUMS)
    ]
    result = types.ForwardBackwardOutput(
        loss_fn_output_type="ArrayRecord",
        loss_fn_outputs=outputs,
        metrics={"loss:sum": 1234.5},
    )
    sample = types.SampleResponse(
        sequences=[types.SampledSequence(stop_reason="length", tokens=[17], logprobs=[-0.25])]
    )
    paths = {
        "proto": directory / "fb_output.pb",
        "json": directory / "fb_output.json",
        "sample_proto": directory / "sample.pb",
        "sample_json": directory / "sample.json",
    }
    paths["proto"].write_bytes(_codecs.encode_forward_backward_output(result))
    paths["json"].write_bytes(_wire.dumps(result))
    paths["sample_proto"].write_bytes(_codecs.encode_sample_response(sample))
    paths["sample_json"].write_bytes(_wire.dumps(sample))
    return {k: str(v) for k, v in paths.items()}


def time_ops(ops: dict[str, Any], inner: int) -> dict[str, list[float]]:
    """Time each op ``inner`` times after one warm-up call; return the durations."""
    return {name: c.time_repeated(fn, repeat=inner, warmup=1) for name, fn in ops.items()}


def lite_child(args: argparse.Namespace) -> None:
    """Measure tinker_lite in this (child) process and print the report."""
    import tinker_lite
    from tinker_lite import types
    from tinker_lite._codec import proto as _proto
    from tinker_lite._codec import wire as _wire

    arrays = make_arrays()
    payload = json.loads(args.payloads)
    proto_body = Path(payload["proto"]).read_bytes()
    json_body = Path(payload["json"]).read_bytes()
    sample_proto = Path(payload["sample_proto"]).read_bytes()
    sample_json = Path(payload["sample_json"]).read_bytes()

    def build() -> list[types.Datum]:
        return [
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens),
                loss_fn_inputs={"target_tokens": targets, "weights": weights},
            )
            for tokens, targets, weights in arrays
        ]

    data = build()

    def encode_proto(datums: list[types.Datum] = data) -> bytes:
        return _proto.encode_forward_backward_request(
            model_id=MODEL_ID,
            seq_id=1,
            data=datums,
            loss_fn="cross_entropy",
            loss_fn_config=None,
            forward_only=False,
        )

    def encode_json(datums: list[types.Datum] = data) -> bytes:
        request = types.ForwardBackwardRequest(
            forward_backward_input=types.ForwardBackwardInput(data=datums, loss_fn="cross_entropy"),
            model_id=MODEL_ID,
            seq_id=1,
        )
        return _wire.dumps(request)

    def decode_proto() -> Any:
        return _proto.decode_forward_backward_output(proto_body)

    def validated(datums: list[types.Datum]) -> list[types.Datum]:
        # What forward_backward checks before encoding (tinker_lite.validate).
        tinker_lite.validate(datums, "cross_entropy")
        return datums

    def decode_json() -> Any:
        return _wire.structure(_wire.loads(json_body), types.ForwardBackwardOutput)

    def decode_sample_proto() -> Any:
        return [_proto.decode_sample_response(sample_proto) for _ in range(SAMPLE_RESULTS)]

    def decode_sample_json() -> Any:
        return [
            _wire.structure(_wire.loads(sample_json), types.SampleResponse)
            for _ in range(SAMPLE_RESULTS)
        ]

    check_proto = decode_proto()
    check_json = decode_json()
    assert len(check_proto.loss_fn_outputs) == DECODE_DATUMS
    assert len(check_json.loss_fn_outputs) == DECODE_DATUMS
    times = time_ops(
        {
            "build": build,
            "encode_proto": encode_proto,
            "build_encode_proto": lambda: encode_proto(build()),
            "build_validate_encode_proto": lambda: encode_proto(validated(build())),
            "encode_json": encode_json,
            "build_encode_json": lambda: encode_json(build()),
            "decode_proto": decode_proto,
            "decode_json": decode_json,
            "decode_sample_proto": decode_sample_proto,
            "decode_sample_json": decode_sample_json,
        },
        args.inner,
    )
    c.emit_report(
        {
            "ok": True,
            "client": c.LITE,
            "times": times,
            "numbers": sum(3 * len(t) for t, _, _ in arrays),
            "request_bytes": {"proto": len(encode_proto()), "json": len(encode_json())},
            **c.process_report(),
        }
    )


def run(quick: bool) -> dict[str, Any]:
    """Run both clients' children in alternation; print the table; write results/encoding.json."""
    outer = 1 if quick else 3
    inner = 2 if quick else 10
    notes: list[str] = []
    samples: dict[str, dict[str, list[float]]] = {c.LITE: {}, c.OFFICIAL: {}}
    failures: dict[str, str] = {}
    sizes: dict[str, Any] = {}
    have_official = c.official_python() is not None
    if not have_official:
        notes.append(c.official_missing_note())
    with tempfile.TemporaryDirectory(prefix="tl-bench-enc-") as tmp:
        payloads = json.dumps(make_result_payloads(Path(tmp)))
        common = ["--payloads", payloads, "--inner", str(inner)]
        for _ in range(outer):
            runs = [(c.LITE, c.lite_child_argv("bench_encoding.py", *common), True)]
            if have_official:
                argv = c.official_child_argv("encoding", *common)
                assert argv is not None
                runs.append((c.OFFICIAL, argv, False))
            for client, argv, lite in runs:
                report = c.run_child(argv, lite=lite)
                if not report.get("ok"):
                    failures[client] = c.failure_text(report)
                    continue
                sizes[client] = report.get("request_bytes")
                for op, values in report["times"].items():
                    samples[client].setdefault(op, []).extend(values)

    stats = {
        client: {op: c.summarize(values) for op, values in ops.items()}
        for client, ops in samples.items()
    }
    ratios: dict[str, float | None] = {}
    rows = []
    for op, label in OPS:
        lite_stat = stats[c.LITE].get(op, {})
        off_stat = stats[c.OFFICIAL].get(op, {})
        r = c.ratio(lite_stat.get("median"), off_stat.get("median"))
        ratios[op] = r
        off_text = c.fmt_stat(off_stat) if off_stat else "n/a"
        if not have_official or c.OFFICIAL in failures:
            off_text = "-"
        rows.append([label, c.fmt_stat(lite_stat), off_text, c.fmt_ratio(r)])
    for client, text in failures.items():
        notes.append(f"{client} failed: {text}")
    if sizes.get(c.LITE):
        notes.append(
            f"tinker_lite request body: protobuf {c.fmt_bytes(sizes[c.LITE]['proto'])}, "
            f"JSON {c.fmt_bytes(sizes[c.LITE]['json'])}"
        )
    if sizes.get(c.OFFICIAL):
        notes.append(f"official request body: protobuf {c.fmt_bytes(sizes[c.OFFICIAL]['proto'])}")
    notes.append(
        "n/a: the official SDK 0.38 sends forward_backward only as protobuf and decodes "
        "ForwardBackwardOutput only from protobuf; a JSON forward_backward or sample result "
        "comes back as a plain dict"
    )
    goals = []
    if have_official and c.OFFICIAL not in failures:
        goals.append(
            c.ratio_goal(
                "encoding 128 datums / 500,000 numbers: client CPU",
                ratios.get("build_validate_encode_proto"),
                0.5,
                "CPU of build + validate + encode protobuf (official: build + encode)",
            )
        )
    c.print_table(
        f"Figure 2: request encoding ({N_DATUMS} datums x {TOKENS_PER_DATUM} tokens x 3 arrays "
        f"= {3 * N_DATUMS * TOKENS_PER_DATUM:,} numbers); median of {outer * inner} (min..max)",
        [
            "operation (CPU time)",
            "tinker_lite",
            f"official {c.OFFICIAL_VERSION}",
            "lite / official",
        ],
        rows,
    )
    c.print_notes(notes)
    c.print_goals(goals)
    data = {
        "outer_runs": outer,
        "inner_runs": inner,
        "stats": stats,
        "ratios": ratios,
        "request_bytes": sizes,
        "failures": failures,
        "goals": goals,
        "notes": notes,
    }
    c.write_results("encoding", data)
    return data


def main(argv: list[str] | None = None) -> None:
    """Run the figure, or one client child with --child."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--payloads", help=argparse.SUPPRESS)
    parser.add_argument("--inner", type=int, default=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    c.ensure_worktree_importable()
    if args.child:
        lite_child(args)
    else:
        run(args.quick)


if __name__ == "__main__":
    sys.exit(main())
