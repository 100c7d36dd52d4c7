"""What the local server does: sessions, training runs, sampling, futures, catalog, ledger."""
