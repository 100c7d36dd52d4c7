"""Drive the official Tinker SDK 0.38 through its public sync calls against a local server.

Run with the official SDK's interpreter (never imports tinker_lite):

    <official-venv>/bin/python tests/compat/official_sdk_driver.py BASE_URL [JWT_BASE_URL]

Every call is recorded as ``PASS name`` or ``FAIL name: reason`` on stdout, followed by a JSON
summary line ``RESULTS {...}``; the exit status is 1 when any call failed. Each call runs under a
deadline, so a wedged client is reported as a failure instead of hanging the run.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import pickle
import subprocess
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

warnings.simplefilter("ignore")

import numpy as np  # noqa: E402
import tinker  # noqa: E402
from tinker import types  # noqa: E402

CALL_DEADLINE_S = float(os.environ.get("OFFICIAL_CALL_DEADLINE_S", "60"))
BASE_MODEL = "Qwen/Qwen3-8B"
RESULTS: dict[str, str] = {}


def check(name: str, call: Callable[[], Any]) -> Any:
    """Run one official call under a deadline; record PASS/FAIL and return its value (or None).

    Each call gets its own daemon thread, so a wedged call cannot hold up the ones after it.
    """
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as e:
            future.set_exception(e)

    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        value = future.result(timeout=CALL_DEADLINE_S)
    except concurrent.futures.TimeoutError:
        RESULTS[name] = f"FAIL: no answer within {CALL_DEADLINE_S:.0f} s"
    except BaseException as e:
        detail = "".join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]
        RESULTS[name] = f"FAIL: {detail[:300]}"
    else:
        RESULTS[name] = "PASS"
        print(f"PASS {name}", flush=True)
        return value
    print(f"{RESULTS[name].replace('FAIL', 'FAIL ' + name, 1)}", flush=True)
    return None


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


TOKENS = list(b"the cat sat on the mat. the cat sat on the mat.")


def sft_datum(tokens: list[int] = TOKENS) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


def rl_datum(tokens: list[int] = TOKENS) -> types.Datum:
    n = len(tokens) - 1
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": tokens[1:],
            "logprobs": [-2.0] * n,
            "advantages": [0.5] * n,
        },
    )


def sample_in_subprocess(payload: bytes, how: str) -> None:
    """Restore a sampler in another process (pickle or sampler handle) and sample once."""
    code = (
        "import pickle, sys, tinker, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "from tinker import types\n"
        "data = sys.stdin.buffer.read()\n"
        f"how = {how!r}\n"
        "if how == 'pickle':\n"
        "    sampler = pickle.loads(data)\n"
        "else:\n"
        "    sampler = tinker.SamplingClient.from_sampler_handle(data.decode())\n"
        "out = sampler.sample(types.ModelInput.from_ints([1, 2, 3]), 1,"
        " types.SamplingParams(max_tokens=4, seed=3)).result(timeout=60)\n"
        "assert len(out.sequences[0].tokens) == 4, out\n"
        "print('SAMPLED')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=payload,
        capture_output=True,
        timeout=CALL_DEADLINE_S,
        check=False,
        env={**os.environ, "TINKER_API_KEY": "tml-local-official"},
    )
    expect(b"SAMPLED" in done.stdout, done.stderr.decode(errors="replace")[-600:])


def drive_training(service: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    check(
        "ServiceClient.get_server_capabilities",
        lambda: expect(
            any(
                m.model_name == BASE_MODEL
                for m in service.get_server_capabilities().supported_models
            ),
            "the model list lacks " + BASE_MODEL,
        ),
    )

    def unknown_model() -> None:
        try:
            # the answer is a future of the client: the creation error surfaces on first use
            service.create_lora_training_client(base_model="Qwen/Qwen3-8b-typo", rank=8).get_info()
        except Exception as e:
            expect(BASE_MODEL in str(e), f"the error does not list the supported models: {e}")
            return
        raise AssertionError("an unknown base_model was accepted")

    check("ServiceClient.create_lora_training_client(unknown model) raises", unknown_model)
    training = check(
        "ServiceClient.create_lora_training_client",
        lambda: service.create_lora_training_client(
            base_model=BASE_MODEL, rank=8, user_metadata={"purpose": "official-run"}
        ),
    )
    if training is None:
        return out
    out["training"] = training
    check("TrainingClient.get_info", lambda: expect(training.get_info().lora_rank == 8, "rank"))

    def sft() -> None:
        losses = []
        for _ in range(15):
            fb = training.forward_backward([sft_datum()] * 4, "cross_entropy").result()
            training.optim_step(types.AdamParams(learning_rate=1e-2)).result()
            losses.append(fb.metrics["loss:sum"])
        expect(losses[0] >= 3 * losses[-1], f"loss did not fall 3x: {losses}")

    check("TrainingClient.forward_backward + optim_step (SFT, loss falls >= 3x)", sft)
    fwd = check(
        "TrainingClient.forward",
        lambda: training.forward([sft_datum()], "cross_entropy").result(),
    )
    out["logprobs"] = fwd.loss_fn_outputs[0]["logprobs"].tolist() if fwd else None

    def has_loss_sum(loss_fn: str, config: dict[str, float] | None) -> None:
        metrics = training.forward_backward([rl_datum()], loss_fn, config).result().metrics
        expect("loss:sum" in metrics, "no loss:sum")

    rl_losses: list[tuple[str, dict[str, float] | None]] = [
        ("importance_sampling", None),
        ("ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}),
        ("cispo", None),
        ("dro", {"beta": 0.05}),
    ]
    for loss_fn, config in rl_losses:
        check(
            f"TrainingClient.forward_backward({loss_fn})",
            functools.partial(has_loss_sum, loss_fn, config),
        )
    check(
        "TrainingClient.optim_step(weight_decay, grad_clip_norm)",
        lambda: training.optim_step(
            types.AdamParams(learning_rate=1e-3, weight_decay=0.01, grad_clip_norm=1.0)
        ).result(),
    )
    out["state"] = check(
        "TrainingClient.save_state(user_metadata)",
        lambda: training.save_state("state-1", user_metadata={"step": "12"}).result().path,
    )
    out["sampler_path"] = check(
        "TrainingClient.save_weights_for_sampler",
        lambda: training.save_weights_for_sampler("sampler-1").result().path,
    )
    check(
        "TrainingClient.save_weights_external",
        lambda: expect(
            "external_weights" in training.save_weights_external("ext-1").result().path, "path"
        ),
    )
    if out["state"]:
        check("TrainingClient.load_state", lambda: training.load_state(out["state"]).result())
        check(
            "TrainingClient.load_state_with_optimizer",
            lambda: training.load_state_with_optimizer(out["state"]).result(),
        )

    def snapshot(kind: str) -> None:
        sampler = training.save_weights_and_get_sampling_client(kind=kind)
        result = sampler.sample(
            types.ModelInput.from_ints(TOKENS[:4]), 2, types.SamplingParams(max_tokens=5, seed=2)
        ).result()
        expect(len(result.sequences) == 2, "two sequences")

    check(
        "TrainingClient.save_weights_and_get_sampling_client(snapshot)",
        lambda: snapshot("snapshot"),
    )
    check(
        "TrainingClient.save_weights_and_get_sampling_client(inflight)",
        lambda: snapshot("inflight"),
    )
    if out["sampler_path"]:
        check(
            "TrainingClient.create_sampling_client",
            lambda: training.create_sampling_client(out["sampler_path"]).get_base_model(),
        )
    return out


def drive_dimuon(service: Any) -> None:
    """A run created with DimuonOptimizerConfig trains with DimuonParams steps and resumes."""
    training = check(
        "ServiceClient.create_lora_training_client(optimizer=DimuonOptimizerConfig)",
        lambda: service.create_lora_training_client(
            base_model=BASE_MODEL, rank=8, optimizer=types.DimuonOptimizerConfig()
        ),
    )
    if training is None:
        return
    check(
        "TrainingClient.get_info (Dimuon optimizer_config)",
        lambda: expect(
            training.get_info().optimizer_config.type == "dimuon",
            f"optimizer_config {training.get_info().optimizer_config}",
        ),
    )

    def sft() -> None:
        losses = []
        for _ in range(15):
            fb = training.forward_backward([sft_datum()] * 4, "cross_entropy").result()
            training.optim_step(types.DimuonParams(learning_rate=1e-2, beta1=0.9)).result()
            losses.append(fb.metrics["loss:sum"])
        expect(losses[0] >= 3 * losses[-1], f"loss did not fall 3x: {losses}")

    check("TrainingClient.optim_step(DimuonParams) (SFT, loss falls >= 3x)", sft)

    def adam_refused() -> None:
        try:
            training.optim_step(types.AdamParams(learning_rate=1e-3)).result()
        except tinker.BadRequestError as e:
            expect("dimuon" in str(e) and "adam" in str(e), f"the error names both: {e}")
            return
        raise AssertionError("an AdamParams step on a Dimuon run was accepted")

    check("TrainingClient.optim_step(AdamParams) on a Dimuon run raises", adam_refused)
    state = check(
        "TrainingClient.save_state (Dimuon)",
        lambda: training.save_state("dimuon-1").result().path,
    )
    if state:
        check(
            "ServiceClient.create_training_client_from_state_with_optimizer (Dimuon)",
            lambda: (
                service.create_training_client_from_state_with_optimizer(state)
                .optim_step(types.DimuonParams(learning_rate=1e-3, grad_clip_norm=1.0))
                .result()
            ),
        )


def drive_sampling(service: Any, sampler_path: str, logprobs: list[float] | None) -> None:
    sampler = check(
        "ServiceClient.create_sampling_client(model_path)",
        lambda: service.create_sampling_client(model_path=sampler_path),
    )
    check(
        "ServiceClient.create_sampling_client(base_model)",
        lambda: (
            service.create_sampling_client(base_model=BASE_MODEL)
            .sample(types.ModelInput.from_ints([5, 6]), 1, types.SamplingParams(max_tokens=3))
            .result()
        ),
    )
    if sampler is None:
        return
    prompt = types.ModelInput.from_ints(TOKENS[:10])
    params = types.SamplingParams(max_tokens=6, seed=7, temperature=0.8, top_k=20, top_p=0.95)
    check(
        "SamplingClient.get_base_model",
        lambda: expect(sampler.get_base_model() == BASE_MODEL, "base"),
    )

    def plain() -> None:
        out = sampler.sample(prompt, 3, params).result()
        expect(len(out.sequences) == 3 and all(len(s.tokens) == 6 for s in out.sequences), "shape")
        expect(all(len(s.logprobs) == 6 for s in out.sequences), "logprobs")

    check("SamplingClient.sample", plain)
    check(
        "SamplingClient.sample(stop strings)",
        lambda: sampler.sample(
            prompt, 1, types.SamplingParams(max_tokens=20, seed=1, stop=["t"])
        ).result(),
    )
    check(
        "SamplingClient.sample(stop tokens)",
        lambda: sampler.sample(
            prompt, 1, types.SamplingParams(max_tokens=20, seed=1, stop=[116])
        ).result(),
    )

    def prompt_logprobs() -> None:
        out = sampler.sample(prompt, 1, params, include_prompt_logprobs=True).result()
        expect(out.prompt_logprobs is not None and len(out.prompt_logprobs) == 10, "prompt lps")
        expect(out.prompt_logprobs[0] is None, "first is None")

    check("SamplingClient.sample(include_prompt_logprobs)", prompt_logprobs)

    def topk_prompt() -> None:
        out = sampler.sample(
            prompt, 1, params, include_prompt_logprobs=True, topk_prompt_logprobs=3
        ).result()
        rows = out.topk_prompt_logprobs
        expect(rows is not None and rows[0] is None and len(rows[1]) == 3, f"topk prompt {rows}")

    check("SamplingClient.sample(topk_prompt_logprobs)", topk_prompt)

    def topk_sample() -> None:
        out = sampler.sample(prompt, 2, params, topk_sample_logprobs=4).result()
        rows = out.sequences[0].topk_logprobs
        expect(rows is not None and len(rows) == 6 and len(rows[0]) == 4, f"topk sample {rows}")
        best = rows[0][0][1]
        expect(all(best >= lp for _, lp in rows[0]), "descending")

    check("SamplingClient.sample(topk_sample_logprobs)", topk_sample)

    def last_n() -> None:
        out = sampler.sample(
            prompt, 1, params, include_prompt_logprobs=True, prompt_logprobs_last_n=3
        ).result()
        lps = out.prompt_logprobs
        expect(lps is not None and len(lps) == 10, f"len {lps}")
        expect(
            all(v is None for v in lps[:7]) and all(v is not None for v in lps[7:]), f"last_n {lps}"
        )

    check("SamplingClient.sample(prompt_logprobs_last_n)", last_n)

    def alt_tokens() -> None:
        out = sampler.sample(
            prompt, 1, params, include_prompt_logprobs=True, prompt_alt_tokens_k=2
        ).result()
        alt = out.prompt_alt_tokens
        expect(alt is not None, "no prompt_alt_tokens")
        expect(list(alt.tokens.shape or []) == [9, 2], f"alt shape {alt.tokens.shape}")

    check("SamplingClient.sample(prompt_alt_tokens_k)", alt_tokens)

    def target_prompt() -> None:
        ids = np.array([[TOKENS[i + 1], 7, -1] for i in range(9)], dtype=np.int64)
        target = types.TensorData.from_numpy(ids)
        out = sampler.sample(
            prompt, 1, params, include_prompt_logprobs=True, target_prompt_logprobs=target
        ).result()
        got = out.target_prompt_logprobs
        expect(got is not None, "no target_prompt_logprobs")
        values = np.asarray(got.tolist(), dtype=np.float64).reshape(9, 3)
        expect(
            np.allclose(
                values[:, 0], np.asarray(out.prompt_logprobs[1:], dtype=np.float64), atol=1e-3
            ),
            "matches prompt lps",
        )

    check("SamplingClient.sample(target_prompt_logprobs)", target_prompt)

    def compute() -> None:
        lps = sampler.compute_logprobs(types.ModelInput.from_ints(TOKENS)).result()
        expect(lps[0] is None and len(lps) == len(TOKENS), "shape")

    check("SamplingClient.compute_logprobs", compute)

    def compute_last_n() -> None:
        lps = sampler.compute_logprobs(
            types.ModelInput.from_ints(TOKENS), prompt_logprobs_last_n=4
        ).result()
        expect(all(v is None for v in lps[:-4]) and all(v is not None for v in lps[-4:]), f"{lps}")

    check("SamplingClient.compute_logprobs(prompt_logprobs_last_n)", compute_last_n)
    check(
        "pickled SamplingClient samples in another process",
        lambda: sample_in_subprocess(pickle.dumps(sampler), "pickle"),
    )
    check(
        "SamplingClient.get_sampler_handle / from_sampler_handle in another process",
        lambda: sample_in_subprocess(sampler.get_sampler_handle().encode(), "handle"),
    )


def drive_service_from_state(service: Any, state_path: str) -> None:
    check(
        "ServiceClient.create_training_client_from_state",
        lambda: (
            service.create_training_client_from_state(state_path)
            .forward([sft_datum()], "cross_entropy")
            .result()
        ),
    )
    check(
        "ServiceClient.create_training_client_from_state_with_optimizer",
        lambda: (
            service.create_training_client_from_state_with_optimizer(state_path)
            .optim_step(types.AdamParams(learning_rate=1e-3))
            .result()
        ),
    )


def drive_rest(service: Any, out: dict[str, Any]) -> None:
    rest = check("ServiceClient.create_rest_client", service.create_rest_client)
    if rest is None or not out.get("state"):
        return
    state_path = out["state"]
    run_id = state_path.split("/")[2]
    check("RestClient.get_server_capabilities", lambda: rest.get_server_capabilities().result())
    check(
        "RestClient.get_training_run",
        lambda: expect(
            rest.get_training_run(run_id).result().user_metadata == {"purpose": "official-run"},
            "user_metadata",
        ),
    )
    check(
        "RestClient.get_training_run_by_tinker_path",
        lambda: rest.get_training_run_by_tinker_path(state_path).result(),
    )
    check(
        "RestClient.get_weights_info_by_tinker_path",
        lambda: expect(
            rest.get_weights_info_by_tinker_path(state_path).result().lora_rank == 8, "rank"
        ),
    )
    check("RestClient.list_training_runs", lambda: rest.list_training_runs().result())

    def listing() -> None:
        checkpoints = rest.list_checkpoints(run_id).result().checkpoints
        state = [c for c in checkpoints if c.checkpoint_id == "weights/state-1"]
        expect(len(state) == 1, f"listing {checkpoints}")
        expect(
            getattr(state[0], "user_metadata", None) == {"step": "12"}, f"user_metadata {state[0]}"
        )

    check("RestClient.list_checkpoints (user_metadata)", listing)
    check("RestClient.list_user_checkpoints", lambda: rest.list_user_checkpoints().result())
    ext_path = f"tinker://{run_id}/external_weights/ext-1"
    check(
        "RestClient.get_external_weights_urls",
        lambda: expect(len(rest.get_external_weights_urls(ext_path).result().urls) > 0, "no urls"),
    )
    check(
        "RestClient.publish_checkpoint_from_tinker_path",
        lambda: rest.publish_checkpoint_from_tinker_path(state_path).result(),
    )
    check(
        "RestClient.unpublish_checkpoint_from_tinker_path",
        lambda: rest.unpublish_checkpoint_from_tinker_path(state_path).result(),
    )
    check(
        "RestClient.set_checkpoint_ttl_from_tinker_path",
        lambda: rest.set_checkpoint_ttl_from_tinker_path(state_path, 7200).result(),
    )
    copied = check(
        "RestClient.copy_weights",
        lambda: rest.copy_weights(state_path, "proj-copy").result(),
    )
    check(
        "ServiceClient.copy_weights",
        lambda: expect("/weights/" in service.copy_weights(state_path).result(), "copied path"),
    )
    session_id = (
        service.holder.get_session_id() if hasattr(service.holder, "get_session_id") else None
    )
    sessions = check("RestClient.list_sessions", lambda: rest.list_sessions().result())
    if session_id is None and sessions is not None and sessions.sessions:
        session_id = sessions.sessions[0]

    def get_session() -> None:
        got = rest.get_session(session_id).result()
        expect(run_id in got.training_run_ids, "run listed")
        expect(getattr(got, "user_metadata", None) == {"team": "local"}, f"user_metadata {got}")

    check("RestClient.get_session (user_metadata)", get_session)
    check(
        "RestClient.assign_session_project",
        lambda: rest.assign_session_project(session_id, "proj-a").result(),
    )
    check(
        "RestClient.export_session_trace",
        lambda: expect(len(rest.export_session_trace(session_id).result()) > 0, "empty"),
    )
    check(
        "RestClient.search_sessions",
        lambda: expect(
            len(rest.search_sessions(types.SessionSearchRequest()).result().sessions) > 0,
            "no sessions",
        ),
    )
    now = datetime.now(timezone.utc)
    check(
        "RestClient.get_billing_usage",
        lambda: rest.get_billing_usage(now - timedelta(days=1), now + timedelta(hours=1)).result(),
    )
    check(
        "RestClient.get_current_checkpoint_storage_usage",
        lambda: rest.get_current_checkpoint_storage_usage().result(),
    )
    check("RestClient.get_audit_log", lambda: rest.get_audit_log().result())

    def get_sampler() -> None:
        sampler_ids = rest.get_session(session_id).result().sampler_ids
        expect(bool(sampler_ids), "the session lists no sampler")
        got = rest.get_sampler(sampler_ids[0]).result()
        expect(got.base_model == BASE_MODEL, f"sampler {got}")

    check("RestClient.get_sampler", get_sampler)
    check(
        "RestClient.delete_checkpoint",
        lambda: rest.delete_checkpoint(run_id, "external_weights/ext-1").result(),
    )
    if copied:
        check(
            "RestClient.delete_checkpoint_from_tinker_path",
            lambda: rest.delete_checkpoint_from_tinker_path(copied).result(),
        )


def main() -> int:
    base_url = sys.argv[1]
    jwt_url = sys.argv[2] if len(sys.argv) > 2 else None
    os.environ.pop("TINKER_BASE_URL", None)
    service = check(
        "ServiceClient(base_url, user_metadata)",
        lambda: tinker.ServiceClient(
            base_url=base_url,
            api_key="tml-local-official",
            user_metadata={"team": "local"},
            project_id="proj-main",
        ),
    )
    if service is None:
        return 1
    out = drive_training(service)
    drive_dimuon(service)
    if out.get("sampler_path"):
        drive_sampling(service, out["sampler_path"], out.get("logprobs"))
    if out.get("state"):
        drive_service_from_state(service, out["state"])
    drive_rest(service, out)
    check("ServiceClient.close", lambda: service.close("success").result(timeout=30))
    if jwt_url:

        def jwt_mode() -> None:
            with tinker.ServiceClient(
                base_url=jwt_url, api_key="tml-local-official"
            ) as jwt_service:
                who = jwt_service.create_rest_client().whoami().result()
                expect(who.org_urn.startswith("tml:organization:"), f"org {who}")
                training = jwt_service.create_lora_training_client(base_model=BASE_MODEL, rank=4)
                training.forward_backward([sft_datum()], "cross_entropy").result()

        check("JWT mode: with ServiceClient / whoami / training", jwt_mode)
    failed = [name for name, result in RESULTS.items() if result != "PASS"]
    print("RESULTS " + json.dumps(RESULTS), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # wedged calls' threads must not keep the process alive
