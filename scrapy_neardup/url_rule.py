"""A learned URL rule: what it is about (its key, stored as plain data), its evidence, the bound
that adopts it and the status it moves through. The model that learns rules is ``urls``."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

# The share of the pages a rule may change, bounded at 95 % confidence, under which it is adopted:
# with no counter-example, 29 pairs of pages that differ by it and hold the same content.
MAX_ERROR, CONFIDENCE = 0.1, 0.95
# The share of its predicted copies a rule in force may change and still be missed, with
# CHECK_CONFIDENCE, once the crawl has checked it before closing (``checks_needed``).
MISSED_SHARE, CHECK_CONFIDENCE = 0.05, 0.99

PARAM, SEGMENT, HOST = "param", "segment", "host"


@dataclass(frozen=True)
class RuleKey:
    """What a rule is about: on ``host`` (under ``section`` for a parameter), the ``kind`` of
    difference and its ``name`` (the parameter, the segment, or the other host)."""

    host: str
    section: str
    kind: str
    name: str

    def words(self) -> str:
        """The rule in words, for logs and reports."""
        where = (self.host or "any host") + ("/" + self.section if self.section else "")
        return f"{self.kind} {self.name!r} on {where}"

    def text(self) -> str:
        """The key as stored: a JSON array in ASCII, so that any character of a URL (a tab, a
        newline, NUL, an undecodable byte kept as a surrogate) reads back exactly."""
        return json.dumps([self.host, self.section, self.kind, self.name])

    @classmethod
    def parse(cls, text: object) -> RuleKey:
        """The key ``text`` wrote; ``ValueError`` for anything else."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        try:
            parts = json.loads(text) if isinstance(text, str) else None
        except (ValueError, RecursionError):
            parts = None
        if not (isinstance(parts, list) and len(parts) == 4 and all(isinstance(p, str) for p in parts)):
            raise ValueError(f"not a URL rule's key: {str(text)[:80]!r}")
        if parts[2] not in (PARAM, SEGMENT, HOST):
            raise ValueError(f"not a kind of URL rule: {parts[2][:40]!r}")
        return cls(*parts)


STATUSES = ("learning", "adopted", "refused", "revoked")


def read_rule(row: tuple) -> tuple[RuleKey, int, int, str]:
    """A rule as an index stored it, (key text, same, differ, status), checked: ``ValueError``
    saying what is wrong with a row that was not written by the rules."""
    text, same, differ, status = row
    key = RuleKey.parse(text)
    if isinstance(status, bytes):
        status = status.decode("ascii", "replace")
    if status not in STATUSES:
        raise ValueError(f"not a rule's status: {str(status)[:40]!r}")
    counts = []
    for count in (same, differ):
        if isinstance(count, bytes | str) and count.strip().isdigit():
            count = int(count)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"not a count of pages: {str(count)[:40]!r}")
        counts.append(count)
    return key, counts[0], counts[1], status


def adopt_after(max_error: float = MAX_ERROR, confidence: float = CONFIDENCE) -> int:
    """The pages of the same content, with no counter-example, that bound a rule's error under
    ``max_error`` (29 for the defaults)."""
    return math.floor(math.log(1.0 - confidence) / math.log(1.0 - max_error)) + 1


def checks_needed(predicted: int, share: float = MISSED_SHARE, confidence: float = CHECK_CONFIDENCE) -> int:
    """How many of a rule's ``predicted`` copies, drawn at random, must be downloaded so that a
    rule that changes ``share`` of them (at least one) shows a counter-example with
    ``confidence``, wherever they are in the crawl: the exact hypergeometric bound, all of a
    few copies, 65 of 150, 90 of many. 0 with no share."""
    if predicted <= 0 or share <= 0:
        return 0
    changed = max(1, math.ceil(share * predicted))
    missed = 1.0
    for drawn in range(predicted):
        missed *= max(0, predicted - changed - drawn) / (predicted - drawn)
        if missed <= 1.0 - confidence:
            return drawn + 1
    return predicted


def next_status(status: str, same: int, differ: int, adopt_at: int) -> str:
    """A rule's status once its evidence is counted: a counter-example refuses a learning rule
    and revokes an adopted one; enough pages of the same content, and none other, adopt it.
    The index applies it in the transaction that adds the evidence, so that crawlers sharing
    an index never adopt a rule another one has just found a counter-example to."""
    if differ and status == "adopted":
        return "revoked"
    if differ and status == "learning":
        return "refused"
    if not differ and status == "learning" and same >= adopt_at:
        return "adopted"
    return status


@dataclass
class Rule:
    """A rule and its evidence: pairs of pages that differ by it with the same content (``same``)
    and with other content (``differ``: counter-examples)."""

    key: RuleKey
    same: int = 0
    differ: int = 0
    status: str = "learning"  # learning, adopted, refused (a counter-example first), revoked

    @property
    def bound(self) -> float:
        """The share of pages it changes, bounded above at CONFIDENCE (Clopper-Pearson with no
        counter-example: 1 - (1 - CONFIDENCE) ** (1 / same)); 1 without evidence."""
        return 1.0 - (1.0 - CONFIDENCE) ** (1.0 / self.same) if self.same else 1.0

    @property
    def adopted(self) -> bool:
        return self.status == "adopted"
