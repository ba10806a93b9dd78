"""A toy engine, this module and one line in ``index.BACKENDS`` (the tests add it): the engine
protocol over one dict, kept in a JSON file between crawls, under the same ledger as every
other index.

It shows what an engine owns: its storage (documents, sets, maps), its transactions (here a
copy of the dict, put back on a failure), its reset (only a file of its own is deleted), its
name in messages and its test of a storage failure. Everything else is the ledger's.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

from scrapy_neardup.exceptions import IndexFileError
from scrapy_neardup.index import schema
from scrapy_neardup.index.ledger import Ledger

MAGIC = "toy-neardup-index"


def _key(*parts: Hashable) -> str:
    """A JSON object's key for a set or document (tuples as lists)."""
    return json.dumps([list(p) if isinstance(p, tuple) else p for p in parts])


def _out(value: Any) -> Any:
    return {"b64": base64.b64encode(value).decode()} if isinstance(value, bytes) else value


def _in(value: Any) -> Any:
    return base64.b64decode(value["b64"]) if isinstance(value, dict) else value


class ToyEngine:
    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path, self.name, self.read_only = path, path.name, read_only
        self.data: dict[str, dict] = {"docs": {}, "sets": {}, "maps": {}}
        if path.exists():
            self.data = _load(path)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        saved = copy.deepcopy(self.data)  # inside a batch too: a failed page undoes itself only
        try:
            yield
        except BaseException:
            self.data = saved
            raise

    def new_id(self, kind: str) -> int:
        return self.incr("ids", kind)

    def put(self, kind: str, doc: int, fields: dict[str, Any]) -> None:
        merged = {**self.data["docs"].get(_key(kind, doc), {}), **{k: _out(v) for k, v in fields.items()}}
        self.data["docs"][_key(kind, doc)] = {k: v for k, v in merged.items() if v is not None}

    def get(self, kind: str, docs: Sequence[int], fields: Sequence[str] | None = None) -> list[dict | None]:
        found = [self.data["docs"].get(_key(kind, doc)) for doc in docs]
        return [None if f is None else {k: _in(v) for k, v in f.items()} for f in found]

    def compare_and_set(self, kind: str, doc: int, field: str, expected: Any, value: Any) -> bool:
        found = self.get(kind, [doc])[0]
        if found is None or found.get(field) != expected:
            return False
        self.put(kind, doc, {field: value})
        return True

    def delete(self, kind: str, doc: int) -> None:
        self.data["docs"].pop(_key(kind, doc), None)

    def listing(self, kind: str) -> Iterator[int]:
        return iter(sorted(doc for k, doc in map(json.loads, list(self.data["docs"])) if k == kind))

    def add(self, name: str, key: Hashable, doc: int) -> None:
        members = self.data["sets"].setdefault(_key(name, key), [])
        if doc not in members:
            members.append(doc)

    def discard(self, name: str, key: Hashable, doc: int) -> None:
        members = self.data["sets"].get(_key(name, key), [])
        if doc in members:
            members.remove(doc)

    def members(self, name: str, keys: Sequence[Hashable]) -> list[set[int]]:
        return [set(self.data["sets"].get(_key(name, key), ())) for key in keys]

    def map_get(self, name: str, fields: Sequence[str] | None = None) -> dict[str, Any]:
        found = {k: _in(v) for k, v in self.data["maps"].get(name, {}).items()}
        return found if fields is None else {f: found[f] for f in fields if f in found}

    def map_set(self, name: str, values: dict[str, Any]) -> None:
        merged = {**self.data["maps"].get(name, {}), **{k: _out(v) for k, v in values.items()}}
        self.data["maps"][name] = {k: v for k, v in merged.items() if v is not None}

    def incr(self, name: str, field: str, by: int = 1) -> int:
        value = int(self.map_get(name, [field]).get(field, 0)) + by
        self.map_set(name, {field: value})
        return value

    def bump(self, name: str, field: str, by: int = 1) -> None:
        self.incr(name, field, by)

    def rank(self, name: str, doc: int, score: float | None) -> None:
        self.map_set(f"rank:{name}", {str(doc): score})

    def ranked(self, name: str, below: float | None = None, beyond: int | None = None) -> list[int]:
        scores = {int(doc): score for doc, score in self.map_get(f"rank:{name}").items()}
        order = sorted(scores, key=lambda doc: (scores[doc], doc))
        out = len(order) - beyond if beyond is not None else 0
        return [d for i, d in enumerate(order) if i < out or (below is not None and scores[d] < below)]

    def clear(self, names: Sequence[str], kinds: Sequence[str]) -> None:
        for name in names:
            self.data["maps"].pop(f"rank:{name}", None)
            self.data["maps"].pop(name, None)
            for key in [k for k in self.data["sets"] if json.loads(k)[0] == name]:
                del self.data["sets"][key]
        for key in [k for k in self.data["docs"] if json.loads(k)[0] in kinds]:
            del self.data["docs"][key]

    def size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def close(self) -> None:
        if not self.read_only:
            self.path.write_text(json.dumps({"magic": MAGIC, **self.data}))


class ToyIndex(Ledger):
    def __init__(self, path: str | Path, config, read_only: bool = False) -> None:
        super().__init__(ToyEngine(Path(path), read_only), config)

    @classmethod
    def from_spec(cls, spec, config) -> ToyIndex:
        return cls(spec.where, config)

    @classmethod
    def existing(cls, spec) -> ToyIndex:
        meta = {k: str(v) for k, v in _load(Path(spec.where))["maps"].get("meta", {}).items()}
        return cls(spec.where, schema.config_from_meta(meta, spec.where), read_only=True)

    @classmethod
    def reset(cls, spec) -> None:
        path = Path(spec.where)
        if path.exists():
            _load(path)  # refuses a file that is not one of its own
            path.unlink()

    @classmethod
    def failure_line(cls, spec, exc: Exception) -> str | None:
        return None

    def is_storage_error(self, exc: Exception) -> bool:
        return isinstance(exc, OSError)

    def failure_advice(self, exc: Exception) -> str:
        return f"the toy index {self.path} failed"


def _load(path: Path) -> dict:
    try:
        held = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        held = None
    if not isinstance(held, dict) or held.get("magic") != MAGIC:
        raise IndexFileError(path, "is not a toy index; name another NEARDUP_INDEX")
    return {part: held.get(part, {}) for part in ("docs", "sets", "maps")}
