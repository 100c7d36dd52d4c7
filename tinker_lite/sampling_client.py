"""SamplingClient: text generation and prompt logprobs from a base model or trained weights.

Each :meth:`SamplingClient.sample` call gets its ``seq_id`` at call time (docs/protocol.rst §7.3:
fixed across the call's HTTP retries and 429 waits; a re-run after the service lost the
request, HTTP 410, takes a new one) and is submitted by the ServiceClient's wide executor.
Backpressure follows docs/protocol.rst §6.4: a process-wide cap on sample requests in flight (400 by
default; the service's client config may change it) and one 429 back-off window shared by every
SamplingClient talking to the same service with the same key (``Retry-After`` when given, else 1 s).

Threading contract: a SamplingClient may be shared by any number of threads. It pickles: a copy
unpickled in this process reuses the open connection (client context) with the same base URL;
elsewhere one connection per process is built on the first copy (its credentials resolved there
as ``ServiceClient()`` resolves them: the pickle carries no API key unless the client is handed
over with :func:`carry_api_key`), reused by the later copies and closed at exit. A copy joins the
sampling session before its first sample; it creates no session.

A sample is sent by a job of :mod:`tinker_lite._sampling` on the connection's wide executor.
"""

from __future__ import annotations

import atexit
import base64
import functools
import json
import logging
import random
import threading
import time
from typing import TYPE_CHECKING, Any

from tinker_lite import types
from tinker_lite._api import endpoints
from tinker_lite._context import ClientContext, context_of, find_live_context, resolve_settings
from tinker_lite._errors import APIResponseValidationError, InvalidInputError
from tinker_lite._futures.answers import QueueStateLogger
from tinker_lite._futures.async_twins import async_twin
from tinker_lite._futures.client_future import ClientFuture, forwarding_to
from tinker_lite._futures.future import APIFuture, chain
from tinker_lite._repr import tolerant_repr
from tinker_lite._sampling import SampleJob, SampleSender, deliver
from tinker_lite.tokenizer import load_tokenizer, resolve_tokenizer_id

if TYPE_CHECKING:
    from tinker_lite._session.holder import SessionHolder
    from tinker_lite.tokenizer import PretrainedTokenizer

__all__ = [
    "BackcompatSamplingClientFuture",
    "SamplingClient",
    "carry_api_key",
    "check_record_stability_info",
]

logger = logging.getLogger("tinker_lite.sampling_client")

# docs/protocol.rst §7.3: a cloned sampler's seq_ids start at cloned_sampler_id * CLONE_STRIDE.
CLONE_STRIDE = 1_000_000_000
# The fields of a sampler handle, in the order _restore_sampling_client takes them.
_HANDLE_KEYS = ("base_url", "sampling_session_id", "model_path", "base_model")


def check_record_stability_info(value: object) -> bool:
    """The ``record_stability_info`` argument, checked before anything is sent."""
    if not isinstance(value, bool):
        raise InvalidInputError(
            "record_stability_info", f"must be True or False, got {value!r}", "the default is False"
        )
    return value


class SamplingClient:
    """Samples from one sampling session (a base model or saved sampler weights).

    Created by :meth:`ServiceClient.create_sampling_client`,
    :meth:`TrainingClient.create_sampling_client` or
    :meth:`TrainingClient.save_weights_and_get_sampling_client`. The official constructor works
    too: ``SamplingClient(service_client.holder, sampling_session_id=..., base_model=...)``.
    """

    def __init__(
        self,
        holder: object,
        sampling_session_id: str,
        *,
        model_path: str | None = None,
        base_model: str | None = None,
        shadow: bool = False,
        retry_config: object | None = None,
        cloned_sampler_id: int | None = 0,
        record_stability_info: bool = False,
    ) -> None:
        del retry_config  # accepted as by create_sampling_client; retries follow the policy
        context = context_of(holder)
        if context is None:
            raise InvalidInputError(
                "holder",
                f"must be a ServiceClient's holder (or the ServiceClient), got a "
                f"{type(holder).__name__}",
                "create sampling clients with ServiceClient.create_sampling_client",
            )
        if shadow:
            # 0.38's shadow sampler is a copy in another process: it joins the session first.
            cloned_sampler_id = None
        self._context = context
        self._api = context.api
        # The official attribute: public code calls holder.get_session_id() (docs/as_tinker.rst).
        self.holder: SessionHolder = context.holder
        self.sampling_session_id = sampling_session_id
        self.model_path = model_path
        self.base_model = base_model
        self.record_stability_info = bool(record_stability_info)
        self._seq_lock = threading.Lock()
        # docs/protocol.rst §7.3: a copy numbers its samples from cloned_sampler_id * 1e9 (the
        # service reads the clone from seq_id // 1e9); None until the copy joins the session.
        self._cloned_sampler_id = cloned_sampler_id
        self._next_seq_id = CLONE_STRIDE * (cloned_sampler_id or 0)
        self._queue_logger = QueueStateLogger(
            "Sampling", model_path or sampling_session_id, kind="sampling"
        )
        self._tokenizer: PretrainedTokenizer | None = None
        self._tokenizer_lock = threading.Lock()

    @tolerant_repr
    def __repr__(self) -> str:
        return (
            f"SamplingClient(sampling_session_id={self.sampling_session_id!r}, "
            f"model_path={self.model_path!r}, base_model={self.base_model!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # No API key (see carry_api_key): the copy finds (or builds) a context by base URL.
        return (_restore_sampling_client, self._pickled_state(None))

    def _pickled_state(self, api_key: str | None) -> tuple[Any, ...]:
        """The arguments of ``_restore_sampling_client`` that rebuild this client elsewhere."""
        return (
            self._context.base_url,
            self.sampling_session_id,
            self.model_path,
            self.base_model,
            self.record_stability_info,
            api_key,
        )

    def get_sampler_handle(self) -> str:
        """A string that names this client's sampler, for another process (no pickle).

        Every :meth:`from_sampler_handle` call on it, in any process and any number of times,
        makes a new client of the same sampler. The handle carries no credentials.
        """
        state = {
            "base_url": self._context.base_url,
            "sampling_session_id": self.sampling_session_id,
            "model_path": self.model_path,
            "base_model": self.base_model,
            "record_stability_info": self.record_stability_info,
        }
        payload = json.dumps(state, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(payload).decode("ascii")

    @staticmethod
    def from_sampler_handle(handle: str, *, api_key: str | None = None) -> SamplingClient:
        """A new SamplingClient of the sampler named by ``handle`` (see get_sampler_handle).

        It authenticates with ``api_key``, else with this process's credentials
        (``TINKER_API_KEY``), as ``ServiceClient()`` does. The first call of a process connects;
        later ones with the same base URL and key reuse that connection.
        """
        try:
            state = json.loads(base64.urlsafe_b64decode(handle.encode("ascii")))
            args = tuple(state[key] for key in _HANDLE_KEYS)
            stability = state.get("record_stability_info", False)
        except Exception as e:
            raise InvalidInputError(
                "handle",
                f"is not a sampler handle ({type(e).__name__})",
                "pass the string SamplingClient.get_sampler_handle() returned",
            ) from e
        if not all(isinstance(value, str | None) for value in args) or not args[1]:
            raise InvalidInputError("handle", "names no sampler", "pass a get_sampler_handle()")
        if not isinstance(stability, bool):
            raise InvalidInputError("handle", "has a record_stability_info that is not a bool")
        base_url, session_id, model_path, base_model = args
        return _restore_sampling_client(
            base_url, session_id, model_path, base_model, stability, api_key
        )

    @classmethod
    def _create(
        cls,
        context: ClientContext,
        model_path: str | None,
        base_model: str | None,
        *,
        sdk_method: str,
        record_stability_info: bool = False,
    ) -> APIFuture[SamplingClient]:
        """Create a sampling session (starting the session if needed); the future of its client.

        The arguments are checked now; the requests are sent on the REST threads, so this
        returns at once. For saved weights (``model_path``), 0.38 then reads the sampler
        (``GET samplers/{id}``, golden-0.38): its base model names the tokenizer. A 0.4.1-era
        service (no client config) has no such endpoint and is not asked.
        """
        if (model_path is None) == (base_model is None):
            raise InvalidInputError(
                "model_path/base_model",
                "both are set" if model_path is not None else "neither is set",
                "pass exactly one: model_path='tinker://<run>/sampler_weights/<name>' or "
                "base_model='...'",
            )
        check_record_stability_info(record_stability_info)
        if model_path is not None:
            _check_sampleable(model_path)
        elif not isinstance(base_model, str) or not base_model:
            raise InvalidInputError("base_model", f"must be a model name, got {base_model!r}")
        api, session = context.api, context.holder
        # docs/protocol.rst §7.1: numbered in call order, like the saves that share the counter.
        seq_id = session.next_sampling_session_seq_id()

        def create() -> SamplingClient:
            request = types.CreateSamplingSessionRequest(
                session_id=session.ensure_session(),
                sampling_session_seq_id=seq_id,
                base_model=base_model,
                model_path=model_path,
            )
            created = api.sampling.create_sampling_session(request, sdk_method=sdk_method)
            found = base_model
            if model_path is not None and session.client_config_from_server:
                sampler = api.request(
                    endpoints.GET_SAMPLER,
                    sdk_method=sdk_method,
                    sampler_id=created.sampling_session_id,
                )
                found = sampler.base_model or None
            return cls(
                context,
                created.sampling_session_id,
                model_path=model_path,
                base_model=found,
                record_stability_info=record_stability_info,
            )

        return context.run_in(context.rest_pool(), create, request_type="CreateSamplingSession")

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

        ``include_prompt_logprobs`` and ``topk_prompt_logprobs`` add each prompt token's logprob
        and top-k alternatives; the further options are the service's (docs/service.rst §5). As
        in 0.38 (docs/protocol.rst §3.1), ``topk_sample_logprobs``, ``prompt_alt_tokens_k`` and
        ``record_stability_info`` are always sent, the others only when set.
        """
        return self._sample(
            "SamplingClient.sample",
            prompt=prompt,
            num_samples=num_samples,
            sampling_params=sampling_params,
            prompt_logprobs=include_prompt_logprobs,
            topk_prompt_logprobs=topk_prompt_logprobs,
            topk_sample_logprobs=topk_sample_logprobs,
            target_prompt_logprobs=target_prompt_logprobs,
            prompt_alt_tokens_k=prompt_alt_tokens_k,
            prompt_logprobs_last_n=prompt_logprobs_last_n,
        )

    def _sample(self, sdk_method: str, **fields: Any) -> APIFuture[types.SampleResponse]:
        """Send a ``SampleRequest`` of ``fields`` in the name of ``sdk_method``."""
        created_at = time.monotonic()
        _check_inputs(fields["prompt"], fields["sampling_params"])
        fields.update(
            sampling_session_id=self.sampling_session_id,
            record_stability_info=self.record_stability_info,
        )
        pool = self._context.sample_pool()
        out: APIFuture[types.SampleResponse] = APIFuture(request_type="Sample")
        if self._cloned_sampler_id is None:
            request = types.SampleRequest(**fields, seq_id=0)  # bad input raises before the join
            try:
                self._join()
            except Exception as e:
                deliver(self._context, APIFuture.failed(e), out, request, created_at)
                return out
        with self._seq_lock:
            # Built once, with its seq_id: the id is taken only when the request is valid.
            request = types.SampleRequest(**fields, seq_id=self._next_seq_id)
            self._next_seq_id += 1
        sender = self._sender
        job = SampleJob(
            sender,
            self._cloned_sampler_id or 0,
            request,
            out,
            created_at=created_at,
            sdk_method=sdk_method,
        )
        # Registered for close(): finished on a normal close, counted if dropped.
        job.pending = self._context.pending.track("sample", out, on_drop=job.fail)
        sender.put(job, pool)
        return out

    def _join(self) -> None:
        """Give this copy its clone number, once, before its first sample (docs/protocol.rst §7.3).

        With ``sample_join_sampling_session`` the service allocates it
        (``join_sampling_session``); otherwise it is random, far from the original's 0.
        """
        with self._seq_lock:
            if self._cloned_sampler_id is not None:
                return
            if self._context.holder.client_config.sample_join_sampling_session:
                clone = self._api.sampling.join_sampling_session(
                    self.sampling_session_id, sdk_method="SamplingClient.sample"
                )
            else:
                clone = random.randrange(1, CLONE_STRIDE)
            self._cloned_sampler_id = clone
            self._next_seq_id = CLONE_STRIDE * clone

    def _unjoined(self) -> bool:
        """Whether the next sample joins the session first (a copy's first; it may ask the
        service)."""
        return self._cloned_sampler_id is None

    def _base_model_unread(self) -> bool:
        """Whether :meth:`get_base_model` would ask the service."""
        return self.base_model is None

    def compute_logprobs(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> APIFuture[list[float | None]]:
        """Return the logprob of each prompt token under the model (the first is None).

        With ``prompt_logprobs_last_n=N`` only the last N tokens are scored (the earlier
        entries are None), which lets the service reuse its cache for the prefix; N must be
        between 1 and ``len(prompt) - 1``.
        """
        if prompt_logprobs_last_n is not None and (
            type(prompt_logprobs_last_n) is not int or prompt_logprobs_last_n < 1
        ):
            raise InvalidInputError(
                "prompt_logprobs_last_n",
                f"must be an int >= 1 or None, got {prompt_logprobs_last_n!r}",
                "None scores the whole prompt",
            )
        future = self._sample(
            "SamplingClient.compute_logprobs",
            prompt=prompt,
            num_samples=1,
            sampling_params=types.SamplingParams(max_tokens=1),
            prompt_logprobs=True,
            topk_sample_logprobs=0,
            prompt_alt_tokens_k=0,
            prompt_logprobs_last_n=prompt_logprobs_last_n,
        )

        def prompt_logprobs(response: types.SampleResponse) -> list[float | None]:
            if response.prompt_logprobs is None:
                raise APIResponseValidationError(
                    "the sample answer has no prompt_logprobs although they were requested"
                )
            return list(response.prompt_logprobs)

        return chain(future, prompt_logprobs)

    def get_base_model(self) -> str:
        """Return the base model this sampler runs, e.g. ``"Qwen/Qwen3-8B"``.

        Known at creation for a base-model sampler; for saved weights it is read once from
        the service (``GET /samplers/<id>``) and kept.
        """
        if self.base_model is None:
            found = self._api.request(
                endpoints.GET_SAMPLER,
                sdk_method="SamplingClient.get_base_model",
                sampler_id=self.sampling_session_id,
            ).base_model
            self.base_model = found
        return self.base_model

    def on_queue_state_change(
        self, queue_state: types.QueueState, queue_state_reason: str | None
    ) -> None:
        """Called with the service's queue state while a sample of this client waits.

        Logs a WARNING at most once a minute while sampling is paused (not when ``active``),
        with the service's reason or a default one. Override it to react otherwise.
        """
        self._queue_logger(str(queue_state), queue_state_reason)

    def _queue_state_noted(self, state: str, reason: str | None) -> None:
        """The poller's queue-state callback: hands it to :meth:`on_queue_state_change`."""
        self.on_queue_state_change(types.QueueState(state), reason)

    def get_tokenizer(self) -> PretrainedTokenizer:
        """Return the tokenizer of the sampled model (resolved from the sampler's base model).

        The same kind of tokenizer as :meth:`TrainingClient.get_tokenizer` returns.
        """
        with self._tokenizer_lock:
            if self._tokenizer is None:
                base_model = self.base_model
                if base_model is None:
                    base_model = self._api.request(
                        endpoints.GET_SAMPLER,
                        sdk_method="SamplingClient.get_tokenizer",
                        sampler_id=self.sampling_session_id,
                    ).base_model
                self._tokenizer = load_tokenizer(resolve_tokenizer_id(base_model))
            return self._tokenizer

    def _take_seq_id(self) -> int:
        with self._seq_lock:
            value = self._next_seq_id
            self._next_seq_id += 1
            return value

    @functools.cached_property
    def _sender(self) -> SampleSender:
        """What this client's sample jobs share (made on the first sample)."""
        return SampleSender(
            self._context, self.sampling_session_id, self._take_seq_id, self._queue_state_noted
        )

    # -- the official *_async twins (deprecated there too) ---------------------------------------

    sample_async = async_twin(sample, blocks=_unjoined)
    compute_logprobs_async = async_twin(compute_logprobs, blocks=_unjoined)
    get_base_model_async = async_twin(get_base_model, blocks=_base_model_unread)


_owned_contexts: list[ClientContext] = []
_owned_lock = threading.Lock()


def _close_owned() -> None:
    with _owned_lock:
        contexts = list(_owned_contexts)
        _owned_contexts.clear()
    for context in contexts:
        context.close()


def carry_api_key(sampler: SamplingClient) -> object:
    """``sampler``, to hand over to another process with its connection's API key, in clear.

    Pickle the returned object (pass it to a Ray task, a process pool, ...) instead of the
    client: the copy unpickled is a SamplingClient that authenticates with this key, which the
    pickle carries in clear, so whoever can read the pickle (an object store, a task queue, a
    log) can read the key. A plain pickle of the client carries no key: the copy uses the
    credentials of the process that unpickles it, resolved as ``ServiceClient()`` resolves them.
    Use this only for workers that have none of their own. Raises
    :class:`~tinker_lite.InvalidInputError` when the connection has no key to carry (a local
    server without one, or a credential that a command fetches when each process connects).
    """
    result = getattr(sampler, "result", None)
    client = result() if callable(result) else sampler  # the client, not its creation future
    if not isinstance(client, SamplingClient):
        raise InvalidInputError(
            "sampler", f"must be a SamplingClient, got {type(sampler).__name__}"
        )
    key = client._context.holder.settings.api_key
    if key is None:
        raise InvalidInputError(
            "sampler",
            "its connection has no API key to carry",
            "hand the client over as it is: each process resolves its own credentials",
        )
    return _KeyCarrier(client._pickled_state(key))


class _KeyCarrier:
    """What :func:`carry_api_key` returns: it unpickles as the SamplingClient, with the key."""

    __slots__ = ("_state",)

    def __init__(self, state: tuple[Any, ...]) -> None:
        self._state = state

    @tolerant_repr
    def __repr__(self) -> str:
        return f"carry_api_key(<SamplingClient {self._state[1]!r}>)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_sampling_client, self._state)


def _restore_sampling_client(  # noqa: PLR0917 - the pickled state, in __reduce__'s order
    base_url: str,
    sampling_session_id: str,
    model_path: str | None,
    base_model: str | None,
    record_stability_info: bool = False,
    api_key: str | None = None,
) -> SamplingClient:
    """An unpickled (or handed-over) copy: it joins the session before its first sample.

    Its connection is this process's open one to ``base_url`` (with ``api_key``: the one made
    earlier with that key), else a new one, kept for the later copies and closed at exit.
    """
    context = _connection_for(base_url, api_key)
    return SamplingClient(
        context,
        sampling_session_id,
        model_path=model_path,
        base_model=base_model,
        cloned_sampler_id=None,
        record_stability_info=record_stability_info,
    )


def _connection_for(base_url: str, api_key: str | None) -> ClientContext:
    """The connection a copy uses: found as :func:`_restore_sampling_client` says, else made."""
    with _owned_lock:
        if api_key is None:
            context = find_live_context(base_url)
        else:
            wanted = base_url.rstrip("/")
            context = next(
                (
                    c
                    for c in _owned_contexts
                    if not c.closed
                    and c.base_url.rstrip("/") == wanted
                    and c.holder.settings.api_key == api_key
                ),
                None,
            )
        if context is not None:
            return context
        try:
            settings = resolve_settings(base_url=base_url, api_key=api_key, allow_local=True)
        except InvalidInputError as e:
            if e.field != "api_key" or api_key is not None:
                raise
            raise InvalidInputError(
                "api_key",
                f"a SamplingClient handed to this process has no API key for {base_url} "
                "(pickles and sampler handles carry none)",
                f"in this process: {e.hint}; or hand the client over as carry_api_key(client) "
                "(the pickle then carries the key)",
            ) from e
        context = ClientContext(settings)
        if not _owned_contexts:
            atexit.register(_close_owned)
        _owned_contexts.append(context)
        return context


def _check_inputs(prompt: object, sampling_params: object) -> None:
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


def _check_sampleable(model_path: str) -> None:
    """Reject a path that cannot be sampled (docs/protocol.rst §4.8; docs/service.rst §7)."""
    types.check_tinker_path("model_path", model_path)
    try:
        parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(model_path)
    except InvalidInputError:
        return  # another path format: let the service decide
    if parsed.checkpoint_type == "training":
        raise InvalidInputError(
            "model_path",
            f"{model_path!r} is a training state (weights/...), which cannot be sampled",
            "save with save_weights_for_sampler(name) and sample from the "
            "tinker://<run>/sampler_weights/<name> path it returns",
        )


@forwarding_to(SamplingClient)
class BackcompatSamplingClientFuture(ClientFuture[SamplingClient], SamplingClient):
    """The future of a SamplingClient, as the creation methods return it (the official name).

    ``result()`` or ``await`` gives the client. Used as the client itself, it waits for the
    client and forwards, with the official deprecation warning (see :class:`ClientFuture`).
    """
