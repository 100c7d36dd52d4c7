"""Futures: ``APIFuture``, the poller of ``retrieve_future``, batch polling, pending requests.

Modules: ``future``, ``poller``, ``batch_poller``, ``pending``.
"""
