"""Download a sampler checkpoint, extract it safely, and look at the adapter it holds.

Against the offline server: ``python docs/howto/download_checkpoint.py``; against the service:
``--base-url URL --path tinker://RUN/sampler_weights/NAME``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import tinker_lite as tinker
from tinker_lite.rest_client import DownloadProgress


def download_and_use(rest: tinker.RestClient, tinker_path: str, dest: Path) -> Path:
    """Download ``tinker_path`` into the folder ``dest``; print what it holds."""

    def progress(state: DownloadProgress) -> None:
        if state.done:  # called as bytes arrive, and once at the end
            print(f"archive: {state.bytes_done} bytes (compressed), {state.attempts} request(s)")

    folder = rest.download_checkpoint(tinker_path, dest, extract=True, progress=progress)
    extracted = sum(f.stat().st_size for f in folder.iterdir())
    print(f"extracted to {folder}: {extracted} bytes")
    for file in sorted(folder.iterdir()):
        print(f"  {file.name:28} {file.stat().st_size:>8} bytes")
    config = json.loads((folder / "adapter_config.json").read_text())
    print(f"LoRA rank {config['r']}, alpha {config['lora_alpha']}")
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="local://")
    parser.add_argument("--path", help="a tinker:// sampler checkpoint (default: save one)")
    parser.add_argument("--dest", type=Path, default=Path("downloaded-adapter"))
    args = parser.parse_args(argv)
    with tinker.ServiceClient(base_url=args.base_url) as service:
        path = args.path
        if path is None:  # the offline server has none yet: save one
            training = service.create_lora_training_client("tinker-lite/tiny-64", rank=8).result()
            path = training.save_weights_for_sampler("final").result().path
        rest = tinker.RestClient(service)
        (listed,) = [c for c in rest.list_all_checkpoints().checkpoints if c.tinker_path == path]
        print(f"{path}: {listed.size_bytes} bytes listed (the files, uncompressed)")
        download_and_use(rest, path, args.dest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
