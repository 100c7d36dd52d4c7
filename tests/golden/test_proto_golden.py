"""tinker_lite._codec.proto against the protobuf bodies captured from the official SDK 0.38.

Each golden-0.38 file with ``body_base64`` holds the exact ForwardBackwardRequest bytes and their
decoded rendering (``body_decoded``). The tests check that (1) the decoded rendering written back
with the module's wire primitives reproduces the bytes exactly, (2) the same request built from
tinker_lite types by ``encode_forward_backward_request`` gives the same bytes (exactly, and
independently of map-entry order, which the official runtime does not fix), and (3) the server
side decoder reads the captured bytes back into the same Datums.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest

from tests.support.proto import (
    canonical,
    config_from_decoded,
    datums_from_decoded,
    decode_to_dict,
    encode_decoded,
    golden_message_bytes,
    golden_proto_fixtures,
)
from tinker_lite import types
from tinker_lite._codec import proto as _proto
from tinker_lite.local.protocol import codecs as _codecs

GOLDEN = golden_proto_fixtures()
IDS = [name for name, _ in GOLDEN]
MESSAGE = "ForwardBackwardRequest"

pytestmark = pytest.mark.skipif(not GOLDEN, reason="../shared/wire/golden-0.38 is not present")


def _encode_from_types(decoded: dict[str, Any], data: list[types.Datum] | None = None) -> bytes:
    return _proto.encode_forward_backward_request(
        model_id=decoded.get("model_id", ""),
        seq_id=decoded.get("seq_id", 0),
        data=datums_from_decoded(decoded) if data is None else data,
        loss_fn=decoded.get("loss_fn", ""),
        loss_fn_config=config_from_decoded(decoded),
        forward_only=decoded.get("forward_only", False),
    )


def _as_float32(tree: Any) -> Any:
    """Normalise a decoded dict for comparison: float32 arrays compared as float32 values."""
    if isinstance(tree, dict):
        return {
            key: np.asarray(value, dtype=np.float32).tolist()
            if key == "float32le"
            else _as_float32(value)
            for key, value in tree.items()
        }
    if isinstance(tree, list):
        return [_as_float32(item) for item in tree]
    return tree


def test_golden_set_covers_the_protobuf_requests() -> None:
    names = set(IDS)
    assert len(names) >= 16
    assert "forward_backward_dro" in names
    assert "forward_backward_image_chunk" in names
    assert any(fixture.get("body_decompressed_base64") for _, fixture in GOLDEN)


@pytest.mark.parametrize(("name", "fixture"), GOLDEN, ids=IDS)
def test_body_decoded_reencodes_byte_for_byte(name: str, fixture: dict[str, Any]) -> None:
    assert fixture["body_decoded_message"] == f"tinker_public.{MESSAGE}"
    assert encode_decoded(MESSAGE, fixture["body_decoded"]) == golden_message_bytes(fixture)


@pytest.mark.parametrize(("name", "fixture"), GOLDEN, ids=IDS)
def test_wire_scanner_reads_body_decoded_back(name: str, fixture: dict[str, Any]) -> None:
    decoded = decode_to_dict(MESSAGE, golden_message_bytes(fixture))
    assert _as_float32(decoded) == _as_float32(fixture["body_decoded"])
    assert list(decoded) == list(fixture["body_decoded"])  # wire order


@pytest.mark.parametrize(("name", "fixture"), GOLDEN, ids=IDS)
def test_request_from_types_matches_golden(name: str, fixture: dict[str, Any]) -> None:
    expected = golden_message_bytes(fixture)
    body = _encode_from_types(fixture["body_decoded"])
    # Built in the golden file's map order, every byte matches.
    assert body == expected
    assert canonical(MESSAGE, body) == canonical(MESSAGE, expected)


@pytest.mark.parametrize(("name", "fixture"), GOLDEN, ids=IDS)
def test_map_order_does_not_matter_up_to_canonical_form(name: str, fixture: dict[str, Any]) -> None:
    decoded = fixture["body_decoded"]
    reversed_data = [
        types.Datum(
            model_input=datum.model_input,
            loss_fn_inputs=dict(reversed(list(datum.loss_fn_inputs.items()))),
        )
        for datum in datums_from_decoded(decoded)
    ]
    body = _encode_from_types(decoded, reversed_data)
    assert canonical(MESSAGE, body) == canonical(MESSAGE, golden_message_bytes(fixture))


@pytest.mark.parametrize(("name", "fixture"), GOLDEN, ids=IDS)
def test_server_decoder_reads_golden(name: str, fixture: dict[str, Any]) -> None:
    decoded = fixture["body_decoded"]
    request = _codecs.decode_forward_backward_request(golden_message_bytes(fixture))
    assert request.model_id == decoded.get("model_id", "")
    assert request.seq_id == decoded.get("seq_id", 0)
    assert request.loss_fn == decoded.get("loss_fn", "")
    assert request.forward_only == decoded.get("forward_only", False)
    assert request.loss_fn_config == config_from_decoded(decoded)
    assert request.data == datums_from_decoded(decoded)


def test_golden_protobuf_requests_carry_the_content_type() -> None:
    for _name, fixture in GOLDEN:
        headers = {key.lower(): value for key, value in fixture["headers"].items()}
        assert headers["content-type"] == "application/x-protobuf"


@pytest.mark.parametrize(
    ("name", "fixture"),
    [(n, f) for n, f in GOLDEN if f.get("body_decompressed_base64")],
    ids=[n for n, f in GOLDEN if f.get("body_decompressed_base64")],
)
def test_zstd_golden_bodies_decompress(name: str, fixture: dict[str, Any]) -> None:
    zstandard = pytest.importorskip("zstandard")
    decompress = zstandard.ZstdDecompressor().decompressobj().decompress
    raw = base64.b64decode(fixture["body_base64"])
    assert decompress(raw) == golden_message_bytes(fixture)
    decompress = zstandard.ZstdDecompressor().decompressobj().decompress
    assert decompress(_proto.compress(golden_message_bytes(fixture))) == (
        golden_message_bytes(fixture)
    )
