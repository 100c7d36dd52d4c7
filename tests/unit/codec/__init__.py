"""Unit tests of ``tinker_lite._codec``: wire JSON, protobuf, decoding, chunking."""
