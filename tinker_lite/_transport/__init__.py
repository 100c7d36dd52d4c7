"""HTTP: one attempt per request, the retry policy and its waits, downloads.

Modules: ``http``, ``retry``, ``download``.
"""
