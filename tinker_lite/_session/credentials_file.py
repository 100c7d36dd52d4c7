"""Reading the stored login, ``~/.tinker/credentials.json`` (``tinker-lite auth login`` writes it).

docs/configuration.rst, "Where the API key comes from", gives its format.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any, Literal

import attrs

from tinker_lite._codec import wire as _wire
from tinker_lite._errors import InvalidInputError, WireFormatError
from tinker_lite._logging import warn_once
from tinker_lite._repr import tolerant_repr
from tinker_lite._transport.http import register_secret

__all__ = [
    "CredentialsFile",
    "KeyDetails",
    "StoredKey",
]

logger = logging.getLogger("tinker_lite.session")

_FIX = "fix it, or remove it and run `tinker-lite auth login`"


@attrs.frozen(kw_only=True)
class OrgDetails:
    """The organization a key belongs to."""

    name: str


@attrs.frozen(kw_only=True)
class UserDetails:
    """The user a key belongs to."""

    email: str


@attrs.frozen(kw_only=True)
class KeyDetails:
    """Who a key belongs to, as the service described it when the key was stored."""

    org_details: OrgDetails
    user_details: UserDetails


@attrs.frozen(kw_only=True)
class StoredKey:
    """One stored API key; ``manual`` keys were pasted in, ``generated`` ones minted for the CLI."""

    type: Literal["manual", "generated"] = "manual"
    key: str = attrs.field(repr=False)
    name: str
    note: str | None = None
    details: KeyDetails | None = None


@attrs.frozen(kw_only=True)
class StoredCredentials:
    """The whole file: named keys and the id of the default one."""

    version: Literal[1] = 1
    default: str | None = None
    keys: dict[str, StoredKey] = attrs.field(factory=dict)


class CredentialsFile:
    """The credentials file at ``path``, read afresh each time (missing: no keys).

    A file that cannot be read or does not match raises InvalidInputError naming it.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        # By default ~/.tinker/credentials.json under the user's home ($HOME).
        self.path = Path(path) if path is not None else Path.home() / ".tinker" / "credentials.json"

    @tolerant_repr
    def __repr__(self) -> str:
        return f"CredentialsFile({str(self.path)!r})"

    def load(self) -> StoredCredentials:
        """The file's contents (empty when there is no file)."""
        raw = self.read()
        return StoredCredentials() if raw is None else self.checked(raw)

    def checked(self, raw: dict[str, Any]) -> StoredCredentials:
        """``raw`` as the file's model; InvalidInputError saying what does not match."""
        problem = None
        try:
            stored = _wire.structure(raw, StoredCredentials)
        except WireFormatError as e:
            # The converter quotes the offending value ("..., got 'tml-...'"): never show it.
            problem = str(e).split(", got ", 1)[0].replace("cannot read StoredCredentials", "")
        if problem is not None:
            # Raised outside the handler: the converter's error (which quotes the value) is
            # not even kept as the context.
            raise InvalidInputError(
                str(self.path), f"does not match the credentials format (version 1):{problem}", _FIX
            )
        for record in stored.keys.values():
            register_secret(record.key)
        return stored

    def default(self) -> tuple[str, StoredKey] | None:
        """The default key and its id, or ``None`` when no usable default is stored."""
        stored = self.load()
        record = stored.keys.get(stored.default or "")
        if stored.default is None or record is None or not record.key:
            return None
        return stored.default, record

    def why_no_default(self) -> str:
        """Why :meth:`default` finds no key, in words (for a missing-key message)."""
        if not self.path.exists():
            return f"{self.path} does not exist"
        stored = self.load()
        if stored.default is None:
            return f"{self.path} has no default key"
        if stored.default not in stored.keys:
            return f"the default of {self.path} names key {stored.default!r}, which is not there"
        return f"the default key of {self.path} ({stored.default!r}) is empty"

    def read(self) -> dict[str, Any] | None:
        """The parsed file, or ``None`` when it does not exist; warns when others may read it."""
        try:
            with open(self.path, "rb") as f:
                mode = os.fstat(f.fileno()).st_mode
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise InvalidInputError(
                str(self.path),
                f"cannot be read ({e.strerror or type(e).__name__})",
                f"check that it is a file you own, with mode 0600 (chmod 600 {self.path})",
            ) from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            bits = stat.S_IMODE(mode)
            message = "%s holds API keys but others may read it (mode %04o): run chmod 600 %s"
            warn_once(logger, (str(self.path), bits), message, self.path, bits, self.path)
        # The parser's errors hold the whole text (with its keys): they are neither shown nor
        # kept as the context of the error raised (outside the handlers).
        problem = None
        try:
            raw = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError:
            problem = "is not UTF-8 text"
        except json.JSONDecodeError as e:
            problem = f"is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})"
        if problem is not None:
            raise InvalidInputError(str(self.path), problem, _FIX)
        if not isinstance(raw, dict):
            raise InvalidInputError(
                str(self.path),
                "does not match the credentials format (version 1): expected a JSON object",
                _FIX,
            )
        return raw
