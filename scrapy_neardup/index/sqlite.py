"""SQLiteIndex: the default, persistent index, one file a user can open in any SQLite tool.

Tables (schema version in ``PRAGMA user_version``):

- ``meta``: what the index was built with (the knobs that shape stored signatures).
- ``documents``: every page checked, duplicates and skipped pages included, with its
  verdict and the signatures needed to verify a candidate. Nothing a crawl saw is lost.
- ``spot_classes``: the frozen frequency classes that order spots rarest first (see ``pruning``).
- ``term_df``: document frequencies of the admitted pages' terms, I-Match's idf statistics
  (kept only when I-Match is configured).
- ``texts``: the first ``keep_text`` characters of each page's main text (zlib), for the report.
- ``spot_lists``: SpotSigs inverted lists, one row a ``key``: the ids of the admitted
  documents whose prefix (see ``pruning``) holds it, as a blob of uint32s; ``key`` packs
  scope, the spot's 32 bits (of a rare spot, its bucket's: ``SPOT_LAYOUT``) and length
  partition, so one spot's lists over a run of partitions are one range of keys. Schema 1
  had a row a posting (``spot_postings``); such a file is upgraded when it is opened.
- ``lookup_keys``: equality lookups ``key -> doc``, ``key`` a 64-bit hash of (kind, scope,
  value), for raw and exact hashes, SimHash blocks, MinHash bands, super-shingles, I-Match
  and K-sentence signatures.

Spots are kept as the top 32 bits of their 64-bit hash (the sorted order is the same), so a
document's multiset costs about 4 bytes a spot (``_spots_blob``); a 32-bit collision between
two different spots of a pair can only move its Jaccard by one spot's weight, at odds of
about 1 in 10^5 for two long pages.

Files of older schema versions are upgraded to version 3 when opened (1: a row a posting;
2: spot sets always stored with counts), and then refuse the versions that wrote them.
Version-3 files are read as they are; new files are version 4 (rare spots share lists).

Only admitted (non-duplicate) pages get postings: the index stands for what was stored.
``check_and_add`` runs in one ``BEGIN IMMEDIATE`` transaction, so processes sharing the
file serialize on it and two copies can never both be admitted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import weakref
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import xxhash

from ..config import SHAPING_KNOBS, DedupConfig
from ..exceptions import IndexFileError
from ..fingerprint import Fingerprint, imatch_with_stats, needed_methods
from ..scope import url_key
from ..signatures.imatch import CollectionStats
from ..signatures.spotsigs import SpotSet
from ..text import storable
from ..verify import DECISION_ORDER, compare
from .base import Verdict
from .pruning import (
    SpotClasses,
    Walk,
    overlap_needed,
    partition_bounds,
    partition_of,
    partitions_covering,
    prefix,
    probe_reach,
    walk,
)

# 3: spot sets may be stored repeated (``_spots_blob`` form 3), which version 2 misreads.
# 4: rare spots may share lists (layout "rare-bucket"), which version 3 misreads. Files of
# version 3 keep their layout, so they stay version 3; older ones are upgraded to 3.
SCHEMA_VERSION, UPGRADED_VERSION = 4, 3
APPLICATION = "scrapy-neardup"

logger = logging.getLogger(__name__)

# Shaping knobs added after indexes were first written: the value an index without them was built with.
LEGACY_KNOBS = {"spotsigs_few_spots_bits": -1, "scope": "global"}

PAGE_SIZE = 1024

# WAL pages before a commit copies them back into the file itself. A check writes ~60 pages,
# so SQLite's 1,000 made every ~16th check pay for a checkpoint (at 40,000 documents 32 MiB
# took the p99 of a check from 16 to 6 ms, benchmarks/bench_index.py). Since the
# ``Checkpointer`` thread copies the WAL beside the checks, this is a backstop for when checks
# come back to back, and a larger one leaves it less to do. The WAL goes when the last
# connection closes.
WAL_AUTOCHECKPOINT = 131072

# Prepared statements a connection keeps. A check's queries bind as many values as the page
# has spot ranges, candidates or lookup keys, so their texts vary with the page and Python's
# default of 128 kept re-preparing them: on a million-page file 1,024 took a check's median
# from ~1.12 to ~1.04 ms and its mean from ~1.75 to ~1.60 (alternated replays) for ~10 MB.
STATEMENT_CACHE = 1024

# Seconds SQLite waits for another process's lock before the wait is logged (and retried up
# to the index's timeout).
LOCK_NOTICE = 5.0

# Files up to this size are checked (PRAGMA quick_check) when opened for writing: ~0.1 s a
# 10 MB file; larger ones would make every start slow, and a damage is still met as an error.
QUICK_CHECK_BYTES = 256 << 20

# Seconds between the background thread's passive checkpoints.
CHECKPOINT_EVERY = 0.2

# Admitted documents after which spot frequency classes are frozen (a one-off re-posting of them).
FREEZE_AT = 5000

# Distinct spots a SpotSigs match must share in both prefixes (``pruning.overlap_needed``).
# Files written before it was stored in ``meta`` ('spot_overlap') posted prefixes for 1. At
# 100,000 pages (benchmarks/bench_index.py, same run state): 2 -> 3 took the median check from
# 0.98 to 0.91 ms and the p99 from 9.2 to 6.2 ms for 16 more bytes a page; 4 was no faster.
SPOT_OVERLAP = 3

# Pages of at least LARGE_PAGE_SPOTS spots (the partitions starting there) post prefixes for
# SPOT_OVERLAP_LARGE shared spots (``meta`` 'spot_overlap_large'; files without it use
# SPOT_OVERLAP for all). A large page meets many pages sharing three rare spots by chance:
# at a million pages, checks of pages of 200 spots or more found 41,339 candidates with 3
# shared spots, 2,097 with 4, 112 with 5, 2 with 6 and 43 with 12 or more, each one's spots
# read and compared.
LARGE_PAGE_SPOTS, SPOT_OVERLAP_LARGE = 150, 6

# How a spot posting key is packed (``meta`` 'spot_layout'). "spot-part": scope (20 bits) | spot (32)
# | length partition (12), so a probe reads one key range a spot for all the partitions it covers
# (a third of the B-tree descents of one key a partition: at 100,000 pages the spot query's
# median fell from 0.73 to 0.52 ms). Files written before it was stored use "part-spot":
# scope | partition | spot, one key a partition. "rare-bucket": as "spot-part", but once the
# spot order is frozen a spot of the rarest class (seen in one page or none at the freeze)
# is keyed by its top RARE_BUCKET_BITS bits, so the rare spots of one bucket share lists:
# most rare spots are in one page only, and a row costs ~14 bytes beside its 4-byte ids. A
# bucket's other spots only add candidates, which the count filter and the Jaccard drop,
# so the search stays exact; frequent spots keep lists of their own, so a rare spot's probe
# meets a long list only where a spot became frequent after the freeze.
SPOT_LAYOUT, RARE_BUCKET_BITS = "rare-bucket", 20

# Posting lists hold document ids as uint32s.
_MAX_DOC = 0xFFFFFFFF

# Postings read at a time when a schema-1 file is upgraded to posting lists.
UPGRADE_CHUNK = 200_000

# A match found for a new page: (document id, similarity, method).
Match = tuple[int, "float | None", "str | None"]


@dataclasses.dataclass(frozen=True)
class Earlier:
    """A page's own records under its revisit key: the one it is a revisit of, and all their ids."""

    id: int
    status: str
    exact: int | None
    ids: frozenset[int]
    admitted: tuple[int, ...]  # the admitted ones, newest first


KIND = {"exact": 1, "simhash": 2, "minhash": 3, "shingles": 4, "imatch": 5, "ksentence": 6, "raw": 7}
# Capping the partition in a spot posting key merges far partitions, and cutting the scope can
# mix scopes: both only add candidates, which are read back with their real scope and size, so
# the search stays exact.
_MAX_PART, _SCOPE_MASK = 4095, (1 << 20) - 1

# A spot posting list: the ids of the documents posted under ``key``, as little-endian
# uint32s in the order they were posted. One row a key, not a row a posting: a probe reads
# a list in one step, and the key is stored once (benchmarks/bench_index.py, 100,000 pages,
# paired runs: 1,724 -> 1,530 bytes a page, last 20,000 checks 0.98 -> 0.94 ms median).
SPOT_LISTS = "CREATE TABLE IF NOT EXISTS spot_lists (key INTEGER PRIMARY KEY, docs BLOB NOT NULL)"

# Crawl runs, and the key a page is found again by (its canonical URL): a page seen again is a
# revisit of its own record, and what a run that never closed admitted may never have been stored.
REVISITS = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, started_at REAL NOT NULL, ended_at REAL, action TEXT, host TEXT, pid INTEGER
);
CREATE INDEX IF NOT EXISTS documents_url_key ON documents(url_key, scope);
"""

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS scopes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL,
    title TEXT,
    source TEXT,
    scope INTEGER NOT NULL REFERENCES scopes(id),
    seen_at REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('unique', 'duplicate', 'skipped')),
    skip_reason TEXT,
    tokens INTEGER NOT NULL,
    language TEXT,
    duplicate_of INTEGER REFERENCES documents(id),
    similarity REAL,
    method TEXT,
    raw_hash INTEGER,
    exact BLOB,
    simhash INTEGER,
    spot_size INTEGER,
    spots BLOB,
    minhash BLOB,
    minhash_bands BLOB,
    super_shingles BLOB,
    imatch BLOB,
    ksentence INTEGER,
    run INTEGER,
    url_key TEXT
);
CREATE INDEX IF NOT EXISTS documents_url ON documents(url);
CREATE INDEX IF NOT EXISTS documents_source ON documents(source) WHERE source IS NOT NULL;
CREATE INDEX IF NOT EXISTS documents_duplicate_of ON documents(duplicate_of) WHERE duplicate_of IS NOT NULL;
CREATE TABLE IF NOT EXISTS spot_classes (spot INTEGER PRIMARY KEY, class INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS term_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS texts (doc INTEGER PRIMARY KEY, text BLOB NOT NULL);
{SPOT_LISTS};
CREATE TABLE IF NOT EXISTS lookup_keys (
    key INTEGER NOT NULL, doc INTEGER NOT NULL, PRIMARY KEY (key, doc)
) WITHOUT ROWID;
{REVISITS}
"""


def file_bytes(path: Path) -> int:
    """Bytes on disk of an index file with its WAL and shared-memory files beside it."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def signed(value: int) -> int:
    """An unsigned 64-bit value as SQLite's signed INTEGER."""
    return value - (1 << 64) if value >= 1 << 63 else value


def unsigned(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


def _key(*parts: int) -> int:
    """A signed 64-bit lookup key for a tuple of non-negative ints below 2**64."""
    return signed(xxhash.xxh3_64_intdigest(b"".join(p.to_bytes(8, "little") for p in parts)))


def simhash_keys(value: int, distance: int, layout: str = "blocks") -> list[tuple[int, int]]:
    """(table, bits) keys such that two fingerprints within ``distance`` bits share one.

    ``blocks``: ``distance + 1`` contiguous blocks; a pair within the distance agrees on a
    whole block. ``permuted`` (Manku et al. 2007): ``distance + 2`` blocks, keyed by every
    pair of them, since such a pair agrees on at least two blocks; each key then has ~26
    bits instead of 16, so a million pages give far fewer chance candidates per key.
    """
    blocks = distance + 1 if layout == "blocks" else distance + 2
    edges = [round(i * 64 / blocks) for i in range(blocks + 1)]
    parts = [(value >> lo) & ((1 << (hi - lo)) - 1) for lo, hi in itertools.pairwise(edges)]
    if layout == "blocks":
        return list(enumerate(parts))
    pairs = itertools.combinations(range(blocks), 2)
    return [(t, (parts[i] << 32) | parts[j]) for t, (i, j) in enumerate(pairs)]


def spots32(spots: SpotSet) -> SpotSet:
    """The multiset with each spot cut to the top 32 bits of its hash (the stored form)."""
    if not len(spots):
        return spots
    high = (spots.hashes >> np.uint64(32)).astype(np.uint64)
    if len(high) > 1 and not np.all(high[1:] != high[:-1]):  # a 32-bit collision: merge counts
        keys, inverse = np.unique(high, return_inverse=True)
        counts = np.bincount(inverse, weights=spots.counts, minlength=len(keys)).astype(np.uint32)
        return SpotSet(keys, counts)
    return SpotSet(high, spots.counts)


class SQLiteIndex:
    """Persistent candidate search over admitted pages, with every verdict recorded."""

    def __init__(self, path: str | Path, config: DedupConfig, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.config = config
        needed = needed_methods(config)
        self._verify_methods = tuple(m for m in DECISION_ORDER if m in needed)
        # Where the spot search finds every SimHash match, the SimHash block keys would only add
        # chance candidates (with 16-bit blocks ~60 a check at a million pages, each a document
        # row read), so they are neither probed nor, in a file made so, stored (``_check_meta``).
        self._probe_simhash = not config.simhash_within_spotsigs
        self._store_simhash = True
        self._scope_ids: dict[str, int] = {}
        self._in_batch = False
        self._classes: SpotClasses | None = None
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
        try:
            con = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
            try:
                row = con.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()
                keys = con.execute("SELECT value FROM meta WHERE key = 'simhash_keys'").fetchone()
            finally:
                con.close()
        except sqlite3.Error as exc:
            raise IndexFileError(path, f"is not a scrapy-neardup index ({exc})") from None
        if row is None:
            raise IndexFileError(path, "is not a scrapy-neardup index")
        try:
            stored = {**LEGACY_KNOBS, **json.loads(row[0])}
        except (ValueError, TypeError) as exc:
            raise IndexFileError(path, f"has damaged settings in its meta table ({exc})") from None
        options = {k: v for k, v in stored.items() if k in SHAPING_KNOBS}
        if keys is not None and keys[0] == "0":  # built with a confirm that needs no SimHash tables
            options["simhash_confirm"] = max(DedupConfig().simhash_confirm, stored["spotsigs_threshold"])
        return cls(path, DedupConfig.from_options(options))

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
            # Small pages: a check touches ~50 B-tree leaves at random keys, and each one goes to
            # the WAL whole; 1 KiB pages write ~2.8x fewer bytes per check than 4 KiB for ~7% more
            # file (benchmarks/bench_index.py, 16,000 documents).
            self.db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            self.db.execute("PRAGMA journal_mode = WAL")
            self._write(self._create)
        elif (version == 1 and {"meta", "spot_postings"} <= tables) or (version == 2 and "meta" in tables):
            self._write(self._upgrade)
        elif version not in (UPGRADED_VERSION, SCHEMA_VERSION) or "meta" not in tables:
            what = (
                "is not a scrapy-neardup index" if "meta" not in tables else f"has schema version {version}"
            )
            raise IndexFileError(
                self.path, f"{what}; this version reads versions 1 to {SCHEMA_VERSION} (use another file)"
            )
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
        if file_bytes(self.path) <= QUICK_CHECK_BYTES:  # never write into a damaged file
            problem = self.db.execute("PRAGMA quick_check(1)").fetchone()[0]
            if problem != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed: {problem}")
        try:
            self._check_meta()
        except (KeyError, ValueError, TypeError, AttributeError) as exc:  # forged or damaged meta rows
            raise IndexFileError(self.path, f"has damaged settings in its meta table ({exc!r})") from None
        if "url_key" not in {r[1] for r in self.db.execute("PRAGMA table_info(documents)")}:
            self._write(self._add_revisits)

    def _add_revisits(self) -> None:
        """Files made before runs and revisit keys were kept get them (crawled pages' keys filled in)."""
        if "url_key" in {r[1] for r in self.db.execute("PRAGMA table_info(documents)")}:
            return  # another process added them while this one waited for the lock
        self.db.execute("ALTER TABLE documents ADD COLUMN run INTEGER")
        self.db.execute("ALTER TABLE documents ADD COLUMN url_key TEXT")
        self.db.create_function("neardup_url_key", 1, url_key, deterministic=True)
        self.db.execute("UPDATE documents SET url_key = neardup_url_key(url) WHERE source IS NULL")
        for statement in REVISITS.split(";"):
            if statement.strip():
                self.db.execute(statement)

    def _create(self) -> None:
        """Create the schema inside the caller's transaction (executescript would commit it)."""
        for statement in SCHEMA.split(";"):
            if statement.strip():
                self.db.execute(statement)
        self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        rows = [
            ("application", APPLICATION), ("created_at", str(time.time())), ("config", self._shaping()),
            ("spot_overlap", str(SPOT_OVERLAP)), ("spot_layout", SPOT_LAYOUT),
            ("spot_overlap_large", f"{LARGE_PAGE_SPOTS} {SPOT_OVERLAP_LARGE}"),
            ("spot_bucket_bits", str(RARE_BUCKET_BITS)),
            ("simhash_keys", "1" if self._probe_simhash else "0"),
        ]  # fmt: skip
        self.db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", rows)

    def _upgrade(self) -> None:
        """An older file to this schema, in one write transaction.

        Version 2 to 3 changes no table: older versions are only kept from reading what this
        one writes into the file from now on (spot sets in form 3; the file keeps its layout).
        """
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version == 1:
            self._upgrade_postings()
        if version in (1, 2):  # else another process upgraded it while this one waited for the lock
            self.db.execute(f"PRAGMA user_version = {UPGRADED_VERSION}")

    def _upgrade_postings(self) -> None:
        """Schema 1 to 2: a row a posting becomes one list a key.

        Streamed in key order, so a million-page file needs no more memory than a chunk.
        """
        logger.info(
            "%s: upgrading the index to posting lists (schema version 2); the old postings' "
            "space is reused as the index grows (VACUUM gives it back now)",
            self.path,
        )
        self.db.execute(SPOT_LISTS)
        rows = self.db.execute("SELECT key, doc FROM spot_postings ORDER BY key")
        keys = docs = np.empty(0, dtype=np.int64)
        while chunk := rows.fetchmany(UPGRADE_CHUNK):
            pairs = np.array(chunk, dtype=np.int64)
            keys, docs = np.concatenate([keys, pairs[:, 0]]), np.concatenate([docs, pairs[:, 1]])
            whole = np.searchsorted(keys, keys[-1])  # the last key's list may go on in the next chunk
            self._write_lists(keys[:whole], docs[:whole])
            keys, docs = keys[whole:], docs[whole:]
        self._write_lists(keys, docs)
        self.db.execute("DROP TABLE spot_postings")

    def _shaping(self) -> str:
        return json.dumps(self.config.shaping(), sort_keys=True)

    def _check_meta(self) -> None:
        meta = dict(self.db.execute("SELECT key, value FROM meta"))
        if meta.get("application") != APPLICATION:
            raise IndexFileError(self.path, "is not a scrapy-neardup index")
        self._overlap = int(meta.get("spot_overlap", 1))  # both written by _create for new files
        large = meta.get("spot_overlap_large")
        self._overlap_large = tuple(int(v) for v in large.split()) if large else None
        self._layout = meta.get("spot_layout", "part-spot")
        self._bucket_bits = int(meta.get("spot_bucket_bits", 32))
        stored, current = {**LEGACY_KNOBS, **json.loads(meta["config"])}, json.loads(self._shaping())
        for name in SHAPING_KNOBS:
            if stored.get(name) != current.get(name):
                raise IndexFileError(
                    self.path,
                    f"was built with {name} = {stored.get(name)!r}, not {current.get(name)!r}; "
                    f"use the same NEARDUP_{name.upper()} or a new index file",
                )
        # Files written before 'simhash_keys' was stored hold the keys.
        self._store_simhash = meta.get("simhash_keys", "1") == "1"
        if self._probe_simhash and not self._store_simhash and "simhash" in self.config.methods:
            tau = self.config.spotsigs_threshold
            raise IndexFileError(
                self.path,
                f"has no SimHash lookup tables (it was built with NEARDUP_SIMHASH_CONFIRM at least "
                f"the SpotSigs threshold {tau}), which NEARDUP_SIMHASH_CONFIRM = "
                f"{self.config.simhash_confirm!r} needs; use a confirm of at least {tau} or a new index file",
            )

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

    def _write(self, work):
        """Run ``work`` in one BEGIN IMMEDIATE transaction (or a savepoint of the open batch, so a
        page that fails leaves the batch's other pages in place)."""
        if self._in_batch:
            self.db.execute("SAVEPOINT page")
            try:
                result = work()
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK TO page")
                    self.db.execute("RELEASE page")
                self._scope_ids.clear()
                self._classes = None
                raise
            self.db.execute("RELEASE page")
            return result
        self._begin()
        try:
            result = work()
        except BaseException:
            self._rollback()
            raise
        self._commit()
        return result

    def _rollback(self) -> None:
        if self.db.in_transaction:  # SQLite may have rolled back already (a full disk)
            self.db.execute("ROLLBACK")
        self._scope_ids.clear()  # a scope inserted by the rolled-back work is gone
        self._classes = None  # and so is a freeze it made

    @contextlib.contextmanager
    def batch(self) -> Iterator[SQLiteIndex]:
        """Group many writes into one transaction (the offline scan): all of them or none."""
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
        crawl's output (feed exports buffer, a kill loses the buffer), so it is *unconfirmed*:
        a page matching only such pages is let through, trading a possible repeat for no loss.
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
        self._unclean = frozenset(run for run, *owner in open_runs if not _running(*owner))

    def end_run(self) -> None:
        """Close the run cleanly: what it admitted reached the output as far as this crawl knows."""
        if self._run is not None:
            run, self._run = self._run, None
            self._write(
                lambda: self.db.execute("UPDATE runs SET ended_at = ? WHERE id = ?", (time.time(), run))
            )

    def last_action(self) -> str | None:
        """What the latest crawl run did with duplicates (``drop`` or ``tag``); None for a scanned index."""
        with contextlib.suppress(sqlite3.OperationalError):  # a file made before runs were kept
            row = self.db.execute("SELECT action FROM runs ORDER BY id DESC LIMIT 1").fetchone()
            return row[0] if row else None
        return None

    def _earlier(self, key: str | None, scope_id: int | None, many: bool = False) -> Earlier | None:
        """The record a page with this revisit key is a revisit of: its admitted one, else its latest.

        With ``many`` (items), only records of earlier crawls: two items of one key in one crawl
        are two items, judged against each other.
        """
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

    def _unconfirmed(self, ids: list[int]) -> set[int]:
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

    # --- the one public decision ----------------------------------------------------------

    def check_and_add(
        self,
        url: str,
        fp: Fingerprint,
        scope: str = "",
        source: str | None = None,
        key: str | None = None,
        many: bool = False,
    ) -> Verdict:
        """Find the best earlier match of ``fp`` in its scope and record the page, atomically.

        A page not judged is recorded as skipped; a duplicate is recorded with what it
        duplicates; any other page is admitted and becomes findable. A page whose revisit
        ``key`` (its canonical URL) has a record already is a revisit: never a duplicate of
        itself, and its record is updated, not repeated. With ``many`` (items: a page may yield
        several under one URL), a changed one is recorded beside the others, not over them.
        """
        return self._write(lambda: self._check_and_add(url, fp, scope, source, key, many))

    def add(self, url: str, fp: Fingerprint, scope: str = "", source: str | None = None) -> Verdict:
        """Admit a page without checking it (an import of pages known to be distinct)."""
        stored = dataclasses.replace(fp, spots=spots32(fp.spots))

        def work() -> Verdict:
            if fp.judged:
                self._sync_order()  # posted in the file's order, frozen maybe by another process
            return self._record(url, stored, scope, None, source)

        return self._write(work)

    def find_raw(self, raw: int, scope: str = "", key: str | None = None) -> int | None:
        """An admitted document whose raw body is byte-identical to ``raw``'s page, or None.

        Lets a caller skip extraction for exact copies; it is a hint only, read outside
        any transaction: ``record_copy`` then records the page. None also where the full
        check must decide: a revisit (``key`` has a record) or an unconfirmed original.
        """
        scope_id = self._scope_id(scope, create=False)
        if scope_id is None or self._earlier(key, scope_id) is not None:
            return None
        row = self.db.execute(
            "SELECT doc FROM lookup_keys WHERE key = ? ORDER BY doc LIMIT 1",
            (_key(KIND["raw"], scope_id, raw >> 64),),
        ).fetchone()
        return row[0] if row and not self._unconfirmed([row[0]]) else None

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
                (url, source, scope_id, time.time(), self._run, key, original),
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

    def _check_and_add(
        self, url: str, fp: Fingerprint, scope: str, source: str | None, key: str | None, many: bool = False
    ) -> Verdict:
        if source is not None:  # the same source twice (two scans at once): a revisit, recorded once
            row = self.db.execute(
                "SELECT id, status, skip_reason FROM documents WHERE source = ? LIMIT 1", (source,)
            ).fetchone()
            if row is not None:
                return Verdict(url, row[0], row[1] == "duplicate", skip_reason=row[2], revisit="unchanged")
        earlier = self._earlier(key, self._scope_id(scope), many)
        if not fp.judged:
            if earlier is not None and earlier.status != "skipped":  # a failed fetch keeps the record
                return Verdict(url, earlier.id, False, skip_reason=fp.skip_reason)
            return self._record(url, fp, scope, None, source, key=key, replace=earlier)
        self._sync_order()
        scope_id = self._scope_id(scope)
        probe = dataclasses.replace(fp, spots=spots32(fp.spots))
        if "imatch" in self.config.methods and probe.terms:
            probe = imatch_with_stats(probe, self.config, self._term_stats(probe.terms))
        for own in self._rows(_SIGNATURE_COLUMNS, list(earlier.admitted) if earlier else [], scope_id):
            same = compare(probe, _row_fingerprint(own), self.config, self._verify_methods)
            if same.duplicate:  # unchanged, or a near-duplicate of its own version
                unconfirmed = bool(self._unconfirmed([own[0]]))  # its item may be lost: not to drop
                self.db.execute("UPDATE documents SET run = ? WHERE id = ?", (self._run, own[0]))
                return Verdict(
                    url, own[0], False, similarity=same.similarity, method=same.method, revisit="unchanged",
                    unconfirmed=unconfirmed,
                )  # fmt: skip
        replace = None if many else earlier
        order = self._walk(probe.spots) if self._spot_searched(probe.spots) else None
        own_ids = earlier.ids if earlier is not None else frozenset()
        matches = []
        for cand_id, cand in self._candidates(probe, scope_id, order):
            if cand_id in own_ids:
                continue
            result = compare(probe, cand, self.config, self._verify_methods)
            if result.duplicate:
                matches.append(
                    (DECISION_ORDER.index(result.method), -(result.similarity or 0.0), cand_id, result)
                )
                if matches[-1][0] == 0 and not self._unclean:
                    break  # an exact copy: nothing ranks higher but an older one
        unconfirmed = self._unconfirmed([m[2] for m in matches])
        best = min(((m[2] in unconfirmed, *m[:3]), m[3]) for m in matches) if matches else None
        match = best and (best[0][3], best[1].similarity, best[1].method)
        if best is not None and best[0][0]:  # only pages an interrupted run admitted: let it through
            verdict = self._record(url, probe, scope, None, source, order, key=key, replace=replace)
            return dataclasses.replace(
                verdict, duplicate_of=match[0], duplicate_of_url=self._url(match[0]), similarity=match[1],
                method=match[2], unconfirmed=True,
            )  # fmt: skip
        verdict = self._record(url, probe, scope, match, source, order, key=key, replace=replace)
        if replace is None:  # a new page, or another item of a page's URL
            return verdict
        # "unchanged" only while it stays what it was: a duplicate now admitted is new to the output.
        same = verdict.duplicate and earlier.exact is not None and earlier.exact == probe.exact
        return dataclasses.replace(verdict, revisit="unchanged" if same else "changed")

    def _url(self, doc_id: int) -> str:
        return self.db.execute("SELECT url FROM documents WHERE id = ?", (doc_id,)).fetchone()[0]

    # --- I-Match statistics ---------------------------------------------------------------

    def _term_stats(self, terms: tuple[str, ...]) -> CollectionStats:
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
        if self._classes is not None or "spotsigs" not in self.config.methods:
            return
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
        sets = [(doc, scope, _blob_spots(blob)) for doc, scope, blob in docs]
        spots, df = np.unique(np.concatenate([s.hashes for _, _, s in sets]), return_counts=True)
        classes = SpotClasses.from_frequencies(spots, df)
        self.db.executemany(
            "INSERT INTO spot_classes VALUES (?, ?)",
            zip(classes.spots.tolist(), classes.classes.tolist(), strict=True),
        )
        self.db.execute("INSERT INTO meta VALUES ('spot_order', 'classes')")
        self._classes = classes
        self.db.execute("DELETE FROM spot_lists")
        keys, docs = [], []
        for doc, scope, spot_set in sets:
            if not self._spot_searched(spot_set):
                continue  # never a SpotSigs match: not posted (see _post)
            posted = self._posting_keys(self._walk(spot_set), scope)
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
        if doc_id > _MAX_DOC:
            raise IndexFileError(self.path, "is full: posting lists hold document ids below 2**32")

    # --- candidates -----------------------------------------------------------------------

    def _lookup_keys(self, fp: Fingerprint, scope: int, posting: bool = False) -> list[int]:
        """Lookup keys of a page for every configured equality-lookup method (and its raw body)."""
        cfg, kinds = self.config, []
        methods = set(cfg.methods)
        if posting and fp.raw_hash is not None:
            kinds.append((KIND["raw"], fp.raw_hash >> 64))
        if "exact" in methods and fp.exact is not None:
            kinds.append((KIND["exact"], fp.exact >> 64))
        simhash_tables = self._store_simhash if posting else self._probe_simhash
        if "simhash" in methods and fp.simhash is not None and simhash_tables:
            tables = simhash_keys(fp.simhash, cfg.simhash_distance, cfg.simhash_tables)
            kinds += [(KIND["simhash"], t, bits) for t, bits in tables]
        if "minhash" in methods:
            kinds += [(KIND["minhash"], k) for k in fp.minhash_bands]
        if "shingles" in methods and fp.super_shingles is not None:
            kinds += [(KIND["shingles"], int(k)) for k in fp.super_shingles]
        if "imatch" in methods:
            kinds += [(KIND["imatch"], j, sig) for j, sig in enumerate(fp.imatch) if sig]
        if "ksentence" in methods and fp.ksentence is not None:
            kinds.append((KIND["ksentence"], fp.ksentence))
        return [_key(kind, scope, *values) for kind, *values in kinds]

    def _spot_searched(self, spots: SpotSet) -> bool:
        """Whether a page of these spots is searched and posted by SpotSigs (configured, and
        enough spots to ever be a match)."""
        return "spotsigs" in self.config.methods and spots.size >= self.config.spotsigs_least_spots

    def _walk(self, spots: SpotSet) -> Walk:
        """``spots`` in the index's order (frozen classes, else hash); a check makes it once, for its
        probe, its count filter and its own postings."""
        return walk(spots, self._classes)

    def _posting_keys(self, order: Walk, scope: int) -> list[int]:
        """A stored page's posting keys: its prefix, extended for the index's overlap, in its partition."""
        tau = self.config.spotsigs_threshold
        part = partition_of(order.size, tau)
        rare = prefix(order, tau, self._overlap_in(part))
        ranges = self._key_ranges(rare, order.classes[: len(rare)], part, np.full(len(rare), part), scope)
        return ranges[:, 0].tolist()

    def _overlap_in(self, part: int) -> int:
        """The shared spots the prefixes of a partition's documents are posted for."""
        large = self._overlap_large
        if large and partition_bounds(self.config.spotsigs_threshold)[part] >= large[0]:
            return large[1]
        return self._overlap

    def _probe_ranges(self, order: Walk, scope: int, parts: range, needs: list[int]) -> np.ndarray:
        """Posting key ranges a probe reads: each prefix spot over the partitions it reaches."""
        rare, reach = probe_reach(order, self.config.spotsigs_threshold, needs, parts)
        return self._key_ranges(rare, order.classes[: len(rare)], parts.start, reach, scope)

    def _key_ranges(
        self, spots: np.ndarray, classes: np.ndarray, first: int, last: np.ndarray, scope: int
    ) -> np.ndarray:
        """Signed (low, high) keys, a row a range, of each spot (of these frequency ``classes``)
        over partitions ``first`` to its ``last``."""
        scope, first = scope & _SCOPE_MASK, min(first, _MAX_PART)
        last = np.minimum(last, _MAX_PART).astype(np.uint64)
        if self._layout in ("spot-part", "rare-bucket"):  # low and high differ in the low bits only
            heads = spots.astype(np.uint64)
            if self._layout == "rare-bucket" and self._classes is not None:
                bucket = np.uint64(((1 << self._bucket_bits) - 1) << (32 - self._bucket_bits))
                heads = np.where(classes == 0, heads & bucket, heads)
            bases = ((np.uint64(scope) << np.uint64(32)) | heads) << np.uint64(12)
            return np.stack([bases | np.uint64(first), bases | last], axis=1).view(np.int64)
        keys = np.array(
            [
                signed((((scope << 12) | part) << 32) | s)
                for s, end in zip(spots.tolist(), last.tolist(), strict=True)
                for part in range(first, end + 1)
            ],
            dtype=np.int64,
        )
        return np.stack([keys, keys], axis=1)

    def _candidates(
        self, probe: Fingerprint, scope: int, order: Walk | None
    ) -> Iterator[tuple[int, Fingerprint]]:
        """Documents that could match ``probe`` by some configured method, loaded, in id order.

        Every index lookup is a necessary condition of its method, and each candidate is
        loaded once, with cheap exact bounds (length ratio, Hamming distance) applied before
        its spots are decoded.
        """
        found: set[int] = set()
        keys = self._lookup_keys(probe, scope)
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            rows = self.db.execute(
                f"SELECT doc FROM lookup_keys WHERE key IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update(r[0] for r in rows)
        tau = self.config.spotsigs_threshold
        if order is not None:  # made where the page is spot-searched
            parts = partitions_covering(probe.spots.size, tau)
            # A probe may ask fewer shared spots than a partition was posted for: a page asks
            # what its own size is posted for, so smaller pages read no longer prefixes.
            own = self._overlap_in(partition_of(probe.spots.size, tau))
            asked = [min(own, self._overlap_in(p)) for p in parts]
            needed = {k: overlap_needed(order, tau, k) for k in set(asked)}
            needs = [needed[k] for k in asked]
            ranges = self._probe_ranges(order, scope, parts, needs)
            found.update(self._sharing(ranges, parts, needs))
        if not found:
            return
        # The few columns the bounds need first; every signature only for the candidates that pass.
        bounds = self._rows(_BOUND_COLUMNS, sorted(found), scope)
        survivors = [row[0] for row in self._may_match(probe, bounds)]
        for row in self._rows(_SIGNATURE_COLUMNS, survivors, scope):
            yield row[0], _row_fingerprint(row)

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
            return _counted(lists, needs[0])
        # Only files of the layouts whose keys end in the partition post some for more spots.
        part = np.array([row[0] for row in lists], dtype=np.int64) & 4095
        need = np.array(needs)[np.clip(part - parts.start, 0, len(needs) - 1)].tolist()
        return [
            doc
            for value in set(needs)
            for doc in _counted([row for row, n in zip(lists, need, strict=True) if n == value], value)
        ]

    def _rows(self, columns: str, ids: list[int], scope: int) -> list[tuple]:
        rows: list[tuple] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows += self.db.execute(
                f"SELECT {columns} FROM documents WHERE id IN ({','.join('?' * len(chunk))}) "
                "AND scope = ? ORDER BY id",
                [*chunk, scope],
            ).fetchall()
        return rows

    def _may_match(self, probe: Fingerprint, rows: list[tuple]) -> list[tuple]:
        """The rows some configured method may call a match, by exact necessary conditions.

        Exact hash equality, the length bound ``min/max >= tau``, the Hamming distance, and
        then the multiset Jaccard of all remaining candidates at once (vectorized); pairs
        are only verified one by one (``compare``) when one of these says they may match.
        """
        cfg, methods = self.config, set(self.config.methods)
        if methods - {"spotsigs", "simhash", "exact"}:
            return rows  # the other methods are verified in full
        tau, size = cfg.spotsigs_threshold, probe.spots.size
        confirm = cfg.simhash_confirm if "simhash" in methods else None
        sure, maybe, need = [], [], []  # need: (row, Jaccard it must reach)
        for row in rows:
            _, exact, sim, spot_size = row[:4]
            if "exact" in methods and exact is not None and int.from_bytes(exact, "big") == probe.exact:
                sure.append(row)
                continue
            bar = None
            distance = None  # SimHash Hamming distance, read by both methods below
            if sim is not None and probe.simhash is not None:
                distance = (unsigned(sim) ^ probe.simhash).bit_count()
            if "spotsigs" in methods and spot_size and size:
                small, large = sorted((spot_size, size))
                if small >= tau * large - 1e-9 and cfg.spotsigs_trusted(small, distance):
                    bar = tau
            if confirm is not None and distance is not None and distance <= cfg.simhash_distance:
                if not confirm:
                    sure.append(row)
                    continue
                bar = confirm if bar is None else min(bar, confirm)
            if bar is not None and row[4]:
                need.append((row, bar))
        if need:
            jaccard = blob_jaccard(probe.spots, [row[4] for row, _ in need])
            maybe = [row for (row, bar), j in zip(need, jaccard, strict=True) if j >= bar - 1e-9]
        return sorted(sure + maybe)

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

    def _record(
        self,
        url: str,
        fp: Fingerprint,
        scope: str,
        match: Match | None,
        source: str | None,
        order: Walk | None = None,
        key: str | None = None,
        replace: Earlier | None = None,
    ) -> Verdict:
        """Store a page; ``fp.spots`` are already in the stored 32-bit form (``spots32``), and
        ``order`` is their walk where the check made it. A revisit ``replace``s its earlier record."""
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
            "spots": _spots_blob(spots) if status == "unique" and len(spots) else None,
            "minhash": _blob(fp.minhash, "<u4"),
            "minhash_bands": _blob(fp.minhash_bands, "<u8"),
            "super_shingles": _blob(fp.super_shingles, "<u8"),
            "imatch": _blob(fp.imatch, "<u8"),
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
            self._post(doc_id, fp, spots, scope_id, order)
            if "imatch" in self.config.methods and fp.terms:
                self._count_terms(fp.terms)
        if self.config.keep_text and fp.text:
            text = storable(fp.text[: self.config.keep_text]).encode("utf-8")
            self.db.execute("INSERT OR REPLACE INTO texts VALUES (?, ?)", (doc_id, zlib.compress(text, 6)))
        dup_url = self._url(match[0]) if match else None
        return Verdict(
            url=url, doc_id=doc_id, duplicate=bool(match), skip_reason=fp.skip_reason,
            duplicate_of=match[0] if match else None, duplicate_of_url=dup_url,
            similarity=match[1] if match else None, method=match[2] if match else None,
        )  # fmt: skip

    def _unpost(self, doc_id: int, scope: int) -> None:
        """Remove a revisited document's lookup keys (its spot postings stay: a stale posting only
        adds a candidate, which is verified against the stored spots)."""
        row = self.db.execute(
            f"SELECT status, raw_hash, {_SIGNATURE_COLUMNS} FROM documents WHERE id = ?", (doc_id,)
        ).fetchone()
        if row is None or row[0] != "unique":
            return
        old = dataclasses.replace(
            _row_fingerprint(row[2:]), raw_hash=unsigned(row[1]) << 64 if row[1] is not None else None
        )
        keys = self._lookup_keys(old, scope, posting=True)
        self.db.executemany("DELETE FROM lookup_keys WHERE key = ? AND doc = ?", [(k, doc_id) for k in keys])

    def _post(self, doc_id: int, fp: Fingerprint, spots: SpotSet, scope: int, order: Walk | None) -> None:
        keys = self._lookup_keys(fp, scope, posting=True)
        if self._spot_searched(spots):
            self._check_doc_id(doc_id)
            doc = doc_id.to_bytes(4, "little")
            order = order if order is not None else self._walk(spots)  # ``add`` makes none
            self.db.executemany(
                "INSERT INTO spot_lists VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET docs = CAST(docs || excluded.docs AS BLOB)",
                [(k, doc) for k in self._posting_keys(order, scope)],
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
            yield _clean_record(dict(zip(names, row, strict=True)))

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
        row = self.db.execute("SELECT 1 FROM documents WHERE source = ? LIMIT 1", (source,)).fetchone()
        return row is not None

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


class Checkpointer:
    """Copies the WAL back into the index file from a thread of its own, off the checks' path.

    A checkpoint made by the writing connection stalls the check that triggers it: at
    100,000 pages that was ~0.6 ms of an average check of ~1.9 ms. A passive checkpoint
    waits for no reader or writer, and ``sqlite3`` releases the GIL while it copies, so
    another core does it beside the checks. Errors (a busy or vanished file) are logged at
    DEBUG and the next round retries.
    """

    def __init__(self, path: Path | None, every: float = CHECKPOINT_EVERY) -> None:
        """Start copying ``path``'s WAL; with no path (a file SQLite could not put in WAL mode,
        so no WAL to copy), never run."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if path is not None:
            self._thread = threading.Thread(
                target=self._run, args=(str(path), every), name="neardup-checkpoint", daemon=True
            )
            self._thread.start()

    def _run(self, path: str, every: float) -> None:
        con = None
        try:
            con = sqlite3.connect(path, isolation_level=None)
            while not self._stop.wait(every):
                try:
                    con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:
                    logger.debug("background checkpoint of %s: %s", path, exc)
        except sqlite3.Error as exc:
            logger.debug("background checkpoints of %s stopped: %s", path, exc)
        finally:
            if con is not None:
                con.close()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait and self._thread is not None and self._thread.is_alive():
            self._thread.join()


def _counted(lists: list[tuple], need: int) -> list[int]:
    """The documents posted at least ``need`` times in rows ending in a posting list."""
    if not lists:
        return []
    # Sorted, a document is posted ``need`` times where an id equals the one ``need - 1`` on
    # (cheaper than counting every id with ``np.unique``; a check meets thousands).
    ids = np.sort(np.frombuffer(b"".join(row[-1] for row in lists), dtype="<u4"))
    step = max(need, 1) - 1
    if len(ids) <= step:
        return []
    return np.unique(ids[step:][ids[step:] == ids[: len(ids) - step]]).tolist()


def _blob(values: np.ndarray | tuple[int, ...] | None, dtype: str) -> bytes | None:
    """Little-endian bytes of an array or int tuple; None when there is nothing."""
    if values is None or len(values) == 0:
        return None
    return np.asarray(values, dtype=np.uint64 if dtype == "<u8" else np.uint32).astype(dtype).tobytes()


def _spots_blob(spots: SpotSet) -> bytes:
    """A stored multiset of 32-bit spots, in whichever of two forms is smaller.

    First byte 3: the sorted spots, each repeated as often as it occurs (4 bytes an occurrence).
    Most spots occur once (99.7 % of them in bench_index's corpus, 93 % on the aeb pages), so
    this is the usual form (the aeb pages' blobs take 0.84x the bytes of the other form
    alone). First byte 1 or 2: the distinct spots, then their counts in 1 or 2 bytes each
    (2 when a count exceeds 255), for pages with many repeats.
    """
    distinct, occurrences = len(spots), int(spots.counts.sum())
    if 4 * occurrences <= 1 + 5 * distinct:
        return b"\x03" + np.repeat(spots.hashes.astype("<u4"), spots.counts).tobytes()
    wide = int(spots.counts.max()) > 255
    counts = np.minimum(spots.counts, 65535).astype("<u2" if wide else "u1")
    return (b"\x02" if wide else b"\x01") + spots.hashes.astype("<u4").tobytes() + counts.tobytes()


def _blob_spots(blob: bytes | None) -> SpotSet:
    if not blob:
        return SpotSet(np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint32))
    if blob[0] == 3:
        hashes, counts, _ = _repeated_spots([blob])
        return SpotSet(hashes, counts.astype(np.uint32))
    width = blob[0]
    n = (len(blob) - 1) // (4 + width)
    hashes = np.frombuffer(blob, dtype="<u4", count=n, offset=1).astype(np.uint64)
    counts = np.frombuffer(blob, dtype="<u2" if width == 2 else "u1", offset=1 + 4 * n).astype(np.uint32)
    return SpotSet(hashes, counts)


def batch_jaccard(probe: SpotSet, sets: list[SpotSet]) -> np.ndarray:
    """Multiset Jaccard of ``probe`` with each of ``sets`` in one vectorized pass."""
    if not sets:
        return np.zeros(0)
    hashes = np.concatenate([s.hashes for s in sets])
    counts = np.concatenate([s.counts for s in sets])
    return _jaccard_flat(probe, hashes, counts, [len(s) for s in sets])


def blob_jaccard(probe: SpotSet, blobs: list[bytes]) -> np.ndarray:
    """``batch_jaccard`` straight from stored blobs: one numpy decode for each form."""
    forms = {blob[0] for blob in blobs}
    if len(forms) > 1:  # a file written before form 3, or pages with many repeats among them
        result = np.zeros(len(blobs))
        for form in forms:
            at = [i for i, blob in enumerate(blobs) if blob[0] == form]
            result[at] = blob_jaccard(probe, [blobs[i] for i in at])
        return result
    if forms == {3}:
        return _jaccard_flat(probe, *_repeated_spots(blobs))
    if forms == {1}:
        lengths = [(len(b) - 1) // 5 for b in blobs]
        pairs = list(zip(blobs, lengths, strict=True))
        hashes = np.frombuffer(b"".join([b[1 : 1 + 4 * n] for b, n in pairs]), "<u4")
        counts = np.frombuffer(b"".join([b[1 + 4 * n :] for b, n in pairs]), "u1")
        return _jaccard_flat(probe, hashes.astype(np.uint64), counts.astype(np.int64), lengths)
    return batch_jaccard(probe, [_blob_spots(b) for b in blobs])  # counts over 255: rare


def _repeated_spots(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Distinct spots, counts and distinct-spot lengths of form-3 blobs laid end to end."""
    spots = np.frombuffer(b"".join([b[1:] for b in blobs]), "<u4").astype(np.uint64)
    lengths = [(len(b) - 1) // 4 for b in blobs]
    owner = np.repeat(np.arange(len(blobs)), lengths)
    repeat = (spots[1:] == spots[:-1]) & (owner[1:] == owner[:-1])  # a spot occurring again
    if not repeat.any():
        return spots, np.ones(len(spots), dtype=np.int64), lengths
    starts = np.flatnonzero(~np.concatenate(([False], repeat)))
    counts = np.diff(np.append(starts, len(spots)))
    return spots[starts], counts, np.bincount(owner[starts], minlength=len(blobs)).tolist()


def _jaccard_flat(probe: SpotSet, hashes: np.ndarray, counts: np.ndarray, lengths: list[int]) -> np.ndarray:
    """Jaccard of ``probe`` with consecutive multisets laid end to end (``lengths`` spots each)."""
    if not len(probe) or not lengths:
        return np.zeros(len(lengths))
    owner = np.repeat(np.arange(len(lengths)), lengths)
    at = np.minimum(np.searchsorted(probe.hashes, hashes), len(probe) - 1)
    shared = np.where(probe.hashes[at] == hashes, np.minimum(counts, probe.counts[at]), 0)
    overlap = np.bincount(owner, weights=shared, minlength=len(lengths))
    sizes = np.bincount(owner, weights=counts, minlength=len(lengths))
    return overlap / (probe.size + sizes - overlap)


_BOUND_COLUMNS = "id, exact, simhash, spot_size, spots"
_SIGNATURE_COLUMNS = (
    "id, exact, simhash, spot_size, spots, minhash, minhash_bands, super_shingles, imatch, ksentence, "
    "tokens, language"
)


def _row_fingerprint(row: tuple) -> Fingerprint:
    """The stored signatures of a document (``_SIGNATURE_COLUMNS``), enough to verify a pair."""
    _, exact, sim, _, spots, mh, bands, sup, im, ks, tokens, language = row
    return Fingerprint(
        token_count=tokens, language=language or "und",
        exact=int.from_bytes(exact, "big") if exact else None,
        simhash=unsigned(sim) if sim is not None else None,
        spots=_blob_spots(spots),
        minhash=np.frombuffer(mh, dtype="<u4").astype(np.uint32) if mh else None,
        minhash_bands=tuple(int(x) for x in np.frombuffer(bands, dtype="<u8")) if bands else (),
        super_shingles=np.frombuffer(sup, dtype="<u8").astype(np.uint64) if sup else None,
        imatch=tuple(int(x) for x in np.frombuffer(im, dtype="<u8")) if im else (),
        ksentence=unsigned(ks) if ks is not None else None,
    )  # fmt: skip


def _running(started_at: float, host: str | None, pid: int | None) -> bool:
    """Whether the process of a run that has not ended still runs (another crawl on this file).

    A run of another host is taken as running; on this host its pid must be alive and, where
    /proc tells, have started no later than the run (a pid reused after a kill is not it).
    """
    if host != socket.gethostname():
        return True
    if pid is None or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return True
    return boot + ticks / os.sysconf("SC_CLK_TCK") <= started_at + 1.0


def damage_advice(exc: BaseException) -> str:
    """What to do about a damaged file, for the one-line errors that name it."""
    if "malformed" in str(exc) or "not a database" in str(exc):
        return "; restore it from a copy, recover what is readable (sqlite3 FILE .recover), or use a new file"
    return ""


_TEXT_FIELDS = ("url", "title", "scope", "status", "skip_reason", "language", "method")


def _clean_record(record: dict) -> dict:
    """A documents row as the report expects its types: a file edited or damaged by hand may hold
    bytes, text or out-of-range numbers anywhere, and one row must not stop a report."""
    for name in _TEXT_FIELDS:
        value = record[name]
        if isinstance(value, bytes):
            record[name] = value.decode("utf-8", errors="replace")
        elif value is not None and not isinstance(value, str):
            record[name] = str(value)
    record["url"] = record["url"] or ""
    seen = record["seen_at"]
    record["seen_at"] = float(seen) if isinstance(seen, (int, float)) and 0 <= seen < 1e11 else 0.0
    similarity = record["similarity"]
    ok = isinstance(similarity, (int, float)) and 0.0 <= similarity <= 1.0
    record["similarity"] = float(similarity) if ok else None
    tokens = record["tokens"]
    record["tokens"] = tokens if isinstance(tokens, int) and tokens >= 0 else 0
    if not isinstance(record["duplicate_of"], int):
        record["duplicate_of"] = None
    return record
