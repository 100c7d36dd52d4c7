"""Environment settings (proxies, CA bundle, netrc) resolved once per connection pool.

``requests`` re-reads the environment on every request of a ``Session`` whose ``trust_env`` is
true: ``HTTP(S)_PROXY``/``ALL_PROXY`` and ``NO_PROXY`` (scanning all of ``os.environ``, twice),
``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` and ``~/.netrc``. A transport sends every request to
one base URL, so the answer is the same each time: :func:`pin_environment` computes it once,
with requests' own functions, stores it on the session and turns ``trust_env`` off.
Environment changes made after a client is created are not seen by it, and a redirect to
another host keeps the pinned proxies (requests would re-read ``NO_PROXY`` and netrc for it).
:func:`send_pinned` then sends through such a session without re-merging its settings on every
request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import requests
import requests.utils
from requests.structures import CaseInsensitiveDict

__all__ = ["EnvironmentSettings", "environment_settings", "pin_environment", "send_pinned"]


@dataclass(frozen=True)
class EnvironmentSettings:
    """What requests would take from the environment for a request to one URL."""

    proxies: dict[str, str]
    verify: bool | str
    netrc_auth: tuple[str, str] | None


def environment_settings(
    url: str, verify: bool | str, *, trust_env: bool = True
) -> EnvironmentSettings:
    """Return the proxies, ``verify`` value and netrc credentials requests would use for ``url``.

    Mirrors ``Session.merge_environment_settings`` (request ``proxies=None``) and the netrc
    lookup of ``Session.prepare_request``; with ``trust_env`` false nothing is read.
    """
    if not trust_env:
        return EnvironmentSettings(proxies={}, verify=verify, netrc_auth=None)
    proxies = dict(requests.utils.get_environ_proxies(url, no_proxy=None))
    if verify is True:
        verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or verify
    auth = requests.utils.get_netrc_auth(url)
    return EnvironmentSettings(proxies=proxies, verify=verify, netrc_auth=auth)


def pin_environment(session: requests.Session, url: str, verify: bool | str) -> bool | str:
    """Resolve the environment settings for requests to ``url`` once and pin them on ``session``.

    Returns the ``verify`` value to pass with each request (the CA bundle from the environment
    when ``verify`` is true). As in requests, the environment's proxies override the session's
    and an explicit ``session.auth`` wins over netrc.
    """
    settings = environment_settings(url, verify, trust_env=session.trust_env)
    session.proxies.update(settings.proxies)
    if settings.netrc_auth is not None and session.auth is None:
        session.auth = settings.netrc_auth
    session.trust_env = False
    return settings.verify


def send_pinned(
    session: requests.Session,
    method: str,
    url: str,
    *,
    data: bytes | None,
    params: Mapping[str, str] | None,
    headers: Mapping[str, str],
    timeout: tuple[float, float],
    allow_redirects: bool,
    verify: bool | str,
) -> requests.Response:
    """Send what ``session.request(...)`` would send, for a session :func:`pin_environment` set up.

    The request gets the session's headers, params, auth, cookies and hooks and is sent with its
    proxies and cert, as ``Session.prepare_request`` and ``merge_environment_settings`` would
    merge them; skipping their generic merging (protocol ``isinstance`` checks, cookie-jar
    copies) saves about a sixth of a request's client CPU. A session that still trusts the
    environment, or has default params, goes through ``session.request``.
    """
    if session.trust_env or session.params:
        return session.request(
            method,
            url,
            data=data,
            params=dict(params) if params else None,
            headers=dict(headers),
            timeout=timeout,
            allow_redirects=allow_redirects,
            verify=verify,
        )
    merged: CaseInsensitiveDict[str | bytes] = CaseInsensitiveDict(session.headers)
    merged.update(headers)
    prepared = requests.PreparedRequest()
    prepared.prepare(
        method=method.upper(),
        url=url,
        headers={k: v for k, v in merged.items() if v is not None},
        data=data,
        params=dict(params) if params else None,
        auth=session.auth,
        # A copy, as prepare_request makes: redirects add to the request's jar, not the session's.
        cookies=session.cookies.copy() if len(session.cookies) else None,
        hooks=session.hooks,
    )
    return session.send(
        prepared,
        timeout=timeout,
        allow_redirects=allow_redirects,
        proxies=dict(session.proxies),
        stream=bool(session.stream),
        verify=verify,
        cert=session.cert,
    )
