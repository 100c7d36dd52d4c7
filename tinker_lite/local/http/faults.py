"""Fault injection for the local server: parse a fault spec and decide, per request, what to break.

The grammar is documented in :mod:`tinker_lite.local`. Rules are evaluated in spec order against
each request; every rule keeps its own counters (requests matched, faults fired) and its own
random generator, seeded by its ``seed`` and its text: the same spec gives every rule the same
sequence of draws (its fault plan: which of its matches fire), whatever the other rules are, so
a run with the same spec and the same request sequence injects the same faults. Every injected
fault is logged at INFO on ``tinker_lite.local.faults`` with its :attr:`FaultRule.kind`.
"""

from __future__ import annotations

import fnmatch
import logging
import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FaultDecision",
    "FaultInjector",
    "FaultRule",
    "FaultSpecError",
    "fault_plan",
    "parse_fault_spec",
]

log = logging.getLogger("tinker_lite.local.faults")

# Actions that answer (or break) the request themselves; the first firing one wins.
TERMINAL_ACTIONS = frozenset(
    {"status", "drop_before", "drop_after", "truncate", "try_again", "expire"}
)
ACTIONS = TERMINAL_ACTIONS | {"delay"}
QUEUE_STATES = frozenset({"active", "paused_capacity", "paused_rate_limit"})

_INT_KEYS = {"status", "count", "every", "after", "seed", "retry_after_ms", "burst"}
_FLOAT_KEYS = {"probability", "delay", "retry_after_date", "truncate_at"}
_STR_KEYS = {"path", "method", "action", "queue_state", "reason", "request_type", "request_id"}


class FaultSpecError(ValueError):
    """A fault spec could not be parsed; the message names the rule and the key."""


@dataclass
class FaultRule:
    """One parsed rule of a fault spec, with its live counters."""

    text: str
    path: str = "*"
    method: str | None = None
    action: str = "status"
    status: int | None = None
    count: int | None = None
    every: int = 1
    after: int = 0
    probability: float = 1.0
    seed: int = 0
    delay: float = 0.0
    retry_after: str | None = None
    retry_after_ms: int | None = None
    retry_after_date: float | None = None
    queue_state: str = "active"
    reason: str | None = None
    request_type: str | None = None
    request_id: str | None = None
    truncate_at: float = 0.5
    burst: int = 1
    matched: int = 0
    fired: int = 0
    burst_left: int = 0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def matches(
        self, method: str, path: str, request_type: str | None, request_id: str | None
    ) -> bool:
        """Tell whether this rule applies to a request (filters only; no counting)."""
        if self.method is not None and self.method != method.upper():
            return False
        if not fnmatch.fnmatchcase(path, self.path):
            return False
        if self.request_type is not None and self.request_type != request_type:
            return False
        return self.request_id is None or self.request_id == request_id

    @property
    def kind(self) -> str:
        """What this rule injects, in a few words without spaces (counts group faults by it).

        ``503``, ``429:retry-after-ms``, ``429:retry-after-s``, ``429:retry-after-date``,
        ``408:paused_capacity``, ``try_again:active``, ``try_again-408:paused_rate_limit``,
        ``expire``, ``drop_before``, ``drop_after``, ``truncate``, ``delay``.
        """
        if self.action == "status":
            if self.status == 408:
                return f"408:{self.queue_state}"
            if self.retry_after_ms is not None:
                return f"{self.status}:retry-after-ms"
            if self.retry_after_date is not None:
                return f"{self.status}:retry-after-date"
            if self.retry_after is not None:
                return f"{self.status}:retry-after-s"
            return str(self.status)
        if self.action == "try_again":
            prefix = "try_again-408" if self.status == 408 else "try_again"
            return f"{prefix}:{self.queue_state}"
        return self.action

    def describe(self) -> dict[str, Any]:
        """The rule as JSON for ``GET /_local/faults`` and the stats."""
        return {"rule": self.text, "kind": self.kind, "matched": self.matched, "fired": self.fired}


@dataclass
class FaultDecision:
    """What the server must do to one request; the default breaks nothing."""

    delay: float = 0.0
    rule: FaultRule | None = None

    @property
    def action(self) -> str | None:
        """The terminal action to apply, or None."""
        return None if self.rule is None else self.rule.action


def _parse_rule(text: str) -> FaultRule:
    rule = FaultRule(text=text)
    seen: set[str] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        value = value.strip()
        if not sep or not value:
            raise FaultSpecError(f"fault rule {text!r}: {key!r} needs a value (key=value)")
        if key in seen:
            raise FaultSpecError(f"fault rule {text!r}: {key!r} given twice")
        seen.add(key)
        try:
            if key == "retry_after":
                float(value)
                rule.retry_after = value
            elif key in _INT_KEYS:
                setattr(rule, key, int(value))
            elif key in _FLOAT_KEYS:
                setattr(rule, key, float(value))
            elif key in _STR_KEYS:
                setattr(rule, key, value)
            else:
                raise FaultSpecError(f"fault rule {text!r}: unknown key {key!r}")
        except ValueError as e:
            if isinstance(e, FaultSpecError):
                raise
            raise FaultSpecError(f"fault rule {text!r}: {key}={value!r} is not a number") from e
    if "action" not in seen:
        if rule.status is not None:
            rule.action = "status"
        elif rule.delay > 0:
            rule.action = "delay"
        else:
            raise FaultSpecError(f"fault rule {text!r}: give status=, action= or delay=")
    rule.action = rule.action.lower()
    if rule.action not in ACTIONS:
        raise FaultSpecError(
            f"fault rule {text!r}: unknown action {rule.action!r} (known: {sorted(ACTIONS)})"
        )
    if rule.action == "status" and rule.status is None:
        raise FaultSpecError(f"fault rule {text!r}: action=status needs status=")
    if rule.status is not None and not 100 <= rule.status <= 599:
        raise FaultSpecError(f"fault rule {text!r}: status must be an HTTP status code")
    if rule.action == "try_again" and rule.status not in (None, 200, 408):
        raise FaultSpecError(f"fault rule {text!r}: action=try_again takes status 200 or 408")
    if rule.queue_state not in QUEUE_STATES:
        raise FaultSpecError(
            f"fault rule {text!r}: queue_state must be one of {sorted(QUEUE_STATES)}"
        )
    if rule.count is not None and rule.count < 0:
        raise FaultSpecError(f"fault rule {text!r}: count must be >= 0")
    if rule.every < 1:
        raise FaultSpecError(f"fault rule {text!r}: every must be >= 1")
    if rule.after < 0:
        raise FaultSpecError(f"fault rule {text!r}: after must be >= 0")
    if not 0.0 <= rule.probability <= 1.0:
        raise FaultSpecError(f"fault rule {text!r}: probability must be within [0, 1]")
    if rule.delay < 0:
        raise FaultSpecError(f"fault rule {text!r}: delay must be >= 0")
    if not 0.0 <= rule.truncate_at < 1.0:
        raise FaultSpecError(f"fault rule {text!r}: truncate_at must be within [0, 1)")
    if rule.burst < 1:
        raise FaultSpecError(f"fault rule {text!r}: burst must be >= 1")
    if rule.method is not None:
        rule.method = rule.method.upper()
    # Seeded by the seed and the rule's text: two rules with the same seed draw independently,
    # and the same rule always draws the same sequence (str seeds hash with SHA-512, not hash()).
    rule.rng = random.Random(f"{rule.seed}|{text.strip()}")
    return rule


def parse_fault_spec(spec: str | None) -> list[FaultRule]:
    """Parse a fault spec (rules separated by ``;``) into rules; raise FaultSpecError if bad."""
    if spec is None:
        return []
    rules: list[FaultRule] = []
    for text in spec.replace("\n", ";").split(";"):
        text = text.strip()
        if text and not text.startswith("#"):
            rules.append(_parse_rule(text))
    return rules


class FaultInjector:
    """Thread-safe holder of the active fault rules; decides the fault for each request."""

    def __init__(self, spec: str | None = None) -> None:
        self._lock = threading.Lock()
        self._rules = parse_fault_spec(spec)

    def set_spec(self, spec: str | None) -> list[FaultRule]:
        """Replace every rule (counters start again at zero); return the new rules."""
        rules = parse_fault_spec(spec)
        with self._lock:
            self._rules = rules
        return rules

    def describe(self) -> list[dict[str, Any]]:
        """Every rule with its counters."""
        with self._lock:
            return [rule.describe() for rule in self._rules]

    def decide(
        self,
        phase: str,
        method: str,
        path: str,
        headers: Mapping[str, str] | None = None,
        request_id: str | None = None,
    ) -> FaultDecision:
        """Evaluate the rules of one phase for a request.

        Phases: ``"connect"`` (before the body is read: only ``drop_before``), ``"request"``
        (after the body is read: status, drop_after, truncate, delay) and ``"poll"`` (inside
        ``retrieve_future`` once the request id is known: try_again, expire).
        """
        decision = FaultDecision()
        if not self._rules:
            return decision
        if path.startswith("/_local/") and not path.startswith("/_local/download/"):
            return decision  # the control plane (stats, faults) is never broken
        request_type = None
        if headers is not None:
            request_type = headers.get("X-Tinker-Request-Type")
        fired: list[tuple[FaultRule, int]] = []
        with self._lock:
            for rule in self._rules:
                if _phase_of(rule) != phase:
                    continue
                if not rule.matches(method, path, request_type, request_id):
                    continue
                if rule.action == "delay":
                    if _fires(rule):
                        decision.delay += rule.delay
                        fired.append((rule, rule.matched))
                    continue
                if decision.rule is not None:
                    continue
                if _fires(rule):
                    decision.rule = rule
                    decision.delay += rule.delay
                    fired.append((rule, rule.matched))
        for rule, match in fired:
            log.info(
                "injected fault %s on %s %s (rule %r, match %d)",
                rule.kind,
                method,
                path,
                rule.text,
                match,
            )
        return decision


def _fires(rule: FaultRule) -> bool:
    """Count a match of ``rule``; tell whether it fires (its counters and RNG advance)."""
    rule.matched += 1
    if rule.count is not None and rule.fired >= rule.count:
        return False
    if rule.burst_left > 0:  # inside a burst: this match fires too, without a draw
        rule.burst_left -= 1
        rule.fired += 1
        return True
    position = rule.matched - rule.after
    if position <= 0 or position % rule.every != 0:
        return False
    if rule.probability < 1.0 and rule.rng.random() >= rule.probability:
        return False
    rule.fired += 1
    rule.burst_left = rule.burst - 1
    return True


def fault_plan(spec: str, matches: int) -> list[tuple[str, list[int]]]:
    """The fault plan of ``spec``: for each rule, which of its first ``matches`` matches fire.

    A rule's plan depends only on its text (its seed included), so the same spec always has the
    same plan; a server evaluating it injects exactly these faults on those matches.
    """
    plan = []
    for rule in parse_fault_spec(spec):
        plan.append((rule.text, [m for m in range(1, matches + 1) if _fires(rule)]))
    return plan


def _phase_of(rule: FaultRule) -> str:
    if rule.action == "drop_before":
        return "connect"
    if rule.action in ("try_again", "expire"):
        return "poll"
    return "request"
