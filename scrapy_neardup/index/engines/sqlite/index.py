"""SQLiteIndex: the default, persistent index, one file a user can open in any SQLite tool.

Storage only: it finds candidates and records what the Detector decided. The file and its
transactions are ``sqlite_file``, the tables ``schema``, the SpotSigs lists ``sqlite_spots``,
the other lookups ``lookup_keys``. Only admitted (non-duplicate) pages are findable: the index
stands for what was stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sqlite3
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ....config import DedupConfig
from ....exceptions import IndexFileError
from ....methods import CollectionStats, Fingerprint, counts_terms, rank
from ....signatures.spotsigs import SpotSet
from ....text import storable
from ....verdict import Verdict
from ...base import Earlier, Match
from ...bounds import BOUND_COLUMNS, may_match
from ...codecs import SIGNATURE_COLUMNS, damaged_record, row_fingerprint, sound_fingerprints, unsigned
from ...lookup_keys import exact_key, lookup_keys, raw_key
from ...records import earlier_of, stored_row, verdict_of
from .crawl_runs import SQLiteRuns
from .file import IndexFile
from .opening import damage_advice, file_bytes, holds_index, no_index_file, stored_config, unusable
from .reading import SQLiteReading
from .spots import SpotLists
from .urls import SQLiteUrls

if TYPE_CHECKING:
    from ...location import IndexSpec

__all__ = ["SQLiteIndex", "damage_advice", "file_bytes"]

logger = logging.getLogger(__name__)


class SQLiteIndex(SQLiteReading, SQLiteRuns, SQLiteUrls):
    """Persistent candidate search over admitted pages, with every verdict recorded."""

    def __init__(
        self, path: str | Path, config: DedupConfig, timeout: float = 60.0, read_only: bool = False
    ) -> None:
        self.path = Path(path)
        self.config = config
        # Where the spot search finds every SimHash match, the SimHash block keys would only add
        # chance candidates (with 16-bit blocks ~60 a check at a million pages, each a document
        # row read), so they are neither probed nor, in a file made so, stored.
        self._probe_simhash = not config.simhash_within_spotsigs
        self._scope_ids: dict[str, int] = {}
        self._run: int | None = None
        self._unclean: frozenset[int] = frozenset()
        self._beside: frozenset[int] = frozenset()  # runs that were running when this one began
        self.file = IndexFile(path, config, timeout, self._probe_simhash, self._forget, read_only)
        self.db = self.file.db
        self.spots = SpotLists(self.db, config, self.file.spot_keys, self.path)
        if self._probe_simhash and not self.file.stores_simhash and "simhash" in config.methods:
            tau = config.spotsigs_threshold
            self.file.close()
            raise IndexFileError(
                self.path,
                f"has no SimHash lookup tables (it was built with NEARDUP_SIMHASH_CONFIRM at least "
                f"the SpotSigs threshold {tau}), which NEARDUP_SIMHASH_CONFIRM = "
                f"{config.simhash_confirm!r} needs; use a confirm of at least {tau} or a new index file",
            )

    @classmethod
    def open_existing(cls, path: str | Path) -> SQLiteIndex:
        """Open an index for reading, with the settings it was built with (reports, stats)."""
        return cls(path, stored_config(Path(path)), read_only=True)

    @classmethod
    def from_spec(cls, spec: IndexSpec, config: DedupConfig) -> SQLiteIndex:
        return cls(spec.where, config, spec.lock_timeout)

    @classmethod
    def existing(cls, spec: IndexSpec) -> SQLiteIndex:
        path = Path(spec.where)
        if not path.is_file():
            raise no_index_file(path)
        return cls.open_existing(path)

    @classmethod
    def reset(cls, spec: IndexSpec) -> None:
        """Delete an index file with its WAL and shared-memory files (NEARDUP_RESET); any other file
        there is refused (``IndexFileError``), as the Redis reset refuses keys not its own."""
        path = Path(spec.where)
        if not holds_index(path):
            return  # no file, or an empty one, which becomes the index
        for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + "-journal"):
            (path.parent / name).unlink(missing_ok=True)

    @property
    def name(self) -> str:
        """What a report calls it: the file's name."""
        return storable(self.path.name)

    def is_storage_error(self, exc: Exception) -> bool:
        return isinstance(exc, (sqlite3.Error, OSError))

    @classmethod
    def failure_line(cls, spec: IndexSpec, exc: Exception) -> str | None:
        """A damaged, locked or vanished file met while a command used it."""
        return str(unusable(Path(spec.where), exc)) if isinstance(exc, sqlite3.DatabaseError) else None

    def failure_advice(self, exc: Exception) -> str:
        """What to do when the file fails under a crawl."""
        return f"the index {self.path} failed; free disk space or end what holds its lock{damage_advice(exc)}"

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One page's reads and writes, atomically (``IndexFile.transaction``)."""
        self.spots.new_transaction()
        with self.file.transaction():
            yield

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """Group many pages into one transaction (the offline scan): all of them or none."""
        return self.file.batch()

    def _write(self, work):
        with self.transaction():
            return work()

    def _forget(self) -> None:
        """What rolled-back work may have made: a scope's id, a freeze of the spot order."""
        self._scope_ids.clear()
        if hasattr(self, "spots"):
            self.spots.forget()

    # --- a page's own records -----------------------------------------------------------------

    def source_record(self, source: str) -> tuple[int, str, str | None] | None:
        """(id, status, skip reason) of the page read from ``source``, if one was recorded."""
        return self.db.execute(
            "SELECT id, status, skip_reason FROM documents WHERE source = ? LIMIT 1", (source,)
        ).fetchone()

    def earlier(self, key: str | None, scope: str, many: bool = False) -> Earlier | None:
        """The record a page with this revisit key is a revisit of: its admitted one, else its latest.

        With ``many`` (items), only records of earlier crawls: two items of one key in one crawl
        are two items, judged against each other.
        """
        scope_id = self._scope_id(scope, create=False)
        if key is None or scope_id is None:
            return None
        rows = self.db.execute(
            "SELECT id, status, exact, run FROM documents WHERE url_key = ? AND scope = ? ORDER BY id DESC",
            (key, scope_id),
        ).fetchall()
        return earlier_of(rows, many, self._run)

    def signatures(self, ids: list[int] | tuple[int, ...], scope: str) -> list[tuple[int, Fingerprint]]:
        """The stored signatures of these documents of ``scope``, in id order."""
        scope_id = self._scope_id(scope, create=False)
        if scope_id is None:
            return []
        return list(sound_fingerprints(self._rows(SIGNATURE_COLUMNS, list(ids), scope_id), self.path))

    def restamp(self, doc_id: int) -> None:
        """Mark a record as met again by this run (an unchanged revisit)."""
        self.db.execute("UPDATE documents SET run = ? WHERE id = ?", (self._run, doc_id))

    def url_of(self, doc_id: int) -> str:
        row = self.db.execute("SELECT url FROM documents WHERE id = ?", (doc_id,)).fetchone()
        return row[0] if row and isinstance(row[0], str) else ""  # "": a damaged record

    # --- byte-identical copies --------------------------------------------------------------

    def find_raw(self, raw: int, scope: str = "", key: str | None = None) -> int | None:
        """An admitted document whose raw body is byte-identical to ``raw``'s page, or None.

        Lets a caller skip extraction for exact copies; it is a hint only, read outside
        any transaction: ``record_copy`` then records the page. None also where the full
        check must decide: a revisit (``key`` has a record) or an unconfirmed original.
        """
        scope_id = self._scope_id(scope, create=False)
        if scope_id is None or self.earlier(key, scope) is not None:
            return None
        row = self.db.execute(
            "SELECT doc FROM lookup_keys WHERE key = ? ORDER BY doc LIMIT 1", (raw_key(raw, scope_id),)
        ).fetchone()
        return row[0] if row and not self.unconfirmed([row[0]]) else None

    def record_copy(
        self,
        url: str,
        raw: int,
        original: int,
        scope: str = "",
        source: str | None = None,
        key: str | None = None,
    ) -> Verdict | None:
        """Record a page whose raw body equals an admitted document's, without its fingerprint.

        None, recording nothing, when the page's ``key`` or ``source`` got a record since
        ``find_raw`` (another crawl or scan fetched it meanwhile): the full check decides then.
        """

        def work() -> Verdict | None:
            if (source is not None and self.source_record(source)) or self.earlier(key, scope):
                return None
            found = self.db.execute("SELECT title, url FROM documents WHERE id = ?", (original,)).fetchone()
            if found is None or not isinstance(found[1], str):  # a damaged index: the full check decides
                return None
            title, dup_url = found
            scope_id = self._scope_id(scope)
            doc_id = self.db.execute(
                "INSERT INTO documents (url, source, scope, seen_at, status, tokens, language, "
                "duplicate_of, similarity, method, raw_hash, exact, simhash, spot_size, run, url_key) "
                "SELECT ?, ?, ?, ?, 'duplicate', tokens, language, id, 1.0, 'exact', raw_hash, exact, "
                "simhash, spot_size, ?, ? FROM documents WHERE id = ?",
                (storable(url), source, scope_id, time.time(), self._run, key, original),
            ).lastrowid
            self.db.execute("UPDATE documents SET title = ? WHERE id = ?", (title, doc_id))
            return Verdict(
                url=url, doc_id=doc_id, duplicate=True, duplicate_of=original,
                duplicate_of_url=dup_url, similarity=1.0, method="exact",
            )  # fmt: skip

        return self._write(work)

    # --- term statistics ------------------------------------------------------------------

    def term_stats(self, terms: tuple[str, ...]) -> CollectionStats:
        """The index's document frequencies of ``terms`` over its admitted pages (a method's idf)."""
        row = self.db.execute("SELECT value FROM meta WHERE key = 'term_docs'").fetchone()
        df: dict[str, int] = {}
        for start in range(0, len(terms), 500):
            chunk = terms[start : start + 500]
            query = f"SELECT term, df FROM term_df WHERE term IN ({','.join('?' * len(chunk))})"
            df.update((t, n) for t, n in self.db.execute(query, chunk) if isinstance(n, int) and n > 0)
        docs = row[0] if row and isinstance(row[0], str) and row[0].isdigit() else "0"
        return CollectionStats(int(docs), df)

    def _count_terms(self, terms: tuple[str, ...]) -> None:
        self.db.executemany(
            "INSERT INTO term_df VALUES (?, 1) ON CONFLICT(term) DO UPDATE SET df = df + 1",
            [(t,) for t in terms],
        )
        self.db.execute(
            "INSERT INTO meta VALUES ('term_docs', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    # --- candidates -----------------------------------------------------------------------

    def candidates(self, probe: Fingerprint, scope: str) -> Iterator[tuple[int, Fingerprint]]:
        """Admitted documents of ``scope`` that could match ``probe`` by some configured method,
        loaded: its exact copies first, then the others, each in id order (``probe.spots`` in the
        stored 32-bit form, ``codecs.spots32``).

        Every index lookup is a necessary condition of its method, and each candidate is
        loaded once, with cheap exact bounds (``bounds``) applied before its spots are decoded.
        An exact copy outranks every other match (unless a plugin's method was put first), so
        a caller that stops at the first one never pays for the spot search.
        """
        self.spots.sync_order()
        scope_id = self._scope_id(scope, create=False)
        if scope_id is None:
            return
        found: set[int] = set()
        keys = lookup_keys(probe, scope_id, self.config, simhash=self._probe_simhash)
        if "exact" in self.config.methods and probe.exact is not None and rank("exact") == 0:
            copy_key = exact_key(probe.exact, scope_id)
            keys = [k for k in keys if k != copy_key]  # looked up here, not again below
            copies = self.db.execute("SELECT doc FROM lookup_keys WHERE key = ?", (copy_key,)).fetchall()
            found.update(doc for (doc,) in copies if type(doc) is int)  # not a damaged row
            yield from sound_fingerprints(
                self._rows(SIGNATURE_COLUMNS, sorted(found), scope_id, admitted=True), self.path
            )
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

    # --- storage --------------------------------------------------------------------------

    def _scope_id(self, name: str, create: bool = True) -> int | None:
        """The scope's id; created (inside a write transaction) unless ``create`` is False."""
        if name not in self._scope_ids:
            row = self.db.execute("SELECT id FROM scopes WHERE name = ?", (name,)).fetchone()
            if row is None and not create:
                return None
            if row is None:
                row = (self.db.execute("INSERT INTO scopes (name) VALUES (?)", (name,)).lastrowid,)
            self._scope_ids[name] = row[0]
        return self._scope_ids[name]

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
    ) -> Verdict:
        """Store a page with its verdict (``match``: what it duplicates, or with ``admit`` what a page
        let through resembles); an admitted page becomes findable. ``fp.spots`` are in the stored
        32-bit form. A revisit ``replace``s its earlier record (same id; its old lookup keys
        removed)."""
        if fp.judged:
            self.spots.sync_order()  # posted in the file's order, frozen maybe by another process
        scope_id = self._scope_id(scope)
        row = stored_row(url, fp, scope_id, match, source, key, self._run, admit)
        status, spots = row["status"], fp.spots
        if replace is not None:
            doc_id = replace.id
            self._unpost(doc_id, scope_id)
            row.pop("seen_at")  # the order pages were first seen in stays (the report's first-seen)
            self.db.execute(
                f"UPDATE documents SET {', '.join(f'{c} = ?' for c in row)} WHERE id = ?",
                [*row.values(), doc_id],
            )
            self.db.execute("DELETE FROM texts WHERE doc = ?", (doc_id,))
        else:
            cols = ", ".join(row)
            doc_id = self.db.execute(
                f"INSERT INTO documents ({cols}) VALUES ({', '.join('?' * len(row))})", list(row.values())
            ).lastrowid
        if status == "unique":
            self._post(doc_id, fp, spots, scope_id)
            if counts_terms(self.config) and fp.terms:
                self._count_terms(fp.terms)
        if self.config.keep_text and fp.text:
            text = storable(fp.text[: self.config.keep_text]).encode("utf-8")
            self.db.execute("INSERT OR REPLACE INTO texts VALUES (?, ?)", (doc_id, zlib.compress(text, 6)))
        return verdict_of(url, doc_id, fp, match, self.url_of(match[0]) if match else None)

    def _unpost(self, doc_id: int, scope: int) -> None:
        """Remove a revisited document's lookup keys (its spot postings stay: a stale posting only
        adds a candidate, which is verified against the stored spots)."""
        row = self.db.execute(
            f"SELECT status, raw_hash, {SIGNATURE_COLUMNS} FROM documents WHERE id = ?", (doc_id,)
        ).fetchone()
        if row is None or row[0] != "unique":
            return
        try:
            old = dataclasses.replace(
                row_fingerprint(row[2:]), raw_hash=unsigned(row[1]) << 64 if isinstance(row[1], int) else None
            )
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            damaged_record(self.path, doc_id, exc)  # its keys stay: each is verified where it leads
            return
        keys = lookup_keys(old, scope, self.config, simhash=self.file.stores_simhash, raw=True)
        self.db.executemany("DELETE FROM lookup_keys WHERE key = ? AND doc = ?", [(k, doc_id) for k in keys])

    def _post(self, doc_id: int, fp: Fingerprint, spots: SpotSet, scope: int) -> None:
        self.spots.post(doc_id, spots, scope)
        keys = lookup_keys(fp, scope, self.config, simhash=self.file.stores_simhash, raw=True)
        self.db.executemany("INSERT OR IGNORE INTO lookup_keys VALUES (?, ?)", [(k, doc_id) for k in keys])

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> SQLiteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
