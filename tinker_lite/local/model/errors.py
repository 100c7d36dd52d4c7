"""The model's one error: bad user input (reported as a failed future of category "user")."""

from __future__ import annotations

__all__ = ["UserInputError"]


class UserInputError(ValueError):
    """Bad user input; the server reports it as a failed future with category "user"."""
