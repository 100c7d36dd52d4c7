"""Replays against the official SDK's captured requests in ``../shared/wire``."""
