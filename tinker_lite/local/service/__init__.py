"""What the local server does: sessions, training runs, sampling, futures, REST views, ledger."""
