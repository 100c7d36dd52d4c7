"""SamplingClient: text generation and prompt logprobs from a base model or trained weights.

Samples are numbered and paced as docs/protocol.rst §7.3 and §6.4 say; a client pickles and is
handed to other processes as docs/scaling.rst tells.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import random
import threading
import time
from typing import TYPE_CHECKING, Any

import attrs

from tinker_lite import types
from tinker_lite._api import endpoints
from tinker_lite._context import ClientContext, context_of, find_live_context
from tinker_lite._errors import APIResponseValidationError, InvalidInputError
from tinker_lite._futures.answers import QueueStateLogger
from tinker_lite._futures.async_twins import async_twin
from tinker_lite._futures.client_future import ClientFuture, forwarding_to
from tinker_lite._futures.future import APIFuture, chain
from tinker_lite._repr import tolerant_repr
from tinker_lite._sampling.job import SampleJob, SampleSender, deliver
from tinker_lite._session.settings import resolve_settings
from tinker_lite.tokenizer import load_tokenizer, resolve_tokenizer_id

if TYPE_CHECKING:
    from tinker_lite._session.holder import SessionHolder
    from tinker_lite.tokenizer import PretrainedTokenizer

__all__ = [
    "BackcompatSamplingClientFuture",
    "SamplingClient",
    "carry_api_key",
    "check_record_stability_info",
    "client_context",
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


def client_context(holder: object, create: str) -> ClientContext:
    """The connection of the ServiceClient (or its holder) a client is constructed on."""
    context = context_of(holder)
    if context is None:
        raise InvalidInputError(
            "holder",
            f"must be a ServiceClient's holder (or the ServiceClient), got a "
            f"{type(holder).__name__}",
            f"create them with ServiceClient.{create}",
        )
    return context


class SamplingClient:
    """Samples from one sampling session (a base model or saved sampler weights).

    Made by the ``create_sampling_client`` methods, or as officially:
    ``SamplingClient(service_client.holder, sampling_session_id=..., base_model=...)``.
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
        context = client_context(holder, "create_sampling_client")
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
        # docs/protocol.rst §7.3: None until a copy joins the session.
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
        return (
            self._context.base_url,
            self.sampling_session_id,
            self.model_path,
            self.base_model,
            self.record_stability_info,
            api_key,
        )

    def get_sampler_handle(self) -> str:
        """A string naming this sampler for :meth:`from_sampler_handle` (no credentials)."""
        keys = (*_HANDLE_KEYS, "record_stability_info")
        state = dict(zip(keys, self._pickled_state(None)[:5], strict=True))
        payload = json.dumps(state, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(payload).decode("ascii")

    @staticmethod
    def from_sampler_handle(handle: str, *, api_key: str | None = None) -> SamplingClient:
        """A new SamplingClient of the sampler named by ``handle``, with ``api_key`` or this
        process's credentials (docs/scaling.rst)."""
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
        record_stability_info: bool,
    ) -> BackcompatSamplingClientFuture:
        """The future of a new sampling session's client; the requests go on the REST threads.

        For saved weights without ``base_model`` 0.38 then reads the sampler (``GET
        samplers/{id}``) for its base model, except from a 0.4.1-era service (no client config),
        which has no such endpoint.
        """
        context.check_open()
        if model_path is None and base_model is None:
            raise InvalidInputError(
                "model_path/base_model",
                "neither is set",
                "pass model_path='tinker://<run>/sampler_weights/<name>' or base_model='...'",
            )
        check_record_stability_info(record_stability_info)
        if base_model is not None and (not isinstance(base_model, str) or not base_model):
            raise InvalidInputError("base_model", f"must be a model name, got {base_model!r}")
        if model_path is not None:
            # docs/protocol.rst §4.8; docs/service.rst §7: a training state cannot be sampled.
            types.check_tinker_path("model_path", model_path)
            try:
                parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(model_path)
            except InvalidInputError:
                parsed = None  # another path format: let the service decide
            if parsed is not None and parsed.checkpoint_type == "training":
                raise InvalidInputError(
                    "model_path",
                    f"{model_path!r} is a training state (weights/...), which cannot be sampled",
                    "save with save_weights_for_sampler(name) and sample from the "
                    "tinker://<run>/sampler_weights/<name> path it returns",
                )
        api, session = context.api, context.holder
        # docs/protocol.rst §7.1: numbered in call order.
        seq_id = session.next_sampling_session_seq_id()

        def create() -> SamplingClient:
            request = types.CreateSamplingSessionRequest(
                session_id=session.ensure_session(),
                sampling_session_seq_id=seq_id,
                base_model=base_model,
                model_path=model_path,
            )
            created = api.sampling.create_sampling_session(request, sdk_method=sdk_method)
            client = cls(
                context,
                created.sampling_session_id,
                model_path=model_path,
                base_model=base_model,
                record_stability_info=record_stability_info,
            )
            # As in 0.38, a base model given with the weights is taken as their base model.
            if base_model is None and session.client_config_from_server:
                client.base_model = client._read_base_model(sdk_method) or None
            return client

        created = context.run_in(context.rest_pool(), create, request_type="CreateSamplingSession")
        return BackcompatSamplingClientFuture(created)

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
        """Give this copy its clone number before its first sample (docs/protocol.rst §7.3)."""
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
        """Whether this copy's next sample first joins the session (docs/protocol.rst §7.3)."""
        return self._cloned_sampler_id is None

    def compute_logprobs(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> APIFuture[list[float | None]]:
        """Return the logprob of each prompt token under the model (the first is None).

        ``prompt_logprobs_last_n=N`` scores only the last N (the rest are None).
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
        """Return the base model this sampler runs (for saved weights, asked once)."""
        if self.base_model is None:
            self.base_model = self._read_base_model("SamplingClient.get_base_model")
        return self.base_model

    def _read_base_model(self, sdk_method: str) -> str:
        sampler_id = self.sampling_session_id
        return self._api.request(
            endpoints.GET_SAMPLER, sdk_method=sdk_method, sampler_id=sampler_id
        ).base_model

    def on_queue_state_change(
        self, queue_state: types.QueueState, queue_state_reason: str | None
    ) -> None:
        """Called with the service's queue state while a sample waits: by default a WARNING at
        most once a minute while paused. Override it to react otherwise."""
        self._queue_logger(str(queue_state), queue_state_reason)

    def get_tokenizer(self) -> PretrainedTokenizer:
        """Return the tokenizer of the sampled model's base model."""
        with self._tokenizer_lock:
            if self._tokenizer is None:
                base_model = self.base_model
                if base_model is None:
                    base_model = self._read_base_model("SamplingClient.get_tokenizer")
                self._tokenizer = load_tokenizer(resolve_tokenizer_id(base_model))
            return self._tokenizer

    def _take_seq_id(self) -> int:
        with self._seq_lock:
            value = self._next_seq_id
            self._next_seq_id += 1
            return value

    @functools.cached_property
    def _sender(self) -> SampleSender:
        def noted(state: str, reason: str | None) -> None:
            self.on_queue_state_change(types.QueueState(state), reason)

        return SampleSender(self._context, self.sampling_session_id, self._take_seq_id, noted)

    # -- the official *_async twins (deprecated there too) ---------------------------------------

    sample_async = async_twin(sample, blocks=_unjoined)
    compute_logprobs_async = async_twin(compute_logprobs, blocks=_unjoined)
    get_base_model_async = async_twin(get_base_model, blocks=lambda self: self.base_model is None)


# The connections made here for copies; each closes at exit as any unclosed connection does.
_owned_contexts: list[ClientContext] = []
_owned_lock = threading.Lock()


def carry_api_key(sampler: SamplingClient) -> object:
    """``sampler``, to pickle for another process with its API key, in clear (docs/scaling.rst,
    "Credentials"). :class:`~tinker_lite.InvalidInputError` when there is no key to carry.
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


@attrs.define(frozen=True, repr=False)
class _KeyCarrier:
    """What :func:`carry_api_key` returns: it unpickles as the SamplingClient, with the key."""

    _state: tuple[Any, ...]

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
    """An unpickled (or handed-over) copy, on this process's open connection to ``base_url``
    (with ``api_key``: made with it), else on a new one kept for later copies (docs/scaling.rst)."""
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
        if context is None:
            try:
                settings = resolve_settings(base_url=base_url, api_key=api_key, allow_local=True)
            except InvalidInputError as e:
                if e.field != "api_key" or api_key is not None:
                    raise
                raise InvalidInputError(
                    "api_key",
                    f"a SamplingClient handed to this process has no API key for {base_url} "
                    "(pickles and sampler handles carry none)",
                    f"in this process: {e.hint}; or hand the client over as "
                    "carry_api_key(client) (the pickle then carries the key)",
                ) from e
            context = ClientContext(settings)
            _owned_contexts.append(context)
    return SamplingClient(
        context,
        sampling_session_id,
        model_path=model_path,
        base_model=base_model,
        cloned_sampler_id=None,
        record_stability_info=record_stability_info,
    )


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


@forwarding_to(SamplingClient)
class BackcompatSamplingClientFuture(ClientFuture[SamplingClient], SamplingClient):
    """The future of a SamplingClient; used as the client it warns, as officially."""
