"""The SQLite index's tables, its schema version and the settings a file is built with.

Tables (schema version in ``PRAGMA user_version``):

- ``meta``: what the index was built with (the knobs that shape stored signatures, the
  posting-key settings of ``spot_search.SpotKeys``).
- ``documents``: every page checked, duplicates and skipped pages included, with its
  verdict, the signatures needed to verify a candidate and when it was last seen (pages not
  seen for long are forgotten where the user asks).
- ``runs``: crawl runs, with their heartbeats; a page admitted by a run that died (it never
  ended and stopped beating) may never have been stored.
- ``pending``: the pages a run admitted while it runs, with the request that fetched each (JSON,
  ``crawl.kept_requests``): fetched again if the run dies, deleted when it closes.
- ``spot_classes``: the frozen frequency classes that order spots rarest first (see ``pruning``).
- ``term_df``: document frequencies of the admitted pages' terms (``methods.Method.with_stats``).
- ``texts``: the first ``keep_text`` characters of each page's main text (zlib), for the report.
- ``spot_lists``: SpotSigs inverted lists, one row a key (``spot_search.SpotKeys``): the ids of
  the admitted documents whose prefix holds it, as a blob of little-endian uint32s.
- ``lookup_keys``: equality lookups ``key -> doc`` (``lookup_keys``).
- ``url_rules``, ``url_skips``, ``url_skip_rules``: learned URL rules, the requests they skipped
  (JSON, as ``pending``) and which rules skipped each.
- views ``pages`` and ``duplicates``: the records and the duplicate pairs, for a user's own queries.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from ..config import PRESETS, SHAPING_KNOBS, DedupConfig
from ..exceptions import IndexFileError
from ..methods import STORED_FIELDS
from . import spot_search
from .spot_search import SpotKeys

SCHEMA_VERSION = 1
APPLICATION = "scrapy-neardup"

# Small pages: a check touches B-tree leaves at random keys, and each one goes to the WAL whole.
PAGE_SIZE = 1024

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE scopes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY, started_at REAL NOT NULL, ended_at REAL, action TEXT, host TEXT, pid INTEGER,
    beat_at REAL, claimed_by INTEGER, recovered_at REAL
);
CREATE TABLE pending (doc INTEGER PRIMARY KEY, run INTEGER NOT NULL, request BLOB NOT NULL);
CREATE TABLE documents (
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
    @METHOD_COLUMNS@
    extra TEXT,
    run INTEGER REFERENCES runs(id),
    url_key TEXT,
    last_seen REAL
);
CREATE INDEX documents_url ON documents(url);
CREATE INDEX documents_source ON documents(source) WHERE source IS NOT NULL;
CREATE INDEX documents_duplicate_of ON documents(duplicate_of) WHERE duplicate_of IS NOT NULL;
CREATE INDEX documents_url_key ON documents(url_key, scope);
CREATE INDEX documents_last_seen ON documents(last_seen);
CREATE TABLE spot_classes (spot INTEGER PRIMARY KEY, class INTEGER NOT NULL);
CREATE TABLE term_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE texts (doc INTEGER PRIMARY KEY, text BLOB NOT NULL);
CREATE TABLE spot_lists (key INTEGER PRIMARY KEY, docs BLOB NOT NULL);
CREATE TABLE lookup_keys (key INTEGER NOT NULL, doc INTEGER NOT NULL, PRIMARY KEY (key, doc)) WITHOUT ROWID;
CREATE TABLE url_rules (
    rule TEXT PRIMARY KEY, same INTEGER NOT NULL DEFAULT 0, differ INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'learning', changed_at REAL
) WITHOUT ROWID;
CREATE TABLE url_skips (
    id INTEGER PRIMARY KEY, url TEXT NOT NULL, target TEXT NOT NULL, request BLOB NOT NULL,
    revived INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE url_skip_rules (
    rule TEXT NOT NULL, skip INTEGER NOT NULL REFERENCES url_skips(id), PRIMARY KEY (rule, skip)
) WITHOUT ROWID;
CREATE VIEW pages AS
    SELECT d.id, d.url, d.title, s.name AS scope, datetime(d.seen_at, 'unixepoch') AS seen, d.status,
           d.skip_reason, d.tokens, d.language, d.duplicate_of, d.similarity, d.method, d.source, d.run
    FROM documents d JOIN scopes s ON s.id = d.scope;
CREATE VIEW duplicates AS
    SELECT d.id, d.url, o.id AS original_id, o.url AS original_url, d.similarity, d.method
    FROM documents d JOIN documents o ON o.id = d.duplicate_of
    WHERE d.status = 'duplicate'
"""
# Each method's own columns come from the registry (``methods.STORED_FIELDS``).
SCHEMA = _SCHEMA.replace(
    "@METHOD_COLUMNS@", "".join(f"{s.field} {s.sql},\n    " for s in STORED_FIELDS).rstrip(" \n")
)


def execute_statements(db: sqlite3.Connection, sql: str) -> None:
    """Run the statements of ``sql`` inside the caller's transaction (executescript would
    commit it)."""
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


def create(db: sqlite3.Connection, config: DedupConfig, simhash_keys: bool) -> None:
    """Create the schema inside the caller's transaction."""
    execute_statements(db, SCHEMA)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", meta_rows(config, simhash_keys))


def meta_rows(config: DedupConfig, simhash_keys: bool) -> list[tuple[str, str]]:
    """What a new index records of how it is built (its ``meta``, in any backend)."""
    return [
        ("application", APPLICATION), ("schema", str(SCHEMA_VERSION)), ("created_at", str(time.time())),
        ("config", shaping(config)), ("spot_overlap", str(spot_search.SPOT_OVERLAP)),
        ("spot_overlap_large", f"{spot_search.LARGE_PAGE_SPOTS} {spot_search.SPOT_OVERLAP_LARGE}"),
        ("spot_bucket_bits", str(spot_search.RARE_BUCKET_BITS)),
        ("simhash_keys", "1" if simhash_keys else "0"),
    ]  # fmt: skip


def shaping(config: DedupConfig) -> str:
    return json.dumps(config.shaping(), sort_keys=True)


def check_version(path: Path, version: int, tables: set[str]) -> None:
    """Refuse a file that is not an index of this schema."""
    if "meta" not in tables:
        raise IndexFileError(path, "is not a scrapy-neardup index (use another file)")
    if version != SCHEMA_VERSION or "pending" not in tables:
        raise IndexFileError(
            path,
            f"has schema version {version}; this release reads version {SCHEMA_VERSION} only (the file is "
            "of a development version or of a newer release): start a new index (NEARDUP_RESET = True or "
            "another file), or use the release that wrote it",
        )


def spot_keys(
    meta: dict[str, str], config: DedupConfig, path: object, remedy: str = "a new index file"
) -> tuple[SpotKeys, bool]:
    """The file's posting-key settings and whether it stores SimHash keys, after checking that
    ``config`` shapes signatures the way the file was built."""
    if meta.get("application") != APPLICATION:
        raise IndexFileError(path, "is not a scrapy-neardup index")
    stored, current = json.loads(meta["config"]), json.loads(shaping(config))
    for name in SHAPING_KNOBS:
        if stored.get(name) != current.get(name):
            preset = name in PRESETS[config.preset]
            by_preset = f" (NEARDUP_PRESET = {config.preset!r} sets it)" if preset else ""
            raise IndexFileError(
                path,
                f"was built with {name} = {stored.get(name)!r}, not {current.get(name)!r}{by_preset}; "
                f"use the same NEARDUP_{name.upper()} or {remedy} (NEARDUP_RESET = True starts it afresh)",
            )
    large = tuple(int(v) for v in meta["spot_overlap_large"].split())
    overlap, bits = int(meta["spot_overlap"]), int(meta["spot_bucket_bits"])
    keys = SpotKeys(config.spotsigs_threshold, overlap, (large[0], large[1]), bits)
    return keys, meta["simhash_keys"] == "1"


def config_from_meta(meta: dict[str, str], name: object) -> DedupConfig:
    """The shaping knobs an index's ``meta`` records, as a configuration (the rest default)."""
    try:
        stored = json.loads(meta["config"])
        options = {k: v for k, v in stored.items() if k in SHAPING_KNOBS}
        if meta.get("simhash_keys") == "0":  # built with a confirm that needs no SimHash tables
            options["simhash_confirm"] = max(DedupConfig().simhash_confirm, stored["spotsigs_threshold"])
        return DedupConfig.from_options(options)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise IndexFileError(name, f"has damaged settings in its meta ({exc!r})") from None
