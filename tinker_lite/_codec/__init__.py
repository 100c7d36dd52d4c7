"""Converters between the ``types`` models and the wire, JSON and protobuf (docs/architecture.rst,
"The codec"); shared with ``tinker_lite.local``."""
