"""Forgetting: an index that keeps only the pages seen lately, written once over every engine.

A record is *seen* when its page is met (recorded, revisited) or a copy of it is (a duplicate
refreshes its original), so a page whose copies keep coming stays. A forgotten page leaves
every lookup and posting, its texts and counts; its duplicates go with it (they were judged
against it), and a page let through as a weak match of it keeps its record without the link.
A copy of a forgotten page met later is a new page: admitted, stored, and findable again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .engine import retried
from .ledger import BY_KEY, BY_SOURCE, DOC, DUPLICATES, META, SEEN, TEXT

if TYPE_CHECKING:
    from .ledger import Ledger

CHUNK = 200  # records forgotten in one transaction


def forget(ledger: Ledger, before: float | None = None, keep: int | None = None) -> int:
    """Forget the records last seen before ``before`` and those past the ``keep`` most recently
    seen; how many were forgotten (duplicates of a forgotten page included)."""
    if before is None and keep is None:
        return 0
    ids = ledger.engine.ranked(SEEN, below=before, beyond=keep)
    forgotten = 0
    for start in range(0, len(ids), CHUNK):
        part = ids[start : start + CHUNK]

        def work(part: list[int] = part) -> int:
            with ledger.transaction():
                return _forget_some(ledger, part, before if keep is None else None)

        forgotten += retried(work)
    return forgotten


def _forget_some(ledger: Ledger, ids: list[int], before: float | None) -> int:
    """Forget these records (inside a transaction); with ``before``, only those still last seen
    before it (another process may have met one since they were listed)."""
    engine = ledger.engine
    if ledger.search is not None:
        ledger.search.ready()
    gone: set[int] = set()
    for doc_id, doc in zip(ids, engine.get(DOC, ids), strict=True):
        if doc is None:
            engine.rank(SEEN, doc_id, None)
            continue
        last = doc.get("last_seen")
        if before is not None and isinstance(last, (int, float)) and last >= before:
            continue
        _forget_one(ledger, doc_id, doc, gone)
    if gone:
        engine.bump(META, "forgotten", len(gone))
    return len(gone)


def _forget_one(ledger: Ledger, doc_id: int, doc: dict[str, Any], gone: set[int]) -> None:
    """Forget a record and the duplicates judged against it."""
    engine, waiting = ledger.engine, [(doc_id, doc)]
    while waiting:
        doc_id, doc = waiting.pop()
        if doc_id in gone:
            continue
        gone.add(doc_id)
        ledger.unstore(doc_id, doc)
        scope, original = doc.get("scope"), doc.get("duplicate_of")
        if doc.get("url_key") is not None:
            engine.discard(BY_KEY, (scope, doc["url_key"]), doc_id)
        if doc.get("source"):
            engine.discard(BY_SOURCE, doc["source"], doc_id)
        if original is not None:
            engine.discard(DUPLICATES, original, doc_id)
        engine.delete(DOC, doc_id)
        engine.delete(TEXT, doc_id)
        engine.rank(SEEN, doc_id, None)
        copies = sorted(engine.members(DUPLICATES, [doc_id])[0] - gone)
        for copy_id, copy in zip(copies, engine.get(DOC, copies), strict=True):
            if copy is not None and copy.get("status") == "duplicate":
                waiting.append((copy_id, copy))
            elif copy is not None:  # let through beside it: its record stays, without the link
                engine.put(DOC, copy_id, {"duplicate_of": None, "similarity": None, "method": None})
                engine.discard(DUPLICATES, doc_id, copy_id)
