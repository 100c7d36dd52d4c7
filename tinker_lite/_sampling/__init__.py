"""Sampling's send path: one sample from its call to its result (:mod:`.job`)."""
