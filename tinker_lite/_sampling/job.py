"""One sample from its call to its result: an in-flight place, the submit, then the poll
(docs/architecture.rst, "The threading contract"; docs/protocol.rst §6.4).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import attrs

from tinker_lite import types
from tinker_lite._api import decode_sample
from tinker_lite._errors import ClientClosedError
from tinker_lite._futures.future import APIFuture

if TYPE_CHECKING:
    from tinker_lite._context import ClientContext
    from tinker_lite._futures.batch_poller import BatchPoller
    from tinker_lite._futures.pending import PendingRequest

__all__ = ["GATE_CHECK_INTERVAL", "SampleJob", "SampleSender", "deliver"]

logger = logging.getLogger("tinker_lite.sampling_client")

GATE_CHECK_INTERVAL = 0.25
"""Seconds between checks of the closing state by a sample waiting for an in-flight place."""


@attrs.define(eq=False, repr=False)
class SampleSender:
    """What the sample jobs of one SamplingClient share, and the queue of those not yet started.

    The queue is drained in call order by at most as many executor work items as the executor
    has threads, each running one job and queueing itself again while jobs wait: a waiting
    sample holds no work item or executor future of its own.
    """

    context: ClientContext
    session_id: str
    take_seq_id: Callable[[], int]
    on_queue_state: Callable[[str, str | None], None]
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _jobs: collections.deque[SampleJob] = attrs.field(factory=collections.deque, init=False)
    _drainers: int = attrs.field(default=0, init=False)

    def put(self, job: SampleJob, pool: ThreadPoolExecutor) -> None:
        """Queue ``job`` to run on ``pool`` after the jobs queued before it."""
        with self._lock:
            self._jobs.append(job)
            if self._drainers >= pool._max_workers:
                return
            self._drainers += 1
        try:
            pool.submit(self._drain, pool)
        except RuntimeError:  # the executor is shut down: the connection is closed
            with self._lock:
                self._drainers -= 1
                if job not in self._jobs:
                    return  # a drainer still running took it
                self._jobs.remove(job)
            job.drop(ClientClosedError("The ServiceClient is closed."))

    def _drain(self, pool: ThreadPoolExecutor) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._drainers -= 1
                    return
                job = self._jobs.popleft()
            job()
            try:  # the next job at the back of the executor's queue, behind other clients' work
                pool.submit(self._drain, pool)
                return
            except RuntimeError:  # shutting down: as the executor's queue, the rest still runs
                continue


def deliver(
    context: ClientContext,
    source: APIFuture[types.SampleResponse],
    out: APIFuture[types.SampleResponse],
    request: types.SampleRequest,
    created_at: float,
) -> None:
    """Journal ``source``'s outcome, then hand it to the caller's future ``out``."""
    if context.journal is None:
        out.forward_from(source)
        return
    prompt_tokens = request.prompt.length

    def tokens(response: types.SampleResponse) -> int:
        return prompt_tokens + sum(len(seq.tokens) for seq in response.sequences)

    # Watched first: the journal line is written before ``out`` completes.
    context.journal_watch(source, "sample", tokens=tokens, started=created_at)
    out.forward_from(source)


@attrs.define(eq=False, repr=False)
class SampleJob:
    """One sample: the state its executor thread and its poller share (see the module)."""

    sender: SampleSender
    clone: int
    request: types.SampleRequest
    out: APIFuture[types.SampleResponse]
    created_at: float = attrs.field(kw_only=True)
    sdk_method: str = attrs.field(kw_only=True)
    pending: PendingRequest = attrs.field(init=False)  # set by the client before it is queued
    batch: BatchPoller | None = attrs.field(default=None, init=False)
    # The future the poller resolves: ``out`` itself, or with a journal one it watches.
    target: APIFuture[types.SampleResponse] = attrs.field(init=False)

    def fail(self, error: BaseException) -> None:
        """Fail the caller's future with ``error`` (journalled)."""
        deliver(
            self.sender.context, APIFuture.failed(error), self.out, self.request, self.created_at
        )

    def drop(self, error: BaseException) -> None:
        """Fail the job with ``error`` unless it was sent or dropped already."""
        if self.pending.claim():
            self.fail(error)

    def run(self) -> None:
        """Take an in-flight place, submit (waiting out 429s), then hand polling to a poller."""
        sender = self.sender
        context = sender.context
        gate = context.holder.sample_gate
        closing = context.closing
        while not gate.acquire(timeout=GATE_CHECK_INTERVAL):
            if closing.is_set():
                self.drop(
                    ClientClosedError("The ServiceClient was closed before the sample was sent.")
                )
                return
        if not self.pending.claim():
            gate.release()  # dropped by close(): its future already holds a ClientClosedError
            return
        try:
            request_id = context.api.sampling.submit_sample(
                self.request, sdk_method=self.sdk_method, closing=closing
            )
            batch = self.batch = context.batch_poller()
        except BaseException as e:
            gate.release()
            self.fail(e)
            return
        # Without a journal the poller resolves the caller's own future: one future a sample.
        journal = context.journal is not None
        out = self.out
        target: APIFuture[types.SampleResponse] = (
            APIFuture(request_id, request_type="Sample") if journal else out
        )
        target.request_id = request_id
        self.target = target
        target.add_done_callback(self._retrieved)
        if batch is None:
            self._fetch()
        else:
            batch.wait(sender.session_id, self.clone, target, self._fetch)
        if journal:
            deliver(context, target, out, self.request, self.created_at)

    def __call__(self) -> None:
        """:meth:`run`; an error that escapes it is logged and fails the caller's future."""
        try:
            self.run()
        except BaseException as e:
            logger.exception("A sample job failed")
            self.fail(e)

    def _fetch(self) -> object:
        """Poll the request for its result (per request, or fetch what is complete)."""
        target = self.target
        sender = self.sender
        context = sender.context
        batch = self.batch
        poller = context.holder.poller if batch is None else batch.fetcher
        request_id = target.request_id
        assert request_id is not None
        return poller.poll(
            request_id,
            "Sample",
            decode_sample,
            created_at=self.created_at,
            resubmit=self._resubmit,
            accept=context.api.sampling.result_accept,
            on_queue_state=sender.on_queue_state,
            sdk_method=self.sdk_method,
            future=target,
            # docs/protocol.rst §5.4: a result retrieve_futures reported complete is fetched whole.
            metadata_only=batch is None,
        )

    def _resubmit(self) -> str:
        # docs/protocol.rst §7.3: a re-run after HTTP 410 takes a new seq_id.
        context = self.sender.context
        self.request = attrs.evolve(self.request, seq_id=self.sender.take_seq_id())
        return context.api.sampling.submit_sample(
            self.request, sdk_method=self.sdk_method, closing=context.closing
        )

    def _retrieved(self, done: object) -> None:
        sender = self.sender
        sender.context.holder.sample_gate.release()
        rid = self.target.request_id
        batch = self.batch
        if rid is not None and batch is not None:
            batch.mark_retrieved(sender.session_id, self.clone, rid)
