"""Compatibility with the official SDK 0.38: surface, ``as_tinker``, async twins, opt-in runs."""
