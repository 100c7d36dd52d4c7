"""The local server's HTTP layer: the router, the REST routes, reading requests, answers, faults."""
