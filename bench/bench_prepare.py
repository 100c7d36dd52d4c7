"""Per-request cost of preparing a request with requests, and of ``Transport.send`` end to end.

tinker_lite alone. Prints the client CPU (``time.process_time``) per request, in µs, median of
repeated runs with the range, of each way to build the ``PreparedRequest`` that
``Transport.send`` hands to ``Session.send`` (the network excluded):

* ``prepare_request``: ``Session.prepare_request(Request(...))`` on every request, the
  session's headers being the connection's;
* ``hand (before)``: the preparation ``Transport.send`` made by hand before it used a template
  (a copy of that code, kept here for the comparison): ``PreparedRequest``'s steps one by one,
  with a URL cache, a cache of header pairs found fit and a cache of urllib3 timeouts;
* ``template + copy()``: a template made once per session with ``Session.prepare_request``,
  then per request ``template.copy()`` (its hooks dict of lists copied too), the method, the
  URL, the extra headers (checked), the body, the cookies and the auth handler; and the same
  with a URL cache, to price that cache;
* ``Transport.prepare``: the transport's own preparation, as ``send`` runs it.

Then the pieces that the old caches saved (URL preparation, header checks, the adapter's route
and path lookups), and ``Transport.send`` end to end against ``tinker-lite local serve`` in its
own process: client CPU and wall time per request, POST with the headers the requestor sends.
Results go to bench/results/prepare.json.

    python bench/bench_prepare.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import _common as c

if str(c.REPO_DIR) not in sys.path:
    sys.path.insert(0, str(c.REPO_DIR))

import requests
import requests.adapters
import urllib3
from requests.cookies import RequestsCookieJar, merge_cookies
from requests.models import PreparedRequest

from tinker_lite._transport.adapters import check_header
from tinker_lite._transport.http import DEFAULT_TIMEOUT, PoolKind, Timeout, Transport

PATH = "/api/v1/forward_backward"
HEALTHZ = "/api/v1/healthz"  # what the local server answers at once
BODY = b'{"model_id":"m","seq_id":1,"forward_backward_input":{"data":[],"loss_fn":"cross_entropy"}}'


def request_headers() -> dict[str, str]:
    """The per-request headers the requestor sends with a forward_backward attempt."""
    return {
        "Content-Type": "application/json",
        "x-sdk-version": "0.38.0",
        "x-sdk-method": "forward_backward",
        "X-Idempotency-Key": uuid.uuid4().hex,
        "x-stainless-retry-count": "0",
        "x-stainless-read-timeout": "60",
    }


def _as_is(r: PreparedRequest) -> PreparedRequest:
    return r


class Ways:
    """Each way of preparing one request, on one transport's session and settings."""

    def __init__(self, transport: Transport) -> None:
        self.t = transport
        self.session = transport.sessions[PoolKind.TRAIN]
        self.url = transport.url(PATH)
        headers: dict[str, Any] = dict.fromkeys(self.session.headers)
        headers.update(transport.default_headers())
        self.headers_session = requests.Session()
        self.headers_session.headers.clear()
        self.headers_session.headers.update(transport.default_headers())
        # The template: the same for every request of a session, made once by requests.
        self.template = self.session.prepare_request(
            requests.Request("GET", transport.base_url, headers=headers, auth=_as_is)
        )
        self.urls: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        self.checked: set[tuple[str, str]] = set()
        self.timeouts: dict[Timeout, urllib3.Timeout] = {}
        self.redirect_hook = lambda r, **kwargs: r

    def prepare_request(self, extra: dict[str, str]) -> PreparedRequest:
        request = requests.Request(
            "POST",
            self.url,
            headers=extra,
            data=BODY,
            auth=self.t._auth,
            hooks={"response": [self.redirect_hook]},
        )
        return self.headers_session.prepare_request(request)

    def hand(self, extra: dict[str, str]) -> PreparedRequest:
        """The preparation of ``Transport.send`` before the template (its three caches)."""
        key = (PATH, ())
        url = self.urls.get(key)
        if url is None:
            p = PreparedRequest()
            p.prepare_url(self.url, None)
            url = self.urls[key] = str(p.url)
        headers = requests.structures.CaseInsensitiveDict(self.t.default_headers())
        headers.update(extra)
        for name, value in extra.items():
            if (name, value) in self.checked:
                continue
            if check_header(name, value) is not None:
                raise ValueError(name)
            self.checked.add((name, value))
        prepared = PreparedRequest()
        prepared.prepare_method("POST")
        prepared.url = url
        prepared.headers = headers
        prepared.prepare_body(BODY, None)
        prepared.prepare_cookies(merge_cookies(RequestsCookieJar(), self.session.cookies))
        prepared.prepare_auth(self.t._auth)
        prepared.prepare_hooks(self.session.hooks)
        prepared.register_hook("response", self.redirect_hook)
        if DEFAULT_TIMEOUT not in self.timeouts:
            self.timeouts[DEFAULT_TIMEOUT] = urllib3.Timeout(connect=5.0, read=60.0)
        return prepared

    def template_copy(self, extra: dict[str, str], *, url_cache: bool = False) -> PreparedRequest:
        for name, value in extra.items():
            if check_header(name, value) is not None:
                raise ValueError(name)
        prepared = self.template.copy()
        prepared.hooks = {event: list(hooks) for event, hooks in self.template.hooks.items()}
        prepared.prepare_method("POST")
        if url_cache:
            url = self.urls.get((PATH, ()))
            if url is None:
                prepared.prepare_url(self.url, None)
                self.urls[(PATH, ())] = str(prepared.url)
            else:
                prepared.url = url
        else:
            prepared.prepare_url(self.url, None)
        prepared.headers.update(extra)
        prepared.prepare_body(BODY, None)
        prepared.prepare_cookies(merge_cookies(RequestsCookieJar(), self.session.cookies))
        prepared.prepare_auth(self.t._auth)
        prepared.register_hook("response", self.redirect_hook)
        return prepared

    def transport_prepare(self, extra: dict[str, str]) -> PreparedRequest | None:
        prepare = getattr(self.t, "prepare", None)
        if prepare is None:  # a transport from before the template
            return None
        prepared: PreparedRequest = prepare(PoolKind.TRAIN, "POST", PATH, body=BODY, headers=extra)
        return prepared


def per_request_us(fn: Callable[[dict[str, str]], Any], count: int, repeat: int) -> dict[str, Any]:
    """CPU µs per call of ``fn`` over ``count`` calls (fresh headers each), ``repeat`` times."""
    headers = [request_headers() for _ in range(count)]
    for extra in headers[: min(count, 200)]:
        fn(extra)
    samples = []
    for _ in range(repeat):
        started = time.process_time()
        for extra in headers:
            fn(extra)
        samples.append((time.process_time() - started) / count * 1e6)
    return c.summarize(samples)


def _us(value: float) -> str:
    return f"{value:.1f} µs"


def row(name: str, stat: dict[str, Any]) -> list[str]:
    if not stat.get("n"):
        return [name, "-"]
    return [name, f"{_us(stat['median'])} ({_us(stat['min'])}..{_us(stat['max'])})"]


def preparation(count: int, repeat: int) -> dict[str, dict[str, Any]]:
    transport = Transport("http://127.0.0.1:9/svc", headers={}, auth=lambda: "tml-bench-key")
    ways = Ways(transport)
    adapter = ways.session.get_adapter(ways.url)
    plain = requests.adapters.HTTPAdapter()
    prepared = ways.template_copy(request_headers())
    verify = transport.verify
    results: dict[str, dict[str, Any]] = {}
    cases: dict[str, Callable[[dict[str, str]], Any]] = {
        "prepare_request": ways.prepare_request,
        "hand (before)": ways.hand,
        "template + copy()": ways.template_copy,
        "template + copy(), URL cached": lambda h: ways.template_copy(h, url_cache=True),
        "piece: prepare_url": lambda h: PreparedRequest().prepare_url(ways.url, None),
        "piece: check 6 headers": lambda h: [check_header(n, v) for n, v in h.items()],
        "piece: copy()": lambda h: ways.template.copy(),
        "piece: adapter route (Transport's adapter)": lambda h: (
            adapter.get_connection_with_tls_context(prepared, verify, None, None)
        ),
        "piece: adapter route (HTTPAdapter's own)": lambda h: plain.get_connection_with_tls_context(
            prepared, verify, None, None
        ),
        "piece: adapter path (Transport's adapter)": lambda h: adapter.request_url(prepared, {}),
        "piece: adapter path (HTTPAdapter's own)": lambda h: plain.request_url(prepared, {}),
    }
    if ways.transport_prepare(request_headers()) is not None:
        cases["Transport.prepare"] = ways.transport_prepare
    try:
        for name, fn in cases.items():
            results[name] = per_request_us(fn, count, repeat)
    finally:
        plain.close()
        transport.close()
    return results


def end_to_end(count: int, repeat: int) -> dict[str, dict[str, Any]]:
    """Client CPU and wall µs per ``Transport.send`` (POST, the requestor's headers)."""
    cpu, wall = [], []
    with c.local_server(stub_model=True) as url:
        transport = Transport(url, headers={}, auth=lambda: "tml-bench-key")
        try:
            send = transport.send
            for _ in range(50):
                send(PoolKind.TRAIN, "POST", HEALTHZ, body=b"{}", headers=request_headers())
            for _ in range(repeat):
                headers = [request_headers() for _ in range(count)]
                started_cpu, started = time.process_time(), time.perf_counter()
                for extra in headers:
                    send(PoolKind.TRAIN, "POST", HEALTHZ, body=b"{}", headers=extra)
                cpu.append((time.process_time() - started_cpu) / count * 1e6)
                wall.append((time.perf_counter() - started) / count * 1e6)
        finally:
            transport.close()
    return {"client CPU": c.summarize(cpu), "wall": c.summarize(wall)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    count, repeat = (2000, 3) if args.quick else (20000, 7)
    sends = 300 if args.quick else 2000
    prepared = preparation(count, repeat)
    c.print_table(
        f"Preparing one request (client CPU per request, median of {repeat} x {count:,})",
        ["way", "µs per request"],
        [row(name, stat) for name, stat in prepared.items()],
    )
    sent = end_to_end(sends, repeat)
    c.print_table(
        f"Transport.send end to end, POST on loopback (median of {repeat} x {sends:,})",
        ["measure", "µs per request"],
        [row(name, stat) for name, stat in sent.items()],
    )
    c.write_results("prepare", {"preparation": prepared, "send": sent})


if __name__ == "__main__":
    main()
