"""The storage protocol every backend implements (SQLite, in-memory, Redis)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ..config import DedupConfig
from ..methods import CollectionStats, Fingerprint
from ..verdict import Verdict


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


class Store(Protocol):
    """What the road (``detector``) reads and writes: one page's check and record. The decision
    is the road's; a store finds candidates and keeps what was decided.

    A check's reads and writes happen inside one ``transaction()``, which makes them atomic
    against every other process sharing the index. Fingerprints given to and returned by an
    index hold spots in the stored 32-bit form (``codecs.spots32``).
    """

    config: DedupConfig
    path: Any  # what messages name: a file, or a server and key prefix
    runs: Any  # ``runs.Runs``: this crawl's run and what it knows of the others

    def transaction(self) -> AbstractContextManager[None]: ...

    def batch(self) -> AbstractContextManager[Any]: ...

    def is_storage_error(self, exc: Exception) -> bool:
        """Whether ``exc`` is a failure of this backend (a full disk, a lost server), not of a page."""
        ...

    # Inside a transaction.
    def candidates(self, probe: Fingerprint, scope: str) -> Iterator[tuple[int, Fingerprint]]:
        """A superset of the admitted pages of ``scope`` that a configured method calls a match
        of ``probe``, in id order, with their stored signatures; a backend may yield the exact
        copies first (in id order too) while exact matches rank first, since the decision stops
        at the first match nothing outranks."""
        ...

    def record(
        self,
        url: str,
        fp: Fingerprint,
        scope: str,
        match: Match | None = None,
        source: str | None = None,
        key: str | None = None,
        replace: Earlier | None = None,
        admit: bool = False,
        request: bytes | None = None,
    ) -> Verdict: ...

    def earlier(self, key: str | None, scope: str, many: bool = False) -> Earlier | None: ...

    def source_record(self, source: str) -> tuple[int, str, str | None] | None: ...

    def signatures(self, ids: list[int] | tuple[int, ...], scope: str) -> list[tuple[int, Fingerprint]]: ...

    def restamp(self, doc_id: int, request: bytes | None = None) -> None: ...

    def seen(self, doc_id: int, at: float) -> None: ...

    def clock(self) -> float: ...

    def unconfirmed(self, ids: list[int]) -> set[int]: ...

    def from_earlier_crawls(self, ids: list[int]) -> set[int]:
        """Those of ``ids`` recorded by crawls that were over when this one began (ended, or
        interrupted), not by this crawl nor one running beside it."""
        ...

    @property
    def interrupted_runs(self) -> bool: ...

    def term_stats(self, terms: tuple[str, ...]) -> CollectionStats: ...

    def url_of(self, doc_id: int) -> str: ...

    # Byte-identical copies, before extraction (each its own transaction).
    def find_raw(self, raw: int, scope: str = "", key: str | None = None) -> int | None: ...

    def record_copy(
        self,
        url: str,
        raw: int,
        original: int,
        scope: str = "",
        source: str | None = None,
        key: str | None = None,
    ) -> Verdict | None: ...

    # Learned URL rules (``urls``): each rule's evidence and status, the requests it skipped.
    def url_rules(self) -> list[tuple[str, int, int, str]]:
        """Every rule: (its key's text, pairs of the same content, counter-examples, status)."""
        ...

    def add_url_evidence(
        self, changes: dict[str, tuple[int, int]], adopt_at: int
    ) -> dict[str, tuple[int, int, str, str]]:
        """Add (same, differ) to rules' evidence and apply ``url_rule.next_status`` at once, for every
        process sharing the index; each rule's totals, and its status before and after."""
        ...

    def set_url_rule(self, rule: str, status: str, at: float) -> None: ...

    def add_url_skip(self, rules: list[str], url: str, target: str, request: bytes) -> int:
        """Keep a skipped request (an empty ``request``: one tag mode fetched, that the rules
        would have skipped; never scheduled again, not counted as skipped); its id."""
        ...

    def add_url_skips(self, rows: list[tuple[list[str], str, str, bytes]]) -> list[int]:
        """Keep skipped requests (``add_url_skip``'s arguments each), in one transaction; their ids."""
        ...

    def url_skips(self, rules: list[str]) -> list[tuple[int, str, bytes]]:
        """The requests these rules skipped that were not scheduled again since: (id, its URL,
        the request)."""
        ...

    def claim_url_skips(self, ids: list[int]) -> list[int]:
        """Those of ``ids`` this call marks as scheduled again (no other crawler marked them)."""
        ...

    def forget_url_rules(self) -> None: ...

    # A scan's resume, a crawl's run.
    def contains_source(self, source: str) -> bool: ...

    def begin_run(self, action: str) -> None: ...

    def beat(self) -> list[int]:
        """Show the run alive; the dead runs whose pages wait to be fetched again, unclaimed."""
        ...

    def claim(self, dead: int) -> bool: ...

    def pending(self, run: int, most: int | None = None) -> list[tuple[int, bytes]]: ...

    def fetched_again(self, doc: int, dead: int) -> None: ...

    def end_run(self) -> None: ...

    def close(self) -> None: ...


class Reader(Protocol):
    """What a report reads: the records, their texts and duplicate edges, the totals."""

    config: DedupConfig
    path: Any

    def get(self, doc_id: int) -> dict[str, Any] | None: ...

    def documents(self) -> Iterator[dict[str, Any]]: ...

    def text(self, doc_id: int) -> str | None: ...

    def duplicate_edges(self) -> Iterator[tuple[int, int, float | None, str | None]]: ...

    def last_action(self) -> str | None: ...

    def stats(self) -> dict[str, int]: ...

    def url_rules(self) -> list[tuple[str, int, int, str]]: ...

    def url_skip_counts(self) -> dict[str, tuple[int, int]]:
        """For each URL rule, the requests it skipped and how many were scheduled again (tag
        mode's would-be skips left out)."""
        ...

    def url_skipped(self) -> list[tuple[str, str, bool | None, list[str]]]:
        """Every skipped request, in the order skipped: (its URL, the fetched page it was predicted
        to copy, whether it was scheduled again (None: not skipped, tag mode fetched it), the
        rules that predicted it)."""
        ...

    def close(self) -> None: ...


class Index(Store, Reader, Protocol):
    """A backend: the store the road uses and the reader reports use, over the same records."""
