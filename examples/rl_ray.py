"""RL rollouts on a Ray cluster: the driver trains, Ray actors sample and grade arithmetic answers.

The driver owns the ServiceClient and the TrainingClient. Each step it saves the current weights
for sampling and hands the SamplingClient to every rollout worker (pickled, the default, or as a
sampler handle with ``--handover handle``). A worker samples its share of the problems
("What is 23 + 45?"), grades every completion in a deliberately CPU-bound environment step and
returns tokens, logprobs and rewards; the driver computes group-relative advantages and takes
one ``importance_sampling`` step::

    pip install 'tinker-lite[ray]'
    python examples/rl_ray.py --steps 3 --workers 2

With no ``--base-url`` and no ``TINKER_API_KEY`` the example starts ``tinker-lite local serve``
(the offline server, over HTTP, with the service's ``sample_join_sampling_session`` flag) and
stops it at the end, printing what the server counted. With ``TINKER_API_KEY`` set (or
``--base-url``) it runs against that service: pass a real ``--base-model`` there.
``--ray-address`` joins a running cluster; otherwise a local one is started (``--num-cpus``).

Why actors rather than tasks: a rollout worker is a long-lived process that keeps what it set
up, its tinker_lite connection (one ``client/config``, its HTTP pools and threads) and the
tokenizer, for every step, and a step is one call per worker, so the driver knows which worker
holds which problems. When a worker process dies mid-sample the driver gets Ray's typed
``RayActorError`` for exactly that share, hands it to another worker and the step completes;
Ray restarts the dead actor (``max_restarts=1``) for the next steps, and the new process
connects once. ``--kill-worker-at-step N`` shows it: worker 0 exits while its samples are in
flight.

What travels: the pickled SamplingClient (or handle) names the service URL and the sampling
session, never the API key. A worker resolves its own credentials as ``ServiceClient()`` does
(``TINKER_API_KEY`` in its environment: a local cluster's workers inherit the driver's; on a
remote cluster set it on the nodes or in the job's ``runtime_env``), or the driver hands over
``carry_api_key(sampler)`` (``tinker_lite.sampling_client``) to carry the key in the pickle
(docs/scaling.rst). Each copy joins the step's sampling session (``join_sampling_session``)
before its first sample; no worker creates a session.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

import tinker_lite as tinker
from tinker_lite import types

BASE_MODEL = "tinker-lite/tiny-64"
ANSWER = re.compile(r"-?\d+")

Problem = tuple[int, int]
# Per problem: (index, completions' tokens, their logprobs, their rewards).
Graded = tuple[int, list[list[int]], list[list[float]], list[float]]


def prompt_text(problem: Problem) -> str:
    """The prompt of one problem, in the hand-made chat format of the examples."""
    return f"User: What is {problem[0]} + {problem[1]}?\nAssistant:"


def prompt_tokens(tokenizer: Any, problem: Problem) -> list[int]:
    """The prompt's token ids."""
    return list(tokenizer.encode(prompt_text(problem)))


def grade(problem: Problem, completion: str, work: int) -> float:
    """The environment step: 1 for the right sum, else a small reward for answering in digits.

    ``work`` iterations of integer arithmetic stand in for what a real grader spends CPU on
    (running the code, calling a checker); they make the step CPU-bound, as in practice.
    """
    state = problem[0] * 1_000 + problem[1]
    for _ in range(work):
        state = (state * 1_103_515_245 + 12_345) & 0x7FFF_FFFF
    found = ANSWER.search(completion)
    if found is not None and int(found.group()) == problem[0] + problem[1]:
        return 1.0
    digits = sum(ch.isdigit() for ch in completion)
    return 0.2 * digits / len(completion) if completion else 0.0


class RolloutWorker:
    """One rollout process: samples with the SamplingClient it is handed, grades the answers.

    Run as a Ray actor by :func:`main`; a plain instance runs the same loop in one process.
    """

    def __init__(self, env_work: int = 20_000) -> None:
        self.env_work = env_work

    def pid(self) -> int:
        """This worker's process id."""
        return os.getpid()

    def rollout(  # noqa: PLR0917 - one call per worker and step
        self,
        sampler: tinker.SamplingClient | str,
        problems: Sequence[tuple[int, Problem, list[int]]],
        group_size: int,
        max_tokens: int,
        seed: int,
        die_mid_sample: bool = False,
    ) -> dict[str, Any]:
        """Sample ``group_size`` answers to each problem and grade them.

        ``problems`` are (index, problem, prompt tokens). Returns the graded answers, this
        process's id and its CPU seconds spent sampling (the client) and grading (the
        environment). ``die_mid_sample`` ends the process once the first answer is back, the
        others still in flight (a crash, for the demonstration).
        """
        if isinstance(sampler, str):
            sampler = tinker.SamplingClient.from_sampler_handle(sampler)
        cpu0 = time.process_time()
        params = types.SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=seed)
        futures = [
            sampler.sample(types.ModelInput.from_ints(tokens), group_size, params)
            for _, _, tokens in problems
        ]
        if die_mid_sample:
            futures[0].result()
            os._exit(1)
        responses = [future.result() for future in futures]
        cpu1 = time.process_time()
        tokenizer = sampler.get_tokenizer()
        graded: list[Graded] = []
        for (index, problem, _), response in zip(problems, responses, strict=True):
            tokens = [list(s.tokens) for s in response.sequences]
            logprobs = [list(s.logprobs or []) for s in response.sequences]
            rewards = [grade(problem, tokenizer.decode(t), self.env_work) for t in tokens]
            graded.append((index, tokens, logprobs, rewards))
        return {
            "graded": graded,
            "pid": os.getpid(),
            "cpu_sample_s": cpu1 - cpu0,
            "cpu_env_s": time.process_time() - cpu1,
        }


def importance_sampling_data(prompt: list[int], graded: Graded) -> list[types.Datum]:
    """One datum per completion whose reward differs from its group's mean (the advantage)."""
    _, tokens, logprobs, rewards = graded
    baseline = float(np.mean(rewards))
    data = []
    for seq, lps, reward in zip(tokens, logprobs, rewards, strict=True):
        if reward == baseline or not seq:
            continue
        n_prompt = len(prompt) - 1
        full = prompt + seq
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(full[:-1]),
                loss_fn_inputs={
                    "target_tokens": full[1:],
                    "logprobs": [0.0] * n_prompt + lps,
                    "advantages": [0.0] * n_prompt + [reward - baseline] * len(seq),
                },
            )
        )
    return data


def run_step(  # noqa: PLR0917 - the step's inputs
    workers: Sequence[Any],
    handed: tinker.SamplingClient | str,
    shards: Sequence[Sequence[tuple[int, Problem, list[int]]]],
    group_size: int,
    max_tokens: int,
    seed: int,
    kill: int | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """One call per worker; a share whose worker died goes to the next worker, until done.

    ``kill`` is the index of a worker told to die mid-sample. Returns the workers' results and
    one line per share handed over again.
    """
    import ray
    from ray.exceptions import RayActorError

    def call(worker: int, shard: int, die: bool = False) -> Any:
        return workers[worker].rollout.remote(
            handed, shards[shard], group_size, max_tokens, seed + shard, die
        )

    pending = {call(i, i, i == kill): (i, i, 1) for i in range(len(workers)) if shards[i]}
    results: list[dict[str, Any]] = []
    notes: list[str] = []
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        worker, shard, tries = pending.pop(done[0])
        try:
            results.append(ray.get(done[0]))
        except RayActorError as e:
            if tries >= len(workers):
                raise
            other = (worker + 1) % len(workers)
            notes.append(
                f"worker {worker} lost mid-sample ({type(e).__name__}): its "
                f"{len(shards[shard])} problems handed to worker {other}"
            )
            pending[call(other, shard)] = (other, shard, tries + 1)
    return results, notes


@contextmanager
def local_serve() -> Iterator[str]:
    """``tinker-lite local serve`` on a free port, as the service configures sampling."""
    argv = [sys.executable, "-m", "tinker_lite.cli", "local", "serve", "--port", "0"]
    argv += ["--config", "sample_join_sampling_session=true", "--log-level", "WARNING"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) as server:
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            if not url.startswith("http"):
                raise RuntimeError(f"tinker-lite local serve did not start (exit {server.poll()})")
            yield url
        finally:
            server.terminate()


def server_counts(base_url: str) -> str:
    """What the local server counted: sessions, connections, joins."""
    with urllib.request.urlopen(f"{base_url}/_local/stats", timeout=10) as answer:
        stats = json.load(answer)
    requests = stats["requests"]
    return (
        f"server: sessions {stats['sessions']}  client/config "
        f"{requests.get('/api/v1/client/config', 0)}  join_sampling_session "
        f"{requests.get('/api/v1/join_sampling_session', 0)}  sample requests "
        f"{stats['samples_submitted']}"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("TINKER_BASE_URL"))
    parser.add_argument("--base-model", default=BASE_MODEL)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--problems", type=int, default=8, help="problems per step")
    parser.add_argument("--group-size", type=int, default=4, help="answers per problem")
    parser.add_argument("--max-tokens", type=int, default=6)
    parser.add_argument("--env-work", type=int, default=20_000, help="grader CPU per answer")
    parser.add_argument("--handover", choices=("pickle", "handle"), default="pickle")
    parser.add_argument("--ray-address", help="a running cluster (default: start a local one)")
    parser.add_argument("--num-cpus", type=int, help="CPUs of the local cluster")
    parser.add_argument("--kill-worker-at-step", type=int, help="worker 0 dies mid-sample")
    return parser.parse_args(argv)


def train(args: argparse.Namespace, base_url: str | None) -> None:
    """The RL loop: the driver's part (Ray is already initialized)."""
    import ray

    actor = ray.remote(num_cpus=1, max_restarts=1, max_task_retries=0)(RolloutWorker)
    workers = [actor.remote(args.env_work) for _ in range(args.workers)]
    rng = random.Random(0)
    with tinker.ServiceClient(base_url=base_url) as service:
        training = service.create_lora_training_client(args.base_model, rank=8, seed=0).result()
        tokenizer = training.get_tokenizer()
        for step in range(1, args.steps + 1):
            problems = [(rng.randint(10, 49), rng.randint(10, 49)) for _ in range(args.problems)]
            prompts = [prompt_tokens(tokenizer, p) for p in problems]
            items = [(i, p, prompts[i]) for i, p in enumerate(problems)]
            shards = [items[w :: args.workers] for w in range(args.workers)]
            sampler = training.save_weights_and_get_sampling_client().result()
            handed = sampler.get_sampler_handle() if args.handover == "handle" else sampler
            kill = 0 if step == args.kill_worker_at_step else None
            results, notes = run_step(
                workers, handed, shards, args.group_size, args.max_tokens, step * 1000, kill
            )
            graded = sorted(g for r in results for g in r["graded"])
            data = [d for g in graded for d in importance_sampling_data(prompts[g[0]], g)]
            rewards = [reward for g in graded for reward in g[3]]
            for note in notes:
                print(f"step {step}: {note}", flush=True)
            if data:
                training.forward_backward(data, "importance_sampling").result()
                training.optim_step(types.AdamParams(learning_rate=2e-2)).result()
            print(
                f"step {step}: samples {len(rewards)} from {len({r['pid'] for r in results})} "
                f"worker processes  env steps {len(rewards)}  mean reward "
                f"{float(np.mean(rewards)):.3f}  datums {len(data)}",
                flush=True,
            )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the RL loop on Ray; return 0."""
    args = parse_args(argv)
    try:
        import ray
    except ImportError:
        print("rl_ray.py needs Ray: pip install 'tinker-lite[ray]'", file=sys.stderr)
        return 1
    if not ray.is_initialized():
        ray.init(address=args.ray_address, num_cpus=args.num_cpus)
    if args.base_url or os.environ.get("TINKER_API_KEY"):
        train(args, args.base_url)
        return 0
    with local_serve() as base_url:
        print(f"local server: {base_url} (tinker-lite local serve)", flush=True)
        train(args, base_url)
        print(server_counts(base_url), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
