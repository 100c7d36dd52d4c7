"""The deadline watch of HTTP attempts: nested attempts, and a connection that gets its socket
only after the deadline has passed."""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace

from tinker_lite._transport.adapters import Deadlines


def test_a_nested_attempt_hands_the_thread_back_to_the_outer_one() -> None:
    deadlines = Deadlines()
    outer = deadlines.start(30.0)
    inner = deadlines.start(30.0)  # e.g. a JWT refreshed from inside a 401's response hook
    assert deadlines.current() is inner
    deadlines.end(inner)
    assert deadlines.current() is outer
    deadlines.end(outer)
    assert deadlines.current() is None


def test_an_attempt_past_its_deadline_shuts_its_connection_down() -> None:
    deadlines = Deadlines()
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.settimeout(5.0)
        attempt = deadlines.start(0.2)
        started = time.monotonic()
        attempt.attach(SimpleNamespace(sock=ours))
        assert theirs.recv(1) == b""  # the peer sees the connection end at the deadline
        elapsed = time.monotonic() - started
        deadlines.end(attempt)
    assert attempt.expired
    assert 0.15 <= elapsed < 2.0, elapsed


def test_a_connection_without_a_socket_yet_is_shut_down_once_it_has_one() -> None:
    deadlines = Deadlines()
    conn = SimpleNamespace(sock=None)
    attempt = deadlines.start(-1.0)  # past its deadline while still "connecting"
    attempt.attach(conn)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.settimeout(5.0)
        conn.sock = ours  # connected at last: the watch, looking again, shuts it down
        assert theirs.recv(1) == b""
        deadlines.end(attempt)
    assert attempt.expired


def test_an_ended_attempt_is_never_shut_down() -> None:
    deadlines = Deadlines()
    ours, theirs = socket.socketpair()
    with ours, theirs:
        attempt = deadlines.start(0.1)
        attempt.attach(SimpleNamespace(sock=ours))
        deadlines.end(attempt)
        later = deadlines.start(0.3)  # wakes the watch past the first deadline
        theirs.settimeout(5.0)
        other_ours, other_theirs = socket.socketpair()
        with other_ours, other_theirs:
            later.attach(SimpleNamespace(sock=other_ours))
            other_theirs.settimeout(5.0)
            assert other_theirs.recv(1) == b""  # the later one expired...
            deadlines.end(later)
            ours.sendall(b"x")
            assert theirs.recv(1) == b"x"  # ...the ended one's connection still works
    assert not attempt.expired
