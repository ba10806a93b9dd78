"""SQLiteIndex: the default, persistent index, one file a user can open in any SQLite tool.

Storage only: it finds candidates and records what the Detector decided. The tables are in
``schema``; the spot search's keys in ``spot_search``, the other lookups in ``lookup_keys``.
Only admitted (non-duplicate) pages get postings: the index stands for what was stored.
A Detector's check runs in one ``BEGIN IMMEDIATE`` transaction (``transaction``), so
processes sharing the file serialize on it and two copies can never both be admitted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import socket
import sqlite3
import time
import weakref
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..config import DedupConfig
from ..exceptions import IndexFileError
from ..fingerprint import Fingerprint
from ..signatures.imatch import CollectionStats
from ..signatures.spotsigs import SpotSet
from ..text import storable
from . import schema
from .base import Earlier, Match, Verdict
from .bounds import BOUND_COLUMNS, may_match
from .checkpoint import Checkpointer
from .codecs import SIGNATURE_COLUMNS, array_blob, blob_spots, row_fingerprint, signed, spots_blob, unsigned
from .lookup_keys import lookup_keys, raw_key
from .pruning import SpotClasses, Walk, overlap_needed, partition_of, partitions_covering, walk
from .records import clean_record
from .runs import running
from .spot_search import MAX_DOC, SpotKeys, counted

logger = logging.getLogger(__name__)

# WAL pages before a commit copies them back into the file itself. A check writes ~60 pages;
# since the ``Checkpointer`` thread copies the WAL beside the checks, this is a backstop for
# when checks come back to back (SQLite's 1,000 made every ~16th check pay for a checkpoint).
WAL_AUTOCHECKPOINT = 131072

# Prepared statements a connection keeps: a check's queries bind as many values as the page has
# spot ranges, candidates or lookup keys, so their texts vary, and Python's 128 kept re-preparing.
STATEMENT_CACHE = 1024

# Seconds SQLite waits for another process's lock before the wait is logged (and retried up
# to the index's timeout).
LOCK_NOTICE = 5.0

# Files up to this size are checked (PRAGMA quick_check) when opened for writing: ~0.1 s a
# 10 MB file; larger ones would make every start slow, and a damage is still met as an error.
QUICK_CHECK_BYTES = 256 << 20

# Admitted documents after which spot frequency classes are frozen (a one-off re-posting of them).
FREEZE_AT = 5000


def file_bytes(path: Path) -> int:
    """Bytes on disk of an index file with its WAL and shared-memory files beside it."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def damage_advice(exc: BaseException) -> str:
    """What to do about a damaged file, for the one-line errors that name it."""
    if "malformed" in str(exc) or "not a database" in str(exc):
        return "; restore it from a copy, recover what is readable (sqlite3 FILE .recover), or use a new file"
    return ""


class SQLiteIndex:
    """Persistent candidate search over admitted pages, with every verdict recorded."""

    def __init__(self, path: str | Path, config: DedupConfig, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.config = config
        # Where the spot search finds every SimHash match, the SimHash block keys would only add
        # chance candidates (with 16-bit blocks ~60 a check at a million pages, each a document
        # row read), so they are neither probed nor, in a file made so, stored.
        self._probe_simhash = not config.simhash_within_spotsigs
        self._scope_ids: dict[str, int] = {}
        self._in_batch = False
        self._classes: SpotClasses | None = None
        self._order_synced = False
        self._walked: tuple[SpotSet, Walk] | None = None
        self._checkpointer: Checkpointer | None = None
        self._run: int | None = None
        self._unclean: frozenset[int] = frozenset()
        try:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(
                str(self.path), timeout=timeout, isolation_level=None, cached_statements=STATEMENT_CACHE
            )
            self._timeout = timeout
            self.db.execute(f"PRAGMA busy_timeout = {int(min(timeout, LOCK_NOTICE) * 1000)}")
            self._open_retrying(timeout)
            # Key ranges one spot query can bind (SQLite's variable limit, one kept for the count).
            self._max_ranges = max(1, (self.db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) - 1) // 2)
        except sqlite3.DatabaseError as exc:
            raise IndexFileError(
                self.path, f"cannot be used as an index ({exc}){damage_advice(exc)}"
            ) from None
        except OSError as exc:
            raise IndexFileError(self.path, f"cannot be created ({exc.strerror or exc})") from None

    @classmethod
    def open_existing(cls, path: str | Path) -> SQLiteIndex:
        """Open an index with the settings it was built with (for reports and stats)."""
        return cls(path, schema.stored_config(Path(path)))

    # --- opening --------------------------------------------------------------------------

    def _open_retrying(self, timeout: float) -> None:
        """``_open``, retried while another process holds the lock (two crawls creating one file).

        Switching a new file to WAL takes an exclusive lock that SQLite does not wait for.
        """
        deadline = time.monotonic() + timeout
        for attempt in itertools.count(1):
            try:
                return self._open()
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or time.monotonic() > deadline:
                    raise
                time.sleep(min(0.5, 0.02 * attempt))

    def _open(self) -> None:
        self.db.execute("BEGIN")  # one snapshot: another process may be creating the schema right now
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            self.db.execute("COMMIT")
        if version == 0 and not tables:
            self.db.execute(f"PRAGMA page_size = {schema.PAGE_SIZE}")
            self.db.execute("PRAGMA journal_mode = WAL")
            self._write(self._create)
        else:
            schema.check_version(self.path, version, tables)
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
        if file_bytes(self.path) <= QUICK_CHECK_BYTES:  # never write into a damaged file
            problem = self.db.execute("PRAGMA quick_check(1)").fetchone()[0]
            if problem != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed: {problem}")
        try:
            meta = dict(self.db.execute("SELECT key, value FROM meta"))
            self._keys, self._store_simhash = schema.spot_keys(meta, self.config, self.path)
        except (KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:  # forged or damaged
            raise IndexFileError(self.path, f"has damaged settings in its meta table ({exc!r})") from None
        if self._probe_simhash and not self._store_simhash and "simhash" in self.config.methods:
            tau = self.config.spotsigs_threshold
            raise IndexFileError(
                self.path,
                f"has no SimHash lookup tables (it was built with NEARDUP_SIMHASH_CONFIRM at least "
                f"the SpotSigs threshold {tau}), which NEARDUP_SIMHASH_CONFIRM = "
                f"{self.config.simhash_confirm!r} needs; use a confirm of at least {tau} or a new index file",
            )

    def _create(self) -> None:
        if self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
            return  # another process created it while this one waited for the lock
        schema.create(self.db, self.config, self._probe_simhash)

    # --- transactions ---------------------------------------------------------------------

    def _begin(self) -> None:
        """BEGIN IMMEDIATE, waiting for another process's lock up to the timeout, and saying so."""
        started = time.monotonic()
        while True:
            try:
                self.db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                waited = time.monotonic() - started
                if ("locked" not in str(exc) and "busy" not in str(exc)) or waited >= self._timeout:
                    raise
                logger.warning(
                    "%s is locked by another process; waited %.0f s of %.0f for it", self.path, waited,
                    self._timeout,
                )  # fmt: skip

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One page's reads and writes, atomically: a BEGIN IMMEDIATE transaction, or a savepoint
        of the open batch (so a page that fails leaves the batch's other pages in place)."""
        self._order_synced = False
        self._walked = None
        if self._in_batch:
            self.db.execute("SAVEPOINT page")
            try:
                yield
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK TO page")
                    self.db.execute("RELEASE page")
                self._forget()
                raise
            self.db.execute("RELEASE page")
            return
        self._begin()
        try:
            yield
        except BaseException:
            self._rollback()
            raise
        self._commit()

    def _write(self, work):
        with self.transaction():
            return work()

    def _forget(self) -> None:
        """What rolled-back work may have made: a scope's id, a freeze of the spot order."""
        self._scope_ids.clear()
        self._classes = None

    def _rollback(self) -> None:
        if self.db.in_transaction:  # SQLite may have rolled back already (a full disk)
            self.db.execute("ROLLBACK")
        self._forget()

    @contextlib.contextmanager
    def batch(self) -> Iterator[SQLiteIndex]:
        """Group many pages into one transaction (the offline scan): all of them or none."""
        if self._in_batch:
            yield self
            return
        self._begin()
        self._in_batch = True
        try:
            yield self
        except BaseException:
            self._in_batch = False
            self._rollback()
            raise
        self._in_batch = False
        self._commit()

    def _commit(self) -> None:
        self.db.execute("COMMIT")
        if self._checkpointer is None:  # started by the first write: readers never need one
            wal = self.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            self._checkpointer = Checkpointer(self.path if wal else None)
            self._unclosed = weakref.finalize(self, self._checkpointer.stop, wait=False)  # never closed

    # --- crawl runs -------------------------------------------------------------------------

    def begin_run(self, action: str) -> None:
        """Start a crawl run: the pages it admits are stamped with it.

        What a run that never closed (its process is gone) admitted may never have reached the
        crawl's output (feed exports buffer, a kill loses the buffer), so it is *unconfirmed*.
        """

        def work() -> tuple[int, list[tuple]]:
            open_runs = self.db.execute(
                "SELECT id, started_at, host, pid FROM runs WHERE ended_at IS NULL"
            ).fetchall()
            run = self.db.execute(
                "INSERT INTO runs (started_at, action, host, pid) VALUES (?, ?, ?, ?)",
                (time.time(), action, socket.gethostname(), os.getpid()),
            ).lastrowid
            return run, open_runs

        self._run, open_runs = self._write(work)
        self._unclean = frozenset(run for run, *owner in open_runs if not running(*owner))

    def end_run(self) -> None:
        """Close the run cleanly: what it admitted reached the output as far as this crawl knows."""
        if self._run is not None:
            run, self._run = self._run, None
            self._write(
                lambda: self.db.execute("UPDATE runs SET ended_at = ? WHERE id = ?", (time.time(), run))
            )

    def last_action(self) -> str | None:
        """What the latest crawl run did with duplicates (``drop`` or ``tag``); None for a scanned index."""
        row = self.db.execute("SELECT action FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return row[0] if row else None

    @property
    def interrupted_runs(self) -> bool:
        """Whether runs that never closed admitted pages this one may meet (unconfirmed pages)."""
        return bool(self._unclean)

    def unconfirmed(self, ids: list[int]) -> set[int]:
        """Those of ``ids`` admitted by a run that never closed."""
        if not self._unclean or not ids:
            return set()
        runs = sorted(self._unclean)
        rows = self.db.execute(
            f"SELECT id FROM documents WHERE id IN ({','.join('?' * len(ids))}) "
            f"AND run IN ({','.join('?' * len(runs))})",
            [*ids, *runs],
        )
        return {r[0] for r in rows}

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
        if many and self._run is not None:
            rows = [r for r in rows if r[3] != self._run]
        if not rows:
            return None
        doc, status, exact, _ = next((r for r in rows if r[1] == "unique"), rows[0])
        exact = int.from_bytes(exact, "big") if exact else None
        admitted = tuple(r[0] for r in rows if r[1] == "unique")
        return Earlier(doc, status, exact, frozenset(r[0] for r in rows), admitted)

    def signatures(self, ids: list[int] | tuple[int, ...], scope: str) -> list[tuple[int, Fingerprint]]:
        """The stored signatures of these documents of ``scope``, in id order."""
        scope_id = self._scope_id(scope, create=False)
        if scope_id is None:
            return []
        return [(row[0], row_fingerprint(row)) for row in self._rows(SIGNATURE_COLUMNS, list(ids), scope_id)]

    def restamp(self, doc_id: int) -> None:
        """Mark a record as met again by this run (an unchanged revisit)."""
        self.db.execute("UPDATE documents SET run = ? WHERE id = ?", (self._run, doc_id))

    def url_of(self, doc_id: int) -> str:
        return self.db.execute("SELECT url FROM documents WHERE id = ?", (doc_id,)).fetchone()[0]

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
    ) -> Verdict:
        """Record a page whose raw body equals an admitted document's, without its fingerprint."""

        def work() -> Verdict:
            scope_id = self._scope_id(scope)
            doc_id = self.db.execute(
                "INSERT INTO documents (url, source, scope, seen_at, status, tokens, language, "
                "duplicate_of, similarity, method, raw_hash, exact, simhash, spot_size, run, url_key) "
                "SELECT ?, ?, ?, ?, 'duplicate', tokens, language, id, 1.0, 'exact', raw_hash, exact, "
                "simhash, spot_size, ?, ? FROM documents WHERE id = ?",
                (storable(url), source, scope_id, time.time(), self._run, key, original),
            ).lastrowid
            title, dup_url = self.db.execute(
                "SELECT title, url FROM documents WHERE id = ?", (original,)
            ).fetchone()
            self.db.execute("UPDATE documents SET title = ? WHERE id = ?", (title, doc_id))
            return Verdict(
                url=url, doc_id=doc_id, duplicate=True, duplicate_of=original,
                duplicate_of_url=dup_url, similarity=1.0, method="exact",
            )  # fmt: skip

        return self._write(work)

    # --- I-Match statistics ---------------------------------------------------------------

    def term_stats(self, terms: tuple[str, ...]) -> CollectionStats:
        """The index's document frequencies of ``terms`` over its admitted pages (I-Match's idf)."""
        row = self.db.execute("SELECT value FROM meta WHERE key = 'imatch_docs'").fetchone()
        df: dict[str, int] = {}
        for start in range(0, len(terms), 500):
            chunk = terms[start : start + 500]
            query = f"SELECT term, df FROM term_df WHERE term IN ({','.join('?' * len(chunk))})"
            df.update(self.db.execute(query, chunk).fetchall())
        return CollectionStats(int(row[0]) if row else 0, df)

    def _count_terms(self, terms: tuple[str, ...]) -> None:
        self.db.executemany(
            "INSERT INTO term_df VALUES (?, 1) ON CONFLICT(term) DO UPDATE SET df = df + 1",
            [(t,) for t in terms],
        )
        self.db.execute(
            "INSERT INTO meta VALUES ('imatch_docs', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    # --- the spot order ---------------------------------------------------------------------

    def _sync_order(self) -> None:
        """Inside a write transaction: load the frozen spot classes, or freeze them when it is time."""
        if self._order_synced or self._classes is not None or "spotsigs" not in self.config.methods:
            return
        self._order_synced = True
        if self.db.execute("SELECT 1 FROM meta WHERE key = 'spot_order'").fetchone():
            rows = self.db.execute("SELECT spot, class FROM spot_classes").fetchall()
            spots = np.array([r[0] for r in rows], dtype=np.int64).astype(np.uint64)
            self._classes = SpotClasses(spots, np.array([r[1] for r in rows], dtype=np.int64))
            return
        admitted = self.db.execute(
            "SELECT COUNT(*) FROM documents WHERE status = 'unique' AND spots IS NOT NULL"
        ).fetchone()[0]
        if admitted >= FREEZE_AT:
            self._freeze_order()

    def _freeze_order(self) -> None:
        """Count spot frequencies over the admitted documents, fix the classes and re-post them all."""
        docs = self.db.execute(
            "SELECT id, scope, spots FROM documents WHERE status = 'unique' AND spots IS NOT NULL"
        ).fetchall()
        sets = [(doc, scope, blob_spots(blob)) for doc, scope, blob in docs]
        spots, df = np.unique(np.concatenate([s.hashes for _, _, s in sets]), return_counts=True)
        classes = SpotClasses.from_frequencies(spots, df)
        self.db.executemany(
            "INSERT INTO spot_classes VALUES (?, ?)",
            zip(classes.spots.tolist(), classes.classes.tolist(), strict=True),
        )
        self.db.execute("INSERT INTO meta VALUES ('spot_order', 'classes')")
        self._classes, self._walked = classes, None
        self.db.execute("DELETE FROM spot_lists")
        keys, docs = [], []
        for doc, scope, spot_set in sets:
            if not self._spot_searched(spot_set):
                continue  # never a SpotSigs match: not posted (see _post)
            posted = self._keys.posting_keys(walk(spot_set, classes), scope, classes)
            keys += posted
            docs += [doc] * len(posted)
        self._write_lists(np.array(keys, dtype=np.int64), np.array(docs, dtype=np.int64))

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

    def _spot_searched(self, spots: SpotSet) -> bool:
        """Whether a page of these spots is searched and posted by SpotSigs (configured, and
        enough spots to ever be a match)."""
        return "spotsigs" in self.config.methods and spots.size >= self.config.spotsigs_least_spots

    def _walk(self, spots: SpotSet) -> Walk:
        """``spots`` in the index's order (frozen classes, else hash); made once a check, for its
        probe, its count filter and its own postings."""
        if self._walked is None or self._walked[0] is not spots:
            self._walked = (spots, walk(spots, self._classes))
        return self._walked[1]

    # --- candidates -----------------------------------------------------------------------

    def candidates(self, probe: Fingerprint, scope: str) -> Iterator[tuple[int, Fingerprint]]:
        """Admitted documents of ``scope`` that could match ``probe`` by some configured method,
        loaded, in id order (``probe.spots`` in the stored 32-bit form, ``codecs.spots32``).

        Every index lookup is a necessary condition of its method, and each candidate is
        loaded once, with cheap exact bounds (``bounds``) applied before its spots are decoded.
        """
        self._sync_order()
        scope_id = self._scope_id(scope, create=False)
        if scope_id is None:
            return
        found: set[int] = set()
        keys = lookup_keys(probe, scope_id, self.config, simhash=self._probe_simhash)
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            rows = self.db.execute(
                f"SELECT doc FROM lookup_keys WHERE key IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update(r[0] for r in rows)
        if self._spot_searched(probe.spots):
            found.update(self._spot_candidates(probe, scope_id))
        if not found:
            return
        # The few columns the bounds need first; every signature only for the candidates that pass.
        bounds = self._rows(BOUND_COLUMNS, sorted(found), scope_id, admitted=True)
        survivors = [row[0] for row in may_match(probe, bounds, self.config)]
        for row in self._rows(SIGNATURE_COLUMNS, survivors, scope_id):
            yield row[0], row_fingerprint(row)

    def _spot_candidates(self, probe: Fingerprint, scope_id: int) -> list[int]:
        """Documents sharing enough spots of their prefixes with the probe's (``pruning``)."""
        order, tau = self._walk(probe.spots), self.config.spotsigs_threshold
        parts = partitions_covering(probe.spots.size, tau)
        # A probe may ask fewer shared spots than a partition was posted for: a page asks
        # what its own size is posted for, so smaller pages read no longer prefixes.
        own = self._keys.overlap_in(partition_of(probe.spots.size, tau))
        asked = [min(own, self._keys.overlap_in(p)) for p in parts]
        needed = {k: overlap_needed(order, tau, k) for k in set(asked)}
        needs = [needed[k] for k in asked]
        ranges = self._keys.probe_ranges(order, scope_id, parts, needs, self._classes)
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
        limit, lists = self._max_ranges, []
        for start in range(0, len(ranges), limit):
            chunk = ranges[start : start + limit]
            lists += self.db.execute(
                f"WITH r(low, high) AS (VALUES {','.join(['(?,?)'] * len(chunk))}) "
                f"SELECT {'docs' if uniform else 'key, docs'} FROM r CROSS JOIN spot_lists "
                "ON key BETWEEN low AND high",
                chunk.ravel().tolist(),
            ).fetchall()
        if uniform:
            return counted(lists, needs[0])
        part = np.array([SpotKeys.partition(row[0]) for row in lists], dtype=np.int64)
        need = np.array(needs)[np.clip(part - parts.start, 0, len(needs) - 1)].tolist()
        return [
            doc
            for value in set(needs)
            for doc in counted([row for row, n in zip(lists, need, strict=True) if n == value], value)
        ]

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
    ) -> Verdict:
        """Store a page with its verdict (``match``: what it duplicates); an admitted page becomes
        findable. ``fp.spots`` are in the stored 32-bit form. A revisit ``replace``s its earlier
        record (same id; its old lookup keys removed)."""
        if fp.judged:
            self._sync_order()  # posted in the file's order, frozen maybe by another process
        scope_id = self._scope_id(scope)
        status = "skipped" if not fp.judged else ("duplicate" if match else "unique")
        spots = fp.spots
        row = {
            "url": storable(url), "title": storable(fp.title) or None,
            "source": storable(source) if source else None, "scope": scope_id,
            "seen_at": time.time(), "status": status,
            "skip_reason": fp.skip_reason, "tokens": fp.token_count, "language": fp.language,
            "duplicate_of": match[0] if match else None, "similarity": match[1] if match else None,
            "method": match[2] if match else None,
            "raw_hash": signed(fp.raw_hash >> 64) if fp.raw_hash is not None else None,
            "exact": fp.exact.to_bytes(16, "big") if fp.exact is not None else None,
            "simhash": signed(fp.simhash) if fp.simhash is not None else None,
            "spot_size": spots.size if fp.judged else None,
            # A duplicate's spots are never loaded again: its Jaccard is recorded already.
            "spots": spots_blob(spots) if status == "unique" and len(spots) else None,
            "minhash": array_blob(fp.minhash, "<u4"),
            "minhash_bands": array_blob(fp.minhash_bands, "<u8"),
            "super_shingles": array_blob(fp.super_shingles, "<u8"),
            "imatch": array_blob(fp.imatch, "<u8"),
            "ksentence": signed(fp.ksentence) if fp.ksentence is not None else None,
            "run": self._run, "url_key": key,
        }  # fmt: skip
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
            if "imatch" in self.config.methods and fp.terms:
                self._count_terms(fp.terms)
        if self.config.keep_text and fp.text:
            text = storable(fp.text[: self.config.keep_text]).encode("utf-8")
            self.db.execute("INSERT OR REPLACE INTO texts VALUES (?, ?)", (doc_id, zlib.compress(text, 6)))
        dup_url = self.url_of(match[0]) if match else None
        return Verdict(
            url=url, doc_id=doc_id, duplicate=bool(match), skip_reason=fp.skip_reason,
            duplicate_of=match[0] if match else None, duplicate_of_url=dup_url,
            similarity=match[1] if match else None, method=match[2] if match else None,
        )  # fmt: skip

    def _unpost(self, doc_id: int, scope: int) -> None:
        """Remove a revisited document's lookup keys (its spot postings stay: a stale posting only
        adds a candidate, which is verified against the stored spots)."""
        row = self.db.execute(
            f"SELECT status, raw_hash, {SIGNATURE_COLUMNS} FROM documents WHERE id = ?", (doc_id,)
        ).fetchone()
        if row is None or row[0] != "unique":
            return
        old = dataclasses.replace(
            row_fingerprint(row[2:]), raw_hash=unsigned(row[1]) << 64 if row[1] is not None else None
        )
        keys = lookup_keys(old, scope, self.config, simhash=self._store_simhash, raw=True)
        self.db.executemany("DELETE FROM lookup_keys WHERE key = ? AND doc = ?", [(k, doc_id) for k in keys])

    def _post(self, doc_id: int, fp: Fingerprint, spots: SpotSet, scope: int) -> None:
        keys = lookup_keys(fp, scope, self.config, simhash=self._store_simhash, raw=True)
        if self._spot_searched(spots):
            self._check_doc_id(doc_id)
            doc = doc_id.to_bytes(4, "little")
            self.db.executemany(
                "INSERT INTO spot_lists VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET docs = CAST(docs || excluded.docs AS BLOB)",
                [(k, doc) for k in self._keys.posting_keys(self._walk(spots), scope, self._classes)],
            )
        self.db.executemany("INSERT OR IGNORE INTO lookup_keys VALUES (?, ?)", [(k, doc_id) for k in keys])

    # --- reading --------------------------------------------------------------------------

    def get(self, doc_id: int) -> dict | None:
        """One document's record (url, scope, status, verdict, sizes), or None."""
        return next(self._records("WHERE d.id = ?", (doc_id,)), None)

    def text(self, doc_id: int) -> str | None:
        """The main text kept for a document (its first ``keep_text`` characters), or None."""
        try:
            row = self.db.execute("SELECT text FROM texts WHERE doc = ?", (doc_id,)).fetchone()
            return zlib.decompress(row[0]).decode("utf-8", errors="replace") if row else None
        except (zlib.error, TypeError, sqlite3.DatabaseError) as exc:  # one damaged text, not the report
            logger.warning(
                "%s: the stored text of document %d is damaged (%s); left out", self.path, doc_id, exc
            )
            return None

    def documents(self) -> Iterator[dict]:
        """Every recorded page in the order seen, streamed."""
        return self._records("ORDER BY d.id")

    def _records(self, where: str, args: tuple = ()) -> Iterator[dict]:
        cur = self.db.execute(
            "SELECT d.id, d.url, d.title, s.name AS scope, d.seen_at, d.status, d.skip_reason, d.tokens, "
            "d.language, d.duplicate_of, d.similarity, d.method "
            f"FROM documents d JOIN scopes s ON s.id = d.scope {where}",
            args,
        )
        names = [c[0] for c in cur.description]
        for row in cur:
            yield clean_record(dict(zip(names, row, strict=True)))

    def duplicate_edges(self) -> Iterator[tuple[int, int, float | None, str | None]]:
        """(document, duplicate_of, similarity, method) for every duplicate, streamed."""
        yield from self.db.execute(
            "SELECT id, duplicate_of, similarity, method FROM documents "
            "WHERE status = 'duplicate' ORDER BY id"
        )

    def contains_url(self, url: str) -> bool:
        """Whether a page with this URL was already recorded."""
        return self.db.execute("SELECT 1 FROM documents WHERE url = ? LIMIT 1", (url,)).fetchone() is not None

    def contains_source(self, source: str) -> bool:
        """Whether the page read from this source was already recorded (a resumed scan skips it)."""
        return self.source_record(source) is not None

    def stats(self) -> dict[str, int]:
        """Counts of documents by status, and the file size in bytes."""
        counts = dict(self.db.execute("SELECT status, COUNT(*) FROM documents GROUP BY status"))
        size = file_bytes(self.path)
        return {
            "documents": sum(counts.values()), "unique": counts.get("unique", 0),
            "duplicates": counts.get("duplicate", 0), "skipped": counts.get("skipped", 0), "bytes": size,
        }  # fmt: skip

    def close(self) -> None:
        if self._checkpointer is not None:
            self._unclosed.detach()
            self._checkpointer.stop()  # first: the last connection to close checkpoints the rest
            self._checkpointer = None
        with contextlib.suppress(sqlite3.Error):
            self.db.close()

    def __enter__(self) -> SQLiteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
