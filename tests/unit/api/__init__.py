"""Unit tests of ``tinker_lite._api``: the requests the requestor builds for each call."""
