"""Hostile checkpoint archives: links, escapes and oversized bodies, built here, byte by byte.

Each archive is refused with :class:`~tinker_lite.UnsafeArchiveError` naming the member before
anything is written, on every Python (with or without tarfile's ``data`` filter), through
:func:`extract_archive`, :meth:`RestClient.download_checkpoint`, ``tinker-lite checkpoint
download --extract`` and ``tinker-lite checkpoint push-hf`` against the real local server.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import tinker_lite as tinker
from tinker_lite import DownloadError, UnsafeArchiveError, types
from tinker_lite._transport import download as download_module
from tinker_lite._transport.download import download, extract_archive, part_path
from tinker_lite.cli import main
from tinker_lite.local import LocalServer
from tinker_lite.local.storage.checkpoints import CheckpointStore

BASE_MODEL = "tinker-lite/tiny-64"

Member = tuple[str, str, "bytes | str"]
"""(name, kind, content): kind ``file`` (bytes), ``dir``, ``sym``/``hard`` (link target),
``fifo`` or ``chr``."""


def tar_bytes(members: list[Member], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
        for name, kind, content in members:
            info = tarfile.TarInfo(name)
            data = None
            if kind == "file":
                assert isinstance(content, bytes)
                info.size = len(content)
                data = io.BytesIO(content)
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind in ("sym", "hard"):
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                assert isinstance(content, str)
                info.linkname = content
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            else:
                info.type = tarfile.CHRTYPE
            tar.addfile(info, data)
    return buf.getvalue()


def cve_2025_4517(escape_to: str) -> list[Member]:
    """The published pattern: a chain of symlinks through directories with long names, whose
    expansion passes PATH_MAX (``os.path.realpath`` then stops resolving and the check passes),
    a link out through it, and a file written through that link."""
    component = "d" * (55 if sys.platform == "darwin" else 247)
    steps = "abcdefghijklmnop"
    members: list[Member] = []
    path = ""
    for step in steps:
        members.append((os.path.join(path, component), "dir", b""))
        members.append((os.path.join(path, step), "sym", component))
        path = os.path.join(path, component)
    link = os.path.join("/".join(steps), "l" * 254)
    members.append((link, "sym", "../" * len(steps)))
    members.append(("escape", "sym", link + "/" + escape_to))
    members.append(("escape/flag", "file", b"written outside the target"))
    return members


def written_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink())


@pytest.fixture(params=[True, False], ids=["data-filter", "no-filter"])
def with_filter(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run on this Python as it is, and as a Python without tarfile's filters (3.10, 3.11.3)."""
    monkeypatch.setattr(download_module, "_has_data_filter", lambda: request.param)
    return bool(request.param)


# -- extract_archive ------------------------------------------------------------------------------


def test_cve_2025_4517_symlink_chain_is_refused(tmp_path: Path, with_filter: bool) -> None:
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    escaped = tmp_path / "escaped"
    escaped.mkdir()
    archive = work / "evil.tar.gz"
    archive.write_bytes(tar_bytes(cve_2025_4517("../" * 16 + str(escaped).lstrip("/"))))
    target = work / "out"
    with pytest.raises(UnsafeArchiveError, match=r"archive member 'a' is a symbolic link"):
        extract_archive(archive, target)
    assert not target.exists()  # refused before anything is written
    assert written_files(tmp_path) == [archive]


@pytest.mark.parametrize(
    ("members", "refused", "why"),
    [
        ([("ok", "file", b"1"), ("ok2", "hard", "ok")], "ok2", "hard link"),
        ([("weights", "file", b"1"), ("alias", "sym", "weights")], "alias", "symbolic link"),
        ([("up", "sym", "../../etc")], "up", "symbolic link"),
        ([("pipe", "fifo", b"")], "pipe", "not a file or directory"),
        ([("tty", "chr", b"")], "tty", "not a file or directory"),
        ([("a/../../out.txt", "file", b"x")], "a/../../out.txt", "leaves the target"),
        ([("/tmp/abs.txt", "file", b"x")], "/tmp/abs.txt", "absolute"),
    ],
    ids=["hardlink-inside", "symlink-inside", "symlink-out", "fifo", "device", "dotdot", "abs"],
)
def test_links_devices_and_escapes_are_refused_by_name(
    tmp_path: Path, with_filter: bool, members: list[Member], refused: str, why: str
) -> None:
    archive = tmp_path / "bad.tar.gz"
    archive.write_bytes(tar_bytes([("adapter_config.json", "file", b"{}"), *members]))
    with pytest.raises(UnsafeArchiveError) as caught:
        extract_archive(archive, tmp_path / "out")
    assert f"archive member {refused!r}" in str(caught.value)
    assert why in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_link_already_in_the_target_is_not_followed(tmp_path: Path, with_filter: bool) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "out"
    target.mkdir()
    (target / "sub").symlink_to(outside)
    (target / "file.bin").symlink_to(outside / "file.bin")
    for name in ("sub/x.bin", "file.bin"):
        archive = tmp_path / "a.tar.gz"
        archive.write_bytes(tar_bytes([(name, "file", b"payload")]))
        with pytest.raises(UnsafeArchiveError, match=repr(name)):
            extract_archive(archive, target)
    assert list(outside.iterdir()) == []


def test_plain_checkpoint_extracts(tmp_path: Path, with_filter: bool) -> None:
    archive = tmp_path / "a.tar"
    members: list[Member] = [
        ("./", "dir", b""),
        ("adapter_config.json", "file", b'{"r": 4}'),
        ("nested/", "dir", b""),
        ("nested/adapter_model.safetensors", "file", b"\0" * 1000),
    ]
    archive.write_bytes(tar_bytes(members, mode="w"))
    names = extract_archive(archive, tmp_path / "out")
    assert len(names) == 4
    assert (tmp_path / "out" / "adapter_config.json").read_bytes() == b'{"r": 4}'
    assert (tmp_path / "out" / "nested" / "adapter_model.safetensors").stat().st_size == 1000


def test_a_clash_of_file_and_folder_is_a_download_error(tmp_path: Path) -> None:
    archive = tmp_path / "clash.tar"
    archive.write_bytes(tar_bytes([("x/y", "file", b"1"), ("x", "file", b"2")], mode="w"))
    with pytest.raises(DownloadError, match=r"cannot extract archive member 'x' of"):
        extract_archive(archive, tmp_path / "out")


def test_extracted_size_is_bounded(tmp_path: Path) -> None:
    archive = tmp_path / "big.tar.gz"
    # 8 MiB of zeros compress to a few KiB: the bound reads the members' sizes, not the file's.
    archive.write_bytes(tar_bytes([("a", "file", b"1"), ("zeros", "file", bytes(8 << 20))]))
    assert archive.stat().st_size < 64 << 10
    with pytest.raises(UnsafeArchiveError, match=r"'zeros' takes the extracted size past"):
        extract_archive(archive, tmp_path / "out", max_bytes=1 << 20)
    assert not (tmp_path / "out").exists()


# -- the download's own bound ---------------------------------------------------------------------


class EndlessServer:
    """Answers every GET with a huge body, announced (``Content-Length``) or chunked; it sends
    at most ``SEND_LIMIT`` bytes in all, so a client without a bound fails the test quickly."""

    SEND_LIMIT = 64 << 20

    def __init__(self, announce: int | None) -> None:
        self.sent = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                if announce is not None:
                    self.send_header("Content-Length", str(announce))
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                block = b"x" * 65536
                chunk = b"%x\r\n%s\r\n" % (len(block), block)
                try:
                    while owner.sent < min(announce or 1 << 40, owner.SEND_LIMIT):
                        self.wfile.write(block if announce is not None else chunk)
                        owner.sent += len(block)
                    if announce is None:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)
        self.thread.start()
        host, port = self.httpd.server_address[:2]
        self.url = f"http://{host!s}:{port}/archive"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def endless() -> Iterator[Callable[[int | None], EndlessServer]]:
    servers: list[EndlessServer] = []

    def start(announce: int | None) -> EndlessServer:
        servers.append(EndlessServer(announce))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_an_announced_size_past_the_bound_is_refused_before_reading(
    tmp_path: Path, endless: Callable[[int | None], EndlessServer]
) -> None:
    server = endless(1 << 40)  # 1 TiB announced
    started = time.monotonic()
    with pytest.raises(DownloadError, match=r"1099511627776 bytes, more than max_bytes=1048576"):
        download(server.url, tmp_path / "a.tar.gz", max_bytes=1 << 20, max_attempts=1)
    assert time.monotonic() - started < 5
    assert server.sent < EndlessServer.SEND_LIMIT
    assert not (tmp_path / "a.tar.gz").exists()
    assert not part_path(tmp_path / "a.tar.gz").exists() or (
        part_path(tmp_path / "a.tar.gz").stat().st_size == 0
    )


def test_an_endless_body_is_cut_at_the_bound_streaming_to_disk(
    tmp_path: Path, endless: Callable[[int | None], EndlessServer]
) -> None:
    server = endless(None)  # chunked, no size announced, never ends
    tracemalloc.start()
    try:
        with pytest.raises(DownloadError, match=r"grows past max_bytes=8388608; stopped"):
            download(server.url, tmp_path / "a.tar.gz", max_bytes=8 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20  # streamed to disk, never held whole
    assert not (tmp_path / "a.tar.gz").exists()
    assert not part_path(tmp_path / "a.tar.gz").exists()


# -- end to end: the public API, the CLI and push-hf against the local server --------------------


@pytest.fixture
def hostile_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The local server, whose checkpoint archives are replaced by the CVE-2025-4517 archive:
    (its URL, a sampler checkpoint's path)."""
    original = CheckpointStore.make_archive
    (tmp_path / "escaped").mkdir()

    def make_archive(
        self: CheckpointStore, run_id: str, checkpoint_id: str, ttl_s: float
    ) -> tuple[str, float]:
        token, expires_at = original(self, run_id, checkpoint_id, ttl_s)
        escape = "../" * 16 + str(tmp_path / "escaped").lstrip("/")
        evil = tar_bytes(cve_2025_4517(escape))
        (self.root / "archives" / f"{token}.tar.gz").write_bytes(evil)
        return token, expires_at

    monkeypatch.setattr(CheckpointStore, "make_archive", make_archive)
    for name in ("TINKER_API_KEY", "TINKER_BASE_URL", "TINKER_LITE_JOURNAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    monkeypatch.setenv("TINKER_LITE_PROGRESS", "0")
    with LocalServer() as url, tinker.ServiceClient(base_url=url) as service:
        training = service.create_lora_training_client(BASE_MODEL, rank=4).result()
        datum = types.Datum(
            model_input=types.ModelInput.from_ints([5, 6, 7]),
            loss_fn_inputs={"target_tokens": [6, 7, 8], "weights": [1.0, 1.0, 1.0]},
        )
        training.forward_backward([datum], "cross_entropy").result()
        path = training.save_weights_for_sampler("final").result().path
        yield url, path


def test_download_checkpoint_refuses_the_escape(
    hostile_server: tuple[str, str], tmp_path: Path
) -> None:
    url, path = hostile_server
    with tinker.RestClient(base_url=url) as rest:
        with pytest.raises(UnsafeArchiveError, match=r"'a' is a symbolic link"):
            rest.download_checkpoint(path, tmp_path / "adapter", extract=True)
    assert list((tmp_path / "escaped").iterdir()) == []
    assert list(tmp_path.iterdir()) == [tmp_path / "escaped"]  # no folder, no archive left


def test_cli_download_extract_refuses_the_escape(
    hostile_server: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, path = hostile_server
    archive, folder = tmp_path / "a.tar.gz", tmp_path / "adapter"
    argv = ["checkpoint", "download", path, "-o", str(archive), "--extract", str(folder)]
    code = main([*argv, "--base-url", url])
    err = capsys.readouterr().err
    assert code != 0
    assert "archive member 'a' is a symbolic link" in err
    assert "Traceback" not in err
    assert list((tmp_path / "escaped").iterdir()) == []
    assert not folder.exists()


def test_push_hf_refuses_the_escape(
    hostile_server: tuple[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("huggingface_hub")
    from tests.support.hub_standin import hub_standin

    url, path = hostile_server
    with hub_standin("hf_standin_token_123") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", "hf_standin_token_123")
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        code = main(["checkpoint", "push-hf", path, "--repo", "tester/x", "--base-url", url])
        err = capsys.readouterr().err
        assert code != 0
        assert "archive member 'a' is a symbolic link" in err
        assert hub.repos == {}  # nothing was created, let alone uploaded
    assert list((tmp_path / "escaped").iterdir()) == []


def test_cli_download_json_is_unchanged_for_a_plain_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    with LocalServer() as url, tinker.ServiceClient(base_url=url) as service:
        training = service.create_lora_training_client(BASE_MODEL, rank=4).result()
        path = training.save_weights_for_sampler("plain").result().path
        code = main(["--format", "json", "checkpoint", "download", path, "-o", str(tmp_path),
                     "--extract", str(tmp_path / "x"), "--base-url", url])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["size_bytes"] == Path(doc["path"]).stat().st_size
    assert sorted(doc["files"]) == sorted(p.name for p in (tmp_path / "x").iterdir())
