"""What the ledger and the road share: a conflict with another process, a match, a page's earlier
records."""

from __future__ import annotations

from dataclasses import dataclass


class Conflict(Exception):
    """Another process changed what a transaction read: the Detector judges the page again.

    Backends with optimistic transactions (Redis) raise it when the transaction ends; SQLite
    locks instead and never does.
    """


# A match found for a new page: (document id, similarity, method).
Match = tuple[int, "float | None", "str | None"]


@dataclass(frozen=True)
class Earlier:
    """A page's own records under its revisit key: the one it is met again as, and all their ids."""

    id: int
    status: str
    exact: int | None
    ids: frozenset[int]
    admitted: tuple[int, ...]  # the admitted ones, newest first
    original: int | None = None  # the content it holds: what it copies, else itself
    ours: bool = False  # recorded by this crawl (this run or one beside it): met again, it is a copy
