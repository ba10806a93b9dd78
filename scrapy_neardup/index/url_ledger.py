"""Learned URL rules in a ledger, over any engine: each rule's evidence and status, and the
requests it skipped (kept, so that a revoked rule's requests are fetched after all, by this
crawl or a resumed one). Written once; the engine's transaction makes a rule's counts and
status change together for every process sharing the index."""

from __future__ import annotations

import time
from typing import Any

from ..url_rule import next_status
from . import stores
from .engine import Engine, retried

SAME, DIFFER = stores.SAME.name, stores.DIFFER.name  # (``stores``)
STATUS, CHANGED = stores.STATUS.name, stores.CHANGED.name
SKIP, SKIP_RULE = stores.SKIP.name, stores.SKIP_RULE.name  # a skipped request's document; a rule's skips


class UrlLedger:
    """The learned URL rules of a ledger (``ledger.Ledger``) over its ``engine``."""

    engine: Engine

    def url_rules(self) -> list[tuple[str, Any, Any, Any]]:
        """Every rule as stored, (its key's text, same, differ, status); ``url_rule.read_rule`` checks it."""
        same, differ, status = (self.engine.map_get(name) for name in (SAME, DIFFER, STATUS))
        return [
            (rule, same.get(rule, 0), differ.get(rule, 0), status.get(rule, "learning"))
            for rule in dict.fromkeys([*same, *differ, *status])  # as stored: a forged one may be bytes
        ]

    def add_url_evidence(
        self, changes: dict[str, tuple[int, int]], adopt_at: int
    ) -> dict[str, tuple[int, int, str, str]]:
        """Add (same, differ) to rules' evidence and apply ``next_status`` in one transaction; each
        rule's totals, as every process made them, and its status before and after."""
        return retried(lambda: _add_evidence(self.engine, changes, adopt_at))

    def set_url_rule(self, rule: str, status: str, at: float | None = None) -> None:
        def work() -> None:
            with self.engine.transaction():
                self.engine.map_set(STATUS, {rule: status})
                self.engine.map_set(CHANGED, {rule: at if at is not None else time.time()})

        retried(work)

    def add_url_skip(self, rules: list[str], url: str, target: str, request: bytes) -> int:
        """Keep a skipped request with the rules that predicted it (an empty ``request``: one tag
        mode fetched, that the rules would have skipped); its id."""
        return self.add_url_skips([(rules, url, target, request)])[0]

    def add_url_skips(self, rows: list[tuple[list[str], str, str, bytes]]) -> list[int]:
        """Keep skipped requests (``add_url_skip``'s arguments each), in one transaction; their ids."""

        def work() -> list[int]:
            ids = []
            with self.engine.transaction():
                for rules, url, target, request in rows:
                    ids.append(skip := self.engine.new_id(SKIP))
                    fields = {"url": url, "target": target, "request": request, "revived": 0}
                    self.engine.put(SKIP, skip, fields)
                    for rule in rules:
                        self.engine.add(SKIP_RULE, rule, skip)
            return ids

        return retried(work)

    def url_skips(self, rules: list[str]) -> list[tuple[int, str, bytes]]:
        """The requests these rules skipped that were not scheduled again since: (id, its URL, the
        request)."""
        ids = sorted(set().union(*self.engine.members(SKIP_RULE, rules))) if rules else []
        return [
            (skip, str(found.get("url", "")), found["request"])
            for skip, found in zip(ids, self.engine.get(SKIP, ids), strict=True)
            if found and found.get("request") and not found.get("revived")
        ]

    def claim_url_skips(self, ids: list[int]) -> list[int]:
        """Mark skipped requests as scheduled again; those of ``ids`` no other crawler (nor an
        earlier call) marked first: each is scheduled again once, by one crawler."""

        def work() -> list[int]:
            with self.engine.transaction():
                return [skip for skip in ids if self.engine.compare_and_set(SKIP, skip, "revived", 0, 1)]

        return retried(work) if ids else []

    def url_skip_counts(self) -> dict[str, tuple[int, int]]:
        """For each rule, the requests it skipped and how many were scheduled again (tag mode's
        would-be skips left out)."""
        rules, counts = self._rules_of_skips(), {}
        for skip, found in _skipped(self.engine):
            if found.get("request"):
                for rule in rules.get(skip, ()):
                    count, revived = counts.get(rule, (0, 0))
                    counts[rule] = (count + 1, revived + bool(found.get("revived")))
        return counts

    def url_skipped(self) -> list[tuple[str, str, bool | None, list[str]]]:
        """Every skipped request in the order skipped: (its URL, the page it was predicted to copy,
        whether it was scheduled again (None: tag mode fetched it), the rules that predicted it)."""
        rules = self._rules_of_skips()
        return [
            (str(found.get("url", "")), str(found.get("target", "")), _revived(found), rules.get(skip, []))
            for skip, found in _skipped(self.engine)
        ]

    def forget_url_rules(self) -> None:
        """Forget every rule, and the requests they skipped (NEARDUP_URL_RULES_RESET)."""

        def work() -> None:
            with self.engine.transaction():
                self.engine.clear([SAME, DIFFER, STATUS, CHANGED, SKIP_RULE], [SKIP])

        retried(work)

    def _rules_of_skips(self) -> dict[int, list[str]]:
        """Each skipped request's rules (a rule that skipped any has evidence: it was adopted)."""
        rules = [str(row[0]) for row in self.url_rules()]
        found: dict[int, list[str]] = {}
        for rule, skips in zip(rules, self.engine.members(SKIP_RULE, rules), strict=True):
            for skip in skips:
                found.setdefault(skip, []).append(rule)
        return found


def _add_evidence(
    engine: Engine, changes: dict[str, tuple[int, int]], adopt_at: int
) -> dict[str, tuple[int, int, str, str]]:
    totals, now = {}, time.time()
    with engine.transaction():
        for rule, (same, differ) in changes.items():
            same = engine.incr(SAME, rule, same)
            differ = engine.incr(DIFFER, rule, differ)
            old = str(engine.map_get(STATUS, [rule]).get(rule, "learning"))
            new = next_status(old, same, differ, adopt_at)
            if new != old:
                engine.map_set(STATUS, {rule: new})
                engine.map_set(CHANGED, {rule: now})
            totals[rule] = (same, differ, old, new)
    return totals


def _skipped(engine: Engine) -> list[tuple[int, dict[str, Any]]]:
    ids = list(engine.listing(SKIP))
    return [(skip, found) for skip, found in zip(ids, engine.get(SKIP, ids), strict=True) if found]


def _revived(found: dict[str, Any]) -> bool | None:
    """Whether a skipped request was scheduled again; None: tag mode fetched it (nothing kept)."""
    return bool(found.get("revived")) if found.get("request") else None
