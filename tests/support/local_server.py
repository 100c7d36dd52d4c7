"""Helpers for the local server tests: a plain-HTTP client of the Tinker API and body builders."""

from __future__ import annotations

import time
from typing import Any

import requests

__all__ = ["Api", "datum", "fb_body"]


def datum(tokens: list[int], weights: list[float] | None = None) -> dict[str, Any]:
    """A cross-entropy datum in wire JSON: input tokens[:-1], targets tokens[1:]."""
    inputs, targets = tokens[:-1], tokens[1:]
    w = weights if weights is not None else [1.0] * len(targets)
    return {
        "loss_fn_inputs": {
            "target_tokens": {"data": targets, "dtype": "int64", "shape": [len(targets)]},
            "weights": {"data": w, "dtype": "float32", "shape": [len(w)]},
        },
        "model_input": {"chunks": [{"tokens": inputs, "type": "encoded_text"}]},
    }


def fb_body(model_id: str, seq_id: int, data: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """A forward (``key="forward_input"``) or forward_backward body."""
    return {
        key: {"data": data, "loss_fn": "cross_entropy"},
        "model_id": model_id,
        "seq_id": seq_id,
    }


class Api:
    """A minimal Tinker HTTP client over one requests.Session (no tinker_lite client code)."""

    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        self.base_url = base_url
        self.http = requests.Session()
        if api_key is not None:
            self.http.headers["X-API-Key"] = api_key

    def close(self) -> None:
        self.http.close()

    def post(self, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 30)
        return self.http.post(self.base_url + path, json=body, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 30)
        return self.http.get(self.base_url + path, **kwargs)

    def ok(self, path: str, body: Any = None) -> Any:
        response = self.post(path, body)
        assert response.status_code == 200, (path, response.status_code, response.text)
        return response.json()

    def poll(self, request_id: str, *, accept: str | None = None, deadline: float = 60.0) -> Any:
        """Poll retrieve_future until the answer is not try_again; return the response."""
        headers = {"Accept": accept} if accept else {}
        end = time.monotonic() + deadline
        while True:
            response = self.post(
                "/api/v1/retrieve_future", {"request_id": request_id}, headers=headers
            )
            if response.status_code == 200 and response.headers["Content-Type"].endswith("json"):
                body = response.json()
                if isinstance(body, dict) and body.get("type") == "try_again":
                    assert time.monotonic() < end, f"{request_id} still pending"
                    continue
            return response

    def result(self, request_id: str) -> Any:
        response = self.poll(request_id)
        assert response.status_code == 200, response.text
        return response.json()

    def run(self, path: str, body: Any) -> Any:
        """Submit and wait for the result JSON."""
        return self.result(self.ok(path, body)["request_id"])

    def session(self) -> str:
        body = {"tags": [], "user_metadata": {}, "sdk_version": "0.38.0", "type": "create_session"}
        session_id: str = self.ok("/api/v1/create_session", body)["session_id"]
        return session_id

    def model(self, session_id: str, model_seq_id: int = 0, rank: int = 8) -> str:
        body = {
            "session_id": session_id,
            "model_seq_id": model_seq_id,
            "base_model": "tinker-lite/tiny-64",
            "lora_config": {"rank": rank, "seed": 3},
        }
        result = self.run("/api/v1/create_model", body)
        model_id: str = result["model_id"]
        return model_id
