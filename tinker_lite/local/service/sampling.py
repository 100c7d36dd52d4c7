"""The local server's sampling sessions and samples (run on a pool of sampling threads)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from tinker_lite import types
from tinker_lite.local.model import tiny_lm as model_mod
from tinker_lite.local.refusals import InvalidRequest, NotFound, Unavailable, UserInputError
from tinker_lite.local.service.catalog import SUPPORTED_MODELS, Catalog, LoraSpec
from tinker_lite.local.service.checks import text_tokens
from tinker_lite.local.service.futures import FutureEntry, FutureStore
from tinker_lite.local.service.sample_log import CompletionLog, Target
from tinker_lite.local.service.sessions import SessionStore
from tinker_lite.local.storage.checkpoints import (
    CheckpointError,
    CheckpointStore,
    parse_tinker_path,
)
from tinker_lite.local.storage.durable import DataDir, npz_bytes, npz_read

__all__ = ["SampleOutcome", "Sampler", "SamplerStore"]


@dataclasses.dataclass(frozen=True)
class SampleOutcome:
    """A sample result with the 0.38 fields the shared response model may not hold (yet).

    ``sequence_topk[i]``: ``topk_sample_logprobs`` rows of sequence i (None when not asked for);
    the arrays answer ``target_prompt_logprobs`` (float32) and ``prompt_alt_tokens_k`` (int64 ids,
    float32 logprobs), each ``(len(prompt) - 1, k)``.
    """

    response: types.SampleResponse
    sequence_ids: list[str]
    sequence_topk: list[list[list[tuple[int, float]] | None] | None]
    target_prompt_logprobs: npt.NDArray[Any] | None = None
    alt_tokens: npt.NDArray[Any] | None = None
    alt_logprobs: npt.NDArray[Any] | None = None
    prompt_cache_hit_tokens: int = 0


class Sampler:
    """A sampling session: base model or saved weights, with its LM built on first use."""

    def __init__(
        self,
        sampler_id: str,
        session_id: str | None,
        *,
        base_model: str,
        model_path: str | None = None,
        lora: LoraSpec | None = None,
        adapter: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        self.sampler_id = sampler_id
        self.session_id = session_id
        self.base_model = base_model
        self.model_path = model_path
        self.lora = lora
        self.adapter = adapter
        self.error = error
        self.lock = threading.Lock()
        self.lm: model_mod.TinyLM | None = None
        self.joined_clients = 0


class SamplerStore:
    """Every sampling session of one server, and the pool its samples run on."""

    def __init__(
        self,
        catalog: Catalog,
        futures: FutureStore,
        checkpoints: CheckpointStore,
        sessions: SessionStore,
        *,
        workers: int,
        data: DataDir | None = None,
    ) -> None:
        self._catalog = catalog
        self._futures = futures
        self._checkpoints = checkpoints
        self._sessions = sessions
        self._data = data
        self.completions = CompletionLog()
        self._lock = threading.Lock()
        self._samplers: dict[str, Sampler] = {}
        self._sample_dedup: dict[tuple[str, int], str] = {}
        self._base_lms: dict[str, model_mod.TinyLM] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, workers), thread_name_prefix="tinker-lite-local-sample"
        )
        self._stats_lock = threading.Lock()
        self.submitted = 0
        self.completed = 0

    def register(self, sampler: Sampler) -> None:
        """Add (or replace) a sampling session, listed with its session."""
        self._keep(sampler)
        with self._lock:
            self._samplers[sampler.sampler_id] = sampler
        self._sessions.add_sampler(sampler.session_id, sampler.sampler_id)

    def _keep(self, sampler: Sampler) -> None:
        """Write a sampling session through to the data dir (an unsaved one with its weights)."""
        if self._data is None:
            return
        name = f"samplers/{self._data.digest(sampler.sampler_id)}"
        unsaved = sampler.model_path is None and sampler.adapter is not None
        if unsaved:
            assert sampler.adapter is not None
            arrays = {k: np.asarray(v) for k, v in sampler.adapter.items()}
            self._data.write_bytes(f"{name}.npz", npz_bytes(arrays))
        record = {
            "sampler_id": sampler.sampler_id,
            "session_id": sampler.session_id,
            "base_model": sampler.base_model,
            "model_path": sampler.model_path,
            "lora": None if sampler.lora is None else dataclasses.asdict(sampler.lora),
            "error": sampler.error,
            "weights": f"{name}.npz" if unsaved else None,
            "joined_clients": sampler.joined_clients,
        }
        self._data.write(f"{name}.json", record)

    def restore(self) -> int:
        """Bring back the sampling sessions kept in the data dir; return how many."""
        if self._data is None:
            return 0
        restored = 0
        for _, record in self._data.records("samplers"):
            try:
                sampler = self._restored(record)
            except (KeyError, TypeError, ValueError, OSError):
                continue
            with self._lock:
                self._samplers[sampler.sampler_id] = sampler
            restored += 1
        return restored

    def _restored(self, record: Mapping[str, Any]) -> Sampler:
        assert self._data is not None
        sampler_id, session_id = record["sampler_id"], record["session_id"]
        path, error = record["model_path"], record["error"]
        if path is not None and error is None:
            try:
                sampler = self._for_path(path, sampler_id, session_id)
            except InvalidRequest:
                error = f"The checkpoint {path} of this sampling session no longer exists"
            else:
                sampler.joined_clients = record.get("joined_clients", 0)
                return sampler
        adapter = None
        if record["weights"] is not None:
            adapter = npz_read(self._data.root / record["weights"])
        lora = record["lora"]
        sampler = Sampler(
            sampler_id,
            session_id,
            base_model=record["base_model"],
            model_path=path,
            lora=None if lora is None else LoraSpec(**lora),
            adapter=adapter,
            error=error,
        )
        sampler.joined_clients = record.get("joined_clients", 0)
        return sampler

    def _get(self, sampler_id: str, what: str = "Sampling session") -> Sampler:
        with self._lock:
            sampler = self._samplers.get(sampler_id)
        if sampler is None:
            raise NotFound(f"{what} not found: {sampler_id!r}")
        return sampler

    def _for_path(self, model_path: str, sampler_id: str, session_id: str | None) -> Sampler:
        parsed = parse_tinker_path(model_path)
        rec = self._checkpoints.get(parsed) if parsed is not None else None
        if parsed is None or rec is None:
            raise InvalidRequest(f"Invalid checkpoint tinker path {model_path}.")
        info = dict(rec.extra)
        base_model = str(info.get("base_model") or SUPPORTED_MODELS[0])
        if parsed.kind == "weights":
            # CB-ERR: the service fails such samples as a user error
            return Sampler(
                sampler_id,
                session_id,
                base_model=base_model,
                model_path=model_path,
                error="State checkpoints can't be used for sampling; save the weights with "
                "save_weights_for_sampler and sample from the sampler_weights/ path",
            )
        try:
            adapter, _, _ = self._checkpoints.load_state(parsed)
        except CheckpointError as e:
            raise InvalidRequest(f"Invalid checkpoint tinker path {model_path}.") from e
        return Sampler(
            sampler_id,
            session_id,
            base_model=base_model,
            model_path=model_path,
            lora=LoraSpec.from_info(info),
            adapter=adapter,
        )

    def create_session(
        self, req: types.CreateSamplingSessionRequest
    ) -> types.CreateSamplingSessionResponse:
        """Open a sampling session on a base model or a sampler checkpoint."""
        session = self._sessions.get(req.session_id)
        sampler_id = f"{session.session_id}:sample:{req.sampling_session_seq_id}"
        with self._lock:
            existing = self._samplers.get(sampler_id)
        if existing is not None:
            return types.CreateSamplingSessionResponse(sampling_session_id=sampler_id)
        if req.model_path is not None:
            sampler = self._for_path(req.model_path, sampler_id, session.session_id)
        else:
            assert req.base_model is not None
            self._catalog.check(req.base_model)
            sampler = Sampler(sampler_id, session.session_id, base_model=req.base_model)
        self.register(sampler)
        return types.CreateSamplingSessionResponse(sampling_session_id=sampler_id)

    def describe(self, sampler_id: str) -> types.GetSamplerResponse:
        """Describe a sampling session."""
        sampler = self._get(sampler_id, "Sampler")
        return types.GetSamplerResponse(
            sampler_id=sampler.sampler_id,
            base_model=sampler.base_model,
            model_path=sampler.model_path,
        )

    def join(self, req: types.JoinSamplingSessionRequest) -> dict[str, Any]:
        """Let a copied sampling client join a sampling session: allocate its ``client_counter``.

        The original client is 0; each joined copy numbers its samples from
        ``client_counter * 1e9``, so copies never reuse each other's seq_ids.
        """
        sampler = self._get(req.sampling_session_id)
        with self._lock:
            sampler.joined_clients += 1
            counter = sampler.joined_clients
            self._keep(sampler)  # a restarted server must not hand out the counter again
        return {"client_counter": counter, "type": "join_sampling_session"}

    def retrieve_futures(self, target: Target, prev_cursor: int, wait_s: float) -> dict[str, Any]:
        """The sample completions of one (sampling session, clone) after ``prev_cursor``."""
        self._get(target[0])
        return self.completions.poll(target, prev_cursor, wait_s)

    def _lm(self, sampler: Sampler) -> model_mod.TinyLM:
        if sampler.error is not None:
            raise UserInputError(sampler.error)
        if sampler.adapter is None:
            with self._lock:
                lm = self._base_lms.get(sampler.base_model)
            if lm is None:
                lm = self._catalog.make_lm(sampler.base_model, LoraSpec())
                with self._lock:
                    lm = self._base_lms.setdefault(sampler.base_model, lm)
            return lm
        with sampler.lock:
            if sampler.lm is None:
                lm = self._catalog.make_lm(sampler.base_model, sampler.lora or LoraSpec())
                lm.load_adapter_state(sampler.adapter)
                sampler.lm = lm
            return sampler.lm

    def asample(self, req: types.SampleRequest) -> dict[str, Any]:
        """Queue a sample on the sampling pool; answer the future (+ ``sample_sequence_ids``)."""
        if req.sampling_session_id is not None:
            sampler = self._get(req.sampling_session_id)
        elif req.model_path is not None:
            sampler = self._path_sampler(req.model_path)
        else:
            assert req.base_model is not None
            self._catalog.check(req.base_model)
            sampler = Sampler(f"base:{req.base_model}", None, base_model=req.base_model)
        # docs/service.rst §5 "Limits": refused at submit (HTTP 400), as the service does.
        prompt_len, new_tokens = req.prompt.length, req.sampling_params.max_tokens
        limit = self._catalog.context_length
        if new_tokens is not None and prompt_len + new_tokens > limit:
            raise InvalidRequest(
                "Prompt length plus max_tokens exceeds the model's context window: "
                f"{prompt_len} prompt tokens + {new_tokens} max_tokens > {limit}."
            )
        dedup_key = (
            (req.sampling_session_id, req.seq_id)
            if req.sampling_session_id is not None and req.seq_id is not None
            else None
        )
        with self._lock:
            entry = None
            if dedup_key is not None and dedup_key in self._sample_dedup:
                entry = self._futures.get(self._sample_dedup[dedup_key])
            submit = entry is None
            if entry is None:
                entry = self._futures.create()
                if dedup_key is not None:
                    self._sample_dedup[dedup_key] = entry.request_id
                    if len(self._sample_dedup) > 2 * max(4096, len(self._futures)):
                        # forget keys whose results the future store no longer holds
                        self._sample_dedup = {
                            k: v
                            for k, v in self._sample_dedup.items()
                            if self._futures.get(v) is not None
                        }
        if submit:
            with self._stats_lock:
                self.submitted += 1
            try:
                target = CompletionLog.target_of(req.sampling_session_id, req.seq_id)
                self._pool.submit(self._run, sampler, req, entry, target)
            except RuntimeError as e:
                raise Unavailable("The local server is shutting down") from e
        # golden-0.38 README: the current SDK expects `sample_sequence_ids` in the asample answer
        return {
            "request_id": entry.request_id,
            "sample_sequence_ids": [f"{entry.request_id}:{i}" for i in range(req.num_samples)],
        }

    def _path_sampler(self, model_path: str) -> Sampler:
        key = f"path:{model_path}"
        with self._lock:
            sampler = self._samplers.get(key)
        parsed = parse_tinker_path(model_path)
        rec = self._checkpoints.get(parsed) if parsed is not None else None
        if sampler is not None and rec is not None:
            return sampler
        sampler = self._for_path(model_path, key, None)
        with self._lock:
            self._samplers[key] = sampler
        return sampler

    def _run(
        self,
        sampler: Sampler,
        req: types.SampleRequest,
        entry: FutureEntry,
        target: Target | None = None,
    ) -> None:
        try:
            lm = self._lm(sampler)
            prompt = text_tokens(req.prompt.chunks, "prompt")
            params = req.sampling_params
            stop = params.stop
            stop_tokens: list[int] | None = None
            stop_strings: list[str] | None = None
            if isinstance(stop, str):
                stop_strings = [stop]
            elif isinstance(stop, list):
                if stop and isinstance(stop[0], str):
                    stop_strings = [str(s) for s in stop]
                else:
                    # docs/service.rst §5: an empty list disables every stop, EOS included
                    stop_tokens = [int(s) for s in stop]
            result = lm.sample(
                prompt,
                num_samples=req.num_samples,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_k=params.top_k,
                top_p=params.top_p,
                seed=params.seed,
                stop_tokens=stop_tokens,
                stop_strings=stop_strings,
                prompt_logprobs=bool(req.prompt_logprobs),
                topk_prompt_logprobs=req.topk_prompt_logprobs,
                topk_sample_logprobs=req.topk_sample_logprobs or 0,
                prompt_logprobs_last_n=req.prompt_logprobs_last_n,
                prompt_alt_tokens_k=req.prompt_alt_tokens_k or 0,
                target_prompt_logprobs=_target_ids(req.target_prompt_logprobs),
            )
            response = types.SampleResponse(
                sequences=[
                    types.SampledSequence(
                        stop_reason=types.StopReason(s.stop_reason),
                        tokens=list(s.tokens),
                        logprobs=list(s.logprobs),
                    )
                    for s in result.sequences
                ],
                prompt_logprobs=result.prompt_logprobs,
                topk_prompt_logprobs=result.topk_prompt_logprobs,
            )
            use = self._sessions.record_use
            use(sampler.session_id, sampler.base_model, "sampling_prefill", len(prompt))
            use(
                sampler.session_id,
                sampler.base_model,
                "sampling_sample",
                sum(len(seq.tokens) for seq in result.sequences),
            )
            outcome = SampleOutcome(
                response,
                sequence_ids=[f"{entry.request_id}:{i}" for i in range(len(result.sequences))],
                sequence_topk=[s.topk for s in result.sequences],
                target_prompt_logprobs=result.target_prompt_logprobs,
                alt_tokens=result.alt_tokens,
                alt_logprobs=result.alt_logprobs,
            )
        except Exception as exc:
            self._futures.fail_from(entry, exc)
        else:
            self._futures.complete(entry, outcome)
        if target is not None:
            self.completions.record(target, entry.request_id, entry.error is not None)
        with self._stats_lock:
            self.completed += 1

    def shutdown(self) -> None:
        """Stop the sampling pool; queued samples are abandoned."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _target_ids(tensor: types.TensorData | None) -> np.ndarray | None:
    """The ids of ``target_prompt_logprobs`` as a dense 2-D int64 array (-1: nothing asked)."""
    if tensor is None:
        return None
    if tensor.dtype != "int64":
        raise UserInputError("target_prompt_logprobs must be an int64 tensor of token ids")
    # a sparse CSR tensor requests only its listed cells: the others are -1 (nothing)
    ids = np.asarray(tensor.to_numpy(pad_value=-1), dtype=np.int64)
    if ids.ndim != 2:
        raise UserInputError(
            f"target_prompt_logprobs must be 2-D [len(prompt) - 1, K], got {list(ids.shape)}"
        )
    return ids
