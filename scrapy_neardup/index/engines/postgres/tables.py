"""The PostgreSQL index's tables, all in one schema of its own (the location's ``prefix``).

Documents are rows of their kind's table, with a column a field (``records.FIELD_TYPES``:
bigint, double precision, text, bytea; counts and small ids integer); ids come from
sequences, never given twice. Lookup keys and SpotSigs lists are tables of their own, many
postings a row (``packing``); the other sets and maps are rows of two narrow tables. The sets a
record's columns hold (its revisit key, source, scope, original) and the counts by status
are read from the documents, as the SQLite engine does: no row is shared by every page, so
concurrent checks do not conflict on a counter.
"""

from __future__ import annotations

from ...records import FIELD_TYPES

TABLES = {"doc": "documents", "run": "runs", "skip": "url_skips", "text": "texts", "pending": "pending"}
ID = {"text": "doc", "pending": "doc"}  # the id column of a table whose id is not ``id``
SQL_TYPES = {int: "bigint", float: "double precision", str: "text", bytes: "bytea"}
# Counts and small ids, in 4 bytes: side by side after the 8-byte columns, so none is padded.
NARROW = {"scope": "integer", "tokens": "integer", "spot_size": "integer", "run": "integer"}
_WIDTH = {"bigint": 0, "double precision": 0, "integer": 1}  # fixed widths first, widest first
# Sets read from the documents' own columns: the condition on a key.
DERIVED = {
    "url": "scope = %s AND url_key = %s", "src": "source = %s",
    "admitted": "status = 'unique' AND scope = %s", "dup": "duplicate_of = %s",
}  # fmt: skip
ORDERS = {"seen": "last_seen"}  # orders read from the documents' columns
# Every table and sequence the index makes: a reset drops these (and empties ``meta``, which
# marks the schema as the index's until it is made again), nothing else.
OWN = ("meta", "maps", "sets", "lookup_keys", "spot_lists", "spot_classes", *TABLES.values())
SEQUENCES = tuple(f"{kind}_ids" for kind in ("doc", "run", "skip"))


def create_statements(schema: str) -> list[str]:
    """The statements that make an index in ``schema`` (a quoted identifier)."""
    table = f"CREATE TABLE IF NOT EXISTS {schema}"
    statements = [
        f"CREATE SCHEMA IF NOT EXISTS {schema}",
        f"{table}.meta (key text PRIMARY KEY, value text NOT NULL)",
        f"{table}.maps (name text, field text, value text, PRIMARY KEY (name, field))",
        f"{table}.sets (name text, key text, doc bigint, PRIMARY KEY (name, key, doc))",
        f"{table}.lookup_keys (key bigint PRIMARY KEY, docs bytea NOT NULL) WITH (fillfactor = 90)",
        f"{table}.spot_lists (key bigint PRIMARY KEY, docs bytea NOT NULL) WITH (fillfactor = 90)",
        f"{table}.spot_classes (spot bigint PRIMARY KEY, class integer NOT NULL)",
    ]
    for kind, name in TABLES.items():
        columns = [f"{ID.get(kind, 'id')} bigint PRIMARY KEY"]
        types = {field: NARROW.get(field, SQL_TYPES[of]) for field, of in FIELD_TYPES[kind].items()}
        order = sorted(types, key=lambda field: _WIDTH.get(types[field], 2))
        columns += [f"{field} {types[field]}" for field in order]
        statements.append(f"{table}.{name} ({', '.join(columns)})")
    statements += [f"CREATE SEQUENCE IF NOT EXISTS {schema}.{name}" for name in SEQUENCES]
    index = "CREATE INDEX IF NOT EXISTS"
    statements += [
        f"{index} documents_url_key ON {schema}.documents (url_key, scope)",
        f"{index} documents_source ON {schema}.documents (source) WHERE source IS NOT NULL",
        f"{index} documents_duplicate_of ON {schema}.documents (duplicate_of) WHERE duplicate_of IS NOT NULL",
        f"{index} documents_last_seen ON {schema}.documents (last_seen)",
        f"ALTER TABLE {schema}.documents ALTER COLUMN spots SET STORAGE MAIN",  # compressed in its row
    ]
    return statements


def bucket_read(table: str, low: str) -> str:
    """A LATERAL subquery of the rows of the bucket of ``table`` whose keys are ``low`` to
    ``low`` + 4095 (``packing``). Ordered by key and limited to those 4096 keys, so that the
    generic plan, which cannot see ``low``, reads them by an index scan: unordered, at 10**6
    pages it expected thousands of rows a bucket and built a bitmap for each (docs/postgres.md,
    "Differences from SQLite")."""
    rows = f"SELECT key, docs FROM {table} WHERE key BETWEEN {low} AND {low} + 4095"
    return f"LATERAL ({rows} ORDER BY key LIMIT 4096)"
