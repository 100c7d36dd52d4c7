"""The ``tinker-lite`` command."""
