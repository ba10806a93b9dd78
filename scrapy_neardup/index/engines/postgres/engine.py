"""The PostgreSQL engine: the engine protocol over one schema's tables (``tables``), in the
transactions of a ``session.Session`` (which says how a check stays exact under concurrency).
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Any

from ...base import Conflict
from ...stores import DOC, KINDS, LOOKUP, MAPS, ORDERS, SETS, SetStore
from .packing import lookup_bucket, lookup_entries, lookup_entry, lookup_row
from .session import Session, ints, lock_key
from .tables import DERIVED, SQL_TYPES, bucket_read

DOCS = DOC.table  # the documents' table (counts and orders are read from its columns)

_INTEGER = re.compile(r"-?[0-9]{1,19}")


class PostgresEngine(Session):
    """The engine protocol over the tables of ``schema`` (``Session`` holds the connection)."""

    # --- documents ------------------------------------------------------------------------

    def new_id(self, kind: str) -> int:
        if KINDS[kind].checked and self._next_doc is not None:
            asked, self._next_doc = self._next_doc, None
            return int(asked.fetchone()[0])
        return int(self.execute("SELECT nextval(%s::regclass)", [self.t(kind + "_ids")]).fetchone()[0])

    def put(self, kind: str, doc: int, fields: dict[str, Any]) -> None:
        table, column = self.t(KINDS[kind].table), KINDS[kind].id_column
        names = list(fields)
        updates = ", ".join(f"{name} = EXCLUDED.{name}" for name in names) or f"{column} = EXCLUDED.{column}"
        self.later(
            (kind, doc),
            f"INSERT INTO {table} ({', '.join([column, *names])}) VALUES (%s{', %s' * len(names)}) "
            f"ON CONFLICT ({column}) DO UPDATE SET {updates}",
            [doc, *map(_storable, fields.values())],
        )

    def get(
        self, kind: str, docs: Sequence[int], fields: Sequence[str] | None = None
    ) -> list[dict[str, Any] | None]:
        table, column = self.t(KINDS[kind].table), KINDS[kind].id_column
        columns = "*" if fields is None else ", ".join(dict.fromkeys([column, *fields]))
        query = f"SELECT {columns} FROM {table} WHERE {column} = ANY(%s::bigint[])"
        cursor = self.execute(query, [ints(docs)])
        rows = cursor.fetchall()  # first: the names come with the rows
        names = cursor.names
        found = {}
        for row in rows:
            values = dict(zip(names, row, strict=True))
            found[values.pop(column)] = {k: _value(v) for k, v in values.items() if v is not None}
        return [found.get(doc) for doc in docs]

    def compare_and_set(self, kind: str, doc: int, field: str, expected: Any, value: Any) -> bool:
        """One UPDATE that changes the row only while it holds ``expected``: another process's
        change waits for the row's lock, and then the condition is read again."""
        table, column = self.t(KINDS[kind].table), KINDS[kind].id_column
        cast = SQL_TYPES[KINDS[kind].fields.get(field, str)]
        done = self.execute(
            f"UPDATE {table} SET {field} = %s::{cast} WHERE {column} = %s "
            f"AND {field} IS NOT DISTINCT FROM %s::{cast} RETURNING 1",
            [_storable(value), doc, _storable(expected)],
        )
        return done.fetchone() is not None

    def delete(self, kind: str, doc: int) -> None:
        self.execute(f"DELETE FROM {self.t(KINDS[kind].table)} WHERE {KINDS[kind].id_column} = %s", [doc])

    def listing(self, kind: str) -> Iterator[int]:
        table, column, last = self.t(KINDS[kind].table), KINDS[kind].id_column, -1
        while True:  # pages of ids, each its own query: a million-page report streams
            rows = self.execute(
                f"SELECT {column} FROM {table} WHERE {column} > %s ORDER BY {column} LIMIT 1000", [last]
            ).fetchall()
            if not rows:
                return
            yield from (row[0] for row in rows)
            last = rows[-1][0]

    # --- sets, maps and orders --------------------------------------------------------------

    def add(self, name: str, key: Hashable, doc: int) -> None:
        if SETS[name].packed:
            row = lookup_row(key, doc)
            self.later(
                (name, row),
                f"INSERT INTO {self.t(SETS[name].table[0])} AS l VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET docs = l.docs || EXCLUDED.docs",
                [row, lookup_entry(key, doc)],
            )
        elif name not in DERIVED:
            self.execute(
                f"INSERT INTO {self.t('sets')} VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                [name, _key(key), doc],
            )

    def discard(self, name: str, key: Hashable, doc: int) -> None:
        if SETS[name].packed:
            self._discard_lookup(name, key, doc)
        elif name not in DERIVED:
            self.execute(
                f"DELETE FROM {self.t('sets')} WHERE name = %s AND key = %s AND doc = %s",
                [name, _key(key), doc],
            )

    def members(self, name: str, keys: Sequence[Hashable]) -> list[set[int]]:
        if name in DERIVED:
            query = f"SELECT id FROM {self.t('documents')} WHERE {DERIVED[name]}"
            args = [list(key) if isinstance(key, tuple) else [key] for key in keys]
            if SETS[name].waited and self._depth:
                # A page's first record (its revisit key, its source) may be being written by another
                # process checking the same page: read once that one is done (a revisit, then).
                self.lock([lock_key(name, _key(key)) for key in keys])
            return [{row[0] for row in self.execute(query, arg)} for arg in args]
        if SETS[name].packed:
            query, args = self.lookup_read(keys, name)
            return self.lookup_members([blob for (blob,) in self.execute(query, args)], keys)
        found: dict[Any, set[int]] = {}
        wanted = [_key(key) for key in keys]
        rows = self.execute(
            f"SELECT key, doc FROM {self.t('sets')} WHERE name = %s AND key = ANY(%s)", [name, wanted]
        )
        for key, doc in rows:
            found.setdefault(key, set()).add(doc)
        return [found.get(key, set()) for key in wanted]

    # --- lookup keys, packed (``packing``) ------------------------------------------------------

    def lookup_read(self, keys: Sequence[Any], name: str = LOOKUP.name) -> tuple[str, list[Any]]:
        """The query for the rows that may hold ``keys`` (their ``docs``, for ``lookup_members``)."""
        lows = [lookup_bucket(key) for key in keys]
        rows = bucket_read(self.t(SETS[name].table[0]), "r.low")
        return f"SELECT l.docs FROM unnest(%s::bigint[]) AS r(low), {rows} AS l", [ints(lows)]

    @staticmethod
    def lookup_members(blobs: Iterable[Any], keys: Sequence[Any]) -> list[set[int]]:
        entries = lookup_entries(bytes(blob) for blob in blobs)
        found: dict[int, set[int]] = {}
        for key, doc in zip(entries["key"].tolist(), entries["doc"].tolist(), strict=True):
            found.setdefault(key, set()).add(doc)
        return [found.get(key, set()) for key in keys]

    def _discard_lookup(self, name: str, key: int, doc: int) -> None:
        table, row = self.t(SETS[name].table[0]), lookup_row(key, doc)
        found = self.execute(f"SELECT docs FROM {table} WHERE key = %s FOR UPDATE", [row]).fetchone()
        if found is None:
            return
        entries = lookup_entries([bytes(found[0])])
        kept = entries[~((entries["key"] == key) & (entries["doc"] == doc))]
        if len(kept):
            self.execute(f"UPDATE {table} SET docs = %s WHERE key = %s", [kept.tobytes(), row])
        else:
            self.execute(f"DELETE FROM {table} WHERE key = %s", [row])

    def map_get(self, name: str, fields: Sequence[str] | None = None) -> dict[str, Any]:
        if MAPS[name].counted:
            column = MAPS[name].counted
            return dict(self.execute(f"SELECT {column}, COUNT(*) FROM {self.t(DOCS)} GROUP BY {column}"))
        found = self._map_read(name, fields)
        missing = [field for field in fields or () if field not in found]
        if MAPS[name].first_wins and missing and self._depth:
            # A value not set yet (a new scope) may be being set: wait for that process, read again.
            # Its pages were searched with no lock of theirs to meet (no scope, no keys).
            self.lock([lock_key(name, field) for field in missing])
            found = self._map_read(name, fields)
        return found

    def _map_read(self, name: str, fields: Sequence[str] | None) -> dict[str, Any]:
        table, key, value, named = self._map(name)
        where, args = " AND ".join(["TRUE", *(["name = %s"] if named else [])]), list(named)
        if fields is not None:
            where, args = f"{where} AND {key} = ANY(%s)", [*args, list(fields)]
        rows = self.execute(f"SELECT {key}, {value} FROM {table} WHERE {where}", args)
        return {
            field: int(value) if _INTEGER.fullmatch(value) else value
            for field, value in rows
            if value is not None
        }

    def _map(self, name: str) -> tuple[str, str, str, list[str]]:
        """A map's table, its key and value columns, and the name its rows carry there (in the
        table of maps; none in a table of its own)."""
        store = MAPS[name]
        if store.marks and store.table:
            return self.t(store.table[0]), store.table[1], store.table[2], []
        return self.t("maps"), "field", "value", [name]

    def _map_upsert(self, name: str, update: str) -> tuple[str, int]:
        """An INSERT of a map's field and value, ``update`` on conflict (``m`` the row there); how
        many leading values (the map's name) it takes before them."""
        table, key, _, named = self._map(name)
        target = ", ".join([*(["name"] if named else []), key])
        marks = ", ".join(["%s"] * (len(named) + 2))
        return f"INSERT INTO {table} AS m VALUES ({marks}) ON CONFLICT ({target}) {update}", len(named)

    def map_set(self, name: str, values: dict[str, Any]) -> None:
        table, key, value_column, named = self._map(name)
        for field, value in values.items():
            if value is None:
                where = " AND ".join([*(["name = %s"] if named else []), f"{key} = %s"])
                self.execute(f"DELETE FROM {table} WHERE {where}", [*named, field])
            elif MAPS[name].first_wins:
                self._first_wins(name, field, str(value))
            else:
                query, _ = self._map_upsert(name, f"DO UPDATE SET {value_column} = EXCLUDED.{value_column}")
                self.execute(query, [*named, field, str(value)])

    def _first_wins(self, name: str, field: str, value: str) -> None:
        """A value set once (a scope's id): another process's, set first, makes this check again."""
        query, _ = self._map_upsert(name, "DO NOTHING RETURNING 1")
        made = self.execute(query, [*self._map(name)[3], field, value]).fetchone()
        if not made:
            raise Conflict(f"{name} {field!r} was given another value by another process")

    def incr(self, name: str, field: str, by: int = 1) -> int:
        if MAPS[name].counted:
            return 0  # read from the documents' column
        value = self._map(name)[2]
        query, _ = self._map_upsert(
            name,
            f"DO UPDATE SET {value} = (CASE WHEN m.{value} ~ '^-?[0-9]{{1,18}}$' THEN m.{value}::bigint "
            f"ELSE 0 END + EXCLUDED.{value}::bigint)::text RETURNING {value}",
        )
        return int(self.execute(query, [*self._map(name)[3], field, str(by)]).fetchone()[0])

    def bump(self, name: str, field: str, by: int = 1) -> None:
        self.incr(name, field, by)

    def rank(self, name: str, doc: int, score: float | None) -> None:
        """Nothing: an order is read from its column, which the ledger writes."""

    def ranked(self, name: str, below: float | None = None, beyond: int | None = None) -> list[int]:
        column, table = ORDERS[name].field, self.t(DOCS)
        query = (
            f"SELECT id FROM {table} WHERE {column} < %s OR id IN (SELECT id FROM {table} "
            f"ORDER BY {column} DESC, id DESC OFFSET %s) ORDER BY {column}, id"
        )
        return [row[0] for row in self.execute(query, [below, 2**62 if beyond is None else beyond])]

    def clear(self, names: Sequence[str], kinds: Sequence[str]) -> None:
        for name in names:
            store = SETS.get(name) or MAPS.get(name)
            if isinstance(store, SetStore) and store.packed and store.table:
                self.execute(f"DELETE FROM {self.t(store.table[0])}")
            elif name not in DERIVED and not getattr(store, "counted", ""):
                self.execute(f"DELETE FROM {self.t('maps')} WHERE name = %s", [name])
                self.execute(f"DELETE FROM {self.t('sets')} WHERE name = %s", [name])
        for kind in kinds:
            self.execute(f"DELETE FROM {self.t(KINDS[kind].table)}")

    def size(self) -> int:
        """The bytes of the index's tables with their indexes and TOAST."""
        query = (
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
        )
        return int(self.execute(query, [self.schema.strip('"').replace('""', '"')]).fetchone()[0])


def _key(key: Hashable) -> str:
    """A set's key as text (a tuple as a JSON list)."""
    return json.dumps(list(key) if isinstance(key, tuple) else key)


def _storable(value: Any) -> Any:
    """A text PostgreSQL can hold: a NUL character (a page's title may have one) escaped."""
    return value.replace("\x00", "\\x00") if isinstance(value, str) and "\x00" in value else value


def _value(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value
