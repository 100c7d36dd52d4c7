"""Speed of the local server's tiny numpy model (tinker_lite.local.model.tiny_lm), in-process.

* forward_backward (cross_entropy, gradients accumulated) of 128 datums x 128 tokens; goal < 1 s;
  the same batch forward-only; 128 datums of mixed lengths (16..256 tokens); one optim_step.
* sampling 64 new tokens after a 16-token prompt (stop=[] so all 64 are generated); goal < 0.2 s;
  the same with num_samples=8, and after a 256-token prompt with prompt logprobs.

Each figure is the median of several runs after a warm-up. Results go to
bench/results/local_model.json.

    python bench/bench_local_model.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO_DIR = Path(__file__).resolve().parents[1]
if str(REPO_DIR) not in sys.path:
    sys.path.insert(0, str(REPO_DIR))

from tinker_lite.local.model.tiny_lm import DatumArrays, TinyLM  # noqa: E402

FB_GOAL_S = 1.0
SAMPLE_GOAL_S = 0.2


def median_time(fn: Callable[[], object], *, repeat: int) -> float:
    """Run ``fn`` once to warm up, then ``repeat`` times; return the median wall time."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ce_batch(lengths: list[int], seed: int) -> list[DatumArrays]:
    """Cross-entropy datums of random byte tokens with the given model-input lengths."""
    rng = np.random.default_rng(seed)
    batch = []
    for n in lengths:
        seq = rng.integers(0, 256, n + 1, dtype=np.int64)
        weights = np.ones(n, dtype=np.float32)
        batch.append(DatumArrays(seq[:-1], {"target_tokens": seq[1:], "weights": weights}))
    return batch


def run(quick: bool) -> dict[str, Any]:
    """Measure every figure, print a table and goal verdicts, and write the results file."""
    repeat = 3 if quick else 7
    model = TinyLM("tinker-lite/tiny-bench")
    square = ce_batch([128] * 128, seed=0)
    mixed = ce_batch(list(np.random.default_rng(1).integers(16, 257, 128)), seed=2)
    adam = {"learning_rate": 1e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-12}

    def fb(batch: list[DatumArrays], backward: bool) -> Callable[[], object]:
        return lambda: model.forward_backward(batch, "cross_entropy", None, backward=backward)

    prompt16 = list(range(65, 81))
    prompt256 = [int(t) for t in np.random.default_rng(3).integers(0, 256, 256)]

    def sample(prompt: list[int], **options: Any) -> Callable[[], object]:
        return lambda: model.sample(prompt, max_tokens=64, stop_tokens=[], seed=0, **options)

    figures = {
        "forward_backward 128 x 128 tokens": median_time(fb(square, True), repeat=repeat),
        "forward only 128 x 128 tokens": median_time(fb(square, False), repeat=repeat),
        "forward_backward 128 x 16..256 tokens": median_time(fb(mixed, True), repeat=repeat),
        "optim_step (rank 32, all placements)": median_time(
            lambda: model.optim_step(**adam), repeat=repeat
        ),
        "sample 64 tokens, prompt 16": median_time(sample(prompt16), repeat=repeat * 3),
        "sample 64 tokens x 8 samples, prompt 16": median_time(
            sample(prompt16, num_samples=8), repeat=repeat * 3
        ),
        "sample 64 tokens, prompt 256 + prompt logprobs": median_time(
            sample(prompt256, prompt_logprobs=True), repeat=repeat * 3
        ),
    }
    goals = [
        goal_line(
            f"forward_backward 128 x 128 < {FB_GOAL_S:g} s",
            figures["forward_backward 128 x 128 tokens"],
            FB_GOAL_S,
        ),
        goal_line(
            f"sample 64 tokens < {SAMPLE_GOAL_S:g} s",
            figures["sample 64 tokens, prompt 16"],
            SAMPLE_GOAL_S,
        ),
    ]
    width = max(len(name) for name in figures)
    print(f"Local model (median of {repeat}+ runs, {os.cpu_count()} CPUs)")
    for name, seconds in figures.items():
        print(f"  {name:<{width}}  {seconds * 1e3:8.1f} ms")
    for goal in goals:
        print(f"  goal: {goal['goal']}: {goal['verdict']} ({goal['detail']})")
    results = {
        "figure": "local_model",
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "numpy": np.__version__,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        "seconds": figures,
        "goals": goals,
    }
    out_dir = REPO_DIR / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "local_model.json"
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"  results: {path.relative_to(REPO_DIR)}")
    return results


def goal_line(name: str, measured: float, limit: float) -> dict[str, Any]:
    """Return a goal verdict in the format of the other figures' results."""
    met = measured < limit
    return {
        "goal": name,
        "met": met,
        "verdict": "MET" if met else "MISSED",
        "detail": f"{measured * 1e3:.1f} ms",
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    run(args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
