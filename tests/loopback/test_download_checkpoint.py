"""``RestClient.download_checkpoint`` against the local server: the archive or the extracted
folder, resume from a ``.part`` file, progress, the size bound, and refusing to overwrite."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import tinker_lite as tinker
from tinker_lite import DownloadError
from tinker_lite._transport.download import part_path
from tinker_lite.local import LocalServer
from tinker_lite.rest_client import DownloadProgress


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[tinker.RestClient, str]]:
    """(a RestClient of a local server, one of its sampler checkpoints)."""
    with LocalServer() as url, tinker.ServiceClient(base_url=url, telemetry=False) as service:
        training = service.create_lora_training_client("tinker-lite/tiny-64", rank=4).result()
        path = training.save_weights_for_sampler("final").result().path
        with tinker.RestClient(service) as rest:
            yield rest, path


def test_archive_to_a_folder_with_progress(
    served: tuple[tinker.RestClient, str], tmp_path: Path
) -> None:
    rest, path = served
    seen: list[DownloadProgress] = []
    archive = rest.download_checkpoint(path, tmp_path, progress=seen.append)
    assert archive.parent == tmp_path
    assert archive.name.endswith("-sampler_weights-final.tar.gz")
    assert not part_path(archive).exists()
    size = archive.stat().st_size
    assert seen[-1].done
    assert (seen[-1].bytes_done, seen[-1].total_bytes) == (size, size)
    assert (seen[-1].attempts, seen[-1].url_refreshes, seen[-1].resumed_from) == (1, 0, 0)
    assert [s.bytes_done for s in seen] == sorted(s.bytes_done for s in seen)
    assert not any(s.done for s in seen[:-1])
    with tarfile.open(archive) as tar:
        assert "adapter_model.safetensors" in tar.getnames()
    with pytest.raises(FileExistsError, match="already exists"):
        rest.download_checkpoint(path, archive)
    assert rest.download_checkpoint(path, archive, overwrite=True) == archive


def test_extract_returns_the_folder_whose_size_is_the_listed_size(
    served: tuple[tinker.RestClient, str], tmp_path: Path
) -> None:
    rest, path = served
    folder = rest.download_checkpoint(path, tmp_path / "adapter", extract=True)
    assert folder == tmp_path / "adapter"
    names = sorted(f.name for f in folder.iterdir())
    assert "adapter_config.json" in names
    assert list(tmp_path.iterdir()) == [folder]  # the archive beside it is removed
    (listed,) = [c for c in rest.list_all_checkpoints().checkpoints if c.tinker_path == path]
    assert listed.size_bytes == sum(f.stat().st_size for f in folder.iterdir())
    with pytest.raises(FileExistsError, match="not empty"):
        rest.download_checkpoint(path, folder, extract=True)


def test_a_part_file_is_resumed(served: tuple[tinker.RestClient, str], tmp_path: Path) -> None:
    rest, path = served
    whole = rest.download_checkpoint(path, tmp_path / "whole.tar.gz").read_bytes()
    dest = tmp_path / "resumed.tar.gz"
    half = len(whole) // 2
    part_path(dest).write_bytes(whole[:half])  # what a killed download leaves
    seen: list[DownloadProgress] = []
    assert rest.download_checkpoint(path, dest, progress=seen.append) == dest
    assert dest.read_bytes() == whole
    assert seen[0].resumed_from == half
    assert seen[-1].bytes_done == len(whole)


def test_an_archive_past_max_bytes_is_refused(
    served: tuple[tinker.RestClient, str], tmp_path: Path
) -> None:
    rest, path = served
    with pytest.raises(DownloadError, match="more than max_bytes=1000"):
        rest.download_checkpoint(path, tmp_path / "a.tar.gz", max_bytes=1000)
    assert list(tmp_path.iterdir()) in ([], [part_path(tmp_path / "a.tar.gz")])
    assert not (tmp_path / "a.tar.gz").exists()
