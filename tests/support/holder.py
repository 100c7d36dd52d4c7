"""A connection (requestor + session holder) from one flat set of keywords, as the transport
tests write them."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

from tinker_lite._api import Requestor
from tinker_lite._context import connect
from tinker_lite._session.holder import SessionHolder
from tinker_lite._session.settings import resolve_settings

SETTING_NAMES = frozenset(inspect.signature(resolve_settings).parameters)


def _split(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    settings = {name: value for name, value in options.items() if name in SETTING_NAMES}
    own = {name: value for name, value in options.items() if name not in SETTING_NAMES}
    return settings, own


def connection_from(**options: Any) -> tuple[Requestor, SessionHolder]:
    """Resolve the connection options once, as a public client does, and hand the rest
    (injected clocks and sleeps, ``lazy``, ``create_session``) to the connection itself."""
    settings, own = _split(options)
    return connect(resolve_settings(**settings), **own)


def holder_from(**options: Any) -> SessionHolder:
    """The session holder of :func:`connection_from` (its requestor is ``holder._api``)."""
    return connection_from(**options)[1]


def requestor_of(holder: SessionHolder) -> Requestor:
    """The requestor :func:`connection_from` gave ``holder`` (the holder sees it as
    ``SessionCalls``)."""
    api = holder._api
    assert isinstance(api, Requestor)
    return api


def requestor_for(base_url: str, **options: Any) -> Requestor:
    """A requestor alone (no session: for the polls, telemetry and the transport's tests)."""
    settings, own = _split({"base_url": base_url, "telemetry": False, **options})
    settings.setdefault("api_key", "tml-secret-test-key-0123456789")
    return Requestor(resolve_settings(**settings), **own)


@contextlib.contextmanager
def requests_over(base_url: str, **options: Any) -> Iterator[Requestor]:
    """The requestor of a session-less connection (started on its first call), closed after."""
    api, holder = connection_from(
        base_url=base_url,
        api_key="tml-secret-test-key-0123456789",
        telemetry=False,
        lazy=True,
        create_session=False,
        **options,
    )
    try:
        yield api
    finally:
        holder.close(timeout=5)
