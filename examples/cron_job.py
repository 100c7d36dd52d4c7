"""A small nightly job for cron: train, save, prune old states, keep a journal, exit clearly.

A crontab line for it (the API key comes from the environment, never from the command line)::

    15 3 * * *  cd /srv/nightly && python cron_job.py --journal /var/log/nightly.jsonl \\
                  --resume-latest >> /var/log/nightly.log 2>&1

What makes it cron-friendly:

* **A journal.** ``ServiceClient(journal=...)`` appends one JSON line per completed operation
  (``ts``, ``kind``, ``status``, ``request_id``, ``seq_id``, ``duration_s``, ``tokens``) to
  the file, so the next run — or a person — can see what happened and where it stopped.
* **Exit codes.** Failures end with the exit codes of the ``tinker-lite`` command (3:
  authentication, 4: not found, 6: connection/timeout, 7: service error, ...; see
  ``tinker-lite --help``) and a one-line message, so monitoring can tell them apart.
* **Resumable.** With ``--resume-latest`` it continues from the newest ``nightly-*`` state of
  your runs (weights and optimizer), otherwise it starts a new run; it says which it did, and
  why when there is nothing to resume from.
* **Bounded storage.** It keeps the newest ``--keep-last`` nightly states (across runs: every
  resume starts a new run) and deletes older ones, only when the checkpoint listing is
  complete, like ``tinker-lite checkpoint prune``.

Against the offline server (the default, ``local://``) the job starts its own local server on
``--local-state-dir`` (``nightly-local-state`` by default), which keeps the checkpoints on disk,
so the next night resumes there too::

    python examples/cron_job.py --steps 3 --journal nightly.jsonl
    python examples/cron_job.py --steps 3 --journal nightly.jsonl --resume-latest
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tinker_lite as tinker
from tinker_lite import types
from tinker_lite.cli import exit_code_for
from tinker_lite.local import LocalServer

BASE_MODEL = "tinker-lite/tiny-64"
STATE_PREFIX = "nightly-"
TODAYS_DATA = [
    "User: What day is it?\nAssistant: a good one\n",
    "User: Status?\nAssistant: all green\n",
]


def previous_entries(journal: Path) -> list[dict[str, Any]]:
    """The journal's complete lines (a line cut short by a crash is ignored)."""
    if not journal.exists():
        return []
    entries = []
    for line in journal.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.endswith("\n") and line.strip():
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue
    return entries


def latest_nightly_state(rest: tinker.RestClient, prefix: str) -> str | None:
    """The newest nightly training state of the user, or None."""
    listing = rest.list_all_checkpoints()
    states = [
        c
        for c in listing.checkpoints
        if c.checkpoint_type == "training" and c.checkpoint_id.startswith("weights/" + prefix)
    ]
    return max(states, key=lambda c: c.time).tinker_path if states else None


def make_datum(tokenizer: Any, text: str) -> types.Datum:
    tokens = tokenizer.encode(text)
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


@contextmanager
def service_url(args: argparse.Namespace) -> Iterator[str]:
    """The service's URL; for ``local://``, a local server whose checkpoints stay on disk in
    ``--local-state-dir`` between nights (``local://`` alone forgets them when the job ends)."""
    if args.base_url != "local://":
        yield args.base_url
        return
    with LocalServer(data_dir=args.local_state_dir) as url:
        print(f"offline server: checkpoints kept in {args.local_state_dir}")
        yield url


def run_job(args: argparse.Namespace, journal: Path) -> str:
    """The night's work; returns the saved state's path. Raises on any failure."""
    with service_url(args) as url, tinker.ServiceClient(base_url=url, journal=journal) as service:
        rest = tinker.RestClient(service)
        start_from = latest_nightly_state(rest, args.name_prefix) if args.resume_latest else None
        if start_from is not None:
            print(f"resuming from {start_from}")
            training = service.create_training_client_from_state_with_optimizer(start_from).result()
        else:
            if args.resume_latest:
                print(f"no {args.name_prefix}* training state to resume from: starting a new run")
            training = service.create_lora_training_client(args.base_model, rank=8).result()
        tokenizer = training.get_tokenizer()
        data = [make_datum(tokenizer, text) for text in TODAYS_DATA]
        tinker.validate(data, "cross_entropy")  # fail before spending anything on bad data

        for step in range(1, args.steps + 1):
            fwd_bwd = training.forward_backward(data, "cross_entropy")
            optim = training.optim_step(types.AdamParams(learning_rate=args.learning_rate))
            print(f"step {step}: loss {fwd_bwd.result().metrics['loss:sum']:.3f}")
            optim.result()

        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = training.save_state(f"{args.name_prefix}{stamp}").result().path
        print(f"saved {path}")

        # Keep the newest nightly states (of every run); older ones go, public ones stay.
        # Like `tinker-lite checkpoint prune`, nothing is deleted unless the listing is complete.
        listing = rest.list_all_checkpoints()
        if not listing.complete:
            print(f"not pruning: {listing.reason}")
        else:
            nightly = sorted(
                (
                    c
                    for c in listing.checkpoints
                    if c.checkpoint_type == "training"
                    and c.checkpoint_id.startswith("weights/" + args.name_prefix)
                    and not c.public
                ),
                key=lambda c: (c.time, c.checkpoint_id),
                reverse=True,
            )
            for checkpoint in nightly[args.keep_last :]:
                rest.delete_checkpoint_from_tinker_path(checkpoint.tinker_path).result()
                print(f"pruned {checkpoint.tinker_path}")
        return str(path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("TINKER_BASE_URL") or "local://")
    parser.add_argument("--base-model", default=BASE_MODEL)
    parser.add_argument(
        "--journal",
        default=os.environ.get("TINKER_LITE_JOURNAL") or "nightly-journal.jsonl",
        help="JSON-lines journal of completed operations (default: $TINKER_LITE_JOURNAL)",
    )
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    parser.add_argument("--keep-last", type=int, default=3, help="nightly states to keep")
    parser.add_argument("--name-prefix", default=STATE_PREFIX, help="name of the saved states")
    parser.add_argument("--resume-latest", action="store_true")
    parser.add_argument(
        "--local-state-dir",
        default="nightly-local-state",
        help="with local://, where the offline server keeps its checkpoints between runs",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the nightly job; return 0, or the tinker-lite exit code of what went wrong."""
    args = parse_args(argv)
    journal = Path(args.journal)
    before = previous_entries(journal)
    if before:
        last = before[-1]
        failed = sum(1 for e in before if e.get("status") != "ok")
        print(
            f"journal {journal}: {len(before)} earlier operations ({failed} failed); "
            f"last: {last.get('kind')} {last.get('status')} at {last.get('ts')}"
        )
    try:
        run_job(args, journal)
    except Exception as exc:
        code = exit_code_for(exc)
        print(f"nightly job failed (exit {code}): {exc}", file=sys.stderr)
        return code
    done = previous_entries(journal)[len(before) :]
    print(f"done: {len(done)} operations journaled to {journal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
