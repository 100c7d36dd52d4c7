"""Futures: ``APIFuture``, the pollers of ``retrieve_future(s)``, pending requests."""
