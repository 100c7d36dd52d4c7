"""Checks of the code's shape: import graph, lazy numpy, send path, README and docs."""
