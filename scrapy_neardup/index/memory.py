"""MemoryIndex: the storage protocol by brute force, in one process's memory.

Every admitted page of a scope is a candidate of every probe, so it finds what a pairwise
check finds by construction: it is the oracle the SQLite (and Redis) indexes are tested
against, and an index for tests and small one-off jobs. Nothing is kept after ``close``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..config import DedupConfig
from ..exceptions import IndexFileError
from ..methods import CollectionStats, Fingerprint, counts_terms
from ..verdict import Verdict
from .base import Earlier, Match
from .memory_urls import MemoryUrls
from .records import earlier_of, stored_row, verdict_of
from .runs import of_earlier_crawl

if TYPE_CHECKING:
    from . import IndexSpec

_MISSING = object()


@dataclasses.dataclass
class _State:
    """Everything a page's transaction may change (each change logged, so a failure undoes it)."""

    records: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    admitted: dict[int, Fingerprint] = dataclasses.field(default_factory=dict)
    texts: dict[int, str] = dataclasses.field(default_factory=dict)
    term_df: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    term_docs: int = 0
    runs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    next_id: int = 1


class MemoryIndex(MemoryUrls):
    """Brute-force candidate search over admitted pages, with every verdict recorded."""

    path = name = "memory"

    def __init__(self, config: DedupConfig) -> None:
        self.config = config
        self._state = _State()
        self._run: int | None = None
        self._undo: list[Callable[[], None]] | None = None

    @classmethod
    def from_spec(cls, spec: IndexSpec, config: DedupConfig) -> MemoryIndex:
        return cls(config)

    @classmethod
    def existing(cls, spec: IndexSpec) -> MemoryIndex:
        raise IndexFileError("memory", "an index in memory is gone with its process; nothing to read")

    @classmethod
    def reset(cls, spec: IndexSpec) -> None:
        """Nothing to delete: each one starts empty."""

    def is_storage_error(self, exc: Exception) -> bool:
        return False  # no storage to fail: every error here is a bug

    @classmethod
    def failure_line(cls, spec: IndexSpec, exc: Exception) -> str | None:
        return None  # its failures are errors of its own already, met where they happen

    def failure_advice(self, exc: Exception) -> str:
        return "a bug: please report it with this page"

    # --- transactions ---------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All of a page's changes or none: a failure undoes what the page changed so far."""
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
            outer.extend(done)  # a page inside a batch: the batch's failure undoes it too

    def _set(self, mapping: dict, key: Any, value: Any) -> None:
        """``mapping[key] = value``, undoable (``value`` _MISSING: delete it)."""
        old = mapping.get(key, _MISSING)
        self._set_raw(mapping, key, value)
        if self._undo is not None:
            self._undo.append(lambda: self._set_raw(mapping, key, old))

    @staticmethod
    def _set_raw(mapping: dict, key: Any, value: Any) -> None:
        if value is _MISSING:
            mapping.pop(key, None)
        else:
            mapping[key] = value

    @contextlib.contextmanager
    def batch(self) -> Iterator[MemoryIndex]:
        with self.transaction():
            yield self

    # --- crawl runs -------------------------------------------------------------------------

    def begin_run(self, action: str) -> None:
        with self.transaction():
            self._state.runs.append({"started_at": time.time(), "ended_at": None, "action": action})
        self._run = len(self._state.runs)

    def end_run(self) -> None:
        if self._run is not None:
            self._state.runs[self._run - 1]["ended_at"] = time.time()
            self._run = None

    def last_action(self) -> str | None:
        return self._state.runs[-1]["action"] if self._state.runs else None

    @property
    def interrupted_runs(self) -> bool:
        return False  # one process's memory: no run of another process left anything behind

    def unconfirmed(self, ids: list[int]) -> set[int]:
        return set()

    def from_earlier_crawls(self, ids: list[int]) -> set[int]:
        records = self._state.records
        return {
            i for i in ids if i in records and of_earlier_crawl(records[i].get("run"), self._run, frozenset())
        }

    # --- a page's own records -----------------------------------------------------------------

    def source_record(self, source: str) -> tuple[int, str, str | None] | None:
        for doc_id, rec in self._state.records.items():
            if rec["source"] == source:
                return doc_id, rec["status"], rec["skip_reason"]
        return None

    def earlier(self, key: str | None, scope: str, many: bool = False) -> Earlier | None:
        if key is None:
            return None
        rows = [
            (doc_id, rec["status"], rec["exact"], rec["run"])
            for doc_id, rec in sorted(self._state.records.items(), reverse=True)
            if rec["url_key"] == key and rec["scope"] == scope
        ]
        return earlier_of(rows, many, self._run)

    def signatures(self, ids: list[int] | tuple[int, ...], scope: str) -> list[tuple[int, Fingerprint]]:
        state = self._state
        return [
            (i, state.admitted[i])
            for i in sorted(ids)
            if i in state.admitted and state.records[i]["scope"] == scope
        ]

    def restamp(self, doc_id: int) -> None:
        self._set(self._state.records, doc_id, {**self._state.records[doc_id], "run": self._run})

    def url_of(self, doc_id: int) -> str:
        return self._state.records[doc_id]["url"]

    # --- byte-identical copies --------------------------------------------------------------

    def find_raw(self, raw: int, scope: str = "", key: str | None = None) -> int | None:
        if self.earlier(key, scope) is not None:
            return None
        for doc_id, fp in sorted(self._state.admitted.items()):
            rec = self._state.records[doc_id]
            if rec["scope"] == scope and fp.raw_hash is not None and fp.raw_hash >> 64 == raw >> 64:
                return doc_id
        return None

    def record_copy(
        self,
        url: str,
        raw: int,
        original: int,
        scope: str = "",
        source: str | None = None,
        key: str | None = None,
    ) -> Verdict | None:
        with self.transaction():
            if (source is not None and self.source_record(source)) or self.earlier(key, scope):
                return None
            first = self._state.records[original]
            doc_id = self._insert({
                **first, "url": url, "source": source, "scope": scope, "seen_at": time.time(),
                "status": "duplicate", "skip_reason": None, "duplicate_of": original, "similarity": 1.0,
                "method": "exact", "run": self._run, "url_key": key,
            })  # fmt: skip
            return Verdict(
                url=url, doc_id=doc_id, duplicate=True, duplicate_of=original, duplicate_of_url=first["url"],
                similarity=1.0, method="exact",
            )  # fmt: skip

    # --- term statistics and candidates ------------------------------------------------------

    def term_stats(self, terms: tuple[str, ...]) -> CollectionStats:
        df = self._state.term_df
        return CollectionStats(self._state.term_docs, {t: df[t] for t in terms if df.get(t, 0) > 0})

    def candidates(self, probe: Fingerprint, scope: str) -> Iterator[tuple[int, Fingerprint]]:
        """Every admitted page of the scope, in id order."""
        for doc_id, fp in sorted(self._state.admitted.items()):
            if self._state.records[doc_id]["scope"] == scope:
                yield doc_id, fp

    # --- storage --------------------------------------------------------------------------

    def _insert(self, record: dict[str, Any]) -> int:
        state = self._state
        doc_id = state.next_id
        state.next_id += 1
        if self._undo is not None:
            self._undo.append(lambda: setattr(state, "next_id", doc_id))
        self._set(state.records, doc_id, record)
        return doc_id

    def record(
        self,
        url: str,
        fp: Fingerprint,
        scope: str,
        match: Match | None = None,
        source: str | None = None,
        key: str | None = None,
        replace: Earlier | None = None,
        admit: bool = False,
    ) -> Verdict:
        state = self._state
        record = stored_row(url, fp, scope, match, source, key, self._run, admit)
        record["exact"], status = fp.exact, record["status"]  # kept as they are: nothing reads them stored
        if replace is not None:
            doc_id = replace.id
            record["seen_at"] = state.records[doc_id]["seen_at"]
            self._set(state.records, doc_id, record)
            self._set(state.admitted, doc_id, _MISSING)
            self._set(state.texts, doc_id, _MISSING)
        else:
            doc_id = self._insert(record)
        if status == "unique":
            self._set(state.admitted, doc_id, dataclasses.replace(fp, text="", terms=()))
            if counts_terms(self.config) and fp.terms:
                self._count_terms(fp.terms)
        if self.config.keep_text and fp.text:
            self._set(state.texts, doc_id, fp.text[: self.config.keep_text])
        return verdict_of(url, doc_id, fp, match, state.records[match[0]]["url"] if match else None)

    def _count_terms(self, terms: tuple[str, ...]) -> None:
        state = self._state
        state.term_df.update(terms)
        state.term_docs += 1
        if self._undo is not None:
            self._undo.append(
                lambda: (state.term_df.subtract(terms), setattr(state, "term_docs", state.term_docs - 1))
            )

    # --- reading --------------------------------------------------------------------------

    _FIELDS = (
        "url", "title", "scope", "seen_at", "status", "skip_reason", "tokens", "language", "duplicate_of",
        "similarity", "method",
    )  # fmt: skip

    def get(self, doc_id: int) -> dict | None:
        rec = self._state.records.get(doc_id)
        return None if rec is None else {"id": doc_id, **{k: rec[k] for k in self._FIELDS}}

    def text(self, doc_id: int) -> str | None:
        return self._state.texts.get(doc_id)

    def documents(self) -> Iterator[dict]:
        for doc_id in sorted(self._state.records):
            yield self.get(doc_id)

    def duplicate_edges(self) -> Iterator[tuple[int, int, float | None, str | None]]:
        for doc_id, rec in sorted(self._state.records.items()):
            if rec["status"] == "duplicate":
                yield doc_id, rec["duplicate_of"], rec["similarity"], rec["method"]

    def contains_source(self, source: str) -> bool:
        return self.source_record(source) is not None

    def stats(self) -> dict[str, int]:
        counts = collections.Counter(rec["status"] for rec in self._state.records.values())
        return {
            "documents": sum(counts.values()), "unique": counts["unique"], "duplicates": counts["duplicate"],
            "skipped": counts["skipped"], "bytes": 0,
        }  # fmt: skip

    def close(self) -> None:
        pass

    def __enter__(self) -> MemoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
