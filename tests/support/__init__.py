"""Helpers shared by the tests: scripted servers, fake clocks, golden loaders, paths."""
