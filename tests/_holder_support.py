"""A SessionHolder from one flat set of keywords, as the transport tests write them."""

from __future__ import annotations

import inspect
from typing import Any

from tinker_lite._session.holder import SessionHolder, resolve_settings

SETTING_NAMES = frozenset(inspect.signature(resolve_settings).parameters)


def holder_from(**options: Any) -> SessionHolder:
    """Resolve the connection options once, as a public client does, and hand the rest
    (injected clocks and sleeps, ``lazy``, ``create_session``) to the holder itself."""
    settings = {name: value for name, value in options.items() if name in SETTING_NAMES}
    own = {name: value for name, value in options.items() if name not in SETTING_NAMES}
    return SessionHolder(resolve_settings(**settings), **own)
