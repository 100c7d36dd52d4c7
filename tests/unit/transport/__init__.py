"""Unit tests of ``tinker_lite._transport``: HTTP on requests, retries, proxies, downloads."""
