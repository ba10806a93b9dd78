"""SQLiteIndex: the default, persistent index, one file a user can open in any SQLite tool.

Tables (schema version in ``PRAGMA user_version``):

- ``meta``: what the index was built with (the knobs that shape stored signatures).
- ``documents``: every page checked, duplicates and skipped pages included, with its
  verdict and the signatures needed to verify a candidate. Nothing a crawl saw is lost.
- ``texts``: the first ``keep_text`` characters of each page's main text (zlib), for the report.
- ``spot_postings``: SpotSigs inverted lists ``(scope, partition, spot) -> doc`` for each
  admitted document's prefix (see ``pruning``).
- ``lookup_keys``: equality lookups ``(kind, scope, key) -> doc`` for exact hashes,
  SimHash blocks, MinHash bands, super-shingles, I-Match and K-sentence signatures.

Only admitted (non-duplicate) pages get postings: the index stands for what was stored.
``check_and_add`` runs in one ``BEGIN IMMEDIATE`` transaction, so processes sharing the
file serialize on it and two copies can never both be admitted.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import xxhash

from ..config import DedupConfig
from ..exceptions import IndexFileError
from ..fingerprint import Fingerprint, needed_methods
from ..signatures.spotsigs import SpotSet
from ..verify import DECISION_ORDER, compare
from .base import Verdict
from .pruning import partition_of, partitions_covering, prefix

SCHEMA_VERSION = 1
APPLICATION = "scrapy-neardup"

# The knobs whose change makes stored signatures or postings incomparable.
SHAPING_KNOBS = (
    "methods", "spotsigs_threshold", "spotsigs_specs", "simhash_distance", "simhash_shingle", "minhash_perm",
    "minhash_shingle", "minhash_bands", "minhash_threshold", "shingles_size", "imatch_lexicons",
    "imatch_drop", "ksentence_k", "language",
)  # fmt: skip

# A match found for a new page: (document id, similarity, method).
Match = tuple[int, "float | None", "str | None"]

KIND = {"exact": 1, "simhash": 2, "minhash": 3, "shingles": 4, "imatch": 5, "ksentence": 6}

SCHEMA = """
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
    raw_hash BLOB,
    exact BLOB,
    simhash INTEGER,
    spot_size INTEGER,
    spots BLOB,
    minhash BLOB,
    minhash_bands BLOB,
    super_shingles BLOB,
    imatch BLOB,
    ksentence INTEGER
);
CREATE INDEX IF NOT EXISTS documents_url ON documents(url);
CREATE INDEX IF NOT EXISTS documents_source ON documents(source) WHERE source IS NOT NULL;
CREATE INDEX IF NOT EXISTS documents_duplicate_of ON documents(duplicate_of) WHERE duplicate_of IS NOT NULL;
CREATE TABLE IF NOT EXISTS texts (doc INTEGER PRIMARY KEY, text BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS spot_postings (
    scope INTEGER NOT NULL, part INTEGER NOT NULL, spot INTEGER NOT NULL, doc INTEGER NOT NULL,
    PRIMARY KEY (scope, part, spot, doc)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lookup_keys (
    kind INTEGER NOT NULL, scope INTEGER NOT NULL, key INTEGER NOT NULL, doc INTEGER NOT NULL,
    PRIMARY KEY (kind, scope, key, doc)
) WITHOUT ROWID;
"""


def signed(value: int) -> int:
    """An unsigned 64-bit value as SQLite's signed INTEGER."""
    return value - (1 << 64) if value >= 1 << 63 else value


def unsigned(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


def _key(*parts: int) -> int:
    """A signed 64-bit lookup key for a tuple of ints (a block index and its bits, say)."""
    return signed(xxhash.xxh3_64_intdigest(b"".join(p.to_bytes(8, "little", signed=False) for p in parts)))


def simhash_blocks(value: int, distance: int) -> list[int]:
    """Keys of the ``distance + 1`` contiguous bit blocks: pages within ``distance`` bits share one."""
    blocks = distance + 1
    edges = [round(i * 64 / blocks) for i in range(blocks + 1)]
    return [
        _key(i, (value >> lo) & ((1 << (hi - lo)) - 1))
        for i, (lo, hi) in enumerate(itertools.pairwise(edges))
    ]


class SQLiteIndex:
    """Persistent candidate search over admitted pages, with every verdict recorded."""

    def __init__(self, path: str | Path, config: DedupConfig, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.config = config
        needed = needed_methods(config)
        self._verify_methods = tuple(m for m in DECISION_ORDER if m in needed)
        self._scope_ids: dict[str, int] = {}
        self._in_batch = False
        try:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
            self.db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self._open()
        except sqlite3.DatabaseError as exc:
            raise IndexFileError(self.path, f"cannot be used as an index ({exc})") from None
        except OSError as exc:
            raise IndexFileError(self.path, f"cannot be created ({exc.strerror or exc})") from None

    @classmethod
    def open_existing(cls, path: str | Path) -> SQLiteIndex:
        """Open an index with the settings it was built with (for reports and stats)."""
        try:
            con = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
            try:
                row = con.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()
            finally:
                con.close()
        except sqlite3.Error as exc:
            raise IndexFileError(path, f"is not a scrapy-neardup index ({exc})") from None
        if row is None:
            raise IndexFileError(path, "is not a scrapy-neardup index")
        stored = json.loads(row[0])
        return cls(path, DedupConfig.from_options({k: v for k, v in stored.items() if k in SHAPING_KNOBS}))

    # --- opening --------------------------------------------------------------------------

    def _open(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if version == 0 and not tables:
            self.db.execute("PRAGMA journal_mode = WAL")
            self._write(self._create)
        elif version != SCHEMA_VERSION or "meta" not in tables:
            what = (
                "is not a scrapy-neardup index" if "meta" not in tables else f"has schema version {version}"
            )
            raise IndexFileError(self.path, f"{what}; this version reads {SCHEMA_VERSION} (use another file)")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self._check_meta()

    def _create(self) -> None:
        """Create the schema inside the caller's transaction (executescript would commit it)."""
        for statement in SCHEMA.split(";"):
            if statement.strip():
                self.db.execute(statement)
        self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        rows = [("application", APPLICATION), ("created_at", str(time.time())), ("config", self._shaping())]
        self.db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", rows)

    def _shaping(self) -> str:
        values = {name: getattr(self.config, name) for name in SHAPING_KNOBS}
        values["minhash_lsh"] = self.config.minhash_lsh
        return json.dumps(values, sort_keys=True)

    def _check_meta(self) -> None:
        meta = dict(self.db.execute("SELECT key, value FROM meta"))
        if meta.get("application") != APPLICATION:
            raise IndexFileError(self.path, "is not a scrapy-neardup index")
        stored, current = json.loads(meta["config"]), json.loads(self._shaping())
        for name in SHAPING_KNOBS:
            if stored.get(name) != current.get(name):
                raise IndexFileError(
                    self.path,
                    f"was built with {name} = {stored.get(name)!r}, not {current.get(name)!r}; "
                    f"use the same NEARDUP_{name.upper()} or a new index file",
                )

    # --- transactions ---------------------------------------------------------------------

    def _write(self, work, retries: int = 5):
        """Run ``work`` in one BEGIN IMMEDIATE transaction (or inside the open batch)."""
        if self._in_batch:
            return work()
        for attempt in range(retries):
            try:
                self.db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == retries - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
                continue
            try:
                result = work()
            except BaseException:
                self.db.execute("ROLLBACK")
                self._scope_ids.clear()  # a scope inserted by the rolled-back work is gone
                raise
            self.db.execute("COMMIT")
            return result
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def batch(self) -> Iterator[SQLiteIndex]:
        """Group many writes into one transaction (the offline scan): all of them or none."""
        if self._in_batch:
            yield self
            return
        self.db.execute("BEGIN IMMEDIATE")
        self._in_batch = True
        try:
            yield self
        except BaseException:
            self._in_batch = False
            self.db.execute("ROLLBACK")
            self._scope_ids.clear()
            raise
        self._in_batch = False
        self.db.execute("COMMIT")

    # --- the one public decision ----------------------------------------------------------

    def check_and_add(self, url: str, fp: Fingerprint, scope: str = "", source: str | None = None) -> Verdict:
        """Find the best earlier match of ``fp`` in its scope and record the page, atomically.

        A page not judged is recorded as skipped; a duplicate is recorded with what it
        duplicates; any other page is admitted and becomes findable.
        """
        return self._write(lambda: self._check_and_add(url, fp, scope, source))

    def add(self, url: str, fp: Fingerprint, scope: str = "", source: str | None = None) -> Verdict:
        """Admit a page without checking it (an import of pages known to be distinct)."""
        return self._write(lambda: self._record(url, fp, scope, None, source))

    def _check_and_add(self, url: str, fp: Fingerprint, scope: str, source: str | None) -> Verdict:
        if not fp.judged:
            return self._record(url, fp, scope, None, source)
        best = None
        for cand_id in sorted(self._candidates(fp, self._scope_id(scope))):
            cand = self._load(cand_id)
            result = compare(fp, cand, self.config, self._verify_methods)
            if result.duplicate:
                rank = (DECISION_ORDER.index(result.method), -(result.similarity or 0.0), cand_id)
                if best is None or rank < best[0]:
                    best = (rank, cand_id, result)
        return self._record(url, fp, scope, best and (best[1], best[2].similarity, best[2].method), source)

    # --- candidates -----------------------------------------------------------------------

    def _lookup_keys(self, fp: Fingerprint) -> list[tuple[int, int]]:
        """(kind, key) pairs of a page for every configured equality-lookup method."""
        cfg, keys = self.config, []
        methods = set(cfg.methods)
        if "exact" in methods and fp.exact is not None:
            keys.append((KIND["exact"], signed(fp.exact >> 64)))
        if "simhash" in methods and fp.simhash is not None:
            keys += [(KIND["simhash"], k) for k in simhash_blocks(fp.simhash, cfg.simhash_distance)]
        if "minhash" in methods:
            keys += [(KIND["minhash"], signed(k)) for k in fp.minhash_bands]
        if "shingles" in methods and fp.super_shingles is not None:
            keys += [(KIND["shingles"], signed(int(k))) for k in fp.super_shingles]
        if "imatch" in methods:
            keys += [(KIND["imatch"], _key(j, sig)) for j, sig in enumerate(fp.imatch) if sig]
        if "ksentence" in methods and fp.ksentence is not None:
            keys.append((KIND["ksentence"], signed(fp.ksentence)))
        return keys

    def _candidates(self, fp: Fingerprint, scope: int) -> set[int]:
        found: set[int] = set()
        keys = self._lookup_keys(fp)
        if keys:
            rows = self.db.execute(
                "SELECT DISTINCT doc FROM lookup_keys WHERE (kind, scope, key) IN "
                f"(VALUES {','.join('(?, ?, ?)' for _ in keys)})",
                [v for kind, key in keys for v in (kind, scope, key)],
            )
            found.update(r[0] for r in rows)
        if "spotsigs" in self.config.methods and fp.spots.size:
            tau = self.config.spotsigs_threshold
            spots = [signed(int(s)) for s in prefix(fp.spots, tau)]
            for part in partitions_covering(fp.spots.size, tau):
                for start in range(0, len(spots), 500):
                    chunk = spots[start : start + 500]
                    rows = self.db.execute(
                        "SELECT DISTINCT doc FROM spot_postings WHERE scope = ? AND part = ? AND spot IN "
                        f"({','.join('?' * len(chunk))})",
                        [scope, part, *chunk],
                    )
                    found.update(r[0] for r in rows)
        return found

    # --- storage --------------------------------------------------------------------------

    def _scope_id(self, name: str) -> int:
        if name not in self._scope_ids:
            row = self.db.execute("SELECT id FROM scopes WHERE name = ?", (name,)).fetchone()
            if row is None:  # always inside a write transaction
                row = (self.db.execute("INSERT INTO scopes (name) VALUES (?)", (name,)).lastrowid,)
            self._scope_ids[name] = row[0]
        return self._scope_ids[name]

    def _record(
        self, url: str, fp: Fingerprint, scope: str, match: Match | None, source: str | None
    ) -> Verdict:
        scope_id = self._scope_id(scope)
        status = "skipped" if not fp.judged else ("duplicate" if match else "unique")
        spots = fp.spots
        row = {
            "url": url, "title": fp.title or None, "source": source, "scope": scope_id,
            "seen_at": time.time(), "status": status,
            "skip_reason": fp.skip_reason, "tokens": fp.token_count, "language": fp.language,
            "duplicate_of": match[0] if match else None, "similarity": match[1] if match else None,
            "method": match[2] if match else None,
            "raw_hash": fp.raw_hash.to_bytes(16, "big") if fp.raw_hash is not None else None,
            "exact": fp.exact.to_bytes(16, "big") if fp.exact is not None else None,
            "simhash": signed(fp.simhash) if fp.simhash is not None else None,
            "spot_size": spots.size if fp.judged else None,
            "spots": _spots_blob(spots) if fp.judged and len(spots) else None,
            "minhash": _blob(fp.minhash, "<u4"),
            "minhash_bands": _blob(fp.minhash_bands, "<u8"),
            "super_shingles": _blob(fp.super_shingles, "<u8"),
            "imatch": _blob(fp.imatch, "<u8"),
            "ksentence": signed(fp.ksentence) if fp.ksentence is not None else None,
        }  # fmt: skip
        cols = ", ".join(row)
        doc_id = self.db.execute(
            f"INSERT INTO documents ({cols}) VALUES ({', '.join('?' * len(row))})", list(row.values())
        ).lastrowid
        if status == "unique":
            self._post(doc_id, fp, scope_id)
        if self.config.keep_text and fp.text:
            text = fp.text[: self.config.keep_text].encode("utf-8", errors="replace")
            self.db.execute("INSERT INTO texts VALUES (?, ?)", (doc_id, zlib.compress(text, 6)))
        dup_url = None
        if match:
            dup_url = self.db.execute("SELECT url FROM documents WHERE id = ?", (match[0],)).fetchone()[0]
        return Verdict(
            url=url, doc_id=doc_id, duplicate=bool(match), skip_reason=fp.skip_reason,
            duplicate_of=match[0] if match else None, duplicate_of_url=dup_url,
            similarity=match[1] if match else None, method=match[2] if match else None,
        )  # fmt: skip

    def _post(self, doc_id: int, fp: Fingerprint, scope: int) -> None:
        keys = self._lookup_keys(fp)
        self.db.executemany(
            "INSERT OR IGNORE INTO lookup_keys VALUES (?, ?, ?, ?)",
            [(k, scope, key, doc_id) for k, key in keys],
        )
        if "spotsigs" in self.config.methods and fp.spots.size:
            tau = self.config.spotsigs_threshold
            part = partition_of(fp.spots.size, tau)
            self.db.executemany(
                "INSERT OR IGNORE INTO spot_postings VALUES (?, ?, ?, ?)",
                [(scope, part, signed(int(s)), doc_id) for s in prefix(fp.spots, tau)],
            )

    def _load(self, doc_id: int) -> Fingerprint:
        """The stored signatures of a document, enough to verify it against a new page."""
        row = self.db.execute(
            "SELECT exact, simhash, spots, minhash, minhash_bands, super_shingles, imatch, ksentence, "
            "tokens, language FROM documents WHERE id = ?",
            (doc_id,),
        ).fetchone()
        exact, sim, spots, mh, bands, sup, im, ks, tokens, language = row
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

    # --- reading --------------------------------------------------------------------------

    def get(self, doc_id: int) -> dict | None:
        """One document's record (url, scope, status, verdict, sizes), or None."""
        return next(self._records("WHERE d.id = ?", (doc_id,)), None)

    def text(self, doc_id: int) -> str | None:
        """The main text kept for a document (its first ``keep_text`` characters), or None."""
        row = self.db.execute("SELECT text FROM texts WHERE doc = ?", (doc_id,)).fetchone()
        return zlib.decompress(row[0]).decode("utf-8", errors="replace") if row else None

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
            yield dict(zip(names, row, strict=True))

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
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        return {
            "documents": sum(counts.values()), "unique": counts.get("unique", 0),
            "duplicates": counts.get("duplicate", 0), "skipped": counts.get("skipped", 0), "bytes": size,
        }  # fmt: skip

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.db.close()

    def __enter__(self) -> SQLiteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _blob(values: np.ndarray | tuple[int, ...] | None, dtype: str) -> bytes | None:
    """Little-endian bytes of an array or int tuple; None when there is nothing."""
    if values is None or len(values) == 0:
        return None
    return np.asarray(values, dtype=np.uint64 if dtype == "<u8" else np.uint32).astype(dtype).tobytes()


def _spots_blob(spots: SpotSet) -> bytes:
    return spots.hashes.astype("<u8").tobytes() + spots.counts.astype("<u4").tobytes()


def _blob_spots(blob: bytes | None) -> SpotSet:
    if not blob:
        return SpotSet(np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint32))
    n = len(blob) // 12
    hashes = np.frombuffer(blob[: 8 * n], dtype="<u8").astype(np.uint64)
    counts = np.frombuffer(blob[8 * n :], dtype="<u4").astype(np.uint32)
    return SpotSet(hashes, counts)
