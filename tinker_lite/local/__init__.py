"""An offline Tinker-compatible HTTP server on loopback, backed by a tiny numpy model.

It speaks the Tinker HTTP API (docs/protocol.rst §4, docs/service.rst) closely enough for
tinker_lite and the official SDK to train and sample against it: sessions, client config (and JWT
exchange with ``jwt=True``), models, forward / forward_backward (JSON and protobuf), optim_step
(AdamW, or Dimuon for runs created with ``{"type": "dimuon"}``), checkpoints on disk (save / load /
sampler weights, REST listing, TTL, publish, tar.gz archives), sampling,
``retrieve_future`` / ``retrieve_futures`` long-polls, telemetry and today's REST views (audit,
usage, session search, traces, copies). Every listed base model name maps to the tiny model;
other names are refused with the list, unless registered (``models=``, ``serve --model``,
``$TINKER_LITE_LOCAL_MODELS``). Of the string-valued ``loss_fn_config`` entries (0.38
``loss_fn_config_v2`` text), dro accepts ``reference: "sampler"`` and ignores it (its reference
policy always is the sampler's ``logprobs`` input); any other string key or value fails the
request as a user error naming it.

Start it in-process::

    from tinker_lite.local import LocalServer

    with LocalServer() as base_url:          # ephemeral port, temporary data dir
        ...                                  # point a client at base_url

or from a shell (prints the base URL on stdout; stops cleanly on SIGINT/SIGTERM)::

    python -m tinker_lite.local serve [--host 127.0.0.1] [--port 8000] [--data-dir DIR]
        [--api-key KEY] [--jwt] [--faults SPEC] [--stub-model] [--result-ttl S] [--long-poll S]
        [--max-body-mb MIB]

Options of :class:`LocalServer`: ``host``, ``port`` (0 = ephemeral), ``data_dir`` (kept, and with
it the server's state: a server started again on it carries on, see "Restarts" below; a temporary
one is removed on stop), ``api_key`` (then every ``/api/v1`` request but healthz needs
``X-API-Key``: 401 otherwise, decided on the headers before any body is read), ``faults`` (below),
``jwt`` (``POST /api/v1/auth/token`` issues HS256 tokens signed with a random per-server secret;
either the key or a valid token is then accepted), ``stub_model`` (instant model for benchmarks),
``result_ttl`` (seconds a completed result is kept; later polls get 410), ``long_poll_s`` (how long
``retrieve_future`` waits before answering try_again), ``pending_status`` (200 try_again or 408),
``config_overrides`` (flags merged into the ``client/config`` answer), ``sample_workers``,
``clock`` (epoch-seconds source for TTLs and result expiry), ``jwt_ttl_s``, ``archive_ttl_s``,
``max_body_bytes`` (64 MiB: a larger request body, as sent or once inflated, is refused with 413).

Fault spec grammar
------------------
A spec is a list of rules separated by ``;`` (or newlines); a rule is a list of ``key=value``
pairs separated by ``,``. Example::

    path=/api/v1/asample,status=429,retry_after=1.5,count=10;
    path=/api/v1/retrieve_future,action=drop_after,count=2

Filters: ``path`` (exact, or an ``fnmatch`` pattern such as ``/api/v1/*``; default ``*``),
``method``, ``request_type`` (the poll's ``X-Tinker-Request-Type``, e.g. ``Sample``) and
``request_id`` (polls of one future).

Actions (``action=``; ``status=N`` alone means ``action=status``, ``delay=S`` alone
``action=delay``):

* ``status`` — answer HTTP ``status`` before the request is processed, body
  ``{"detail": ...}`` (408 bodies carry ``queue_state``). Retry hints: ``retry_after=2`` (integer
  seconds) or ``retry_after=1.5`` (float seconds) set ``Retry-After``; ``retry_after_ms=1500`` sets
  ``retry-after-ms``; ``retry_after_date=2`` sets ``Retry-After`` to an IMF-fixdate 2 s ahead.
* ``drop_before`` — close the connection before reading the request body (nothing is applied).
* ``drop_after`` — process the request (it *is* applied), then close without answering.
* ``truncate`` — answer with the full ``Content-Length`` but only the first ``truncate_at``
  fraction of the body (default 0.5), then close.
* ``delay`` — add ``delay=S`` seconds of latency; ``delay=`` also works on any other action.
* ``try_again`` (``retrieve_future`` only) — answer "not ready" even when the result is ready:
  200 ``try_again``, or 408 with ``status=408``; ``queue_state=`` (active, paused_capacity,
  paused_rate_limit) and ``reason=`` fill the body.
* ``expire`` (``retrieve_future`` only) — answer 410 and forget the stored result.

Counting: every rule counts the requests it matched and the faults it fired. ``after=M`` skips
the first M matches, ``every=K`` fires on every K-th match after that, ``count=N`` fires at most N
times (default: unlimited), ``probability=P`` fires with probability P, ``burst=B`` makes a firing
also fire on the B-1 matches that follow (a burst of 5xx; each counts as fired). The first firing
rule with a terminal action wins; delays add up.

Random faults are reproducible: each rule draws from its own generator, seeded by ``seed=``
(default 0) together with the rule's text, so two rules never draw in step and the same spec
always gives every rule the same fault plan (which of its matches fire), whatever other rules
the spec holds. Every injected fault is logged at INFO on ``tinker_lite.local.faults``::

    injected fault 429:retry-after-ms on POST /api/v1/asample (rule '...', match 17)

The kinds (also in ``GET /_local/faults``): the status (``503``), ``429:retry-after-ms``,
``429:retry-after-s`` and ``429:retry-after-date`` by Retry-After form, ``408:<queue_state>``,
``try_again:<queue_state>``, ``try_again-408:<queue_state>``, ``expire``, ``drop_before``,
``drop_after``, ``truncate`` and ``delay``.

Rules come from ``faults=`` / ``--faults``, else the environment variable
``TINKER_LITE_LOCAL_FAULTS``; :meth:`LocalServer.set_faults` replaces them at run time. When a
spec was given (even empty) or ``set_faults`` was called, ``GET /_local/faults`` lists the rules
with their counters and ``POST /_local/faults {"spec": "..."}`` replaces them.

A restart as clients see it: :meth:`LocalServer.pause_listening` closes the listening socket and
every open connection (connecting is refused), :meth:`LocalServer.resume_listening` listens again
on the same port; models, futures and checkpoints are kept.

Restarts
--------
With a data dir given (``data_dir=``, ``--data-dir``), the server writes its state through to it
before answering, so a server stopped, or killed at any moment (``kill -9``), and started again
on the same directory (and port) carries on (:mod:`tinker_lite.local.storage.durable`). Kept:
sessions (heartbeats are accepted again), training models with their weights, optimizer state and
accumulated gradients, their ``seq_id`` ledger (a resend of an applied request gets its answer,
never a second application) and the results of applied requests (for ``result_ttl``),
checkpoints, download links, sampling sessions (an unsaved ``save_weights_for_sampler`` snapshot
too, and copies' ``client_counter``), the audit log, usage records and the JWT secret. Not kept:
training requests accepted but not run yet (their polls answer ``{"error": ..., "category":
"server"}`` saying they were lost in a restart; their ``seq_id`` is consumed, so the model's next
requests run), samples in flight and sample results (a poll gets 410 and the client re-submits),
heartbeat times, fault counters and the request counters of the stats. ``restored`` in the stats
counts what came back. Without a data dir nothing of this is written.

Stats
-----
``GET /_local/stats`` (and :meth:`LocalServer.stats`) answer::

    {"requests": {"/api/v1/asample": 12, ...},           # received, per path
     "clients": {"wave-3": {"requests": 40, "last_request_at": 1767225600.25}},  # see below
     "responses": {"/api/v1/asample": {"200": 10, "429": 2}, ...},  # per status; 0 = dropped
     "models": {"<model_id>": {
         "base_model": "...",
         "applied": [{"seq_id": 0, "kind": "create_model", "request_id": "...", "ok": true},
                     ...],                                # in execution order
         "applied_count": 3, "next_seq_id": 3, "waiting_seq_ids": [5], "unloaded": false}},
     "samples_submitted": 4, "samples_completed": 4,
     "telemetry_events": 1, "telemetry_batches": 1,
     "active_sessions": 1, "sessions": 1,
     "futures": {"stored": 9, "pending": 0, "completed": 9},
     "restored": {"sessions": 1, "models": 1, "samplers": 0, "lost_requests": 0},  # at start
     "faults": [{"rule": "path=...,status=429,count=10", "kind": "429", "matched": 3,
                 "fired": 3}]}

``clients`` counts the requests received per value of the ``X-Local-Client`` header, with the
time (epoch seconds) the last one arrived: give each client its own tag
(``ServiceClient(default_headers={"X-Local-Client": "wave-3"})``) to tell whether it still sent
anything after ``close()`` (at most 1,000 tags are counted).

A ``retrieve_future`` answer that carries a result also carries ``X-Local-Ready-At`` (epoch
seconds when the result became ready), ``X-Local-Ready-At-Perf`` and ``X-Local-Created-At-Perf``
(``time.perf_counter()`` of the server process, for in-process latency measurements).
In-process, ``LocalServer.state.telemetry_bodies`` holds the last 1,000 telemetry bodies as
received.
"""

from __future__ import annotations

from tinker_lite.local.server import LocalServer, serve

__all__ = ["LocalServer", "serve"]
