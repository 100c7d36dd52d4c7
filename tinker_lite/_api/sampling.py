"""The requestor's sampling sessions and sample submit loop (docs/protocol.rst §6.4)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import attrs

from tinker_lite import types
from tinker_lite._api.endpoints import (
    ASAMPLE_PATH,
    CREATE_SAMPLING_SESSION,
    JOIN_SAMPLING_SESSION,
)
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.decoding import parse_model
from tinker_lite._errors import ClientClosedError
from tinker_lite._transport.answers import JSON, PROTOBUF, HttpResponse, raise_for_status
from tinker_lite._transport.http import PoolKind
from tinker_lite._transport.loops import (
    RetryableStatus,
    ServiceWait,
    attempt_error,
    call_of,
    retry_loop,
)
from tinker_lite._transport.retry import StallWatch

if TYPE_CHECKING:
    from tinker_lite._api.sender import Sender

__all__ = ["SamplingRequests", "decode_sample"]

logger = logging.getLogger("tinker_lite.api")


def decode_sample(resp: HttpResponse) -> types.SampleResponse:
    """A sample result in either content type (docs/protocol.rst §3.5)."""
    if resp.is_protobuf:
        from tinker_lite._codec import proto as _proto

        return _proto.decode_sample_response(resp.body)
    return _wire.structure(resp.json(), types.SampleResponse)


class SamplingRequests:
    """The sampling operations of one requestor (``requestor.sampling``)."""

    def __init__(self, api: Sender) -> None:
        self._api = api
        policy = api.policy
        # The sample submit loop, built once for every sample of the connection.
        self._submits = retry_loop(
            wait=ServiceWait(
                policy,
                fallback=lambda state: (
                    0.0 if isinstance(attempt_error(state), _HeldBack) else policy.throttle_default
                ),
                wall_clock=api.wall_clock,
                at_most=lambda state: call_of(state).life.remaining(),
                window=api.sample_gate,  # docs/protocol.rst §6.4: one window for every sampler
            ),
            stop=lambda state: api.closing.is_set() or call_of(state).closing.is_set(),
            retry_on=lambda error: isinstance(error, (RetryableStatus, _HeldBack)),
            sleep=api.sleep,
        )

    def create_sampling_session(
        self, request: types.CreateSamplingSessionRequest, *, sdk_method: str
    ) -> types.CreateSamplingSessionResponse:
        """Create a sampling session (HTTP retries only, docs/protocol.rst §6.5)."""
        resp = self._api.call(
            CREATE_SAMPLING_SESSION.verb,
            CREATE_SAMPLING_SESSION.path,
            body_obj=request,
            sdk_method=sdk_method,
            pool=PoolKind.SESSION,
            operation_retries=False,
        )
        return parse_model(resp, types.CreateSamplingSessionResponse)

    @property
    def result_accept(self) -> str:
        """The content type asked for polled forward/sample results (docs/protocol.rst §3.5)."""
        return PROTOBUF if self._api.session_holder().wire_format == "protobuf" else JSON

    def join_sampling_session(self, sampling_session_id: str, *, sdk_method: str) -> int:
        """Join a sampling session as a copy; its ``client_counter`` (docs/protocol.rst §7.3)."""
        resp = self._api.call(
            JOIN_SAMPLING_SESSION.verb,
            JOIN_SAMPLING_SESSION.path,
            body_obj=types.JoinSamplingSessionRequest(sampling_session_id=sampling_session_id),
            sdk_method=sdk_method,
            pool=PoolKind.SESSION,
        )
        return parse_model(resp, types.JoinSamplingSessionResponse).client_counter

    def submit_sample(
        self, request: types.SampleRequest, *, sdk_method: str, closing: threading.Event
    ) -> str:
        """Send one ``asample`` until the service accepts it, waiting out 429s in the shared window;
        return its request id (docs/protocol.rst §6.4)."""
        call = _SampleCall(closing, self._api.stall_watch(), _wire.dumps(request), sdk_method)
        try:
            return self._submits(self._submit_sample_once, call)
        except (RetryableStatus, _HeldBack):  # stopped: the client is closing
            pass
        raise ClientClosedError("The ServiceClient was closed during a 429 back-off.")

    def _submit_sample_once(self, call: _SampleCall) -> str:
        """One turn of the sample loop: wait out an open window (or give up), else send."""
        if call.closing.is_set():
            raise ClientClosedError("The ServiceClient was closed during a 429 back-off.")
        life = call.life
        window = self._api.sample_gate.backoff_remaining()
        if window > 0:
            if window <= life.remaining():
                raise _HeldBack
            if call.throttled is not None:
                # docs/protocol.rst §6.6: the back-off would outlast the stall timeout.
                raise_for_status(
                    call.throttled,
                    what=f"POST {ASAMPLE_PATH} (held back by HTTP 429 for "
                    f"{life.silent_for():.0f} s; stall timeout {life.stall_timeout:g} s)",
                )
        resp = self._api.call(
            "POST",
            ASAMPLE_PATH,
            body=call.body,
            sdk_method=call.sdk_method,
            pool=PoolKind.SAMPLE,
            # docs/protocol.rst §6.4: 429 backpressure rather than queueing at the service.
            headers={"X-Tinker-Sampling-Backpressure": "1"},
            accept_status=(429,),
            deadline=life,
        )
        if resp.status == 429:
            call.throttled = resp
            logger.debug("asample answered 429; backing off")
            raise RetryableStatus(resp)
        self._api.sample_gate.note_accepted()
        return parse_model(resp, types.UntypedAPIFuture, what="asample").request_id


@attrs.define
class _SampleCall:
    """One sample's submit loop: its life (docs/protocol.rst §6.6), bytes and last 429."""

    closing: threading.Event
    life: StallWatch
    body: bytes
    sdk_method: str
    throttled: HttpResponse | None = None


class _HeldBack(Exception):
    """A sample not sent: the shared 429 window is open (its loop waits it out, then sends)."""
