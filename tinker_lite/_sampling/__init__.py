"""Sampling's send path: one sample from its call to its result (:mod:`.job`)."""

from tinker_lite._sampling.job import SampleJob, SampleSender, deliver

__all__ = ["SampleJob", "SampleSender", "deliver"]
