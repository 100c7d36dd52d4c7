"""Audio (``DmelChunk``) model inputs go out as the official SDK 0.38 sends them.

golden-0.38 has no capture with an audio chunk, so the expected bodies below were produced once
with 0.38 itself (``forward_backward_request_to_proto(...).SerializeToString()`` and the
``asample`` body's ``model_dump``) for the same inputs, and are written out here: a
forward_backward is protobuf (``Chunk.dmel``, field 3: ``DmelChunk {bytes dmel = 1}``), a sample
prompt JSON (``{"dmel": <base64>, "type": "dmel"}``). A malformed TensorContainer header is
refused before anything is sent.
"""

from __future__ import annotations

import json

import pytest

from tests.support.audio import tensor_container
from tests.support.clients import API_KEY, FakeTinker
from tests.support.proto import canonical, decode_to_dict
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import InvalidInputError, ServiceClient, types

BASE = "Qwen/Qwen3-8B"
MESSAGE = "ForwardBackwardRequest"
SPEECH = tensor_container((7, 80), payload=bytes(range(8)))  # 01 02 07 50 + payload
SILENCE = tensor_container((3, 80), constant=True, payload=b"\0\0")  # fe 01 02 03 50 + payload

# 0.38: forward_backward_request_to_proto(ForwardBackwardRequest(model_id="run-0001", seq_id=1,
# data=_data(), loss_fn="cross_entropy")).SerializeToString(), a run whose map entries came out
# in insertion order (the protobuf runtime does not fix that order; tinker_lite keeps insertion).
FORWARD_BACKWARD_038 = bytes.fromhex(
    "0a0872756e2d3030303110011ad0010a0c0a0a0a080a0000000b0000000a101a0e0a0c010207500001020304"
    "0506070a080a060a040c00000012680a0d7461726765745f746f6b656e7312570a5001000000000000000200"
    "0000000000000300000000000000040000000000000005000000000000000600000000000000070000000000"
    "0000080000000000000009000000000000000a00000000000000180222010a123a0a0777656967687473122f"
    "0a280000000000000000000000000000000000000000000000000000000000000000000000000000803f1801"
    "22010a1a510a0b1a090a07fe0102035000000a080a060a040500000012380a0d7461726765745f746f6b656e"
    "7312270a2001000000000000000200000000000000030000000000000004000000000000001802220104220d"
    "63726f73735f656e74726f7079"
)

# 0.38: the asample body of SamplingClient.sample(_prompt(), 1, SamplingParams(max_tokens=4))
SAMPLE_038 = {
    "num_samples": 1,
    "prompt": {
        "chunks": [
            {"tokens": [10, 11], "type": "encoded_text"},
            {"dmel": "AQIHUAABAgMEBQYH", "type": "dmel"},
            {"tokens": [12], "type": "encoded_text"},
        ]
    },
    "sampling_params": {"max_tokens": 4, "temperature": 1.0, "top_k": -1, "top_p": 1.0},
    "sampling_session_id": "sess-0001:sample:1",
    "seq_id": 1,
    "prompt_logprobs": False,
    "topk_prompt_logprobs": 0,
    "topk_sample_logprobs": 0,
    "prompt_alt_tokens_k": 0,
    "record_stability_info": False,
    "type": "sample",
}


def _prompt() -> types.ModelInput:
    return types.ModelInput(
        chunks=[
            types.EncodedTextChunk(tokens=[10, 11]),
            types.DmelChunk(dmel=SPEECH),
            types.EncodedTextChunk(tokens=[12]),
        ]
    )


def _data() -> list[types.Datum]:
    return [
        types.Datum(
            model_input=_prompt(),
            loss_fn_inputs={"target_tokens": list(range(1, 11)), "weights": [0.0] * 9 + [1.0]},
        ),
        types.Datum(
            model_input=types.ModelInput(
                chunks=[types.DmelChunk(dmel=SILENCE), types.EncodedTextChunk(tokens=[5])]
            ),
            loss_fn_inputs={"target_tokens": [1, 2, 3, 4]},
        ),
    ]


def _malformed() -> types.ModelInput:
    # The tinker-cookbook's placeholder: a dtype byte, then no dimension at all.
    return types.ModelInput(
        chunks=[types.EncodedTextChunk(tokens=[10]), types.DmelChunk(dmel=b"\0" * 16)]
    )


@pytest.fixture
def client(server: ScriptedServer) -> ServiceClient:
    FakeTinker(server, client_config={"proto_compress_fwdbwd": False})
    return ServiceClient(base_url=server.url, api_key=API_KEY, telemetry=False)


def test_forward_backward_sends_038s_protobuf_bytes(
    server: ScriptedServer, client: ServiceClient
) -> None:
    with client:
        trainer = client.create_lora_training_client(BASE).result()
        out = trainer.forward_backward(_data(), "cross_entropy").result(timeout=30)
    assert [len(o["logprobs"].tolist()) for o in out.loss_fn_outputs] == [10, 4]
    (sent,) = server.requests("/api/v1/forward_backward")
    assert sent.header("Content-Type") == "application/x-protobuf"
    assert sent.body == FORWARD_BACKWARD_038
    assert canonical(MESSAGE, sent.body) == canonical(MESSAGE, FORWARD_BACKWARD_038)
    decoded = decode_to_dict(MESSAGE, sent.body)
    assert decoded["data"][0]["model_input"][1] == {
        "dmel": {"dmel": {"base64": "AQIHUAABAgMEBQYH"}}
    }


def test_sample_sends_038s_json_prompt(server: ScriptedServer, client: ServiceClient) -> None:
    with client:
        sampler = client.create_sampling_client(base_model=BASE).result()
        sampler.sample(_prompt(), 1, types.SamplingParams(max_tokens=4)).result(timeout=30)
    (sent,) = server.requests("/api/v1/asample")
    body = sent.json()
    assert isinstance(body.pop("seq_id"), int)  # order dependent: the sampler's clone number
    assert body == {key: value for key, value in SAMPLE_038.items() if key != "seq_id"}
    assert list(body) == [key for key in SAMPLE_038 if key != "seq_id"]


def test_a_malformed_header_is_refused_before_sending(
    server: ScriptedServer, client: ServiceClient
) -> None:
    bad = types.Datum(model_input=_malformed(), loss_fn_inputs={"target_tokens": [1, 2]})
    with client:
        trainer = client.create_lora_training_client(BASE).result()
        with pytest.raises(InvalidInputError) as refused:
            trainer.forward_backward([*_data(), bad], "cross_entropy")
        assert refused.value.field == "data[2].model_input.chunks[1].dmel"
        assert "no dimension" in refused.value.problem
        assert "TensorContainer" in refused.value.hint
        with pytest.raises(InvalidInputError, match=r"^data\[0\]\.model_input\.chunks\[1\]\.dmel"):
            trainer.forward([bad], "cross_entropy")
        sampler = client.create_sampling_client(base_model=BASE).result()
        with pytest.raises(InvalidInputError) as refused:
            sampler.sample(_malformed(), 1, types.SamplingParams(max_tokens=4))
        assert refused.value.field == "prompt.chunks[1].dmel"
        with pytest.raises(InvalidInputError, match=r"^prompt\.chunks\[1\]\.dmel"):
            sampler.compute_logprobs(_malformed())
    sent = [r.path for r in server.requests()]
    assert not {"/api/v1/forward_backward", "/api/v1/forward", "/api/v1/asample"} & set(sent)


def test_json_wire_sends_the_chunk_as_038_serializes_it(server: ScriptedServer) -> None:
    FakeTinker(server)
    with ServiceClient(base_url=server.url, api_key=API_KEY, telemetry=False, wire="json") as c:
        trainer = c.create_lora_training_client(BASE).result()
        trainer.forward_backward(_data(), "cross_entropy").result(timeout=30)
    (sent,) = server.requests("/api/v1/forward_backward")
    chunks = sent.json()["forward_backward_input"]["data"][0]["model_input"]["chunks"]
    assert chunks == SAMPLE_038["prompt"]["chunks"]  # type: ignore[index]
    assert json.dumps(chunks[1]) == '{"dmel": "AQIHUAABAgMEBQYH", "type": "dmel"}'
