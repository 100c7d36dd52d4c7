"""Credentials never leak, and TLS verification is on unless turned off out loud.

The leak test runs a full workload (training, sampling, REST, a checkpoint download, telemetry
on and pointed at the local server, induced errors) with a distinctive API key exchanged for
JWTs (``LocalServer(jwt=True)``) and Cloudflare Access credentials in the environment, then scans
everything the run emitted: every log record at DEBUG (tracebacks included), stdout/stderr, the
``repr()`` of every client, future, result and internal object reachable, ``str``/``repr`` and
attributes of every exception (with their causes), the telemetry bodies the server received,
the run journal, a pickled SamplingClient and the User-Agent of every connection pool.
"""

from __future__ import annotations

import http.server
import logging
import os
import pickle
import re
import shutil
import ssl
import subprocess
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from urllib3.exceptions import InsecureRequestWarning

from tests.support.clients import service_with
from tests.support.reliability import FastSleep, fast_options, setup_rest, sft_batch
from tinker_lite import (
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    InvalidInputError,
    NotFoundError,
    PromiseExpiredError,
    RequestFailedError,
    types,
)
from tinker_lite._transport.download import download
from tinker_lite._transport.http import user_agent
from tinker_lite.local import LocalServer
from tinker_lite.rest_client import RestClient
from tinker_lite.service_client import ServiceClient

API_KEY = "tml-SECRET-abc123"
WRONG_KEY = "tml-WRONG-key-999"
CF_ID = "cf-id-visible.access"
CF_SECRET = "cf-SECRET-xyz789"
BASE_MODEL = "tinker-lite/tiny-64"
JWT_SHAPE = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}")


def _exception_texts(error: BaseException) -> Iterator[str]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield str(current)
        yield repr(current)
        yield repr(current.args)
        yield repr(vars(current))
        yield "".join(traceback.format_exception(type(current), current, current.__traceback__))
        current = current.__cause__ or current.__context__


def _reprs(service: ServiceClient) -> list[str]:
    holder = service.holder
    internals: list[Any] = [
        service,
        holder,
        holder.settings,
        service._context.api,
        service._context.api.transport,
        holder.poller,
        holder.sample_gate,
        holder.telemetry,
        holder._credentials,
        holder.client_config,
    ]
    return [repr(obj) for obj in internals]


def test_no_credential_in_anything_a_full_run_emits(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("CLOUDFLARE_ACCESS_CLIENT_ID", CF_ID)
    monkeypatch.setenv("CLOUDFLARE_ACCESS_CLIENT_SECRET", CF_SECRET)
    caplog.set_level(logging.DEBUG)
    faults = (
        # retried errors, an expired training future, a failed heartbeat
        "path=/api/v1/forward_backward,status=503,count=2;"
        "path=/api/v1/retrieve_future,action=expire,request_type=OptimStep,count=1;"
        "path=/api/v1/retrieve_future,status=502,every=5,count=5;"
        "path=/api/v1/session_heartbeat,status=500"
    )
    server = LocalServer(api_key=API_KEY, jwt=True, faults=faults)
    url = server.start()
    texts: list[str] = []
    reprs: list[str] = []
    errors: list[BaseException] = []
    jwts: set[str] = set()

    def expect(error_type: type[BaseException], call: Any) -> None:
        with pytest.raises(error_type) as caught:
            call()
        errors.append(caught.value)

    try:
        service = service_with(
            fast_options(telemetry_flush_interval=0.05, heartbeat_interval=0.05),
            api_key=API_KEY,
            base_url=url,
            telemetry=True,
            journal=tmp_path / "run.jsonl",
        )
        try:
            holder = service.holder
            trainer = service.create_lora_training_client(BASE_MODEL, rank=8, seed=1).result()
            assert holder.uses_jwt
            fb = trainer.forward_backward(sft_batch(0), "cross_entropy")
            expired = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
            out = fb.result(timeout=30)
            expect(PromiseExpiredError, lambda: expired.result(timeout=30))
            stepped = trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result(timeout=30)
            saved = trainer.save_state("ckpt").result(timeout=30)
            # A bad checkpoint path (400 from the service) and a request failed by the service.
            expect(
                BadRequestError,
                lambda: _load_state_deprecated(trainer, "tinker://missing/weights/x"),
            )
            bad_token = types.Datum(
                model_input=types.ModelInput.from_ints([1, 2, 3]),
                loss_fn_inputs={"target_tokens": [2, 3, 400]},
            )
            expect(
                RequestFailedError,
                lambda: trainer.forward([bad_token], "cross_entropy").result(timeout=30),
            )
            sampler = trainer.save_weights_and_get_sampling_client().result()
            prompt = types.ModelInput.from_ints([5, 6, 7])
            samples = [
                sampler.sample(prompt, 2, types.SamplingParams(max_tokens=4, seed=i))
                for i in range(8)
            ]
            sample_results = [s.result(timeout=30) for s in samples]
            setup = setup_rest(service)
            rest = RestClient(service)
            runs = rest.list_training_runs().result(timeout=30)
            checkpoints = rest.list_checkpoints(setup.model_id).result(timeout=30)
            archive = rest.get_checkpoint_archive_url(setup.model_id, "sampler_weights/final")
            archive_url = archive.result(timeout=30)
            download(archive_url.url, tmp_path / "final.tar.gz", sleep=FastSleep())
            expect(InvalidInputError, lambda: ServiceClient(api_key=f"{API_KEY} ", base_url=url))
            expect(
                AuthenticationError,
                lambda: _first_use(ServiceClient(api_key=WRONG_KEY, base_url=url)),
            )
            telemetry = holder.telemetry
            assert telemetry is not None
            for error in errors:
                telemetry.log_exception(error)
            jwts.add(str(holder._credentials._jwt))
            reprs.extend(_reprs(service))
            reprs.extend(
                repr(obj)
                for obj in (
                    trainer,
                    sampler,
                    rest,
                    fb,
                    expired,
                    out,
                    stepped,
                    saved,
                    runs,
                    checkpoints,
                    archive,
                    archive_url,
                    *samples,
                    *sample_results,
                )
            )
            texts.append(pickle.dumps(sampler).decode("latin-1"))
            texts.append(str(service._context.api.transport.default_headers().get("User-Agent")))
        finally:
            service.close()
        reprs.extend(_reprs(service))
        bodies = list(server.state.telemetry_bodies)
        assert bodies, "the server received no telemetry"
        events = b"".join(bodies)
        assert b"UNHANDLED_EXCEPTION" in events or b"user_error" in events
        texts.extend(body.decode("utf-8") for body in bodies)
    finally:
        server.stop()

    texts.append(user_agent())
    texts.append((tmp_path / "run.jsonl").read_text(encoding="utf-8"))
    for error in errors:
        texts.extend(_exception_texts(error))
    for record in caplog.records:
        texts.append(record.getMessage())
        texts.append(repr(record.args))
    texts.append(caplog.text)
    captured = capsys.readouterr()
    texts.extend([captured.out, captured.err])
    texts.extend(reprs)

    assert len(errors) == 5
    assert len(caplog.records) > 100, "the run should have logged at DEBUG"
    assert jwts
    assert all(JWT_SHAPE.fullmatch(jwt) for jwt in jwts)
    secrets = {"API key": API_KEY, "wrong API key": WRONG_KEY, "CF secret": CF_SECRET}
    secrets.update({f"JWT {i}": jwt for i, jwt in enumerate(sorted(jwts))})
    everything = "\n".join(texts)
    for name, secret in secrets.items():
        assert secret not in everything, f"the {name} leaked"
    assert not JWT_SHAPE.search(everything), "a JWT leaked"


def test_tls_verification_is_on_by_default() -> None:
    with LocalServer() as url, ServiceClient(base_url=url, telemetry=False) as service:
        assert service.holder.settings.verify is True
        # Verified with certifi's trust store, or the CA bundle the environment names.
        bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
        transport = service._context.api.transport
        assert transport.verify == (bundle or True)
        # requests' sessions, which verify unless told not to.
        assert all(session.verify is True for session in transport.sessions.values())


def test_turning_tls_verification_off_warns(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    with LocalServer() as url, ServiceClient(base_url=url, telemetry=False, verify=False):
        pass
    assert any("TLS certificate verification is disabled" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("value", [0, "", "  ", None])
def test_tls_verification_cannot_be_turned_off_silently(value: object) -> None:
    with pytest.raises(InvalidInputError, match="verify"):
        ServiceClient(base_url="http://127.0.0.1:9", verify=value)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Against a real TLS endpoint with a self-signed certificate


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "23")
        self.end_headers()
        self.wfile.write(b'{"detail": "Not Found"}')

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on loopback with a fresh self-signed certificate: (url, cert path)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make a self-signed certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    httpd.daemon_threads = True
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", cert
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _first_use(service: ServiceClient) -> None:
    """Start ``service``'s connection (docs/protocol.rst §8.1: nothing is sent before), then close
    it."""
    with service:
        RestClient(service).get_server_capabilities().result(timeout=60)


def test_an_untrusted_certificate_is_refused(tls_server: tuple[str, Path]) -> None:
    url, _ = tls_server
    with (
        service_with(fast_options(), api_key=API_KEY, base_url=url) as service,
        pytest.raises(APIConnectionError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        service.create_lora_training_client(BASE_MODEL).result()


def test_a_ca_bundle_or_verify_false_reaches_the_endpoint(
    tls_server: tuple[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    url, cert = tls_server
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    # The handshake succeeds; the endpoint answers 404 to create_session.
    with (
        pytest.raises(NotFoundError),
        ServiceClient(api_key=API_KEY, base_url=url, verify=str(cert)) as service,
    ):
        service.create_lora_training_client(BASE_MODEL).result()
    assert not caplog.records
    # urllib3 warns about every unverified request too.
    with (
        pytest.warns(InsecureRequestWarning),
        pytest.raises(NotFoundError),
        ServiceClient(api_key=API_KEY, base_url=url, verify=False) as service,
    ):
        service.create_lora_training_client(BASE_MODEL).result()
    warnings = [
        r.getMessage() for r in caplog.records if "verification is disabled" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert url in warnings[0]


def _load_state_deprecated(trainer: Any, path: str) -> object:
    """``load_state``, which warns FutureWarning first (deprecated, as in the official SDK)."""
    with pytest.warns(FutureWarning, match="load_state"):
        return trainer.load_state(path).result(timeout=30)


# ---------------------------------------------------------------------------------------------
# Credentials found in the stored login or printed by TINKER_CREDENTIAL_CMD


def test_no_stored_or_command_credential_in_anything_emitted(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    import io
    import json
    import shlex
    import sys

    from tinker_lite.cli import main as cli_main

    stored_key, command_key = "tml-STORED-secret-4242", "tml-COMMAND-secret-5353"
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    caplog.set_level(logging.DEBUG)
    path = tmp_path / ".tinker" / "credentials.json"
    texts: list[str] = []
    errors: list[BaseException] = []

    def expect(error_type: type[BaseException], call: Any) -> None:
        with pytest.raises(error_type) as caught:
            call()
        errors.append(caught.value)

    def write(document: Any, mode: int = 0o644) -> None:
        path.parent.mkdir(exist_ok=True)
        path.write_text(document if isinstance(document, str) else json.dumps(document))
        path.chmod(mode)  # readable by others: warned about, never with the key

    def command(text: str, status: int = 0) -> str:
        script = f"import sys; print({text!r}); sys.stderr.write('failed\\n'); sys.exit({status})"
        return f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"

    record = {"type": "manual", "key": stored_key, "name": "laptop"}
    with LocalServer(api_key=stored_key, jwt=True) as url:
        # The key from the file: a session that trains, samples and lists, then the CLI.
        write({"version": 1, "default": "1", "keys": {"1": record}})
        with ServiceClient(base_url=url, telemetry=False) as service:
            trainer = service.create_lora_training_client(BASE_MODEL, rank=4).result()
            trainer.forward_backward(sft_batch(0), "cross_entropy").result(timeout=30)
            reprs = [repr(o) for o in (service, service.holder, service.holder.settings)]
            reprs.append(repr(service.holder._credentials))
            texts.extend(reprs)
        monkeypatch.setattr("sys.stdin", io.StringIO(stored_key + "\n"))
        for argv in (
            ["auth", "status"],
            ["auth", "whoami"],
            ["check", "--format", "json"],
            ["auth", "logout"],
            ["auth", "login"],
            ["auth", "status", "--format", "json"],
        ):
            cli_main([*argv, "--base-url", url])
        # Malformed files that hold the key in the wrong place.
        for document in (
            {"version": 1, "default": "1", "keys": {"1": stored_key}},
            {"version": 1, "keys": [stored_key]},
            {"version": stored_key},
            '{"version": 1, "keys": {"1": {"key": "' + stored_key + '"',
        ):
            write(document)
            expect(InvalidInputError, lambda: ServiceClient(base_url="https://x.example"))
            cli_main(["auth", "status", "--base-url", url])
        path.unlink()
        # The command's credential: used, then failing after printing it, then printing junk.
        monkeypatch.setenv("TINKER_CREDENTIAL_CMD", command(command_key))
        with ServiceClient(base_url=url, telemetry=False) as service:
            expect(AuthenticationError, lambda: _first_use_of(service))  # not the server's key
        monkeypatch.setenv("TINKER_CREDENTIAL_CMD", command(command_key, status=1))
        with ServiceClient(base_url=url, telemetry=False) as service:
            expect(InvalidInputError, lambda: _first_use_of(service))
        monkeypatch.setenv("TINKER_CREDENTIAL_CMD", command(f"{command_key} extra"))
        with ServiceClient(base_url=url, telemetry=False) as service:
            expect(InvalidInputError, lambda: _first_use_of(service))
        cli_main(["auth", "status", "--base-url", url])
    for error in errors:
        texts.extend(_exception_texts(error))
    for log in caplog.records:
        texts.append(log.getMessage())
        texts.append(repr(log.args))
    texts.append(caplog.text)
    captured = capsys.readouterr()
    texts.extend([captured.out, captured.err])
    everything = "\n".join(texts)
    assert "others may read it (mode 0644)" in everything  # the run did warn
    assert "Logged in as local@tinker-lite.invalid" in everything  # and did log in again
    assert len(errors) == 7
    assert stored_key not in everything, "the stored key leaked"
    assert command_key not in everything, "the command's credential leaked"


def _first_use_of(service: ServiceClient) -> None:
    RestClient(service).get_server_capabilities().result(timeout=60)
