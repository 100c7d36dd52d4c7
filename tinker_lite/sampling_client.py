"""SamplingClient: text generation and prompt logprobs from a base model or trained weights.

Each :meth:`SamplingClient.sample` call gets its ``seq_id`` at call time (WIRE.md §P.5: fixed
across the call's HTTP retries and 429 waits; a re-run after the service lost the request, HTTP
410, takes a new one) and is submitted by the ServiceClient's wide executor. Backpressure follows
WIRE.md §P.8: a process-wide cap on sample requests in flight (400 by default; the service's
client config may change it) and one 429 back-off window shared by every SamplingClient talking
to the same service with the same key (``Retry-After`` when given, else 1 s).

Threading contract: a SamplingClient may be shared by any number of threads. It pickles: a copy
unpickled in this process reuses the open ServiceClient with the same base URL; elsewhere a new
ServiceClient is opened on first use (credentials from the environment) and closed at exit.
"""

from __future__ import annotations

import atexit
import logging
import random
import threading
import time
from typing import TYPE_CHECKING, Any

import attrs

from tinker_lite import _wire, types
from tinker_lite._errors import APIResponseValidationError, InvalidInputError
from tinker_lite._futures import APIFuture, QueueStateLogger, ReadyClient, chain
from tinker_lite._http import JSON, PROTOBUF, ClientClosedError, HttpResponse, PoolKind, path_param
from tinker_lite.tokenizer import load_tokenizer, resolve_tokenizer_id

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from tinker_lite._session import SampleGate
    from tinker_lite.service_client import ServiceClient

__all__ = ["SamplingClient"]

logger = logging.getLogger("tinker_lite.sampling_client")

ASAMPLE_PATH = "/api/v1/asample"
_BACKPRESSURE_HEADERS = {"X-Tinker-Sampling-Backpressure": "1"}
# How often a submit waiting for an in-flight place checks whether the client was closed.
_GATE_CHECK_INTERVAL = 0.25


def _unless_zero(value: int) -> int | None:
    """``None`` (not sent) for the default 0; anything else is validated by SampleRequest."""
    if type(value) is int and value == 0:
        return None
    return value


def _decode_sample(resp: HttpResponse) -> types.SampleResponse:
    # WIRE.md §P.10: decode whichever content type the service answered with.
    if resp.is_protobuf:
        from tinker_lite import _proto

        return _proto.decode_sample_response(resp.body)
    return _wire.structure(resp.json(), types.SampleResponse)


class SamplingClient(ReadyClient):
    """Samples from one sampling session (a base model or saved sampler weights).

    Created by :meth:`ServiceClient.create_sampling_client`,
    :meth:`TrainingClient.create_sampling_client` or
    :meth:`TrainingClient.save_weights_and_get_sampling_client`.
    """

    def __init__(
        self,
        service: ServiceClient,
        sampling_session_id: str,
        *,
        model_path: str | None = None,
        base_model: str | None = None,
        first_seq_id: int = 0,
    ) -> None:
        self._service = service
        self._holder = service.holder
        self.sampling_session_id = sampling_session_id
        self.model_path = model_path
        self.base_model = base_model
        self._seq_lock = threading.Lock()
        self._next_seq_id = first_seq_id
        self._queue_logger = QueueStateLogger(
            "Sampling", model_path or sampling_session_id, kind="sampling"
        )
        self._tokenizer: Tokenizer | None = None
        self._tokenizer_lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"SamplingClient(sampling_session_id={self.sampling_session_id!r}, "
            f"model_path={self.model_path!r}, base_model={self.base_model!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Credentials are never pickled; the copy finds (or opens) a ServiceClient by base URL.
        return (
            _restore_sampling_client,
            (self._holder.base_url, self.sampling_session_id, self.model_path, self.base_model),
        )

    # -- sampling --------------------------------------------------------------------------------

    def sample(  # noqa: PLR0917 - the official positional signature
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        topk_sample_logprobs: int = 0,
        target_prompt_logprobs: types.TensorData | None = None,
        prompt_alt_tokens_k: int = 0,
        prompt_logprobs_last_n: int | None = None,
    ) -> APIFuture[types.SampleResponse]:
        """Generate ``num_samples`` continuations of ``prompt``; returns a future at once.

        ``include_prompt_logprobs`` adds the logprob of every prompt token (the first is None);
        ``topk_prompt_logprobs`` adds the top-k alternatives at each prompt position.

        The service's further options are sent only when set to something other than their
        default: ``topk_sample_logprobs`` (top-k alternatives at each sampled position),
        ``target_prompt_logprobs`` (an int64 TensorData of token ids whose logprobs to return
        at each prompt position), ``prompt_alt_tokens_k`` and ``prompt_logprobs_last_n``
        (prompt logprobs for the last n positions only). The offline local server accepts
        them and ignores them: its answers never carry those extra results.
        """
        created_at = time.monotonic()
        request = self._build(
            prompt, num_samples, sampling_params, include_prompt_logprobs, topk_prompt_logprobs
        )
        # Sent only when set: a default value leaves the key out of the body.
        request = attrs.evolve(
            request,
            topk_sample_logprobs=_unless_zero(topk_sample_logprobs),
            target_prompt_logprobs=target_prompt_logprobs,
            prompt_alt_tokens_k=_unless_zero(prompt_alt_tokens_k),
            prompt_logprobs_last_n=prompt_logprobs_last_n,
        )
        pool = self._service._sample_pool()
        request = attrs.evolve(request, seq_id=self._take_seq_id())
        out: APIFuture[types.SampleResponse] = APIFuture(request_type="Sample")
        try:
            pool.submit(self._run, request, out, created_at)
        except RuntimeError:
            closed = ClientClosedError("The ServiceClient is closed.")
            self._deliver(APIFuture.failed(closed), out, request, created_at)
        return out

    def compute_logprobs(self, prompt: types.ModelInput) -> APIFuture[list[float | None]]:
        """Return the logprob of each prompt token under the model (the first is None)."""
        future = self.sample(
            prompt, 1, types.SamplingParams(max_tokens=1), include_prompt_logprobs=True
        )

        def prompt_logprobs(response: types.SampleResponse) -> list[float | None]:
            if response.prompt_logprobs is None:
                raise APIResponseValidationError(
                    "the sample answer has no prompt_logprobs although they were requested"
                )
            return list(response.prompt_logprobs)

        return chain(future, prompt_logprobs)

    def get_tokenizer(self) -> Tokenizer:
        """Return the tokenizer of the sampled model (resolved from the sampler's base model)."""
        with self._tokenizer_lock:
            if self._tokenizer is None:
                base_model = self.base_model
                if base_model is None:
                    resp = self._holder.submit(
                        PoolKind.TRAIN,
                        "GET",
                        f"/api/v1/samplers/{path_param(self.sampling_session_id)}",
                        content_type=None,
                        sdk_method="SamplingClient.get_tokenizer",
                    )
                    base_model = self._holder.parse(resp, types.GetSamplerResponse).base_model
                self._tokenizer = load_tokenizer(resolve_tokenizer_id(base_model))
            return self._tokenizer

    def _build(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool,
        topk_prompt_logprobs: int,
    ) -> types.SampleRequest:
        if not isinstance(prompt, types.ModelInput):
            raise InvalidInputError(
                "prompt",
                f"must be a ModelInput, got {type(prompt).__name__}",
                "use types.ModelInput.from_ints(tokens)",
            )
        if not isinstance(sampling_params, types.SamplingParams):
            raise InvalidInputError(
                "sampling_params",
                f"must be a SamplingParams, got {type(sampling_params).__name__}",
                "e.g. types.SamplingParams(max_tokens=32)",
            )
        return types.SampleRequest(
            num_samples=num_samples,
            prompt=prompt,
            sampling_params=sampling_params,
            sampling_session_id=self.sampling_session_id,
            seq_id=0,
            prompt_logprobs=include_prompt_logprobs,
            topk_prompt_logprobs=topk_prompt_logprobs,
        )

    def _take_seq_id(self) -> int:
        with self._seq_lock:
            value = self._next_seq_id
            self._next_seq_id += 1
            return value

    # -- background work -------------------------------------------------------------------------

    def _run(
        self, request: types.SampleRequest, out: APIFuture[types.SampleResponse], created_at: float
    ) -> None:
        """Take an in-flight place, submit (waiting out 429s), then hand polling to the poller."""
        gate = self._holder.sample_gate
        if not self._acquire(gate):
            closed = ClientClosedError("The ServiceClient was closed before the sample was sent.")
            self._deliver(APIFuture.failed(closed), out, request, created_at)
            return
        current = [request]
        try:
            request_id = self._submit(request)
        except BaseException as e:
            gate.release()
            self._deliver(APIFuture.failed(e), out, request, created_at)
            return

        def resubmit() -> str:
            # WIRE.md §P.5: a re-run after HTTP 410 takes a new seq_id.
            current[0] = attrs.evolve(current[0], seq_id=self._take_seq_id())
            return self._submit(current[0])

        accept = PROTOBUF if self._holder.wire_format == "protobuf" else JSON
        inner = self._holder.poller.poll(
            request_id,
            "Sample",
            _decode_sample,
            created_at=created_at,
            resubmit=resubmit,
            accept=accept,
            on_queue_state=self._queue_logger,
        )
        inner.add_done_callback(lambda _: gate.release())
        self._deliver(inner, out, request, created_at)

    def _deliver(
        self,
        source: APIFuture[types.SampleResponse],
        out: APIFuture[types.SampleResponse],
        request: types.SampleRequest,
        created_at: float,
    ) -> None:
        """Journal ``source``'s outcome, then hand it to the caller's future ``out``."""
        prompt_tokens = request.prompt.length

        def tokens(response: types.SampleResponse) -> int:
            return prompt_tokens + sum(len(seq.tokens) for seq in response.sequences)

        # Watched first: the journal line is written before ``out`` completes.
        self._service._journal_watch(source, "sample", tokens=tokens, started=created_at)
        out.forward_from(source)

    def _acquire(self, gate: SampleGate) -> bool:
        closing = self._service._closing_event
        while not gate.acquire(timeout=_GATE_CHECK_INTERVAL):
            if closing.is_set():
                return False
        return True

    def _submit(self, request: types.SampleRequest) -> str:
        """POST asample with the request's fixed seq_id until accepted; 429s wait in the window."""
        gate = self._holder.sample_gate
        closing = self._service._closing_event
        body = _wire.dumps(request)
        while True:
            remaining = gate.backoff_remaining()
            while remaining > 0:
                if closing.wait(remaining):
                    raise ClientClosedError("The ServiceClient was closed during a 429 back-off.")
                remaining = gate.backoff_remaining()
            resp = self._holder.submit(
                PoolKind.SAMPLE,
                "POST",
                ASAMPLE_PATH,
                body=body,
                headers=_BACKPRESSURE_HEADERS,
                accept_status=(429,),
                sdk_method="SamplingClient.sample",
            )
            if resp.status == 429:
                # WIRE.md §P.8: backpressure, not an error; every sampler waits, then re-sends.
                delay = gate.note_429(resp.headers)
                logger.debug("asample answered 429; backing off %.2fs", delay)
                continue
            gate.note_accepted()
            return self._holder.parse(resp, types.UntypedAPIFuture, what="asample").request_id


_owned_clients: list[ServiceClient] = []
_owned_lock = threading.Lock()


def _close_owned() -> None:
    with _owned_lock:
        clients = list(_owned_clients)
        _owned_clients.clear()
    for client in clients:
        client.close()


def _restore_sampling_client(
    base_url: str, sampling_session_id: str, model_path: str | None, base_model: str | None
) -> SamplingClient:
    from tinker_lite.service_client import ServiceClient, find_live_client

    service = find_live_client(base_url)
    if service is None:
        with _owned_lock:
            service = ServiceClient(base_url=base_url)
            if not _owned_clients:
                atexit.register(_close_owned)
            _owned_clients.append(service)
    # WIRE.md §13.4 (0.12.0): a copy starts its seq_ids far from the original's.
    first = random.randrange(1, 10**9) * 10**9
    return SamplingClient(
        service,
        sampling_session_id,
        model_path=model_path,
        base_model=base_model,
        first_seq_id=first,
    )
