"""Environment settings (proxies, CA bundle, netrc) and the urllib3 pool managers built from them.

The rules are the ones requests applies on every request of a session that trusts the
environment: ``http_proxy``/``https_proxy``/``all_proxy`` (lower case first, then upper case, as
:func:`urllib.request.getproxies` reads them) unless ``no_proxy``/``NO_PROXY`` names the host
(a domain suffix, ``host:port``, an IPv4 address or CIDR network, or ``*``);
``REQUESTS_CA_BUNDLE`` then ``CURL_CA_BUNDLE`` replace the default trust store (certifi's bundle)
when ``verify`` is true; ``$NETRC`` or ``~/.netrc`` / ``~/_netrc`` gives Basic credentials for
the host. A transport sends every request to one base URL, so :func:`environment_settings`
resolves them once per transport; changes to the environment made later are not seen.
:func:`pool_manager` then builds the urllib3 ``PoolManager`` or ``ProxyManager`` that route.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import socket
import ssl
import struct
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import urllib3
from urllib3.util import parse_url
from urllib3.util.ssl_ import create_urllib3_context

__all__ = [
    "EnvironmentSettings",
    "basic_auth",
    "environ_proxies",
    "environment_settings",
    "netrc_auth",
    "pool_manager",
    "select_proxy",
    "should_bypass_proxies",
    "tls_pool_kwargs",
]


@dataclass(frozen=True)
class EnvironmentSettings:
    """What the environment says about requests to one URL: proxies, ``verify``, netrc login."""

    proxies: dict[str, str]
    verify: bool | str
    netrc_auth: tuple[str, str] | None


def environment_settings(
    url: str, verify: bool | str, *, trust_env: bool = True
) -> EnvironmentSettings:
    """Return the proxies, ``verify`` value and netrc credentials for requests to ``url``.

    ``verify`` true becomes the CA bundle named by ``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE``
    when one is set; an explicit path or ``False`` is kept. With ``trust_env`` false nothing is
    read.
    """
    if not trust_env:
        return EnvironmentSettings(proxies={}, verify=verify, netrc_auth=None)
    if verify is True:
        verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or verify
    return EnvironmentSettings(
        proxies=environ_proxies(url), verify=verify, netrc_auth=netrc_auth(url)
    )


# ---------------------------------------------------------------------------------------------
# Proxies


def environ_proxies(url: str) -> dict[str, str]:
    """The environment's proxies by scheme (``{}`` when ``no_proxy`` exempts ``url``'s host)."""
    if should_bypass_proxies(url):
        return {}
    return dict(urllib.request.getproxies())


def _is_ipv4_address(text: str) -> bool:
    try:
        socket.inet_aton(text)
    except OSError:
        return False
    return True


def _is_valid_cidr(text: str) -> bool:
    """Whether ``text`` is ``a.b.c.d/n`` with 1 <= n <= 32."""
    if text.count("/") != 1:
        return False
    address, _, bits = text.partition("/")
    try:
        mask = int(bits)
    except ValueError:
        return False
    return 1 <= mask <= 32 and _is_ipv4_address(address)


def _address_in_network(ip: str, network: str) -> bool:
    address, _, bits = network.partition("/")
    mask = (0xFFFFFFFF << (32 - int(bits))) & 0xFFFFFFFF
    (host_value,) = struct.unpack(">L", socket.inet_aton(ip))
    (net_value,) = struct.unpack(">L", socket.inet_aton(address))
    return bool((host_value & mask) == (net_value & mask))


def should_bypass_proxies(url: str, no_proxy: str | None = None) -> bool:
    """Whether ``url`` is sent directly: its host matches ``no_proxy`` (default: the environment).

    Entries are comma-separated; an IPv4 host matches an equal address or a CIDR network, any
    other host matches an entry equal to it (with or without ``:port``) or a domain suffix of it
    (a leading ``.`` is optional). The platform's own bypass rules (``*``, macOS/Windows
    settings) apply last, through :func:`urllib.request.proxy_bypass`.
    """
    explicit = no_proxy
    if no_proxy is None:
        no_proxy = os.environ.get("no_proxy") or os.environ.get("NO_PROXY")
    parsed = urllib.parse.urlparse(url)
    hostname = parsed.hostname
    if hostname is None:
        return True
    if no_proxy:
        entries = [entry for entry in no_proxy.replace(" ", "").split(",") if entry]
        if _is_ipv4_address(hostname):
            for entry in entries:
                if _is_valid_cidr(entry):
                    if _address_in_network(hostname, entry):
                        return True
                elif hostname == entry:
                    return True
        else:
            host_with_port = hostname
            if parsed.port:
                host_with_port += f":{parsed.port}"
            for entry in entries:
                entry = entry.lstrip(".")
                if entry in (hostname, host_with_port):
                    return True
                suffix = "." + entry
                if hostname.endswith(suffix) or host_with_port.endswith(suffix):
                    return True
    return _platform_bypass(hostname, explicit)


def _platform_bypass(hostname: str, no_proxy: str | None) -> bool:
    """:func:`urllib.request.proxy_bypass`, with ``no_proxy`` (when given) in the environment."""
    saved = os.environ.get("no_proxy")
    if no_proxy is not None:
        os.environ["no_proxy"] = no_proxy
    try:
        return bool(urllib.request.proxy_bypass(hostname))
    except (TypeError, socket.gaierror):
        return False
    finally:
        if no_proxy is not None:
            if saved is None:
                del os.environ["no_proxy"]
            else:
                os.environ["no_proxy"] = saved


def select_proxy(url: str, proxies: Mapping[str, str]) -> str | None:
    """The proxy of ``proxies`` for ``url``: keyed ``scheme://host``, ``scheme``, ``all://host``
    or ``all``, the most specific first."""
    if not proxies:
        return None
    parts = urllib.parse.urlparse(url)
    if parts.hostname is None:
        return proxies.get(parts.scheme, proxies.get("all"))
    for key in (
        f"{parts.scheme}://{parts.hostname}",
        parts.scheme,
        f"all://{parts.hostname}",
        "all",
    ):
        if key in proxies:
            return proxies[key]
    return None


def _with_scheme(proxy: str) -> str:
    """``proxy`` with ``http://`` in front when it names no scheme (``proxy.test:3128``)."""
    parsed = parse_url(proxy)
    netloc = parsed.netloc or ""
    path = parsed.path
    if not netloc:
        netloc, path = path or "", netloc
    if parsed.auth:
        netloc = f"{parsed.auth}@{netloc}"
    return urllib.parse.urlunparse(
        (parsed.scheme or "http", netloc, path or "", "", parsed.query or "", parsed.fragment or "")
    )


# ---------------------------------------------------------------------------------------------
# Credentials


def basic_auth(username: str, password: str) -> str:
    """An ``Authorization``/``Proxy-Authorization`` value for Basic credentials (latin-1)."""
    pair = username.encode("latin-1") + b":" + password.encode("latin-1")
    return "Basic " + base64.b64encode(pair).decode("ascii")


_NETRC_FILES = ("~/.netrc", "~/_netrc")


def netrc_auth(url: str) -> tuple[str, str] | None:
    """The (login, password) that ``$NETRC`` (else ``~/.netrc`` / ``~/_netrc``) has for ``url``.

    A missing, unreadable or malformed file gives ``None``, as it does in requests.
    """
    configured = os.environ.get("NETRC")
    locations = (configured,) if configured is not None else _NETRC_FILES
    path = next(
        (p for p in (os.path.expanduser(loc) for loc in locations) if os.path.exists(p)), None
    )
    if path is None:
        return None
    host = urllib.parse.urlparse(url).hostname
    if host is None:
        return None
    import netrc

    try:
        entry = netrc.netrc(path).authenticators(host)
    except (netrc.NetrcParseError, OSError):
        return None
    if not entry or not any(entry):
        return None
    login = entry[0] if entry[0] else entry[1]
    return (login or "", entry[2] or "")


# ---------------------------------------------------------------------------------------------
# TLS and pool managers


def _default_ca_bundle() -> str:
    import certifi

    return str(certifi.where())


def tls_pool_kwargs(verify: bool | str) -> dict[str, Any]:
    """urllib3 pool arguments for ``verify``: a CA bundle (file or directory) or no checks.

    ``True`` means certifi's bundle. The bundle is loaded into one ``SSLContext`` here, not once
    per connection. Raises :class:`OSError` naming the path when the bundle does not exist.
    """
    if verify is False:
        return {"cert_reqs": "CERT_NONE"}
    location = _default_ca_bundle() if verify is True else verify
    if not location or not os.path.exists(location):
        raise OSError(
            f"Could not find a suitable TLS CA certificate bundle, invalid path: {location}"
        )
    context = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
    if os.path.isdir(location):
        context.load_verify_locations(capath=location)
    else:
        context.load_verify_locations(cafile=location)
    return {"cert_reqs": "CERT_REQUIRED", "ssl_context": context}


def pool_manager(
    proxy: str | None, *, num_pools: int, maxsize: int, **pool_kwargs: Any
) -> urllib3.PoolManager:
    """A ``PoolManager`` (``proxy`` None), ``ProxyManager`` or ``SOCKSProxyManager`` for a route.

    Credentials in the proxy URL become ``Proxy-Authorization`` (SOCKS: the handshake's login);
    a SOCKS proxy needs PySocks (``pip install pysocks``) and raises :class:`ImportError`
    without it.
    """
    if proxy is None:
        return urllib3.PoolManager(num_pools=num_pools, maxsize=maxsize, **pool_kwargs)
    proxy = _with_scheme(proxy)
    parsed = urllib.parse.urlparse(proxy)
    username = password = ""
    if parsed.username is not None and parsed.password is not None:
        username = urllib.parse.unquote(parsed.username)
        password = urllib.parse.unquote(parsed.password)
    if proxy.lower().startswith("socks"):
        # Checked first: urllib3 warns (DependencyWarning) before its own ImportError.
        if importlib.util.find_spec("socks") is None:
            raise ImportError("SOCKS proxies need PySocks (pip install pysocks)")
        from urllib3.contrib.socks import SOCKSProxyManager

        manager: urllib3.PoolManager = SOCKSProxyManager(
            proxy,
            username=username or None,
            password=password or None,
            num_pools=num_pools,
            maxsize=maxsize,
            **pool_kwargs,
        )
        return manager
    headers = {"Proxy-Authorization": basic_auth(username, password)} if username else None
    return urllib3.ProxyManager(
        proxy, proxy_headers=headers, num_pools=num_pools, maxsize=maxsize, **pool_kwargs
    )
