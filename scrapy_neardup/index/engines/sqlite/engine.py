"""The SQLite engine: the engine protocol over the index file's own tables (``schema``), laid out
as the ledger's stores declare (``stores``).

Documents are rows of their kind's table, kept sets and maps rows of theirs. The sets a
record's own columns hold (its revisit key, its source, its scope's admitted pages, its
original's duplicates), the counts by status and the order of when pages were last seen are
read from the documents table, so adding to them writes nothing: a user's SQL sees one row a
page. A transaction is BEGIN IMMEDIATE, or a savepoint inside one (a page of a batch).
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ....config import DedupConfig
from ....text import storable
from ...stores import KINDS, MAPS, ORDERS, SETS
from .file import IndexFile
from .opening import file_bytes
from .search import SQLiteSearch

DERIVED = {store.name: store.condition("?") for store in SETS.values() if store.of}
_CHUNK = 500  # values bound in one statement


class SQLiteEngine:
    """The engine protocol over one index file (``file.IndexFile``)."""

    def __init__(self, path: str | Path, config: DedupConfig, timeout: float = 60.0, read_only: bool = False):
        simhash_keys = not config.simhash_within_spotsigs
        self.file = IndexFile(path, config, timeout, simhash_keys, self._rolled_back, read_only)
        self.db, self.path, self.name = self.file.db, self.file.path, storable(Path(path).name)
        self.search = SQLiteSearch(self.db, config, self.file.spot_keys, self.path, simhash_keys)
        self._savepoints = 0
        self._fresh: set[tuple[str, int]] = set()  # ids new_id gave that no row has yet

    def _rolled_back(self) -> None:
        if hasattr(self, "search"):
            self.search.forget()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if not self.db.in_transaction:
            self.search.begin()
            self._fresh.clear()  # ids of a transaction only: the file's write lock keeps them ours
            with self.file.transaction():
                yield
            return
        self._savepoints += 1
        name = f"s{self._savepoints}"
        self.db.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            if self.db.in_transaction:
                self.db.execute(f"ROLLBACK TO {name}")
                self.db.execute(f"RELEASE {name}")
            self.search.forget()
            raise
        finally:
            self._savepoints -= 1
        self.db.execute(f"RELEASE {name}")

    def new_id(self, kind: str) -> int:
        table, column = KINDS[kind].table, KINDS[kind].id_column
        top = self.db.execute("SELECT value FROM meta WHERE key = ?", (f"top_{kind}",)).fetchone()
        doc = self.db.execute(f"SELECT COALESCE(MAX({column}), 0) + 1 FROM {table}").fetchone()[0]
        doc = max(doc, int(top[0]) + 1 if top and str(top[0]).isdigit() else 0)  # not a deleted one's
        self._fresh.add((kind, doc))
        return doc

    def put(self, kind: str, doc: int, fields: dict[str, Any]) -> None:
        """An INSERT of a row new_id just numbered, else an UPDATE of the row, else an INSERT (an
        upsert would meet the NOT NULL columns a partial update leaves out)."""
        table, column = KINDS[kind].table, KINDS[kind].id_column
        names = list(fields)
        fresh = (kind, doc) in self._fresh
        self._fresh.discard((kind, doc))
        if names and not fresh:
            sets = ", ".join(f"{name} = ?" for name in names)
            done = self.db.execute(f"UPDATE {table} SET {sets} WHERE {column} = ?", [*fields.values(), doc])
            if done.rowcount:
                return
        self.db.execute(
            f"INSERT INTO {table} ({', '.join([column, *names])}) VALUES (?{', ?' * len(names)})",
            [doc, *fields.values()],
        )

    def get(
        self, kind: str, docs: Sequence[int], fields: Sequence[str] | None = None
    ) -> list[dict[str, Any] | None]:
        table, column = KINDS[kind].table, KINDS[kind].id_column
        columns = "*" if fields is None else ", ".join(dict.fromkeys([column, *fields]))
        found: dict[int, dict[str, Any]] = {}
        for start in range(0, len(docs), _CHUNK):
            chunk = list(docs[start : start + _CHUNK])
            cursor = self.db.execute(
                f"SELECT {columns} FROM {table} WHERE {column} IN ({_marks(chunk)})", chunk
            )
            names = [c[0] for c in cursor.description]
            for row in cursor:
                values = dict(zip(names, row, strict=True))
                found[values.pop(column)] = {k: v for k, v in values.items() if v is not None}
        return [found.get(doc) for doc in docs]

    def compare_and_set(self, kind: str, doc: int, field: str, expected: Any, value: Any) -> bool:
        table, column = KINDS[kind].table, KINDS[kind].id_column
        done = self.db.execute(
            f"UPDATE {table} SET {field} = ? WHERE {column} = ? AND {field} IS ?", (value, doc, expected)
        )
        return done.rowcount == 1

    def delete(self, kind: str, doc: int) -> None:
        """Delete the row; the highest id deleted is kept, so that new_id never gives it again."""
        self.db.execute(f"DELETE FROM {KINDS[kind].table} WHERE {KINDS[kind].id_column} = ?", (doc,))
        if KINDS[kind].counter is not None:  # numbered: its highest number kept
            self.db.execute(
                "INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = "
                "MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                (f"top_{kind}", doc),
            )

    def listing(self, kind: str) -> Iterator[int]:
        table, column = KINDS[kind].table, KINDS[kind].id_column
        return (row[0] for row in self.db.execute(f"SELECT {column} FROM {table} ORDER BY {column}"))

    def add(self, name: str, key: Hashable, doc: int) -> None:
        if SETS[name].table:  # else derived: the record's own columns hold it
            table, key_column, member = SETS[name].table
            self.db.execute(
                f"INSERT OR IGNORE INTO {table} ({key_column}, {member}) VALUES (?, ?)", (key, doc)
            )

    def discard(self, name: str, key: Hashable, doc: int) -> None:
        if SETS[name].table:
            table, key_column, member = SETS[name].table
            self.db.execute(f"DELETE FROM {table} WHERE {key_column} = ? AND {member} = ?", (key, doc))

    def members(self, name: str, keys: Sequence[Hashable]) -> list[set[int]]:
        if name in DERIVED:
            query = f"SELECT id FROM documents WHERE {DERIVED[name]}"
            args = [key if isinstance(key, tuple) else (key,) for key in keys]
            return [{row[0] for row in self.db.execute(query, arg)} for arg in args]
        table, key_column, member = SETS[name].table
        found: dict[Any, set[int]] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = list(keys[start : start + _CHUNK])
            query = f"SELECT {key_column}, {member} FROM {table} WHERE {key_column} IN ({_marks(chunk)})"
            for key, doc in self.db.execute(query, chunk):
                found.setdefault(key, set()).add(doc)
        return [found.get(key, set()) for key in keys]

    def map_get(self, name: str, fields: Sequence[str] | None = None) -> dict[str, Any]:
        if MAPS[name].counted:
            column = MAPS[name].counted
            return dict(self.db.execute(f"SELECT {column}, COUNT(*) FROM documents GROUP BY {column}"))
        table, key_column, value = MAPS[name].table
        query = f"SELECT {key_column}, {value} FROM {table} WHERE {value} IS NOT NULL"
        if fields is None:
            return dict(self.db.execute(query))
        found: dict[str, Any] = {}
        for start in range(0, len(fields), _CHUNK):
            chunk = list(fields[start : start + _CHUNK])
            found.update(
                self.db.execute(f"{query} AND {key_column} IN ({','.join('?' * len(chunk))})", chunk)
            )
        return found

    def map_set(self, name: str, values: dict[str, Any]) -> None:
        table, key_column, value = MAPS[name].table
        self.db.executemany(
            f"INSERT INTO {table} ({key_column}, {value}) VALUES (?, ?) "
            f"ON CONFLICT({key_column}) DO UPDATE SET {value} = excluded.{value}",
            list(values.items()),
        )

    def incr(self, name: str, field: str, by: int = 1) -> int:
        if MAPS[name].counted:
            return 0  # read from the documents' column
        table, key_column, value = MAPS[name].table
        self.db.execute(
            f"INSERT INTO {table} ({key_column}, {value}) VALUES (?, ?) "
            f"ON CONFLICT({key_column}) DO UPDATE SET {value} = CAST({value} AS INTEGER) + excluded.{value}",
            (field, by),
        )
        return int(
            self.db.execute(f"SELECT {value} FROM {table} WHERE {key_column} = ?", (field,)).fetchone()[0]
        )

    def bump(self, name: str, field: str, by: int = 1) -> None:
        self.incr(name, field, by)

    def rank(self, name: str, doc: int, score: float | None) -> None:
        """Nothing: an order is read from its column, which the ledger writes."""

    def ranked(self, name: str, below: float | None = None, beyond: int | None = None) -> list[int]:
        column = ORDERS[name].field
        query = (
            f"SELECT id FROM documents WHERE {column} < ? OR id IN (SELECT id FROM documents "
            f"ORDER BY {column} DESC, id DESC LIMIT -1 OFFSET ?) ORDER BY {column}, id"
        )
        return [row[0] for row in self.db.execute(query, (below, 2**62 if beyond is None else beyond))]

    def clear(self, names: Sequence[str], kinds: Sequence[str]) -> None:
        kept = [MAPS[n].table if n in MAPS else SETS[n].table for n in names]
        tables = {found[0] for found in kept if found} | {KINDS[k].table for k in kinds}
        for table in sorted(tables):
            self.db.execute(f"DELETE FROM {table}")

    def size(self) -> int:
        return file_bytes(self.path)

    def close(self) -> None:
        self.file.close()


def _marks(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))
