"""The memory engine: the engine protocol over dicts, in one process, gone with it.

``MemoryIndex`` is the ledger over it: every admitted page a candidate of every probe, so it
finds what a pairwise check finds by construction. It is the oracle the SQLite and Redis
indexes are tested against, and an index for tests and small one-off jobs (``memory:``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ...config import DedupConfig
from ...exceptions import IndexFileError
from ..ledger import Ledger

if TYPE_CHECKING:
    from ..location import IndexSpec

_MISSING = object()


def _restore(table: dict, key: Hashable, old: Any) -> None:
    if old is _MISSING:
        table.pop(key, None)
    else:
        table[key] = old


class MemoryEngine:
    """Documents, sets and maps in dicts; a transaction keeps an undo log, so a failure inside
    it leaves everything as it was."""

    path = name = "memory"

    def __init__(self) -> None:
        self.state: dict[str, dict] = {"docs": {}, "sets": {}, "maps": {}, "ids": {}, "ranks": {}}
        self._undo: list[Callable[[], None]] | None = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        outer, self._undo = self._undo, []
        try:
            yield
        except BaseException:
            for undo in reversed(self._undo):
                undo()
            self._undo = outer
            raise
        done, self._undo = self._undo, outer
        if outer is not None:
            outer.extend(done)  # inside a batch: the batch's failure undoes it too

    def _change(self, part: str, key: Hashable) -> dict:
        """The entry ``key`` of a part of the state, its old value kept for an undo."""
        table = self.state[part]
        if self._undo is not None:
            old = table.get(key, _MISSING)  # never changed in place: a change puts a new value
            self._undo.append(lambda: _restore(table, key, old))
        return table

    def new_id(self, kind: str) -> int:
        ids = self._change("ids", kind)
        ids[kind] = ids.get(kind, 0) + 1
        return ids[kind]

    def put(self, kind: str, doc: int, fields: dict[str, Any]) -> None:
        docs = self._change("docs", (kind, doc))
        merged = {**docs.get((kind, doc), {}), **fields}
        docs[(kind, doc)] = {k: v for k, v in merged.items() if v is not None}

    def get(
        self, kind: str, docs: Sequence[int], fields: Sequence[str] | None = None
    ) -> list[dict[str, Any] | None]:
        found = self.state["docs"]
        return [dict(found[(kind, d)]) if (kind, d) in found else None for d in docs]

    def compare_and_set(self, kind: str, doc: int, field: str, expected: Any, value: Any) -> bool:
        found = self.get(kind, [doc])[0]
        if found is None or found.get(field) != expected:
            return False
        self.put(kind, doc, {field: value})
        return True

    def delete(self, kind: str, doc: int) -> None:
        self._change("docs", (kind, doc)).pop((kind, doc), None)

    def listing(self, kind: str) -> Iterator[int]:
        return iter(sorted(d for k, d in list(self.state["docs"]) if k == kind))

    def add(self, name: str, key: Hashable, doc: int) -> None:
        sets = self._change("sets", (name, key))
        sets[(name, key)] = sets.get((name, key), set()) | {doc}

    def discard(self, name: str, key: Hashable, doc: int) -> None:
        sets = self._change("sets", (name, key))
        left = sets.get((name, key), set()) - {doc}
        if left:
            sets[(name, key)] = left
        else:
            sets.pop((name, key), None)

    def members(self, name: str, keys: Sequence[Hashable]) -> list[set[int]]:
        return [set(self.state["sets"].get((name, key), ())) for key in keys]

    def map_get(self, name: str, fields: Sequence[str] | None = None) -> dict[str, Any]:
        found = self.state["maps"].get(name, {})
        return dict(found) if fields is None else {f: found[f] for f in fields if f in found}

    def map_set(self, name: str, values: dict[str, Any]) -> None:
        maps = self._change("maps", name)
        merged = {**maps.get(name, {}), **values}
        maps[name] = {k: v for k, v in merged.items() if v is not None}

    def incr(self, name: str, field: str, by: int = 1) -> int:
        value = int(self.map_get(name, [field]).get(field, 0)) + by
        self.map_set(name, {field: value})
        return value

    def bump(self, name: str, field: str, by: int = 1) -> None:
        self.incr(name, field, by)

    def rank(self, name: str, doc: int, score: float | None) -> None:
        ranks = self._change("ranks", name)
        merged = {**ranks.get(name, {}), doc: score}
        ranks[name] = {d: s for d, s in merged.items() if s is not None}

    def ranked(self, name: str, below: float | None = None, beyond: int | None = None) -> list[int]:
        return _ranked(self.state["ranks"].get(name, {}), below, beyond)

    def clear(self, names: Sequence[str], kinds: Sequence[str]) -> None:
        for name in names:
            if name in self.state["ranks"]:
                self._change("ranks", name).pop(name)
            if name in self.state["maps"]:
                self._change("maps", name).pop(name)
            for key in [key for key in self.state["sets"] if key[0] == name]:
                self._change("sets", key).pop(key)
        for key in [key for key in self.state["docs"] if key[0] in kinds]:
            self._change("docs", key).pop(key)

    def size(self) -> int:
        return 0  # no storage to measure

    def close(self) -> None:
        pass


def _ranked(scores: dict[int, float], below: float | None, beyond: int | None) -> list[int]:
    """The documents of an order (doc -> score) below a score or past its ``beyond`` highest."""
    order = sorted(scores, key=lambda doc: (scores[doc], doc))
    out = len(order) - beyond if beyond is not None else 0
    return [doc for i, doc in enumerate(order) if i < out or (below is not None and scores[doc] < below)]


class MemoryIndex(Ledger):
    """The ledger over a memory engine: a new, empty index."""

    def __init__(self, config: DedupConfig) -> None:
        super().__init__(MemoryEngine(), config)

    def at_once(self) -> contextlib.AbstractContextManager[None]:
        """Every work answers at once: nothing to wait for (``lanes.Lanes``)."""
        return contextlib.nullcontext()

    @classmethod
    def from_spec(cls, spec: IndexSpec, config: DedupConfig) -> MemoryIndex:
        return cls(config)

    @classmethod
    def existing(cls, spec: IndexSpec) -> MemoryIndex:
        raise IndexFileError("memory", "an index in memory is gone with its process; nothing to read")

    @classmethod
    def reset(cls, spec: IndexSpec) -> None:
        """Nothing to delete: each one starts empty."""

    @classmethod
    def failure_line(cls, spec: IndexSpec, exc: Exception) -> str | None:
        return None  # nothing stored to fail

    def is_storage_error(self, exc: Exception) -> bool:
        return False  # no storage to fail: every error here is a bug

    def failure_advice(self, exc: Exception) -> str:
        return "a bug: please report it with this page"
