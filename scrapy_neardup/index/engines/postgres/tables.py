"""The PostgreSQL index's tables, all in one schema of its own (the location's ``prefix``).

The ledger's stores are laid out as they are declared (``stores``). Documents are rows of their
kind's table, with a column a field (bigint, double precision, text, bytea; counts and small
ids integer, ``Kind.narrow``); ids come from
sequences, never given twice. Lookup keys and SpotSigs lists are tables of their own, many
postings a row (``packing``); the other sets and maps are rows of two narrow tables. The sets a
record's columns hold (its revisit key, source, scope, original) and the counts by status
are read from the documents, as the SQLite engine does: no row is shared by every page, so
concurrent checks do not conflict on a counter.
"""

from __future__ import annotations

from ...stores import KINDS, MAPS, SETS

SQL_TYPES = {int: "bigint", float: "double precision", str: "text", bytes: "bytea"}
_WIDTH = {"bigint": 0, "double precision": 0, "integer": 1}  # fixed widths first, widest first
# Sets read from the documents' own columns: the condition on a key.
DERIVED = {store.name: store.condition("%s") for store in SETS.values() if store.of}
_OWN_MAPS = tuple(store.table[0] for store in MAPS.values() if store.marks and store.table)
MARK = _OWN_MAPS[0]  # the table that marks a schema as an index's (its meta)
_KEPT_SETS = tuple(store.table[0] for store in SETS.values() if store.packed and store.table)
# Every table and sequence the index makes: a reset drops these (and empties the tables that
# mark the schema as the index's, until it is made again), nothing else.
OWN = (*_OWN_MAPS, "maps", "sets", *_KEPT_SETS, "spot_lists", "spot_classes")
OWN += tuple(kind.table for kind in KINDS.values())
SEQUENCES = tuple(f"{kind.name}_ids" for kind in KINDS.values() if kind.counter)


def create_statements(schema: str) -> list[str]:
    """The statements that make an index in ``schema`` (a quoted identifier)."""
    table = f"CREATE TABLE IF NOT EXISTS {schema}"
    own_maps = [store.table for store in MAPS.values() if store.marks and store.table]
    packed = "(key bigint PRIMARY KEY, docs bytea NOT NULL) WITH (fillfactor = 90)"
    statements = [
        f"CREATE SCHEMA IF NOT EXISTS {schema}",
        *(f"{table}.{name} ({key} text PRIMARY KEY, {value} text NOT NULL)" for name, key, value in own_maps),
        f"{table}.maps (name text, field text, value text, PRIMARY KEY (name, field))",
        f"{table}.sets (name text, key text, doc bigint, PRIMARY KEY (name, key, doc))",
        *(f"{table}.{name} {packed}" for name in _KEPT_SETS),
        f"{table}.spot_lists {packed}",
        f"{table}.spot_classes (spot bigint PRIMARY KEY, class integer NOT NULL)",
    ]
    for kind in KINDS.values():
        columns = [f"{kind.id_column} bigint PRIMARY KEY"]
        types = {name: SQL_TYPES[of] for name, of in kind.fields.items()}
        types.update(dict.fromkeys(kind.narrow, "integer"))
        order = sorted(types, key=lambda field: _WIDTH.get(types[field], 2))
        columns += [f"{field} {types[field]}" for field in order]
        statements.append(f"{table}.{kind.table} ({', '.join(columns)})")
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
