"""Unit tests of ``tinker_lite._futures``: APIFuture, the pollers, chaining."""
