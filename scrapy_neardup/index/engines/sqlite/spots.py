"""SpotLists: the SpotSigs inverted lists of an SQLite index, and the frozen spot order.

Only admitted pages are posted, each under the keys of its prefix (``pruning``,
``spot_search.SpotKeys``); a probe reads the lists of its own prefix over the length
partitions it can match and keeps the documents met often enough (the count filter).
"""

from __future__ import annotations

import sqlite3

import numpy as np

from ....config import DedupConfig
from ....exceptions import IndexFileError
from ....signatures.spotsigs import SpotSet
from ...codecs import blob_spots, sound_spots_blob
from ...pruning import SpotClasses, Walk, walk
from ...spot_search import MAX_DOC, SpotKeys, shared

# Admitted documents after which spot frequency classes are frozen (a one-off re-posting of them).
FREEZE_AT = 5000


class SpotLists:
    """The ``spot_lists`` and ``spot_classes`` tables of one open index file."""

    def __init__(self, db: sqlite3.Connection, config: DedupConfig, keys: SpotKeys, path) -> None:
        self.db, self.config, self.keys, self.path = db, config, keys, path
        self.classes: SpotClasses | None = None
        self._synced = False
        self._walked: tuple[SpotSet, Walk] | None = None
        # Key ranges one spot query can bind (SQLite's variable limit, one kept for the count).
        self.max_ranges = max(1, (db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) - 1) // 2)

    def new_transaction(self) -> None:
        """Another process may have frozen the order since the last transaction."""
        self._synced = False
        self._walked = None

    def forget(self) -> None:
        """After a rollback: a freeze the rolled-back work made is gone."""
        self.classes = None
        self._walked = None

    def searched(self, spots: SpotSet) -> bool:
        """Whether a page of these spots is searched and posted (SpotSigs configured, and enough
        spots to ever be a match)."""
        return "spotsigs" in self.config.methods and spots.size >= self.config.spotsigs_least_spots

    def sync_order(self) -> None:
        """Inside a write transaction: load the frozen spot classes, or freeze them when it is time."""
        if self._synced or self.classes is not None or "spotsigs" not in self.config.methods:
            return
        self._synced = True
        if self.db.execute("SELECT 1 FROM meta WHERE key = 'spot_order'").fetchone():
            rows = self.db.execute("SELECT spot, class FROM spot_classes").fetchall()
            self.classes = SpotClasses.from_rows(rows)
            return
        # Ids are distinct and positive, so the largest bounds the count: a lookup, not a scan.
        if (self.db.execute("SELECT MAX(id) FROM documents").fetchone()[0] or 0) < FREEZE_AT:
            return
        admitted = self.db.execute(
            "SELECT COUNT(*) FROM documents WHERE status = 'unique' AND spots IS NOT NULL"
        ).fetchone()[0]
        if admitted >= FREEZE_AT:
            self._freeze()

    def _freeze(self) -> None:
        """Count spot frequencies over the admitted documents, fix the classes and re-post them all."""
        docs = self.db.execute(
            "SELECT id, scope, spots FROM documents WHERE status = 'unique' AND spots IS NOT NULL"
        ).fetchall()
        sets = [(doc, scope, blob_spots(blob)) for doc, scope, blob in docs if sound_spots_blob(blob)]
        spots, df = np.unique(np.concatenate([s.hashes for _, _, s in sets]), return_counts=True)
        classes = SpotClasses.from_frequencies(spots, df)
        self.db.executemany(
            "INSERT INTO spot_classes VALUES (?, ?)",
            zip(classes.spots.tolist(), classes.classes.tolist(), strict=True),
        )
        self.db.execute("INSERT INTO meta VALUES ('spot_order', 'classes')")
        self.classes, self._walked = classes, None
        self.db.execute("DELETE FROM spot_lists")
        keys, ids = [], []
        for doc, scope, spot_set in sets:
            if not self.searched(spot_set):
                continue  # never a SpotSigs match: not posted (see post)
            posted = self.keys.posting_keys(walk(spot_set, classes), scope, classes)
            keys += posted
            ids += [doc] * len(posted)
        self._write_lists(np.array(keys, dtype=np.int64), np.array(ids, dtype=np.int64))

    def _write_lists(self, keys: np.ndarray, docs: np.ndarray) -> None:
        """Store the posting lists of ``keys[i] -> docs[i]`` pairs, keys not yet listed, docs in order."""
        if not len(keys):
            return
        self._check_doc_id(int(docs.max()))
        order = np.lexsort((docs, keys))
        keys, docs = keys[order], docs[order].astype("<u4")
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        ends = np.r_[starts[1:], len(keys)]
        self.db.executemany(
            "INSERT INTO spot_lists VALUES (?, ?)",
            ((int(keys[a]), docs[a:b].tobytes()) for a, b in zip(starts, ends, strict=True)),
        )

    def _check_doc_id(self, doc_id: int) -> None:
        """Posting lists hold uint32 document ids: a file past that is full, not wrapped around."""
        if doc_id > MAX_DOC:
            raise IndexFileError(self.path, "is full: posting lists hold document ids below 2**32")

    def _walk(self, spots: SpotSet) -> Walk:
        """``spots`` in the index's order (frozen classes, else hash); made once a check, for its
        probe, its count filter and its own postings."""
        if self._walked is None or self._walked[0] is not spots:
            self._walked = (spots, walk(spots, self.classes))
        return self._walked[1]

    def post(self, doc_id: int, spots: SpotSet, scope_id: int) -> None:
        """Post an admitted page under its prefix's keys."""
        if not self.searched(spots):
            return
        self._check_doc_id(doc_id)
        doc = doc_id.to_bytes(4, "little")
        self.db.executemany(
            "INSERT INTO spot_lists VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET docs = CAST(docs || excluded.docs AS BLOB)",
            [(k, doc) for k in self.keys.posting_keys(self._walk(spots), scope_id, self.classes)],
        )

    def unpost(self, doc_id: int, spots: SpotSet, scope_id: int) -> None:
        """Take a page out of the lists it was posted under (a list left empty goes)."""
        if not self.searched(spots):
            return
        for key in self.keys.posting_keys(self._walk(spots), scope_id, self.classes):
            row = self.db.execute("SELECT docs FROM spot_lists WHERE key = ?", (key,)).fetchone()
            if row is None or not isinstance(row[0], bytes) or len(row[0]) % 4:
                continue  # not posted, or a damaged list: each of its candidates is verified
            docs = np.frombuffer(row[0], dtype="<u4")
            kept = docs[docs != doc_id]
            if len(kept) == len(docs):
                continue
            if len(kept):
                self.db.execute("UPDATE spot_lists SET docs = ? WHERE key = ?", (kept.tobytes(), key))
            else:
                self.db.execute("DELETE FROM spot_lists WHERE key = ?", (key,))

    def candidates(self, spots: SpotSet, scope_id: int) -> list[int]:
        """Documents sharing enough spots of their prefixes with a probe of these ``spots``."""
        ranges, parts, needs = self.keys.probe(self._walk(spots), scope_id, self.classes)
        return self._sharing(ranges, parts, needs)

    def _sharing(self, ranges: np.ndarray, parts: range, needs: list[int]) -> list[int]:
        """Documents of each of ``parts`` with at least its ``needs`` postings in the key ``ranges``.

        SQLite only returns the lists and numpy counts their documents: a ``GROUP BY doc``
        would build a temporary B-tree over every posting met. The ranges are disjoint, so
        a posting is met once (two rare spots of one bucket read its list twice, which only
        adds candidates); CROSS JOIN keeps the ranges the outer loop. Where partitions
        ask different counts, each list's key tells its partition (a document is in one).
        """
        uniform = min(needs) == max(needs)
        limit, lists = self.max_ranges, []
        for start in range(0, len(ranges), limit):
            chunk = ranges[start : start + limit]
            lists += self.db.execute(
                f"WITH r(low, high) AS (VALUES {','.join(['(?,?)'] * len(chunk))}) "
                f"SELECT {'docs' if uniform else 'key, docs'} FROM r CROSS JOIN spot_lists "
                "ON key BETWEEN low AND high",
                chunk.ravel().tolist(),
            ).fetchall()
        return shared(lists, parts, needs)
