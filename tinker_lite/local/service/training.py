"""The local server's training requests: model creation, passes, optimizer steps, saves, loads.

Each request is checked at once (a refusal is an HTTP error) and queued on its model's worker in
``seq_id`` order (:mod:`tinker_lite.local.service.runs`); the caller gets the future's id.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tinker_lite import types
from tinker_lite.local.model import tiny_lm as model_mod
from tinker_lite.local.refusals import (
    InvalidRequest,
    UserInputError,
    checkpoint_refusal,
    field_error,
)
from tinker_lite.local.service.catalog import Catalog, LoraSpec
from tinker_lite.local.service.checks import (
    DimuonStepRequest,
    check_optimizer_config,
    text_tokens,
    user_metadata,
)
from tinker_lite.local.service.ledger import Ledger
from tinker_lite.local.service.runs import ModelState, ModelStore, optimizer_config
from tinker_lite.local.service.sampling import Sampler, SamplerStore
from tinker_lite.local.service.sessions import SessionStore
from tinker_lite.local.storage.checkpoints import (
    CheckpointError,
    CheckpointStore,
    TinkerPath,
    parse_tinker_path,
)

__all__ = ["Training"]

# docs/service.rst §1.1: the live service names the cross-entropy output record
# "CrossEntropyLossReturn"; the names for the other losses are not documented, these follow the same
# pattern.
_OUTPUT_TYPES = {
    "cross_entropy": "CrossEntropyLossReturn",
    "importance_sampling": "ImportanceSamplingLossReturn",
    "ppo": "PPOLossReturn",
    "cispo": "CISPOLossReturn",
    "dro": "DROLossReturn",
    "gspo": "GSPOLossReturn",
}


class Training:
    """The training endpoints, over the models, sessions, samplers and checkpoints they use."""

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        catalog: Catalog,
        models: ModelStore,
        sessions: SessionStore,
        samplers: SamplerStore,
        checkpoints: CheckpointStore,
        ledger: Ledger,
    ) -> None:
        self._clock = clock
        self._catalog = catalog
        self._models = models
        self._sessions = sessions
        self._samplers = samplers
        self._checkpoints = checkpoints
        self._ledger = ledger

    @staticmethod
    def _future(model: ModelState, request_id: str) -> types.UntypedAPIFuture:
        return types.UntypedAPIFuture(request_id=request_id, model_id=model.model_id)

    # -- model lifecycle ------------------------------------------------------------------------

    def create_model(self, req: types.CreateModelRequest) -> types.UntypedAPIFuture:
        """Create a LoRA training model; its creation is the model's seq_id 0."""
        session = self._sessions.get(req.session_id)
        if not req.base_model:
            raise InvalidRequest("base_model is required")
        self._catalog.check(req.base_model)
        cfg = req.lora_config or types.LoraConfig()
        lora = LoraSpec(cfg.rank, cfg.seed, cfg.train_unembed, cfg.train_mlp, cfg.train_attn)
        lora.check()
        family = check_optimizer_config(req.optimizer_config, "optimizer_config") or "adamw"

        def build(model: ModelState) -> types.CreateModelResponse:
            model.lm = self._catalog.make_lm(model.base_model, model.lora, family)
            return types.CreateModelResponse(model_id=model.model_id)

        model, request_id = self._models.create(
            session,
            model_seq_id=req.model_seq_id,
            base_model=req.base_model,
            lora=lora,
            user_metadata=req.user_metadata,
            optimizer=family,
            create_kind="create_model",
            create=build,
        )
        return self._future(model, request_id)

    def get_info(self, req: types.GetInfoRequest) -> types.GetInfoResponse:
        """Describe a model (answered directly, not through a future)."""
        model = self._models.get(req.model_id)
        return types.GetInfoResponse(
            model_id=model.model_id,
            model_data=types.ModelData(
                arch="tinylm",
                model_name=model.base_model,
                tokenizer_id=self._catalog.tokenizer_id(model.base_model),
            ),
            is_lora=True,
            lora_rank=model.lora.rank,
            model_name=model.base_model,
            optimizer_config=(
                types.DimuonOptimizerConfig()
                if model.optimizer == "dimuon"
                else types.AdamOptimizerConfig()
            ),
        )

    def unload_model(self, req: types.UnloadModelRequest) -> types.UntypedAPIFuture:
        """Unload a model after the requests already queued for it."""
        model = self._models.get(req.model_id)
        return self._future(model, self._models.unload(model).request_id)

    # -- passes and steps -----------------------------------------------------------------------

    def forward_backward(
        self,
        model_id: str,
        seq_id: int | None,
        data: Sequence[types.Datum],
        loss_fn: str,
        loss_fn_config: Mapping[str, float | str] | None,
        *,
        forward_only: bool,
    ) -> types.UntypedAPIFuture:
        """Queue a forward (``forward_only``) or forward_backward pass."""
        model = self._models.get(model_id)
        kind = "forward" if forward_only else "forward_backward"

        def run(m: ModelState) -> types.ForwardBackwardOutput:
            assert m.lm is not None
            batch = [_datum_arrays(d, i) for i, d in enumerate(data)]
            outputs, metrics = m.lm.forward_backward(
                batch, loss_fn, loss_fn_config, backward=not forward_only
            )
            tokens = sum(len(b.tokens) for b in batch)
            self._sessions.record_use(m.session_id, m.base_model, "training", tokens)
            return types.ForwardBackwardOutput(
                loss_fn_output_type=_OUTPUT_TYPES.get(loss_fn, "LossReturn"),
                loss_fn_outputs=[
                    {k: types.TensorData.from_numpy(np.asarray(v)) for k, v in out.items()}
                    for out in outputs
                ],
                metrics={k: float(v) for k, v in metrics.items()},
            )

        return self._future(model, self._models.enqueue(model, seq_id, kind, run).request_id)

    def optim_step(self, req: types.OptimStepRequest | DimuonStepRequest) -> types.UntypedAPIFuture:
        """Queue an optimizer step of the model's family: AdamW or Dimuon.

        A step of the other family is refused (400) naming both: the optimizer is chosen at
        model creation and each optim_step must match it (0.38 ``TrainingClient.optim_step``).
        """
        model = self._models.get(req.model_id)

        def check() -> None:
            sent = "dimuon" if isinstance(req, DimuonStepRequest) else "adamw"
            if sent != model.optimizer:
                raise InvalidRequest(_family_mismatch(model, sent))

        def run(m: ModelState) -> types.OptimStepResponse:
            assert m.lm is not None
            if isinstance(req, DimuonStepRequest):
                metrics = m.lm.dimuon_step(
                    learning_rate=req.learning_rate,
                    beta1=req.beta1,
                    grad_clip_norm=req.grad_clip_norm,
                )
                return types.OptimStepResponse(metrics=metrics)
            p = req.adam_params
            assert p is not None  # a body without optimizer_params was read with adam_params
            metrics = m.lm.optim_step(
                learning_rate=p.learning_rate,
                beta1=p.beta1,
                beta2=p.beta2,
                eps=p.eps,
                weight_decay=p.weight_decay or 0.0,
                grad_clip_norm=p.grad_clip_norm or 0.0,
            )
            return types.OptimStepResponse(metrics=metrics)

        entry = self._models.enqueue(model, req.seq_id, "optim_step", run, reject=check)
        return self._future(model, entry.request_id)

    # -- saves ----------------------------------------------------------------------------------

    def _reserve(self, model: ModelState, kind: str, name: str, overwrite: bool) -> TinkerPath:
        try:
            return self._checkpoints.reserve(model.model_id, kind, name, overwrite=overwrite)
        except CheckpointError as e:
            raise checkpoint_refusal(e) from e

    def _saved(self, model: ModelState, tinker_path: str) -> None:
        self._sessions.record_use(model.session_id, model.base_model, "checkpoint", 1)
        self._ledger.audit(
            self._clock(), "checkpoint.created", model_id=model.model_id, tinker_path=tinker_path
        )

    def save_weights(
        self, req: types.SaveWeightsRequest, extras: Mapping[str, Any] | None = None
    ) -> types.UntypedAPIFuture:
        """Queue save_state: adapter + optimizer state under ``weights/<name>``.

        ``extras`` may hold ``user_metadata`` (kept with the checkpoint and listed with it).
        """
        model = self._models.get(req.model_id)
        metadata = user_metadata(extras)
        name = req.path or f"checkpoint-{uuid.uuid4().hex[:8]}"
        target: list[TinkerPath] = []

        def reserve() -> None:
            target.append(self._reserve(model, "weights", name, bool(req.overwrite)))

        def run(m: ModelState) -> types.SaveWeightsResponse:
            assert m.lm is not None
            rec = self._checkpoints.save_state(
                target[0],
                m.lm.adapter_state(),
                m.lm.optimizer_state(),
                m.checkpoint_info(metadata),
                req.ttl_seconds,
            )
            self._saved(m, rec.tinker_path)
            return types.SaveWeightsResponse(path=rec.tinker_path)

        entry = self._models.enqueue(model, req.seq_id, "save_weights", run, reject=reserve)
        return self._future(model, entry.request_id)

    def save_weights_for_sampler(
        self, req: types.SaveWeightsForSamplerRequest, extras: Mapping[str, Any] | None = None
    ) -> types.UntypedAPIFuture:
        """Queue a sampler save: named (``sampler_weights/<name>``) or ephemeral (a session)."""
        model = self._models.get(req.model_id)
        metadata = user_metadata(extras)
        target: list[TinkerPath] = []

        def reserve() -> None:
            if req.path is not None:
                target.append(self._reserve(model, "sampler_weights", req.path, False))

        def run(m: ModelState) -> types.SaveWeightsForSamplerResponseInternal:
            assert m.lm is not None
            adapter = m.lm.adapter_state()
            path = None
            if target:
                rec = self._checkpoints.save_sampler(
                    target[0],
                    adapter,
                    m.lm.lora_config(),
                    m.checkpoint_info(metadata),
                    req.ttl_seconds,
                )
                path = rec.tinker_path
                self._saved(m, path)
            sampler_id = None
            if req.sampling_session_seq_id is not None:
                sampler_id = f"{m.session_id}:sample:{req.sampling_session_seq_id}"
                sampler = Sampler(
                    sampler_id,
                    m.session_id,
                    base_model=m.base_model,
                    model_path=path,
                    lora=m.lora,
                    adapter=adapter,
                )
                self._samplers.register(sampler)
            return types.SaveWeightsForSamplerResponseInternal(
                path=path, sampling_session_id=sampler_id
            )

        kind = "save_weights_for_sampler"
        entry = self._models.enqueue(model, req.seq_id, kind, run, reject=reserve)
        return self._future(model, entry.request_id)

    def save_weights_external(self, body: Mapping[str, Any]) -> types.UntypedAPIFuture:
        """Queue save_weights_external: the adapter in PEFT layout under ``external_weights/``."""
        model_id, name = body.get("model_id"), body.get("path")
        if not isinstance(model_id, str) or not isinstance(name, str) or not name:
            raise field_error(
                ["body", "path"], "model_id and path (a name) are required", "missing"
            )
        seq_id, ttl = body.get("seq_id"), body.get("ttl_seconds")
        if seq_id is not None and (not isinstance(seq_id, int) or isinstance(seq_id, bool)):
            raise field_error(["body", "seq_id"], "seq_id: must be an integer", "int_type")
        if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0):
            raise field_error(
                ["body", "ttl_seconds"], "ttl_seconds: must be a positive int", "int_type"
            )
        model = self._models.get(model_id)
        target: list[TinkerPath] = []

        def reserve() -> None:
            if body.get("age_encryption_recipients"):
                raise InvalidRequest(
                    "age_encryption_recipients: encryption is not available on the local server",
                )
            target.append(self._reserve(model, "external_weights", name, False))

        def run(m: ModelState) -> dict[str, Any]:
            assert m.lm is not None
            rec = self._checkpoints.save_sampler(
                target[0], m.lm.adapter_state(), m.lm.lora_config(), m.checkpoint_info(None), ttl
            )
            self._saved(m, rec.tinker_path)
            return {"path": rec.tinker_path, "size_bytes": rec.size_bytes}

        entry = self._models.enqueue(model, seq_id, "save_weights_external", run, reject=reserve)
        return self._future(model, entry.request_id)

    # -- loads ----------------------------------------------------------------------------------

    def _checkpoint_path(self, path: str) -> TinkerPath:
        """Parse a path that must name an existing (or queued) checkpoint; 400 otherwise."""
        parsed = parse_tinker_path(path)
        if parsed is None or not self._checkpoints.exists_or_pending(parsed):
            # TX-LIVE: the service's answer for a missing or deleted path
            raise InvalidRequest(f"Invalid checkpoint tinker path {path}.")
        return parsed

    def _load_into(self, lm: model_mod.TinyLM, path: TinkerPath, optimizer: bool) -> None:
        try:
            adapter, optim_state, _ = self._checkpoints.load_state(path)
        except CheckpointError as e:
            raise UserInputError(e.detail) from e
        if optimizer and optim_state is None:
            raise UserInputError(
                f"{path.uri} is a sampler checkpoint and holds no optimizer state; "
                "load a weights/ checkpoint with optimizer=true"
            )
        lm.load_adapter_state(adapter)
        if optimizer:
            lm.load_optimizer_state(optim_state)
        else:
            # docs/service.rst §7: load_state loads weights only and resets the optimizer
            lm.reset_optimizer()

    def load_weights(
        self, req: types.LoadWeightsRequest, extras: Mapping[str, Any] | None = None
    ) -> types.UntypedAPIFuture:
        """Queue load_state[_with_optimizer], or create a model from a checkpoint.

        ``extras`` may hold ``optimizer_config``: the optimizer of a model created weights-only
        (AdamW by default); it cannot change an existing model's or a restored one's (400).
        """
        family = check_optimizer_config((extras or {}).get("optimizer_config"), "optimizer_config")
        if req.model_id is None:
            return self._create_via_load(req, family)
        model = self._models.get(req.model_id)
        if family is not None and family != model.optimizer:
            raise InvalidRequest(
                f"optimizer_config: model {model.model_id} was created with optimizer_config "
                f"{optimizer_config(model.optimizer)}; a load cannot change it to "
                f"{optimizer_config(family)}"
            )
        parsed: list[TinkerPath] = []

        def check() -> None:
            parsed.append(self._checkpoint_path(req.path))

        def run(m: ModelState) -> types.LoadWeightsResponse:
            assert m.lm is not None
            self._load_into(m.lm, parsed[0], req.optimizer)
            return types.LoadWeightsResponse(path=req.path)

        entry = self._models.enqueue(model, req.seq_id, "load_weights", run, reject=check)
        return self._future(model, entry.request_id)

    def _create_via_load(
        self, req: types.LoadWeightsRequest, family: str | None
    ) -> types.UntypedAPIFuture:
        # docs/protocol.rst §4.3: load_weights with session_id + model_seq_id creates the model (its
        # seq 0).
        assert req.session_id is not None
        assert req.model_seq_id is not None
        session = self._sessions.get(req.session_id)
        path = self._checkpoint_path(req.path)
        rec = self._checkpoints.get(path)
        info = dict(rec.extra) if rec is not None else {}
        base_model = req.base_model or str(info.get("base_model") or "")
        if not base_model:
            raise InvalidRequest(f"Invalid checkpoint tinker path {req.path}.")
        lora = LoraSpec.from_info(info)
        optimizer = family or "adamw"
        if req.optimizer:
            # the restored optimizer state decides the family (0.38 LoadWeightsRequest docs)
            optimizer = self._checkpoint_family(path, info)
            if family is not None and family != optimizer:
                raise InvalidRequest(
                    f"optimizer_config: {req.path} holds {optimizer_config(optimizer)} optimizer "
                    f"state, which optimizer_config {optimizer_config(family)} cannot override; "
                    "omit optimizer_config or load the weights only"
                )

        def build(m: ModelState) -> types.LoadWeightsResponse:
            lm = self._catalog.make_lm(m.base_model, m.lora, m.optimizer)
            self._load_into(lm, path, req.optimizer)
            m.lm = lm  # only once loaded: a failed load leaves no model to train
            return types.LoadWeightsResponse(path=req.path, model_id=m.model_id)

        model, request_id = self._models.create(
            session,
            model_seq_id=req.model_seq_id,
            base_model=base_model,
            lora=lora,
            user_metadata=req.user_metadata,
            optimizer=optimizer,
            create_kind="create_via_load",
            create=build,
        )
        return self._future(model, request_id)

    def _checkpoint_family(self, path: TinkerPath, info: Mapping[str, Any]) -> str:
        """The optimizer family of a checkpoint: as saved, else its (queued) saver's."""
        saved = info.get("optimizer_config")
        if isinstance(saved, Mapping) and saved.get("type") == "dimuon":
            return "dimuon"
        if saved is None:
            saver = self._models.find([path.run_id])
            if saver:
                return saver[0].optimizer
        return "adamw"


# How each optimizer family is named to the user: its config class and its step's params.
_FAMILY_NAMES = {
    "adamw": ("AdamOptimizerConfig", "adam_params (AdamParams)"),
    "dimuon": ("DimuonOptimizerConfig", "optimizer_params of type 'dimuon' (DimuonParams)"),
}


def _family_mismatch(model: ModelState, sent: str) -> str:
    config, params = _FAMILY_NAMES[model.optimizer]
    sent_params = _FAMILY_NAMES[sent][1]
    return (
        f"optim_step: model {model.model_id} was created with optimizer_config "
        f"{optimizer_config(model.optimizer)} ({config}) but this step sends {sent_params}; "
        f"send {params} to this model, or create a model with {_FAMILY_NAMES[sent][0]}"
    )


def _datum_arrays(datum: types.Datum, index: int) -> model_mod.DatumArrays:
    for position, chunk in enumerate(datum.model_input.chunks):
        if isinstance(chunk, types.EncodedTextChunk) and not chunk.length:
            # docs/service.rst §2: the service fails such a datum ("max() iterable argument is
            # empty"); said here in words.
            raise UserInputError(
                f"data[{index}].model_input.chunks[{position}]: an empty encoded_text chunk; "
                "leave it out"
            )
    tokens = text_tokens(datum.model_input.chunks, f"data[{index}].model_input")
    return model_mod.DatumArrays(
        tokens=np.asarray(tokens, dtype=np.int64),
        inputs={key: td.to_numpy() for key, td in datum.loss_fn_inputs.items()},
    )
