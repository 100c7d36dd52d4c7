"""The tests of tinker_lite, by layer and kind (docs/architecture.rst, "The tests")."""
