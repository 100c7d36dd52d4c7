"""Speed of the offline server (tinker_lite.local) over HTTP on loopback.

* forward_backward of 128 datums x 128 tokens (cross_entropy), submit -> result through
  ``retrieve_future``, JSON and protobuf requests; goal < 1 s. Real model.
* sampling 64 new tokens (16-token prompt, ``stop=[]``), submit -> result; goal < 0.2 s.
  Real model.
* requests per second for asample + retrieve_future pairs with the instant stub model: one
  keep-alive connection in a plain ``http.client`` loop, and 8 such loops in threads.
* the delay between a result becoming ready (the server's ``X-Local-Ready-At``) and the
  client holding the answer of the poll that was waiting for it.

The server runs in its own process (``python -m tinker_lite.local serve``), so the client loop
never competes with it for the GIL. Results go to bench/results/local_server.json.

    python bench/bench_local_server.py [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import _common as c

if str(c.REPO_DIR) not in sys.path:
    sys.path.insert(0, str(c.REPO_DIR))

FB_GOAL_S = 1.0
SAMPLE_GOAL_S = 0.2
PAIR_THREADS = 8
MODEL = "tinker-lite/tiny-64"


class Client:
    """One keep-alive HTTP/1.1 connection speaking the Tinker JSON API."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.conn = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port, timeout=60
        )

    def post(
        self, path: str, body: bytes, content_type: str = "application/json"
    ) -> tuple[int, dict[str, str], bytes]:
        self.conn.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = self.conn.getresponse()
        data = response.read()
        return response.status, dict(response.headers), data

    def call(self, path: str, obj: Any) -> Any:
        status, _, data = self.post(path, json.dumps(obj).encode())
        if status != 200:
            raise RuntimeError(f"{path}: HTTP {status}: {data[:200]!r}")
        return json.loads(data)

    def wait(self, request_id: str) -> tuple[Any, dict[str, str], float]:
        """Poll until the result; return (result, headers, client receive time)."""
        body = json.dumps({"request_id": request_id}).encode()
        while True:
            status, headers, data = self.post("/api/v1/retrieve_future", body)
            received = time.time()
            result = json.loads(data)
            if status == 200 and result.get("type") != "try_again":
                if "error" in result:
                    raise RuntimeError(f"request failed: {result['error']}")
                return result, headers, received

    def session(self) -> str:
        """Open a session; return its id."""
        body = {"tags": [], "user_metadata": {}, "sdk_version": "0.38.0"}
        session_id: str = self.call("/api/v1/create_session", body)["session_id"]
        return session_id

    def base_sampler(self, session: str) -> str:
        """Open a sampling session on the base model; return its id."""
        body = {"session_id": session, "sampling_session_seq_id": 0, "base_model": MODEL}
        sampler_id: str = self.call("/api/v1/create_sampling_session", body)["sampling_session_id"]
        return sampler_id

    def close(self) -> None:
        self.conn.close()


def _session_and_model(client: Client) -> tuple[str, str]:
    session = client.session()
    future = client.call(
        "/api/v1/create_model",
        {
            "session_id": session,
            "model_seq_id": 0,
            "base_model": MODEL,
            "lora_config": {"rank": 32},
        },
    )
    model_id: str = client.wait(future["request_id"])[0]["model_id"]
    return session, model_id


def _tokens(row: int, n_tokens: int) -> list[int]:
    """Datum ``row`` of the benchmark batch: model input and targets, ``n_tokens + 1`` tokens."""
    return [(7 * row + j) % 256 for j in range(n_tokens + 1)]


def _batch_json(n_datums: int, n_tokens: int) -> list[dict[str, Any]]:
    data = []
    for i in range(n_datums):
        tokens = _tokens(i, n_tokens)
        data.append(
            {
                "loss_fn_inputs": {
                    "target_tokens": {"data": tokens[1:], "dtype": "int64", "shape": [n_tokens]},
                    "weights": {"data": [1.0] * n_tokens, "dtype": "float32", "shape": [n_tokens]},
                },
                "model_input": {"chunks": [{"tokens": tokens[:-1], "type": "encoded_text"}]},
            }
        )
    return data


def _batch_proto(model_id: str, seq_id: int, n_datums: int, n_tokens: int) -> bytes:
    import numpy as np

    from tinker_lite import types
    from tinker_lite._codec import proto as _proto

    data = []
    for i in range(n_datums):
        tokens = np.array(_tokens(i, n_tokens), dtype=np.int64)
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1]),
                loss_fn_inputs={
                    "target_tokens": tokens[1:],
                    "weights": np.ones(n_tokens, dtype=np.float32),
                },
            )
        )
    return _proto.encode_forward_backward_request(
        model_id=model_id,
        seq_id=seq_id,
        data=data,
        loss_fn="cross_entropy",
        loss_fn_config=None,
        forward_only=False,
    )


def bench_model_only(repeat: int) -> dict[str, Any]:
    """The same forward_backward in-process, without HTTP (what the server adds is the rest)."""
    import numpy as np

    from tinker_lite.local.model.tiny_lm import DatumArrays, TinyLM

    lm = TinyLM(MODEL)
    rows = [np.array(_tokens(i, 128), dtype=np.int64) for i in range(128)]
    batch = [
        DatumArrays(
            tokens=row[:-1],
            inputs={"target_tokens": row[1:], "weights": np.ones(128, dtype=np.float32)},
        )
        for row in rows
    ]

    def fb() -> None:
        lm.forward_backward(batch, "cross_entropy", None, backward=True)

    return {
        "forward_backward 128 x 128 (model only, no HTTP)": c.summarize(
            c.time_repeated(fb, repeat=repeat)
        )
    }


def bench_model_calls(repeat: int) -> dict[str, Any]:
    """forward_backward 128 x 128 and sampling 64 tokens through the real-model server."""
    out: dict[str, Any] = bench_model_only(repeat)
    with c.local_server(stub_model=False) as url:
        client = Client(url)
        session, model_id = _session_and_model(client)
        seq = [1]
        batch = _batch_json(128, 128)

        def fb_json() -> None:
            body = {
                "forward_backward_input": {"data": batch, "loss_fn": "cross_entropy"},
                "model_id": model_id,
                "seq_id": seq[0],
            }
            seq[0] += 1
            client.wait(client.call("/api/v1/forward_backward", body)["request_id"])

        # protobuf bodies are encoded before the clock starts (client-side work)
        proto_bodies = {s: _batch_proto(model_id, s, 128, 128) for s in range(1, 2 * repeat + 3)}

        def fb_proto() -> None:
            body = proto_bodies[seq[0]]
            seq[0] += 1
            status, _, data = client.post(
                "/api/v1/forward_backward", body, "application/x-protobuf"
            )
            if status != 200:
                raise RuntimeError(f"protobuf forward_backward: HTTP {status}: {data[:200]!r}")
            client.wait(json.loads(data)["request_id"])

        out["forward_backward 128 x 128 (JSON)"] = c.summarize(
            c.time_repeated(fb_json, repeat=repeat)
        )
        out["forward_backward 128 x 128 (protobuf)"] = c.summarize(
            c.time_repeated(fb_proto, repeat=repeat)
        )
        sampler = client.base_sampler(session)
        sample_seq = [0]

        def sample() -> None:
            body = {
                "prompt": {"chunks": [{"tokens": list(range(65, 81))}]},
                "sampling_params": {"max_tokens": 64, "stop": [], "seed": sample_seq[0]},
                "sampling_session_id": sampler,
                "seq_id": sample_seq[0],
            }
            sample_seq[0] += 1
            result = client.wait(client.call("/api/v1/asample", body)["request_id"])[0]
            if len(result["sequences"][0]["tokens"]) != 64:
                raise RuntimeError("expected 64 sampled tokens")

        out["sample 64 tokens (prompt 16)"] = c.summarize(
            c.time_repeated(sample, repeat=repeat * 3)
        )
        client.close()
    return out


def _pair_loop(url: str, pairs: int, latencies: list[float], errors: list[str]) -> None:
    client = Client(url)
    try:
        sampler = client.base_sampler(client.session())
        for seq in range(pairs):
            body = {
                "prompt": {"chunks": [{"tokens": [1, 2, 3, 4]}]},
                "sampling_params": {"max_tokens": 8},
                "sampling_session_id": sampler,
                "seq_id": seq,
            }
            request_id = client.call("/api/v1/asample", body)["request_id"]
            _, headers, received = client.wait(request_id)
            latencies.append(received - float(headers["X-Local-Ready-At"]))
    except Exception as e:  # reported in the results, the figure is then void
        errors.append(repr(e))
    finally:
        client.close()


def bench_request_rate(pairs: int) -> dict[str, Any]:
    """asample + retrieve_future pairs per second with the stub model."""
    out: dict[str, Any] = {}
    with c.local_server(stub_model=True) as url:
        warm: list[float] = []
        _pair_loop(url, 50, warm, [])
        for threads in (1, PAIR_THREADS):
            latencies: list[float] = []
            errors: list[str] = []
            per_thread = max(1, pairs // threads)
            workers = [
                threading.Thread(target=_pair_loop, args=(url, per_thread, latencies, errors))
                for _ in range(threads)
            ]
            started = time.perf_counter()
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            elapsed = time.perf_counter() - started
            done = len(latencies)
            out[f"{threads} connection(s)"] = {
                "pairs": done,
                "seconds": elapsed,
                "pairs_per_s": done / elapsed,
                "requests_per_s": 2 * done / elapsed,
                "ready_to_client_median_s": statistics.median(latencies) if latencies else None,
                "ready_to_client_p95_s": c.percentile(latencies, 95) if latencies else None,
                "errors": errors[:3],
            }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeat = 2 if args.quick else 5
    pairs = 400 if args.quick else 4000

    calls = bench_model_calls(repeat)
    rows = [[name, c.fmt_stat(stat)] for name, stat in calls.items()]
    c.print_table(
        "Local server: model calls over HTTP (submit -> result)", ["call", "wall time"], rows
    )
    fb = calls["forward_backward 128 x 128 (JSON)"]["median"]
    fb_proto = calls["forward_backward 128 x 128 (protobuf)"]["median"]
    sample = calls["sample 64 tokens (prompt 16)"]["median"]
    goals = [
        c.goal_line(
            "forward_backward 128 x 128 < 1 s",
            max(fb, fb_proto) < FB_GOAL_S,
            f"JSON {c.fmt_time(fb)}, protobuf {c.fmt_time(fb_proto)}",
        ),
        c.goal_line("sample 64 tokens < 0.2 s", sample < SAMPLE_GOAL_S, c.fmt_time(sample)),
    ]
    c.print_goals(goals)

    rate = bench_request_rate(pairs)
    rows = [
        [
            name,
            str(r["pairs"]),
            f"{r['pairs_per_s']:.0f}",
            f"{r['requests_per_s']:.0f}",
            c.fmt_time(r["ready_to_client_median_s"]),
            c.fmt_time(r["ready_to_client_p95_s"]),
        ]
        for name, r in rate.items()
    ]
    c.print_table(
        "Local server: asample + retrieve_future on loopback (stub model)",
        ["client", "pairs", "pairs/s", "requests/s", "ready->client p50", "p95"],
        rows,
    )
    errors = [e for r in rate.values() for e in r["errors"]]
    if errors:
        c.print_notes(errors)
    c.write_results("local_server", {"model_calls": calls, "request_rate": rate, "goals": goals})
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
