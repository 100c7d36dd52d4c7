"""Converters between the ``types`` models and the wire: JSON (cattrs) and protobuf.

Shared with ``tinker_lite.local``. Modules: ``wire`` (JSON), ``protowire`` (protobuf
primitives), ``proto`` (client protobuf codecs), ``decoding`` (answers to models).
"""
