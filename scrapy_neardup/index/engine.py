"""The small protocol a storage engine implements; ``ledger.Ledger`` keeps every record above it.

An engine stores four kinds of things, all inside ``transaction()``:

- documents: numbered records of a kind (``doc``, ``run``, ``skip``), each a dict of fields;
- sets: sets of document ids under keys (postings: lookup keys, a revisit key's records);
- maps: named maps of fields to strings or ints (settings, scope names, rule statuses), with
  counters (``incr``);
- listings: a kind's ids in order;
- orders: documents ranked by a number under a name (when each was last seen), read lowest first.

It knows nothing of pages, verdicts or rules: what a record means, when a page is findable,
how a run is confirmed and when a rule is adopted are the ledger's, written once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .base import Conflict

# Tries of a transaction of the ledger's own (a run begun, a rule's evidence) while other
# processes keep changing what it read (an optimistic engine: Redis).
TRIES = 50


def retried(work: Callable[[], Any]) -> Any:
    """``work`` (one transaction) again while another process changes what it read; crawlers
    sharing an index begin runs and add evidence at once."""
    for _ in range(TRIES - 1):
        try:
            return work()
        except Conflict:
            continue
    return work()


class Engine(Protocol):
    """Storage only. Values are None, ints, floats, strings and bytes."""

    path: Any  # what messages name: a file, a server and key prefix
    name: str  # what a report calls it

    def transaction(self) -> AbstractContextManager[None]:
        """All the writes inside it or none; ``base.Conflict`` at its end when another process
        changed what it read (the ledger's caller judges the page again)."""
        ...

    def new_id(self, kind: str) -> int:
        """A number no document of ``kind`` had (ids grow; a rolled-back one may be skipped)."""
        ...

    def put(self, kind: str, doc: int, fields: dict[str, Any]) -> None:
        """Set these fields of a document (made when missing); a None value removes the field."""
        ...

    def get(
        self, kind: str, docs: Sequence[int], fields: Sequence[str] | None = None
    ) -> list[dict[str, Any] | None]:
        """Each document's fields (those of ``fields`` only, where given: an engine may read
        fewer), None for one that does not exist."""
        ...

    def compare_and_set(self, kind: str, doc: int, field: str, expected: Any, value: Any) -> bool:
        """Set a field of an existing document to ``value`` only while it holds ``expected`` (None:
        the field is missing), atomically against every other process; whether it did."""
        ...

    def delete(self, kind: str, doc: int) -> None: ...

    def listing(self, kind: str) -> Iterator[int]:
        """The ids of ``kind``'s documents, in order (streamed: a report of a million pages)."""
        ...

    def add(self, name: str, key: Hashable, doc: int) -> None: ...

    def discard(self, name: str, key: Hashable, doc: int) -> None: ...

    def members(self, name: str, keys: Sequence[Hashable]) -> list[set[int]]:
        """The set under each key (empty where there is none)."""
        ...

    def map_get(self, name: str, fields: Sequence[str] | None = None) -> dict[str, Any]:
        """The map's fields (all of them when ``fields`` is None; missing ones left out)."""
        ...

    def map_set(self, name: str, values: dict[str, Any]) -> None:
        """Set these fields of the map; a None value removes the field."""
        ...

    def incr(self, name: str, field: str, by: int = 1) -> int:
        """Add to a map's counter (made at 0) and return its new value (read: inside a
        transaction, another process's change makes it fail)."""
        ...

    def bump(self, name: str, field: str, by: int = 1) -> None:
        """Add to a map's counter without reading it (counts that no decision reads)."""
        ...

    def rank(self, name: str, doc: int, score: float | None) -> None:
        """Place a document in the order ``name`` by ``score`` (None: take it out)."""
        ...

    def ranked(self, name: str, below: float | None = None, beyond: int | None = None) -> list[int]:
        """The documents of the order whose score is below ``below``, and those past its ``beyond``
        highest, lowest score first."""
        ...

    def clear(self, names: Sequence[str], kinds: Sequence[str]) -> None:
        """Remove these maps, sets and orders, and every document of these kinds."""
        ...

    def size(self) -> int:
        """The bytes it takes (0 where nothing tells)."""
        ...

    def close(self) -> None: ...


class Search(Protocol):
    """An engine's own candidate search (its ``search`` attribute, where it has one): the
    structures it keeps beside the ledger's lookup keys (SQLite's spot lists) and the query."""

    def ready(self) -> None:
        """Inside the transaction, before a judged page is recorded: its state made current."""
        ...

    def post(self, doc: int, fp: Any, scope: int) -> None:
        """An admitted page becomes findable (its lookup keys are posted by the ledger)."""
        ...

    def unpost(self, doc: int, fp: Any, scope: int) -> None:
        """A page is no longer admitted (a revisit changed it); a stale posting may stay."""
        ...

    def find(self, probe: Any, scope: int) -> Iterator[tuple[int, Any]]:
        """A superset of the scope's admitted pages a configured method calls a match of
        ``probe``, loaded: exact copies first, then the others, each in id order."""
        ...
