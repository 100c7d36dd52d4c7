"""Futures: ``APIFuture``, the poller of ``retrieve_future``, batch polling, pending requests.

Modules: ``future``, ``poller``, ``batch_poller``, ``pending``, ``client_future`` (the futures
the client-creation methods return).
"""
