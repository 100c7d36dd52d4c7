"""Unit tests of ``tinker_lite.types``: constructors, conversions, checks of the wire models."""
