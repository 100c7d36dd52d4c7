"""Figure 7: the requests floor, what the same HTTP exchanges cost when sent with plain requests.

The training loop of figure 4 (20 steps of a 32 x 256 ``forward_backward`` + ``optim_step``) and
the 1,000-sample fan-out of figure 3 make 4 and 2 HTTP requests per step and per sample. Here a
child sends exactly those requests, with the bodies and headers tinker_lite sends, through a
plain ``requests.Session`` (``prepare_request`` + ``send``, requests' prepared-request API) and
nothing else: no checks, no futures, no retries, no decoding beyond the request id. Training,
its bodies encoded before the clock starts: one thread, one step after the other (the cheapest
way to send them), and pipelined on the design's threads (a single-worker executor sends, a
poll executor polls). Fan-out: one thread, and a 16-thread ``ThreadPoolExecutor`` (the wide
executor of the design, each thread with its own session). tinker_lite and the official SDK run
the figures' workloads in the same alternation; every ratio is against the official SDK.

A client built on requests spends at least the floor; tinker_lite / official below
floor / official would mean it sends less than the floor does.

    python bench/bench_floor.py [--quick]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
import threading
import uuid
from typing import Any

import _common as c

TRAINING = {"steps": 20, "datums": 32, "tokens": 256}
FAN_OUT = 1000
FAN_OUT_THREADS = 16
POLL_THREADS = 4  # what tinker_lite's poller starts for this loop
CASES = ("training", "training-threads", "fan-out", "fan-out-threads")
# A threaded floor case shares the clients' runs of the case it follows.
SHARES = {"training-threads": "training", "fan-out-threads": "fan-out"}


def floor_child(sdk: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Send one case's requests with plain requests; the report has ``run`` like a client's."""
    import numpy.random  # noqa: F401  (first, as in the training workload: BLAS threads settle)
    import requests

    service = sdk.ServiceClient(base_url=args.base_url)
    requestor: Any = None
    headers: dict[str, str] = {}
    base = args.base_url.rstrip("/") + "/api/v1/"
    local = threading.local()

    def post(path: str, body: bytes, content_type: str, extra: dict[str, str]) -> Any:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
        sent = {**headers, **extra, "Content-Type": content_type}
        sent["X-Idempotency-Key"] = uuid.uuid4().hex
        sent["x-stainless-retry-count"] = "0"
        request = requests.Request("POST", base + path, data=body, headers=sent)
        answer = session.send(session.prepare_request(request), timeout=(10, 60), proxies={})
        answer.raise_for_status()
        return answer

    def retrieve(request_id: str, request_type: str, accept: str) -> Any:
        body = json.dumps({"request_id": request_id, "allow_metadata_only": True}).encode()
        extra = {
            "Accept": accept,
            "X-Tinker-Request-Iteration": "0",
            "X-Tinker-Request-Type": request_type,
            "X-Stainless-Raw-Response": "raw",
        }
        answer = post("retrieve_future", body, "application/json", extra)
        if answer.headers.get("Content-Type", "").startswith("application/json"):
            data = answer.json()
            if data.get("type") == "try_again" or "error" in data:
                raise RuntimeError(f"retrieve_future answered {data}")
        return answer

    if args.case.startswith("training"):
        trainer = c.resolved(
            service.create_lora_training_client(base_model=args.base_model, rank=8)
        )
        requestor = trainer._api
        headers.update(requestor.transport.default_headers())
        data = c.training_data(sdk, args)
        adam = sdk.types.AdamParams(learning_rate=1e-4)
        trainer.forward_backward(data, "cross_entropy").result()
        trainer.optim_step(adam).result()
        seq_id = trainer._queue._next_request_id
        bodies = []
        for _ in range(args.steps + 1):  # the first is the warm-up
            fb = requestor.training.encode_forward_backward(
                seq_id + 1,
                model_id=trainer.model_id,
                data=data,
                loss_fn="cross_entropy",
                loss_fn_config=None,
                forward_only=False,
                wire="protobuf",
                sdk_method="TrainingClient.forward_backward",
            )
            opt = requestor.training.encode_optim_step(
                trainer.model_id, seq_id + 2, adam, sdk_method="TrainingClient.optim_step"
            )
            bodies.append((fb, opt))
            seq_id += 2

        def send_step(step: tuple[Any, Any]) -> None:
            for request in step:
                extra = {"X-SDK-Method": request.sdk_method, **request.headers}
                if request.accept != "application/json":
                    extra["Accept"] = request.accept
                path = request.path.rsplit("/", 1)[-1]
                answer = post(path, request.body, request.content_type, extra)
                retrieve(answer.json()["request_id"], request.request_type, request.accept)

        send_step(bodies[0])

        def run() -> None:
            if args.case == "training":
                for step in bodies[1:]:
                    send_step(step)
                return
            # The client's threads, pipelined as figure 4: a single-worker executor sends in
            # order, each answer's poll goes to a poll executor, and the caller submits step
            # i+1 before it waits for step i's results.
            polls = concurrent.futures.ThreadPoolExecutor(POLL_THREADS)
            sends = concurrent.futures.ThreadPoolExecutor(1)

            def submit(request: Any) -> Any:
                extra = {"X-SDK-Method": request.sdk_method, **request.headers}
                if request.accept != "application/json":
                    extra["Accept"] = request.accept
                path = request.path.rsplit("/", 1)[-1]
                answer = post(path, request.body, request.content_type, extra)
                request_id = answer.json()["request_id"]
                return polls.submit(retrieve, request_id, request.request_type, request.accept)

            with polls, sends:
                previous: list[Any] = []
                for step in bodies[1:]:
                    current = [sends.submit(submit, request) for request in step]
                    for sent in previous:
                        sent.result().result()
                    previous = current
                for sent in previous:
                    sent.result().result()

    else:
        sampler = c.resolved(service.create_sampling_client(base_model=args.base_model))
        requestor = sampler._api
        headers.update(requestor.transport.default_headers())
        session_id = sampler.sampling_session_id
        counter = iter(range(1, 10**9))
        lock = threading.Lock()

        def one(_: object = None) -> None:
            with lock:
                seq_id = next(counter)
            body = {
                "num_samples": 1,
                "prompt": {"chunks": [{"tokens": c.PROMPT, "type": "encoded_text"}]},
                "sampling_params": {"max_tokens": 1, "temperature": 1.0, "top_k": -1, "top_p": 1.0},
                "sampling_session_id": session_id,
                "seq_id": seq_id,
                "prompt_logprobs": False,
                "topk_prompt_logprobs": 0,
                "topk_sample_logprobs": 0,
                "prompt_alt_tokens_k": 0,
                "record_stability_info": False,
                "type": "sample",
            }
            extra = {"X-SDK-Method": "SamplingClient.sample", "Accept": "application/json"}
            answer = post("asample", json.dumps(body).encode(), "application/json", extra)
            retrieve(answer.json()["request_id"], "Sample", "application/json")

        one()
        threads = FAN_OUT_THREADS if args.case == "fan-out-threads" else 0

        def run() -> None:
            if not threads:
                for _ in range(args.n):
                    one()
                return
            with concurrent.futures.ThreadPoolExecutor(threads) as pool:
                list(pool.map(one, range(args.n)))

    with c.Span() as span:
        run()
    return {"run": span.as_dict(), "_close": service}


def run(quick: bool) -> dict[str, Any]:
    """Run the floor, tinker_lite and the official SDK for each case; print and write results."""
    runs = 1 if quick else 3
    steps = 5 if quick else TRAINING["steps"]
    n = 200 if quick else FAN_OUT
    notes: list[str] = []
    if c.official_python() is None:
        notes.append(c.official_missing_note())
    results: dict[str, Any] = {}
    before: dict[str, list[dict[str, Any]]] = {}
    rows: list[list[str]] = []
    with c.local_server(stub_model=True) as base_url:
        for case in CASES:
            if case.startswith("training"):
                options = c.client_argv(
                    base_url=base_url, steps=steps, datums=TRAINING["datums"], tokens=256
                )
                lite = c.lite_child_argv("bench_training.py", *options)
                official = c.official_child_argv("training", *options)
            else:
                options = c.client_argv(base_url=base_url, n=n, concurrency=n)
                lite = c.lite_child_argv("bench_sampling.py", *options)
                official = c.official_child_argv("sampling", *options)
            floor = c.lite_child_argv("bench_floor.py", *options, "--case", case)
            reports: dict[str, list[dict[str, Any]]] = {"floor": [], c.LITE: [], c.OFFICIAL: []}
            for _ in range(runs):
                plan = [("floor", floor), (c.LITE, lite), (c.OFFICIAL, official)]
                for who, argv in plan:
                    if argv is None or (case in SHARES and who != "floor"):
                        continue  # the clients ran in the case before
                    report = c.run_child(argv, lite=who != c.OFFICIAL)
                    if report.get("ok"):
                        reports[who].append(report)
                    else:
                        notes.append(f"{case}: {who} failed: {c.failure_text(report)}")
            if case in SHARES:
                reports[c.LITE], reports[c.OFFICIAL] = before[c.LITE], before[c.OFFICIAL]
            before = reports
            cpu = {who: c.median_of(reports[who], "run.cpu_s") for who in reports}
            results[case] = {
                "cpu_s": cpu,
                "samples": {who: [r["run"]["cpu_s"] for r in reports[who]] for who in reports},
                "floor_ratio": c.ratio(cpu["floor"], cpu[c.OFFICIAL]),
                "lite_ratio": c.ratio(cpu[c.LITE], cpu[c.OFFICIAL]),
            }
            label = {
                "training": f"training loop, {steps} steps (4 requests each), floor in one thread",
                "training-threads": f"training loop, {steps} steps, floor pipelined on threads",
                "fan-out": f"fan-out, {n:,} samples (2 requests each), floor in one thread",
                "fan-out-threads": f"fan-out, {n:,} samples, floor on {FAN_OUT_THREADS} threads",
            }[case]
            rows.append(
                [
                    label,
                    c.fmt_time(cpu[c.LITE]),
                    c.fmt_time(cpu["floor"]),
                    c.fmt_time(cpu[c.OFFICIAL]),
                    c.fmt_ratio(results[case]["lite_ratio"]),
                    c.fmt_ratio(results[case]["floor_ratio"]),
                ]
            )
    c.print_table(
        f"Figure 7: client CPU of tinker_lite, of the same requests sent with plain requests "
        f"(the floor) and of the official SDK {c.OFFICIAL_VERSION}; median of {runs} runs",
        ["workload", "tinker_lite", "requests floor", "official", "lite / off", "floor / off"],
        rows,
    )
    notes.append("the fan-out rows share one tinker_lite and one official run per round")
    c.print_notes(notes)
    data = {"runs": runs, "cases": results, "notes": notes}
    c.write_results("floor", data)
    return data


def main(argv: list[str] | None = None) -> int:
    """Run the figure, or one floor child with --child."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    c.client_args(parser)
    args = parser.parse_args(argv)
    c.ensure_worktree_importable()
    if args.child:
        return c.run_client_command("tinker_lite", floor_child, args)
    run(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
