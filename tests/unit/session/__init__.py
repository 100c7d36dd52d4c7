"""Unit tests of ``tinker_lite._session``: settings, credentials, start-up, holder, telemetry."""
