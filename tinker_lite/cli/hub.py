"""``tinker-lite checkpoint push-hf``: publish a LoRA checkpoint on the Hugging Face Hub.

The repository is a PEFT adapter: ``adapter_config.json`` (its ``base_model_name_or_path`` set to
the checkpoint's base model when missing), ``adapter_model.safetensors`` and a ``README.md``
model card naming the base model and the ``tinker://`` path it came from. It is private unless
``--public``. The Hub is reached through ``huggingface_hub`` (installed with ``tokenizers``),
which finds the Hub's address (``HF_ENDPOINT``) and token (``HF_TOKEN``, or ``hf auth login``)
as usual.

A sampler checkpoint is fetched as its archive, an external-weights checkpoint file by file,
and a training state (``weights/``) is first exported as external weights (a short training
session on its base model; the export is deleted afterwards), as the official CLI does. A
repository whose model card names another ``tinker://`` path is refused, so that two
checkpoints never end up mixed in one repository.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinker_lite.cli._context import Context, parse_path
from tinker_lite.cli._exit import (
    EXIT_AUTH,
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_SERVICE,
    EXIT_USAGE,
    PROG,
    CLIError,
)
from tinker_lite.cli._parser import leaf

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from tinker_lite import types

__all__ = ["cmd_checkpoint_push_hf", "model_card", "register", "repo_name"]

_ADAPTER_CONFIG = "adapter_config.json"
_ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
_EXPORT_TTL_S = 3600
"""Lifetime of the temporary external-weights export of a training state."""
_TINKER_PATH = re.compile(r"tinker://[^\s`'\"]+")


def repo_name(text: str) -> str:
    """``text`` as a Hub repository or branch name: other characters become ``-``."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", text)
    return re.sub(r"-{2,}", "-", name).strip("-_. ")


def model_card(
    tinker_path: str, repo_id: str, base_model: str, weights: types.WeightsInfoResponse | None
) -> str:
    """The README of the adapter repository: front matter for the Hub, then how to use it."""
    tags = ["tinker", "peft", "lora"]
    if base_model != "unknown":
        tags.append(f"base_model:adapter:{base_model}")
    lines = ["---", f"base_model: {base_model}", "library_name: peft", "tags:"]
    lines += [f"- {tag}" for tag in tags]
    lines += [
        f"tinker_path: {tinker_path}",
        "---",
        "",
        f"# {repo_id}",
        "",
        f"A LoRA adapter of `{base_model}`, trained with Tinker and exported from",
        f"`{tinker_path}`.",
        "",
        "```python",
        "from peft import PeftModel",
        "from transformers import AutoModelForCausalLM",
        "",
        f'base = AutoModelForCausalLM.from_pretrained("{base_model}")',
        f'model = PeftModel.from_pretrained(base, "{repo_id}")',
        "```",
        "",
        f"- Base model: {base_model}",
        f"- Tinker checkpoint: {tinker_path}",
    ]
    if weights is not None and weights.lora_rank is not None:
        lines.append(f"- LoRA rank: {weights.lora_rank}")
    if weights is not None:
        trained = [
            name
            for name, on in (
                ("attention", weights.train_attn),
                ("MLP", weights.train_mlp),
                ("unembedding", weights.train_unembed),
            )
            if on
        ]
        if trained:
            lines.append(f"- Trained: {', '.join(trained)}")
    return "\n".join(lines) + "\n"


def _download_external(ctx: Context, tinker_path: str, dest: Path) -> None:
    """Download every file of an external-weights checkpoint into ``dest``."""
    from tinker_lite._transport.download import download

    answer = ctx.wait(ctx.rest().get_external_weights_urls(tinker_path))
    root = dest.resolve()
    for name, url in sorted(answer.urls.items()):
        target = (dest / name).resolve()
        if not target.is_relative_to(root):
            raise CLIError(f"unsafe file name in the checkpoint: {name!r}", EXIT_SERVICE)
        target.parent.mkdir(parents=True, exist_ok=True)
        download(url, target, overwrite=True)


def _export_training_state(ctx: Context, tinker_path: str, dest: Path) -> None:
    """Export a training state as external weights (a training session on its base model),
    download them into ``dest``, and delete the export."""
    from tinker_lite._errors import TinkerError
    from tinker_lite.service_client import ServiceClient

    ctx.output.waiting(
        f"Exporting {tinker_path} as external weights (this starts a training session on "
        "the checkpoint's base model)..."
    )
    with ServiceClient(
        {"created_by": f"{PROG} checkpoint push-hf"},
        base_url=ctx.base_url,
        stall_timeout=ctx.timeout,
        startup_timeout=ctx.startup_timeout,
    ) as service:
        training = ctx.call(lambda: service.create_training_client_from_state(tinker_path).result())
        export = ctx.wait(training.save_weights_external("push-hf", ttl_seconds=_EXPORT_TTL_S))
        try:
            _download_external(ctx, export.path, dest)
        finally:
            try:
                ctx.wait(ctx.rest().delete_checkpoint_from_tinker_path(export.path))
            except TinkerError as e:
                ctx.output.note(
                    f"warning: could not delete the temporary export {export.path} ({e}); "
                    f"it expires in {_EXPORT_TTL_S} s"
                )


def _fetch_adapter(ctx: Context, parsed: types.ParsedCheckpointTinkerPath, dest: Path) -> None:
    """Download the checkpoint's adapter files into ``dest`` (an empty folder)."""
    if parsed.checkpoint_type == "external":
        _download_external(ctx, parsed.tinker_path, dest)
        return
    if parsed.checkpoint_type == "training":
        _export_training_state(ctx, parsed.tinker_path, dest)
        return
    # The archive is extracted as `checkpoint download` does: plain files only, none outside.
    rest = ctx.rest()
    ctx.call(lambda: rest.download_checkpoint(parsed.tinker_path, dest, extract=True))


def _base_model(ctx: Context, tinker_path: str) -> tuple[str, types.WeightsInfoResponse | None]:
    """The checkpoint's base model (``unknown`` when the service cannot say) and weights info."""
    from tinker_lite._errors import TinkerError

    try:
        weights = ctx.wait(ctx.rest().get_weights_info_by_tinker_path(tinker_path))
    except TinkerError as e:
        ctx.output.note(f"warning: no weights info for {tinker_path} ({e}); base model unknown")
        return "unknown", None
    return weights.base_model, weights


def _set_base_model(config_path: Path, base_model: str) -> None:
    """Fill ``base_model_name_or_path`` of adapter_config.json when it is missing."""
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CLIError(
            f"the checkpoint's {_ADAPTER_CONFIG} cannot be read: {e}", EXIT_SERVICE
        ) from None
    if isinstance(config, dict) and not isinstance(config.get("base_model_name_or_path"), str):
        config["base_model_name_or_path"] = base_model
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", "utf-8")


def _hub_error(what: str, error: Exception) -> CLIError:
    """A Hub failure as a one-line CLI error with the exit code its status calls for."""
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    code = {401: EXIT_AUTH, 403: EXIT_AUTH, 404: EXIT_NOT_FOUND, 409: EXIT_CONFLICT}.get(
        status or 0, EXIT_SERVICE
    )
    text = " ".join(str(error).split())
    return CLIError(f"{what}: {text}", code)


def _published_tinker_path(
    api: HfApi, repo_id: str, revision: str | None, cache: Path
) -> str | None:
    """The ``tinker://`` path the repository's model card names, if it has one."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        readme = api.hf_hub_download(repo_id, "README.md", revision=revision, cache_dir=cache)
    except (HfHubHTTPError, LocalEntryNotFoundError):
        return None
    match = _TINKER_PATH.search(Path(str(readme)).read_text(encoding="utf-8", errors="replace"))
    return match.group(0) if match else None


def cmd_checkpoint_push_hf(ctx: Context) -> int:
    """Upload a LoRA checkpoint to the Hugging Face Hub as a PEFT adapter repository."""
    args = ctx.args
    parsed = parse_path(args.path)
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError as e:
        raise CLIError(
            f"push-hf needs huggingface_hub ({e}): pip install huggingface_hub", EXIT_ERROR
        ) from None
    # HF_ENDPOINT is read now, not only when huggingface_hub was imported (as it does).
    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)
    try:
        user = str(api.whoami()["name"])
    except Exception as e:
        raise CLIError(
            f"not logged in to the Hugging Face Hub at {api.endpoint} ({type(e).__name__}): "
            "run `hf auth login` or set HF_TOKEN",
            EXIT_AUTH,
        ) from None
    revision: str | None = args.revision
    repo_id: str | None = args.repo
    with tempfile.TemporaryDirectory(prefix="tinker-lite-push-") as temporary:
        folder = Path(temporary) / "adapter"
        folder.mkdir()
        _fetch_adapter(ctx, parsed, folder)
        if not (folder / _ADAPTER_CONFIG).is_file() or not any(
            (folder / name).is_file() for name in _ADAPTER_WEIGHTS
        ):
            raise CLIError(
                f"{parsed.tinker_path} holds no PEFT adapter ({_ADAPTER_CONFIG} and "
                f"{_ADAPTER_WEIGHTS[0]}); only LoRA checkpoints can be pushed",
                EXIT_USAGE,
            )
        base_model, weights = _base_model(ctx, parsed.tinker_path)
        _set_base_model(folder / _ADAPTER_CONFIG, base_model)
        if repo_id is None:
            short = base_model.rsplit("/", 1)[-1] if base_model != "unknown" else "adapter"
            repo_id = repo_name(f"tinker-{short}-{parsed.training_run_id}")
            if revision is None:
                revision = repo_name(parsed.checkpoint_id.replace("/", "-"))
        if "/" not in repo_id:
            repo_id = f"{user}/{repo_id}"  # where the Hub creates it: the token's own namespace
        readme = folder / "README.md"
        if not args.no_model_card and not readme.exists():
            readme.write_text(model_card(parsed.tinker_path, repo_id, base_model, weights), "utf-8")
        ignore = list(args.ignore_patterns)
        if not args.allow_patterns and "checkpoint_complete" not in ignore:
            ignore.append("checkpoint_complete")
        try:
            api.create_repo(repo_id, private=not args.public, exist_ok=True)
            if revision is not None and not args.create_pr:
                api.create_branch(repo_id, branch=revision, exist_ok=True)
            published = _published_tinker_path(api, repo_id, revision, Path(temporary) / "hub")
            if published is not None and published != parsed.tinker_path:
                raise CLIError(
                    f"the repository {repo_id} holds another checkpoint ({published}); "
                    "choose another with --repo",
                    EXIT_CONFLICT,
                )
            api.upload_folder(
                repo_id=repo_id,
                folder_path=folder,
                path_in_repo="",
                revision=revision,
                commit_message=args.commit_message,
                create_pr=args.create_pr,
                allow_patterns=list(args.allow_patterns) or None,
                ignore_patterns=ignore or None,
            )
        except HfHubHTTPError as e:
            raise _hub_error(f"the Hub refused the upload to {repo_id}", e) from None
    doc: dict[str, Any] = {"checkpoint_path": parsed.tinker_path, "repo_id": repo_id}
    if revision is not None:
        doc["revision"] = revision
    doc["public"] = bool(args.public)
    if ctx.output.json:
        ctx.output.document(doc)
        return EXIT_OK
    ctx.output.record(
        [
            ("Checkpoint", parsed.tinker_path),
            ("Repository", f"{api.endpoint}/{repo_id}"),
            ("Revision", revision or "main"),
            ("Public", bool(args.public)),
        ]
    )
    return EXIT_OK


def register(group: Any, common: argparse.ArgumentParser) -> None:
    """Add ``push-hf`` to the ``checkpoint`` group."""
    sub = leaf(
        group,
        "push-hf",
        cmd_checkpoint_push_hf,
        "upload a LoRA checkpoint to the Hugging Face Hub as a PEFT adapter (private by default)",
        common=common,
        examples=[
            f"{PROG} checkpoint push-hf tinker://RUN_ID/sampler_weights/final --repo me/my-adapter",
            f"{PROG} checkpoint push-hf tinker://RUN_ID/weights/final --public",
        ],
    )
    sub.add_argument("path", metavar="TINKER_PATH")
    sub.add_argument(
        "-r",
        "--repo",
        metavar="REPO_ID",
        help="Hub repository (e.g. me/my-adapter; default: tinker-<base model>-<run id>)",
    )
    sub.add_argument("--public", action="store_true", help="make the repository public")
    sub.add_argument("--revision", metavar="BRANCH", help="upload to this branch")
    sub.add_argument("--commit-message", metavar="TEXT", help="the commit message")
    sub.add_argument(
        "--create-pr", action="store_true", help="open a pull request instead of pushing"
    )
    sub.add_argument(
        "--allow-pattern",
        dest="allow_patterns",
        action="append",
        default=[],
        metavar="GLOB",
        help="upload only files matching it (repeatable)",
    )
    sub.add_argument(
        "--ignore-pattern",
        dest="ignore_patterns",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip files matching it (repeatable)",
    )
    sub.add_argument(
        "--no-model-card", action="store_true", help="do not write a README.md model card"
    )
