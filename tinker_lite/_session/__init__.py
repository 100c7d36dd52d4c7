"""The connection below the requestor: settings, credentials, start-up, heartbeat, sample gate.

Modules: ``settings``, ``credentials``, ``startup``, ``heartbeat``, ``sample_gate`` and the
session ``holder`` that ties them together.
"""
