"""The offline server ``tinker_lite.local``: its API, protocol, faults, restarts and model."""
