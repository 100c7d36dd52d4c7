"""Each served name reports its tokenizer, and the tiny model takes that tokenizer's ids.

The service names a model's own tokenizer in ``get_info`` (docs/service.rst §6); code written
for it tokenizes with that tokenizer, so ids reach 150k-250k. The local server folds them into
its tiny table (``tinker_lite/local/model/vocab.py``) and answers ids of the same vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.local_server import Api
from tinker_lite import BadRequestError, ServiceClient, TinkerError, types
from tinker_lite.local import LocalServer
from tinker_lite.local.model.vocab import BYTE_TOKENIZER_ID, find_tokenizer_file, token_space
from tinker_lite.local.service.catalog import SUPPORTED_MODELS

LLAMA3_TOKENIZER = "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer"
QWEN3_VOCABULARY = 151_936
# A Qwen3 chat turn as Qwen's tokenizer encodes it: <|im_start|>user\nHello<|im_end|>\n
# <|im_start|>assistant\n, then the answer "Hello" and <|im_end|>.
IM_START, IM_END, NEWLINE, USER, ASSISTANT, HELLO = 151644, 151645, 198, 872, 77091, 9707
PROMPT = [IM_START, USER, NEWLINE, HELLO, IM_END, NEWLINE, IM_START, ASSISTANT, NEWLINE]
ANSWER = [HELLO, IM_END]


def expected_tokenizer_id(name: str) -> str:
    if name.startswith("tinker-lite/") or name == "acme/custom-7b":
        return BYTE_TOKENIZER_ID
    if name.startswith("meta-llama/Llama-3"):
        return LLAMA3_TOKENIZER
    return name


@pytest.fixture(scope="module")
def stub_service() -> Iterator[ServiceClient]:
    with (
        LocalServer(stub_model=True, models=["acme/custom-7b"]) as base_url,
        ServiceClient(base_url=base_url, telemetry=False) as client,
    ):
        yield client


def test_get_info_names_the_tokenizer_the_service_names(stub_service: ServiceClient) -> None:
    names = [*SUPPORTED_MODELS, "acme/custom-7b"]
    assert "Qwen/Qwen3-8B" in names
    assert "openai/gpt-oss-20b" in names
    seen = {}
    for name in names:
        training = stub_service.create_lora_training_client(base_model=name, rank=4).result()
        seen[name] = training.get_info().model_data.tokenizer_id
    assert seen == {name: expected_tokenizer_id(name) for name in names}
    assert seen["Qwen/Qwen3-8B"] == "Qwen/Qwen3-8B"
    assert seen["meta-llama/Llama-3.1-8B-Instruct"] == LLAMA3_TOKENIZER
    assert seen["tinker-lite/tiny-64"] == seen["acme/custom-7b"] == BYTE_TOKENIZER_ID


def chat_datum() -> types.Datum:
    tokens = PROMPT + ANSWER
    weights = [0.0] * (len(PROMPT) - 1) + [1.0] * len(ANSWER)
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights},
    )


def test_real_tokenizer_ids_train_and_sample_back() -> None:
    """Qwen3 ids (up to 151,935) train; greedy sampling answers the trained ids and stops."""
    with ServiceClient(base_url="local://", telemetry=False) as client:
        training = client.create_lora_training_client(
            base_model="Qwen/Qwen3-8B", rank=8, seed=0
        ).result()
        top = types.Datum(
            model_input=types.ModelInput.from_ints([QWEN3_VOCABULARY - 1, 0]),
            loss_fn_inputs={"target_tokens": [0, QWEN3_VOCABULARY - 1]},
        )
        losses = []
        for _ in range(25):
            out = training.forward_backward([chat_datum(), top], "cross_entropy").result()
            training.optim_step(types.AdamParams(learning_rate=2e-2)).result()
            losses.append(out.metrics["loss:sum"])
        assert losses[-1] < 0.2 * losses[0], losses

        sampler = training.save_weights_and_get_sampling_client().result()
        params = types.SamplingParams(max_tokens=6, temperature=0.0, stop=[IM_END])
        response = sampler.sample(
            types.ModelInput.from_ints(PROMPT), 1, params, topk_sample_logprobs=3
        ).result()
        (sequence,) = response.sequences
        assert sequence.tokens == ANSWER
        assert sequence.stop_reason == "stop"
        assert sequence.topk_logprobs is not None
        assert sequence.topk_logprobs[0] is not None
        assert sequence.topk_logprobs[0][0][0] == HELLO
        for row in sequence.topk_logprobs:
            assert all(0 <= token < QWEN3_VOCABULARY for token, _ in row or [])

        # hot sampling still answers ids of the vocabulary, never the tiny table's own
        hot = types.SamplingParams(max_tokens=40, temperature=1.5, seed=7)
        many = sampler.sample(types.ModelInput.from_ints(PROMPT), 4, hot).result()
        tokens = [t for seq in many.sequences for t in seq.tokens]
        assert all(0 <= t < QWEN3_VOCABULARY for t in tokens)
        assert any(t >= 259 for t in tokens) or set(tokens) <= set(PROMPT)

        with pytest.raises((BadRequestError, TinkerError)) as info:
            training.forward(
                [
                    types.Datum(
                        model_input=types.ModelInput.from_ints([QWEN3_VOCABULARY]),
                        loss_fn_inputs={"target_tokens": [0]},
                    )
                ],
                "cross_entropy",
            ).result()
        assert str(QWEN3_VOCABULARY) in str(info.value)


def test_the_largest_ids_of_each_family_are_accepted() -> None:
    with (
        LocalServer(stub_model=True) as base_url,
        ServiceClient(base_url=base_url, telemetry=False) as client,
    ):
        for name in ("openai/gpt-oss-20b", "Qwen/Qwen3.5-9B-Base", "meta-llama/Llama-3.2-1B"):
            top = token_space(name).size - 1
            training = client.create_lora_training_client(base_model=name, rank=4).result()
            datum = types.Datum(
                model_input=types.ModelInput.from_ints([top, 0]),
                loss_fn_inputs={"target_tokens": [0, top]},
            )
            out = training.forward([datum], "cross_entropy").result()
            assert len(out.loss_fn_outputs) == 1


def test_the_byte_model_still_refuses_ids_past_its_table() -> None:
    with (
        LocalServer(stub_model=True) as base_url,
        ServiceClient(base_url=base_url, telemetry=False) as client,
    ):
        training = client.create_lora_training_client("tinker-lite/tiny-64", rank=4).result()
        datum = types.Datum(
            model_input=types.ModelInput.from_ints([300]), loss_fn_inputs={"target_tokens": [0]}
        )
        with pytest.raises(TinkerError, match="300"):
            training.forward([datum], "cross_entropy").result()


def test_stop_strings_use_the_tokenizer_file_when_the_server_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tinker_lite.local.model import tiny_lm as model_mod
    from tinker_lite.local.model import vocab

    folder = tmp_path / "Qwen" / "Qwen3-8B"
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_bytes(model_mod.tokenizer_path().read_bytes())
    monkeypatch.setenv("TINKER_LITE_TOKENIZER_DIR", str(tmp_path))
    vocab._decoder.cache_clear()
    try:
        assert find_tokenizer_file("Qwen/Qwen3-8B") == folder / "tokenizer.json"
        lm = model_mod.TinyLM("Qwen/Qwen3-8B", rank=4, token_space=token_space("Qwen/Qwen3-8B"))
        prompt = list(b"ab\nab\nab\n")
        free = lm.sample(prompt, max_tokens=30, temperature=1.0, seed=3, stop_strings=["\n"])
        (seq,) = free.sequences
        text = bytes(t for t in seq.tokens if t < 256).decode("latin-1")
        assert "\n" not in text[:-1]
        assert (seq.stop_reason == "stop") == text.endswith("\n")
    finally:
        vocab._decoder.cache_clear()


@pytest.fixture(scope="module")
def api() -> Iterator[Api]:
    with LocalServer(stub_model=True) as base_url:
        client = Api(base_url)
        yield client
        client.close()


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("GET", ""), ("DELETE", ""), ("GET", "/archive"), ("PUT", "/ttl"), ("POST", "/publish")],
)
def test_an_untyped_checkpoint_id_is_a_bad_request(api: Api, method: str, suffix: str) -> None:
    model_id = api.model(api.session())
    for run in (model_id, "no-such-run"):
        url = f"{api.base_url}/api/v1/training_runs/{run}/checkpoints/my-ckpt{suffix}"
        response = requests.request(method, url, json={"ttl_seconds": 60}, timeout=30)
        assert response.status_code == 400, response.text
        assert "weights/<name>" in response.json()["detail"]
    typed = f"{api.base_url}/api/v1/training_runs/{model_id}/checkpoints/weights/my-ckpt"
    assert requests.get(typed, timeout=30).status_code == 404


def test_an_untyped_tinker_path_is_a_bad_request(api: Api) -> None:
    model_id = api.model(api.session())
    untyped = api.post("/api/v1/weights_info", {"tinker_path": f"tinker://{model_id}/my-ckpt"})
    assert untyped.status_code == 400, untyped.text
    assert "Invalid checkpoint tinker path" in untyped.json()["detail"]
    missing = f"tinker://{model_id}/weights/my-ckpt"
    assert api.post("/api/v1/weights_info", {"tinker_path": missing}).status_code == 404


def test_folding_keeps_byte_ids_and_answers_context_ids_first() -> None:
    import numpy as np

    space = token_space("Qwen/Qwen3-8B")
    assert space.folded
    assert not token_space("tinker-lite/tiny-64").folded
    small = np.arange(259)
    assert (space.rows(small) == small).all()
    big = np.arange(259, QWEN3_VOCABULARY)
    rows = space.rows(big)
    assert rows.min() >= 0
    assert rows.max() < 259
    assert len(set(rows.tolist())) == 259  # every row is used
    # two large ids of one row: the later prompt id wins, a stop token beats both
    same = big[rows == rows[0]][:3]
    row = int(rows[0])
    assert space.ids_for_rows([])[row] == row
    assert space.ids_for_rows([int(same[0]), int(same[1])])[row] == same[1]
    assert space.ids_for_rows([int(same[1]), int(same[0])])[row] == same[0]
    assert space.ids_for_rows([int(same[0])], [int(same[2])])[row] == same[2]
