"""The SQLite file's own search, beneath the ledger: a probe's exact copies first, then its
lookup keys, its SpotSigs lists (``spots``) and the exact bounds, so each candidate is read
once and its spots decoded only when the cheap bounds pass. The ledger posts the lookup keys
(the ``lookup_keys`` table); the spot lists and the frozen spot order are kept here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from ....config import DedupConfig
from ....methods import Fingerprint, rank
from ...bounds import BOUND_COLUMNS, may_match
from ...codecs import SIGNATURE_COLUMNS, sound_fingerprints
from ...lookup_keys import exact_key, lookup_keys
from ...spot_search import SpotKeys
from .spots import SpotLists


class SQLiteSearch:
    """Candidates of a probe among a scope's admitted pages, from the file's tables."""

    def __init__(
        self, db: sqlite3.Connection, config: DedupConfig, keys: SpotKeys, path: Path, probe_simhash: bool
    ):
        self.db, self.config, self.path = db, config, path
        self.spots = SpotLists(db, config, keys, path)
        # Where the spot search finds every SimHash match, the SimHash block keys would only add
        # chance candidates (with 16-bit blocks ~60 a check at a million pages, each a document
        # row read), so they are neither probed nor, in a file made so, stored.
        self.probe_simhash = probe_simhash

    def begin(self) -> None:
        """A transaction begins: another process may have frozen the spot order since the last."""
        self.spots.new_transaction()

    def forget(self) -> None:
        """After a rollback: a freeze the rolled-back work made is gone."""
        self.spots.forget()

    def ready(self) -> None:
        """Before a judged page is recorded: post it in the file's order (frozen maybe by another
        process, or due now)."""
        self.spots.sync_order()

    def post(self, doc_id: int, fp: Fingerprint, scope_id: int) -> None:
        """An admitted page's spot postings (its lookup keys are the ledger's)."""
        self.spots.post(doc_id, fp.spots, scope_id)

    def unpost(self, doc_id: int, fp: Fingerprint, scope_id: int) -> None:
        """A page no longer admitted leaves its spot lists."""
        self.spots.unpost(doc_id, fp.spots, scope_id)

    def find(self, probe: Fingerprint, scope_id: int) -> Iterator[tuple[int, Fingerprint]]:
        """Admitted pages of the scope that could match ``probe`` by some configured method,
        loaded: its exact copies first, then the others, each in id order. An exact copy
        outranks every other match (unless a plugin's method was put first), so a caller that
        stops at the first one never pays for the spot search."""
        self.spots.sync_order()
        found: set[int] = set()
        keys = lookup_keys(probe, scope_id, self.config, simhash=self.probe_simhash)
        if "exact" in self.config.methods and probe.exact is not None and rank("exact") == 0:
            copy_key = exact_key(probe.exact, scope_id)
            keys = [k for k in keys if k != copy_key]  # looked up here, not again below
            copies = self.db.execute("SELECT doc FROM lookup_keys WHERE key = ?", (copy_key,)).fetchall()
            found.update(doc for (doc,) in copies if type(doc) is int)  # not a damaged row
            rows = self._rows(SIGNATURE_COLUMNS, sorted(found), scope_id, admitted=True)
            yield from sound_fingerprints(rows, self.path)
        copies_found = frozenset(found)
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            rows = self.db.execute(
                f"SELECT doc FROM lookup_keys WHERE key IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update(r[0] for r in rows if type(r[0]) is int)
        if self.spots.searched(probe.spots):
            found.update(self.spots.candidates(probe.spots, scope_id))
        if not found:
            return
        # The few columns the bounds need first; every signature only for the candidates that pass.
        bounds = self._rows(BOUND_COLUMNS, sorted(found - copies_found), scope_id, admitted=True)
        survivors = [row[0] for row in may_match(probe, bounds, self.config)]
        yield from sound_fingerprints(self._rows(SIGNATURE_COLUMNS, survivors, scope_id), self.path)

    def _rows(self, columns: str, ids: list[int], scope: int, admitted: bool = False) -> list[tuple]:
        """Rows of these ids in ``scope``; with ``admitted``, of admitted pages only (a spot posting of
        a page that a revisit made a duplicate stays behind)."""
        rows: list[tuple] = []
        status = " AND status = 'unique'" if admitted else ""
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows += self.db.execute(
                f"SELECT {columns} FROM documents WHERE id IN ({','.join('?' * len(chunk))}) "
                f"AND scope = ?{status} ORDER BY id",
                [*chunk, scope],
            ).fetchall()
        return rows
