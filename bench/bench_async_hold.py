"""How long each ``*_async`` twin holds the caller's event loop, against a server with latency.

A heartbeat task ticks on the loop every millisecond; the hold of a twin is the longest gap
between two ticks while it is awaited (the gap still open when it returns included). A twin that
waits on the loop, as it should, holds it for about one tick; one that blocks holds it for the
round trips it waits for. The local server runs in its own process with ``delay=S`` added to
every request (its fault grammar), the clients in child processes of their own, alternating;
each twin is called once per run, in the order a training script would, on fresh clients (the
first client creation also starts the session). The table shows the median over the runs (and
the max); the official SDK's figures come from the same workload in its own venv.

    python bench/bench_async_hold.py [--quick] [--delay 0.1] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import _common as c

TICK = 0.001
"""The heartbeat's sleep between ticks (seconds)."""


class Heartbeat:
    """A task ticking on the running loop; ``hold`` gives the longest gap of a window."""

    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.max_gap = 0.0
        self._tick: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Heartbeat:
        self._tick = asyncio.Event()
        self._task = asyncio.create_task(self._run())
        await self.next_tick()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    async def _run(self) -> None:
        assert self._tick is not None
        while True:
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            self.max_gap = max(self.max_gap, now - self.last)
            self.last = now
            self._tick.set()

    async def next_tick(self) -> None:
        """Wait for the heartbeat to tick once more (the loop is idle again)."""
        assert self._tick is not None
        self._tick.clear()
        await self._tick.wait()

    async def hold(self, awaitable: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
        """Await ``awaitable()``; return the longest loop gap meanwhile, and its result."""
        await self.next_tick()
        self.max_gap = 0.0
        result = await awaitable()
        gap = max(self.max_gap, time.perf_counter() - self.last)
        return gap, result


def _session_id(service: Any) -> str:
    sid = getattr(service, "session_id", None)
    return sid if isinstance(sid, str) else service.holder.get_session_id()


def _sampler_id(sampler: Any) -> str:
    sid = getattr(sampler, "sampling_session_id", None)
    return sid if isinstance(sid, str) else sampler._sampling_session_id


def _custom_loss(sdk: Any) -> Any:
    """A loss for forward_backward_custom in the form this SDK takes (None: cannot run)."""
    if sdk.__name__ == "tinker_lite" and importlib.util.find_spec("torch") is None:
        import numpy as np

        def loss(data: Any, logprobs: list[Any]) -> Any:
            grads = [-np.ones_like(lp) for lp in logprobs]
            return float(-sum(lp.sum() for lp in logprobs)), grads, {}

        return loss
    if importlib.util.find_spec("torch") is None:
        return None

    def torch_loss(data: Any, logprobs: list[Any]) -> Any:
        total = -sum(lp.sum() for lp in logprobs)
        return total, {"custom:sum": float(total)}

    return torch_loss


def twin_plan(sdk: Any, args: Any) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    """Every twin both SDKs have, as (name, call(state) -> awaitable), in a script's order.

    A call may read what earlier ones stored in ``state`` (clients, checkpoint paths).
    """
    types = sdk.types
    model = args.base_model
    data = [
        types.Datum(
            model_input=types.ModelInput.from_ints([1, 2, 3, 4]),
            loss_fn_inputs={"target_tokens": [2, 3, 4, 5], "weights": [1.0, 1.0, 1.0, 1.0]},
        )
    ]
    prompt = types.ModelInput.from_ints([1, 2, 3])
    params = types.SamplingParams(max_tokens=2)
    adam = types.AdamParams(learning_rate=1e-3)
    custom = _custom_loss(sdk)

    async def keep(state: dict[str, Any], key: str, awaitable: Awaitable[Any]) -> Any:
        state[key] = value = await awaitable
        return value

    def svc(s: dict[str, Any]) -> Any:
        return s["service"]

    def tc(s: dict[str, Any]) -> Any:
        return s["trainer"]

    def sc(s: dict[str, Any]) -> Any:
        return s["sampler"]

    def rest(s: dict[str, Any]) -> Any:
        return s["rest"]

    plan: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        (
            "ServiceClient.create_lora_training_client_async",
            lambda s: keep(s, "trainer", svc(s).create_lora_training_client_async(model, rank=8)),
        ),
        (
            "ServiceClient.get_server_capabilities_async",
            lambda s: svc(s).get_server_capabilities_async(),
        ),
        ("TrainingClient.get_info_async", lambda s: tc(s).get_info_async()),
        ("TrainingClient.forward_async", lambda s: tc(s).forward_async(data, "cross_entropy")),
        (
            "TrainingClient.forward_backward_async",
            lambda s: tc(s).forward_backward_async(data, "cross_entropy"),
        ),
    ]
    if custom is not None:
        plan.append(
            (
                "TrainingClient.forward_backward_custom_async",
                lambda s: tc(s).forward_backward_custom_async(data, custom),
            )
        )
    plan += [
        ("TrainingClient.optim_step_async", lambda s: tc(s).optim_step_async(adam)),
        (
            "TrainingClient.save_state_async",
            lambda s: keep(s, "state_future", tc(s).save_state_async("hold-state")),
        ),
        (
            "TrainingClient.save_weights_for_sampler_async",
            lambda s: keep(s, "sampler_future", tc(s).save_weights_for_sampler_async("hold-s")),
        ),
        (
            "TrainingClient.save_weights_external_async",
            lambda s: keep(s, "external_future", tc(s).save_weights_external_async("hold-x")),
        ),
        (
            "TrainingClient.load_state_async",
            lambda s: tc(s).load_state_async(s["state_path"]),
        ),
        (
            "TrainingClient.load_state_with_optimizer_async",
            lambda s: tc(s).load_state_with_optimizer_async(s["state_path"]),
        ),
        (
            "TrainingClient.create_sampling_client_async",
            lambda s: tc(s).create_sampling_client_async(s["sampler_path"]),
        ),
        (
            "TrainingClient.save_weights_and_get_sampling_client_async",
            lambda s: keep(s, "sampler", tc(s).save_weights_and_get_sampling_client_async()),
        ),
        ("SamplingClient.sample_async", lambda s: sc(s).sample_async(prompt, 1, params)),
        ("SamplingClient.compute_logprobs_async", lambda s: sc(s).compute_logprobs_async(prompt)),
        ("SamplingClient.get_base_model_async", lambda s: sc(s).get_base_model_async()),
        (
            "ServiceClient.create_sampling_client_async",
            lambda s: svc(s).create_sampling_client_async(base_model=model),
        ),
        (
            "ServiceClient.create_training_client_from_state_async",
            lambda s: svc(s).create_training_client_from_state_async(s["state_path"]),
        ),
        (
            "ServiceClient.create_training_client_from_state_with_optimizer_async",
            lambda s: svc(s).create_training_client_from_state_with_optimizer_async(
                s["state_path"]
            ),
        ),
        (
            "RestClient.get_training_run_async",
            lambda s: rest(s).get_training_run_async(tc(s).model_id),
        ),
        (
            "RestClient.get_training_run_by_tinker_path_async",
            lambda s: rest(s).get_training_run_by_tinker_path_async(s["state_path"]),
        ),
        ("RestClient.list_training_runs_async", lambda s: rest(s).list_training_runs_async()),
        (
            "RestClient.list_checkpoints_async",
            lambda s: rest(s).list_checkpoints_async(tc(s).model_id),
        ),
        ("RestClient.list_user_checkpoints_async", lambda s: rest(s).list_user_checkpoints_async()),
        ("RestClient.get_session_async", lambda s: rest(s).get_session_async(s["session_id"])),
        ("RestClient.list_sessions_async", lambda s: rest(s).list_sessions_async()),
        (
            "RestClient.get_sampler_async",
            lambda s: rest(s).get_sampler_async(_sampler_id(sc(s))),
        ),
        (
            "RestClient.set_checkpoint_ttl_from_tinker_path_async",
            lambda s: rest(s).set_checkpoint_ttl_from_tinker_path_async(s["state_path"], 86400),
        ),
        (
            "RestClient.publish_checkpoint_from_tinker_path_async",
            lambda s: rest(s).publish_checkpoint_from_tinker_path_async(s["state_path"]),
        ),
        (
            "RestClient.unpublish_checkpoint_from_tinker_path_async",
            lambda s: rest(s).unpublish_checkpoint_from_tinker_path_async(s["state_path"]),
        ),
        (
            "RestClient.get_external_weights_urls_async",
            lambda s: rest(s).get_external_weights_urls_async(s["external_path"]),
        ),
        ("RestClient.get_audit_log_async", lambda s: rest(s).get_audit_log_async()),
        (
            "RestClient.get_current_checkpoint_storage_usage_async",
            lambda s: rest(s).get_current_checkpoint_storage_usage_async(),
        ),
        (
            "RestClient.delete_checkpoint_from_tinker_path_async",
            lambda s: rest(s).delete_checkpoint_from_tinker_path_async(s["sampler_path"]),
        ),
    ]
    return plan


async def _measure(sdk: Any, args: Any) -> dict[str, Any]:
    service = sdk.ServiceClient(base_url=args.base_url)
    state: dict[str, Any] = {"service": service, "rest": sdk.RestClient(base_url=args.base_url)}
    holds: dict[str, float] = {}
    errors: dict[str, str] = {}
    async with Heartbeat() as beat:
        for name, call in twin_plan(sdk, args):
            try:
                holds[name], _ = await beat.hold(lambda call=call: call(state))
            except Exception as exc:  # reported per twin: the others still run
                errors[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
            # What later twins need, read outside the measured windows.
            if name == "ServiceClient.create_lora_training_client_async" and "trainer" in state:
                state["session_id"] = _session_id(service)
            for key in ("state", "sampler", "external"):
                future = state.pop(f"{key}_future", None)
                if future is not None:
                    state[f"{key}_path"] = (await future).path
    return {"holds": holds, "errors": errors, "_close": service}


def hold_workload(sdk: Any, args: Any) -> dict[str, Any]:
    """Call every twin once on a running loop; report each one's loop hold (seconds)."""
    warnings.simplefilter("ignore")  # both SDKs warn on every twin: not what is measured
    return asyncio.run(_measure(sdk, args))


def run(quick: bool, delay: float, runs: int | None) -> dict[str, Any]:
    """Measure both clients; print the per-twin table; write results/async_hold.json."""
    runs = runs or (1 if quick else 3)
    notes: list[str] = []
    per_client: dict[str, dict[str, list[float]]] = {c.LITE: {}, c.OFFICIAL: {}}
    failures: dict[str, dict[str, str]] = {c.LITE: {}, c.OFFICIAL: {}}
    options = c.client_argv(base_model="meta-llama/Llama-3.2-1B")
    with c.local_server(extra=["--faults", f"delay={delay}"]) as base_url:
        options += c.client_argv(base_url=base_url)
        plan = [(c.LITE, c.lite_child_argv("bench_async_hold.py", *options), True)]
        official_argv = c.official_child_argv("async_hold", *options)
        if official_argv is None:
            notes.append(c.official_missing_note())
        else:
            plan.append((c.OFFICIAL, official_argv, False))
        for _ in range(runs):
            for client, argv, lite in plan:
                report = c.run_child(argv, lite=lite)
                if not report.get("ok"):
                    notes.append(f"{client}: {c.failure_text(report)}")
                    continue
                for name, hold in report["holds"].items():
                    per_client[client].setdefault(name, []).append(hold)
                failures[client].update(report["errors"])
    names = list(dict.fromkeys([*per_client[c.LITE], *per_client[c.OFFICIAL]]))
    rows = []
    table: dict[str, dict[str, Any]] = {}
    for name in names:
        cells = []
        for client in (c.LITE, c.OFFICIAL):
            values = per_client[client].get(name)
            if values:
                table.setdefault(name, {})[client] = c.summarize(values)
                cells.append(f"{statistics.median(values) * 1e3:.1f} ({max(values) * 1e3:.1f})")
            else:
                cells.append(failures[client].get(name, "-")[:40])
        rows.append([name, *cells])
    c.print_table(
        f"Event-loop hold of each *_async twin, ms: median (max) of {runs} run(s); every request "
        f"delayed {delay * 1e3:.0f} ms by the server; heartbeat tick {TICK * 1e3:.0f} ms",
        ["twin", "tinker_lite", "official 0.38"],
        rows,
    )
    for client, errs in failures.items():
        for name, err in errs.items():
            notes.append(f"{client} {name}: {err}")
    c.print_notes(notes)
    data = {"runs": runs, "delay_s": delay, "holds": table, "errors": failures, "notes": notes}
    c.write_results("async_hold", data)
    return data


def main(argv: list[str] | None = None) -> int:
    """Run the figure, or tinker_lite's child with --child."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--delay", type=float, default=0.1, help="server latency per request (s)")
    parser.add_argument("--runs", type=int)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    c.client_args(parser)
    args = parser.parse_args(argv)
    c.ensure_worktree_importable()
    if args.child:
        return c.run_client_command("tinker_lite", hold_workload, args)
    run(args.quick, args.delay, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
