"""The client context: what every client of one connection shares.

docs/architecture.rst, "The layers" and "The threading contract", explain it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar, get_args

from tinker_lite._api import Requestor
from tinker_lite._environment import resolve
from tinker_lite._errors import ClientClosedError, InvalidInputError
from tinker_lite._futures.future import APIFuture
from tinker_lite._futures.pending import PendingRegistry
from tinker_lite._futures.poller import Poller
from tinker_lite._repr import tolerant_repr
from tinker_lite._secrets import redact_url
from tinker_lite._session.holder import FinishReason, SessionHolder
from tinker_lite._session.journal import Journal
from tinker_lite._session.settings import Settings
from tinker_lite._transport.retry import DEFAULT_RETRY_POLICY

if TYPE_CHECKING:
    from tinker_lite._futures.batch_poller import BatchPoller

__all__ = [
    "FINISH_REASONS",
    "ClientContext",
    "FinishReason",
    "connect",
    "exit_timeout",
    "find_live_context",
]

logger = logging.getLogger("tinker_lite.context")

T = TypeVar("T")

FINISH_REASONS: tuple[str, ...] = get_args(FinishReason)
DEFAULT_REST_WORKERS = 4
DEFAULT_EXIT_TIMEOUT: float = resolve("TINKER_LITE_EXIT_TIMEOUT", None, "", {})
# Threads that run the queued work: a close() made on one of them cannot wait for that work.
_WORKER_THREAD_PREFIXES = (
    "tinker-lite-train",
    "tinker-lite-sample",
    "tinker-lite-rest",
    "tinker-lite-poll",
)

# Live contexts of this process, so an unpickled SamplingClient finds its connection.
_LIVE: weakref.WeakSet[ClientContext] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def context_of(connection: object) -> ClientContext | None:
    """The open connection behind a context, a client, or a client's ``holder`` (as 0.38 takes)."""
    if isinstance(connection, ClientContext):
        return connection
    if isinstance(connection, SessionHolder):
        with _LIVE_LOCK:
            return next((c for c in _LIVE if c.holder is connection), None)
    shared = getattr(connection, "_context", None)
    return shared if isinstance(shared, ClientContext) else None


# Options of a connection's requestor; its session holder takes all but request_timeout.
_REQUESTOR_OPTIONS = frozenset(
    {"request_timeout", "retry_policy", "poll_threads", "sleep", "rand", "clock", "wall_clock"}
)


def connect(
    settings: Settings, *, create_session: bool = True, **options: Any
) -> tuple[Requestor, SessionHolder]:
    """The requestor and the session holder of one connection, each given its ``options``."""
    if settings.max_retries is not None:
        policy = options.get("retry_policy", DEFAULT_RETRY_POLICY)
        options["retry_policy"] = dataclasses.replace(policy, max_retries=settings.max_retries)
    api = Requestor(settings, **{k: v for k, v in options.items() if k in _REQUESTOR_OPTIONS})
    try:
        holder = SessionHolder(
            settings,
            api,
            create_session=create_session,
            **{k: v for k, v in options.items() if k != "request_timeout"},
        )
    except BaseException:
        api.close()
        raise
    return api, holder


class ClientContext:
    """The shared state of one connection: session holder, requestor, executors, journal.

    ``local://`` starts the offline local server here; ``session=False`` is a standalone
    RestClient's. Nothing is sent until first use (docs/protocol.rst §8.1).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        session: bool = True,
        holder_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self.closed = False  # close() was called
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._train_executors: list[ThreadPoolExecutor] = []
        self._local_server: Any = None
        self.pending = PendingRegistry()
        self._batch_poller: BatchPoller | None = None
        self._batch_checked = False
        journal = settings.journal
        self.journal = (
            journal if journal is None or isinstance(journal, Journal) else Journal(journal)
        )
        options: dict[str, Any] = {"lazy": True, **(holder_options or {})}
        if settings.is_local:
            from tinker_lite.local import server as local_server

            self._local_server = local_server.LocalServer()
            settings = settings.with_base_url(self._local_server.start())
            logger.info("Started the offline local server at %s", settings.base_url)
        try:
            self.api, self.holder = connect(settings, create_session=session, **options)
        except BaseException:
            self._stop_local_server()
            raise
        self.closing = self.api.closing  # one event per connection, set as it closes
        with _LIVE_LOCK:
            _LIVE.add(self)  # closed at exit if never closed (docs/protocol.rst §8.5)

    def _stop_local_server(self) -> None:
        server, self._local_server = self._local_server, None
        if server is not None:
            server.stop()

    @tolerant_repr
    def __repr__(self) -> str:
        return f"ClientContext(base_url={redact_url(self.base_url)!r}, closed={self.closed})"

    @property
    def base_url(self) -> str:
        """The service's base URL (the local server's when started with ``local://``)."""
        return self.holder.settings.base_url

    def journal_watch(self, future: APIFuture[Any], kind: str, **options: Any) -> None:
        """Record ``future``'s outcome in the journal when it completes (no journal: nothing)."""
        if self.journal is not None:
            self.journal.watch(future, kind, **options)

    def check_open(self) -> None:
        """Raise :class:`~tinker_lite.ClientClosedError` once the connection is closed."""
        if self.closed:
            raise ClientClosedError("The ServiceClient is closed.")

    def new_train_executor(self, owner: object) -> ThreadPoolExecutor:
        """A single-thread executor for one TrainingClient's submits, shut down with ``owner``."""
        with self._lock:
            self.check_open()
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tinker-lite-train")
            self._train_executors.append(executor)
        weakref.finalize(owner, executor.shutdown, wait=False)
        return executor

    def sample_pool(self) -> ThreadPoolExecutor:
        """The wide executor shared by this connection's SamplingClients."""
        return self._pool("sample", self.holder.settings.sample_workers)

    def rest_pool(self) -> ThreadPoolExecutor:
        """The small executor REST calls run on."""
        return self._pool("rest", DEFAULT_REST_WORKERS)

    def _pool(self, kind: str, workers: int) -> ThreadPoolExecutor:
        with self._lock:
            self.check_open()
            if kind not in self._pools:
                self._pools[kind] = ThreadPoolExecutor(workers, f"tinker-lite-{kind}")
            return self._pools[kind]

    def batch_poller(self) -> BatchPoller | None:
        """The ``retrieve_futures`` poller when the client config turns it on, else ``None``."""
        batch = self._batch_poller
        if batch is not None or self._batch_checked:
            return batch
        use = self.holder.client_config.sample_use_retrieve_futures
        with self._lock:
            if self.closed:
                # Samples already sent are still awaited while close() drains the queue: they
                # are polled one by one (the session's poller runs until the end of close()).
                return self._batch_poller
            if use and self._batch_poller is None:
                from tinker_lite._futures.batch_poller import DEFAULT_FETCH_THREADS, BatchPoller

                holder = self.holder
                fetcher = Poller(
                    self.api.retrieve_future,
                    max_workers=DEFAULT_FETCH_THREADS,
                    stall_timeout=holder.settings.stall_timeout,
                    thread_name="tinker-lite-poll-fetch",
                )
                self._batch_poller = BatchPoller(
                    self.api.retrieve_futures, fetcher, stall_timeout=holder.settings.stall_timeout
                )
            self._batch_checked = True
            return self._batch_poller

    def run_in(
        self, pool: ThreadPoolExecutor, fn: Callable[[], T], *, request_type: str | None = None
    ) -> APIFuture[T]:
        """Run ``fn`` on ``pool``; its result or error is delivered to the returned future."""
        out: APIFuture[T] = APIFuture(request_type=request_type)
        pending = self.pending.track(request_type or "REST", out, on_drop=out.try_set_exception)

        def run() -> None:
            if out.cancelled() or not pending.claim():
                return
            try:
                value = fn()
            except BaseException as e:
                out.try_set_exception(e)
            else:
                out.try_set_result(value)

        try:
            pool.submit(run)
        except RuntimeError:
            if pending.claim():
                out.try_set_exception(ClientClosedError("The ServiceClient is closed."))
        return out

    def close(
        self,
        status: FinishReason = "success",
        detail: str | None = None,
        *,
        wait: bool = True,
        why: str | None = None,
        budget: float | None = None,
        what: str = "Closing",
    ) -> None:
        """Finish or drop what was queued, end the session and stop every thread (idempotent).

        ``wait=False`` (``why`` says why, for the log) drops at once; ``budget`` bounds the wait in
        seconds. docs/architecture.rst, "Closing and queued work", tells the rest.
        """
        with self._lock:
            if self.closed:
                return
            self.closed = True
        interrupted: BaseException | None = None
        if wait and _on_worker_thread():
            why = (
                f"{what}: close() was called on one of the client's own worker threads, which "
                "cannot wait for the work queued behind it"
            )
        elif wait:
            try:
                why = self.pending.drain(
                    stall_timeout=self.holder.settings.stall_timeout, budget=budget, what=what
                )
            except BaseException as e:  # Ctrl-C (or a signal handler's exception) while waiting
                interrupted = e
                status = "errored" if isinstance(e, Exception) else "interrupted"
                name = type(e).__name__
                why = f"{what}: interrupted ({name}) while waiting for queued requests"
        try:
            self._shut_down(
                status, detail, why or (what if wait else "ServiceClient.close(wait=False)")
            )
        finally:
            if interrupted is not None:
                raise interrupted

    def _shut_down(self, status: FinishReason, detail: str | None, why: str) -> None:
        with self._lock:
            pools = [self._pools[kind] for kind in ("sample", "rest") if kind in self._pools]
            executors = [*self._train_executors, *pools]
        # Dropped before the holder closes: a request waiting for its turn is failed with a
        # ClientClosedError that names it, never sent to a closing connection.
        self.pending.cancel(why)
        self.closing.set()
        with _LIVE_LOCK:
            _LIVE.discard(self)
        batch = self._batch_poller
        if batch is not None:
            batch.close()
            batch.fetcher.close(timeout=1.0)
        try:
            self.holder.close(status, detail, sdk_method="ServiceClient.close")
        finally:
            # A close() made on one of the executors' own threads cannot join that thread.
            join = not _on_worker_thread()
            for executor in executors:
                executor.shutdown(wait=join)
            self._stop_local_server()


def _on_worker_thread() -> bool:
    return threading.current_thread().name.startswith(_WORKER_THREAD_PREFIXES)


def find_live_context(base_url: str) -> ClientContext | None:
    """An open context of this process with a session, connected to ``base_url``, if any."""
    wanted = base_url.rstrip("/")
    with _LIVE_LOCK:
        for context in list(_LIVE):
            if not context.holder.has_session or context.closed:
                continue
            if context.base_url.rstrip("/") == wanted:
                return context
    return None


def exit_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds an unclosed connection finishes its queued work at exit (a bad value warns)."""
    env = os.environ if environ is None else environ
    try:
        return float(resolve("TINKER_LITE_EXIT_TIMEOUT", None, "", env))
    except InvalidInputError as e:
        logger.warning("%s; using %g", e, DEFAULT_EXIT_TIMEOUT)
        return DEFAULT_EXIT_TIMEOUT


def _close_live_contexts() -> None:
    """Close the connections the program never closed, as the interpreter exits.

    docs/architecture.rst, "Closing and queued work", says what is finished and what dropped.
    """
    with _LIVE_LOCK:
        contexts = list(_LIVE)
    error = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if sys.flags.interactive or hasattr(sys, "ps1") or not isinstance(error, BaseException):
        error = None  # (at a prompt, the last error is not why the interpreter exits)
    for context in contexts:
        try:
            if error is None:
                context.close(
                    "success",
                    budget=exit_timeout(),
                    what="At interpreter exit (the ServiceClient was not closed)",
                )
            else:
                name = type(error).__name__
                context.close(
                    "interrupted" if isinstance(error, KeyboardInterrupt) else "errored",
                    name,
                    wait=False,
                    why=f"At interpreter exit after an uncaught {name}",
                )
        except BaseException:  # pragma: no cover - never fail interpreter exit
            logger.debug("closing at exit failed", exc_info=True)


# Live contexts are closed in threading's exit hooks, before ``atexit`` and before the
# concurrent.futures workers are joined (a retrying submit would hold the exit for minutes).
try:
    threading._register_atexit(_close_live_contexts)  # type: ignore[attr-defined]
except RuntimeError:  # pragma: no cover - the interpreter is already shutting down
    logger.debug("could not register the exit hook", exc_info=True)
