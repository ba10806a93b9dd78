"""Ledger: the index's bookkeeping, written once over any storage engine (``engine.Engine``).

A page's record and verdict, its revisits, crawl runs and the confirmation of what they
admitted, byte-identical copies, term statistics, learned URL rules (``url_ledger``) and what
reports read. The engine only stores; what a record means is decided here. An engine with
a ``search`` of its own (``engine.Search``: SQLite's spot lists) finds the candidates; without
one, they are every admitted page of the probe's scope (brute force: the oracle the searching
indexes are tested against).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from ..config import DedupConfig
from ..methods import CollectionStats, Fingerprint, counts_terms
from ..text import storable
from ..verdict import Verdict
from . import schema, stores
from .base import Earlier, Match
from .codecs import SIGNATURE_FIELDS, damaged_record
from .engine import Engine
from .lookup_keys import lookup_keys, raw_key
from .records import clean_record, earlier_of, stored_fingerprint, stored_row, verdict_of
from .run_ledger import RUN, RunLedger
from .runs import Runs
from .url_ledger import UrlLedger

logger = logging.getLogger(__name__)

# The stores it keeps, by name (``stores`` declares each).
DOC, TEXT = stores.DOC.name, stores.TEXT.name
META, SCOPES, COUNTS, TERMS = stores.META.name, stores.SCOPES.name, stores.COUNTS.name, stores.TERMS.name
BY_KEY, BY_SOURCE, ADMITTED = stores.BY_KEY.name, stores.BY_SOURCE.name, stores.ADMITTED.name
LOOKUP, DUPLICATES, SEEN = stores.LOOKUP.name, stores.DUPLICATES.name, stores.SEEN.name
_READ = ("url", "title", "scope", "seen_at", "status", "skip_reason", "tokens", "language", "duplicate_of",
         "similarity", "method")  # fmt: skip
_COPIED = ("title", "tokens", "language", "raw_hash", "exact", "simhash", "spot_size")
# What a candidate is verified with (``records.stored_fingerprint``), and where it is.
SIGNATURES = ("status", "scope", "raw_hash", *SIGNATURE_FIELDS[1:])


class Ledger(RunLedger, UrlLedger):
    """An index: what the road (``detector``, ``decision``) reads and writes, and what reports read,
    over an engine. Each backend is a subclass that opens its engine."""

    def __init__(self, engine: Engine, config: DedupConfig) -> None:
        self.engine, self.config = engine, config
        self.path, self.name = engine.path, engine.name
        self._runs = _Shared(Runs())  # this crawl's run and what it knows of the others
        self._depth, self._made = 0, []  # transactions open; the records this one made this run's
        self._scope_ids: dict[str, int] = {}
        self._scope_names: dict[int, str] = {}
        self._simhash_keys = not config.simhash_within_spotsigs
        self.search = getattr(engine, "search", None)
        # An engine that need not wait for the record of a page let through (``_store``).
        self._let_through: Callable[[str | None], None] | None = getattr(engine, "commit_unawaited", None)
        self.clock: Callable[[], float] = time.time  # when a page is seen (a benchmark's days)
        if not engine.map_get(META, ["application"]):
            with engine.transaction():
                engine.map_set(META, dict(schema.meta_rows(config, self._simhash_keys)))
        meta = {k: str(v) for k, v in engine.map_get(META).items()}
        _, self._simhash_keys = schema.spot_keys(meta, config, self.path)

    # --- connections ----------------------------------------------------------------------

    lanes = 1  # connections a crawl checks pages on at once (``lanes.Lanes``)

    def another(self) -> Ledger:
        """Another connection to this index, in the same crawl run (a lane of its own); an index
        of one lane is its own."""
        return self

    def _joined(self, other: Ledger) -> Ledger:
        """``other`` (a new connection to this index) as part of this one's crawl run."""
        other._runs = self._runs
        other.clock = self.clock
        return other

    @property
    def runs(self) -> Runs:
        return self._runs.value

    @runs.setter
    def runs(self, runs: Runs) -> None:
        self._runs.value = runs

    # --- transactions ---------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One page's reads and writes, atomically (a failure forgets what it made, its scopes too)."""
        outermost, self._depth = self._depth == 0, self._depth + 1
        try:
            with self.engine.transaction():
                yield
        except BaseException:
            self._scope_ids.clear()
            raise
        else:
            if outermost:
                self._runs.note(self._made)  # records of this run, known without asking the index
        finally:
            self._depth -= 1
            if outermost:
                self._made = []

    @contextlib.contextmanager
    def batch(self) -> Iterator[Ledger]:
        """Many pages in one transaction, all or none (a scan's batch), where the engine has such
        a unit (an engine's ``batch`` says otherwise: in Redis each page is its own)."""
        own = getattr(self.engine, "batch", None)
        with own() if own is not None else self.transaction():
            yield self

    # --- crawl runs (``run_ledger``) and what reports read of them ------------------------

    def last_action(self) -> str | None:
        """What the latest crawl run did with duplicates; None for a scanned index."""
        last = max(self.engine.listing(RUN), default=None)
        found = self.engine.get(RUN, [last])[0] if last is not None else None
        return found.get("action") if found else None

    @property
    def unrecorded(self) -> int:
        """Pages let through whose record the engine could not confirm (``commit_unawaited``)."""
        return getattr(self.engine, "unrecorded", 0)

    # --- a page's own records -----------------------------------------------------------------

    def _scope_id(self, name: str, create: bool = True) -> int | None:
        """The scope's id; made (inside a transaction) unless ``create`` is False. A damaged id
        (an index written by another program) is no id: the scope gets a new one."""
        if name not in self._scope_ids:
            found = self.engine.map_get(SCOPES, [name]).get(name)
            if not (isinstance(found, int) and not isinstance(found, bool) and found >= 0):
                if not create:
                    return None
                found = self.engine.incr(META, "scope_next")
                self.engine.map_set(SCOPES, {name: found})
            self._scope_ids[name] = found
        return self._scope_ids[name]

    def source_record(self, source: str) -> tuple[int, str, str | None] | None:
        """(id, status, skip reason) of the page read from ``source``, if one was recorded."""
        ids = sorted(self.engine.members(BY_SOURCE, [storable(source)])[0])
        found = self.engine.get(DOC, ids[:1], ("status", "skip_reason"))
        return (ids[0], found[0]["status"], found[0].get("skip_reason")) if found and found[0] else None

    def contains_source(self, source: str) -> bool:
        return self.source_record(source) is not None

    def earlier(self, key: str | None, scope: str, many: bool = False) -> Earlier | None:
        """The record a page with this revisit key is met again as (``records.earlier_of``)."""
        scope_id = self._scope_id(scope, create=False)
        if key is None or scope_id is None:
            return None
        ids = sorted(self.engine.members(BY_KEY, [(scope_id, key)])[0], reverse=True)
        found = self.engine.get(DOC, ids, ("status", "exact", "run", "duplicate_of"))
        rows = [
            (i, doc["status"], doc.get("exact"), doc.get("run"), doc.get("duplicate_of"))
            for i, doc in zip(ids, found, strict=True)
            if doc
        ]
        return earlier_of(rows, many, self.runs)

    def signatures(self, ids: list[int] | tuple[int, ...], scope: str) -> list[tuple[int, Fingerprint]]:
        """The stored signatures of these admitted documents of ``scope``, in id order."""
        return list(self._admitted(sorted(ids), self._scope_id(scope, create=False)))

    def restamp(self, doc_id: int, request: bytes | None = None) -> None:
        """Mark a record as met again by this run (an unchanged revisit): its content is this
        crawl's now. With ``request``, this run delivers its items again (a dead run's page)."""
        self.engine.put(DOC, doc_id, {"run": self.runs.current})
        self._made.append(doc_id)
        self.seen(doc_id, self.clock())
        self._pending(doc_id, request)

    def seen(self, doc_id: int, at: float) -> None:
        """Mark a record as last seen ``at`` (pages not seen for long are forgotten first)."""
        self.engine.put(DOC, doc_id, {"last_seen": at})
        self.engine.rank(SEEN, doc_id, at)

    def url_of(self, doc_id: int) -> str:
        found = self.engine.get(DOC, [doc_id], ("url",))[0]
        return found["url"] if found and isinstance(found.get("url"), str) else ""

    # --- candidates and term statistics -----------------------------------------------------

    def candidates(self, probe: Fingerprint, scope: str) -> Iterator[tuple[int, Fingerprint]]:
        """The admitted pages of the scope a configured method may call a match of ``probe``: the
        engine's search finds them, else every one (in id order)."""
        scope_id = self._scope_id(scope, create=False)
        if scope_id is not None and self.search is not None:
            yield from self.search.find(probe, scope_id)
        elif scope_id is not None:
            yield from self._admitted(sorted(self.engine.members(ADMITTED, [scope_id])[0]), scope_id)

    def _admitted(self, ids: list[int], scope_id: int | None) -> Iterator[tuple[int, Fingerprint]]:
        """(id, signatures) of those ids that are admitted pages of the scope and read soundly."""
        for doc_id, doc in zip(ids, self.engine.get(DOC, ids, SIGNATURES), strict=True):
            if doc and doc.get("status") == "unique" and doc.get("scope") == scope_id:
                try:
                    yield doc_id, stored_fingerprint(doc_id, doc)
                except (ValueError, TypeError, OverflowError, RecursionError) as exc:
                    damaged_record(self.path, doc_id, exc)

    def term_stats(self, terms: tuple[str, ...]) -> CollectionStats:
        """The document frequencies of ``terms`` over the admitted pages (a method's idf)."""
        df = {t: _count(n) for t, n in self.engine.map_get(TERMS, list(terms)).items()}
        docs = _count(self.engine.map_get(META, ["term_docs"]).get("term_docs"))
        return CollectionStats(docs, {t: n for t, n in df.items() if n > 0})

    # --- byte-identical copies --------------------------------------------------------------

    def find_raw(self, raw: int, scope: str = "", key: str | None = None) -> int | None:
        """An admitted page whose raw body is byte-identical to ``raw``'s page, or None (also where
        the full check must decide: a revisit, or an original this crawl has not met yet)."""
        scope_id = self._scope_id(scope, create=False)
        if scope_id is None or self.earlier(key, scope) is not None:
            return None
        ids = sorted(self.engine.members(LOOKUP, [raw_key(raw, scope_id)])[0])
        if not ids or self.runs.current is None:
            return ids[0] if ids else None
        run = dict(self._runs_of(ids[:1])).get(ids[0])
        return ids[0] if self.runs.this_crawl(run) else None  # else met first by this crawl: decided

    def record_copy(self, url: str, raw: int, original: int, scope: str = "", source: str | None = None,
                    key: str | None = None) -> Verdict | None:  # fmt: skip
        """Record a page whose raw body equals an admitted page's, without its fingerprint; None,
        recording nothing, when its key or source got a record since ``find_raw``."""
        with self.transaction():
            if (source is not None and self.source_record(source)) or self.earlier(key, scope):
                return None
            first = self.engine.get(DOC, [original], ("url", *_COPIED))[0]
            if not first or not isinstance(first.get("url"), str):  # a damaged index: the full check decides
                return None
            now = self.clock()
            row = {
                **{name: first.get(name) for name in _COPIED}, "url": storable(url),
                "source": storable(source) if source else None, "scope": self._scope_id(scope),
                "seen_at": now, "last_seen": now, "status": "duplicate", "duplicate_of": original,
                "similarity": 1.0, "method": "exact", "run": self.runs.current, "url_key": key,
            }  # fmt: skip
            doc_id = self.engine.new_id(DOC)
            self._store(doc_id, row, None)
            self._made.append(doc_id)
            self.seen(original, now)
        return Verdict(
            url,
            doc_id,
            True,
            duplicate_of=original,
            duplicate_of_url=first["url"],
            similarity=1.0,
            method="exact",
        )

    # --- storage --------------------------------------------------------------------------

    def record(
        self, url: str, fp: Fingerprint, scope: str, match: Match | None = None, source: str | None = None,
        key: str | None = None, replace: Earlier | None = None, admit: bool = False,
        request: bytes | None = None,
    ) -> Verdict:  # fmt: skip
        """Store a page with its verdict; an admitted page becomes findable. A revisit ``replace``s
        its earlier record (same id, its old lookup keys removed, its first-seen time kept). An
        admitted page's ``request`` is kept until this run closes (``pending``)."""
        if self.search is not None and fp.judged:
            self.search.ready()
        scope_id = self._scope_id(scope)
        row = stored_row(url, fp, scope_id, match, source, key, self.runs.current, admit)
        row["seen_at"] = row["last_seen"] = now = self.clock()
        old = None
        if replace is not None:
            doc_id, old = replace.id, self.engine.get(DOC, [replace.id])[0]
            row.pop("seen_at")
        else:
            doc_id = self.engine.new_id(DOC)
        self._store(doc_id, row, old)
        self._made.append(doc_id)
        if row["status"] == "duplicate" and match:
            self.seen(match[0], now)  # its content met again: the original stays
        if row["status"] == "unique":
            self._pending(doc_id, request)
            for lookup in lookup_keys(fp, scope_id, self.config, simhash=self._simhash_keys, raw=True):
                self.engine.add(LOOKUP, lookup, doc_id)
            if self.search is not None:
                self.search.post(doc_id, fp, scope_id)
            if counts_terms(self.config) and fp.terms:
                for term in fp.terms:
                    self.engine.bump(TERMS, term)
                self.engine.bump(META, "term_docs")
        if self.config.keep_text and fp.text:
            text = zlib.compress(storable(fp.text[: self.config.keep_text]).encode("utf-8"), 6)
            self.engine.put(TEXT, doc_id, {"text": text})
        elif replace is not None:
            self.engine.delete(TEXT, doc_id)
        return verdict_of(url, doc_id, fp, match, self.url_of(match[0]) if match else None)

    def _store(self, doc_id: int, row: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Write a record with its place in the counts and sets; a revisit's old record leaves its
        lookup keys (its content changed) and its count."""
        engine, scope_id = self.engine, row["scope"]
        if self._let_through is not None:
            self._let_through(row["url"] if row["status"] == "unique" else None)
        if old is not None:
            self.unstore(doc_id, old)
            if old.get("duplicate_of") is not None:
                engine.discard(DUPLICATES, old["duplicate_of"], doc_id)
        engine.put(DOC, doc_id, row)  # every field of a record: None removes an old one
        engine.rank(SEEN, doc_id, row["last_seen"])
        engine.bump(COUNTS, row["status"])
        if row.get("duplicate_of") is not None:
            engine.add(DUPLICATES, row["duplicate_of"], doc_id)
        if row["status"] == "unique" and self.search is None:  # a searching engine finds its own
            engine.add(ADMITTED, scope_id, doc_id)
        if row.get("url_key") is not None:
            engine.add(BY_KEY, (scope_id, row["url_key"]), doc_id)
        if row.get("source"):
            engine.add(BY_SOURCE, row["source"], doc_id)

    def unstore(self, doc_id: int, old: dict[str, Any]) -> None:
        """Take a record out of the counts and, if admitted, out of every lookup (a revisit
        replaces it, or it is forgotten)."""
        self.engine.bump(COUNTS, str(old.get("status")), -1)
        if old.get("status") == "unique":
            if self.search is None:
                self.engine.discard(ADMITTED, old.get("scope"), doc_id)
            self._unpost(doc_id, old)

    def _unpost(self, doc_id: int, old: dict[str, Any]) -> None:
        try:
            fp = stored_fingerprint(doc_id, old)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            damaged_record(self.path, doc_id, exc)  # its keys stay: each is verified where it leads
            return
        for lookup in lookup_keys(fp, old.get("scope"), self.config, simhash=self._simhash_keys, raw=True):
            self.engine.discard(LOOKUP, lookup, doc_id)
        if self.search is not None:
            self.search.unpost(doc_id, fp, old.get("scope"))

    # --- what reports read ----------------------------------------------------------------

    def get(self, doc_id: int) -> dict | None:
        found = self.engine.get(DOC, [doc_id])[0]
        return None if found is None else self._read(doc_id, found)

    def _read(self, doc_id: int, doc: dict[str, Any]) -> dict[str, Any]:
        if not self._scope_names or doc.get("scope") not in self._scope_names:
            self._scope_names = {v: k for k, v in self.engine.map_get(SCOPES).items()}
        record = {"id": doc_id, **{name: doc.get(name) for name in _READ}}
        record["scope"] = self._scope_names.get(doc.get("scope"), "")
        return clean_record(record)

    def documents(self) -> Iterator[dict]:
        """Every recorded page in the order seen, streamed a few hundred at a time."""
        ids = self.engine.listing(DOC)
        while chunk := list(itertools.islice(ids, 500)):
            for doc_id, found in zip(chunk, self.engine.get(DOC, chunk, _READ), strict=True):
                if found:
                    yield self._read(doc_id, found)

    def text(self, doc_id: int) -> str | None:
        """The main text kept for a page (its first ``keep_text`` characters), or None; a damaged
        one is said and left out, never stopping the report."""
        found = self.engine.get(TEXT, [doc_id])[0]
        try:
            return zlib.decompress(found["text"]).decode("utf-8", errors="replace") if found else None
        except (zlib.error, TypeError, KeyError) as exc:
            logger.warning(
                "%s: the stored text of document %d is damaged (%s); left out", self.path, doc_id, exc
            )
            return None

    def match_edges(self) -> Iterator[tuple[int, int, float | None, str | None]]:
        """(page, the page it matched, similarity, method) of every duplicate, and of every page let
        through beside what it resembles (an admitted page whose match was not sure)."""
        for record in self.documents():
            if record["duplicate_of"] is not None and record["status"] in ("duplicate", "unique"):
                yield record["id"], record["duplicate_of"], record["similarity"], record["method"]

    def stats(self) -> dict[str, int]:
        counts = {k: int(v) for k, v in self.engine.map_get(COUNTS).items()}
        return {
            "documents": sum(counts.values()), "unique": counts.get("unique", 0),
            "duplicates": counts.get("duplicate", 0), "skipped": counts.get("skipped", 0),
            "forgotten": _count(self.engine.map_get(META, ["forgotten"]).get("forgotten")),
            "bytes": self.engine.size(),
        }  # fmt: skip

    def stored(self, doc_id: int) -> tuple[Fingerprint, str | None, str | None]:
        """A record's stored signatures, source and revisit key (to copy the index elsewhere)."""
        found = self.engine.get(DOC, [doc_id])[0] or {}
        return stored_fingerprint(doc_id, found), found.get("source"), found.get("url_key")

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _count(value: Any) -> int:
    """A stored count, 0 for a damaged one (a file edited by hand)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return max(value, 0)
    return int(value) if isinstance(value, str) and value.isdigit() else 0


class _Shared:
    """What every connection of one crawl run reads: what it knows of the runs (``value``), and
    the records it made or took over (the last ``MINE`` of them), whose run needs no reading."""

    MINE = 100_000

    def __init__(self, value: Runs) -> None:
        self._value, self.mine = value, dict[int, None]()

    @property
    def value(self) -> Runs:
        return self._value

    @value.setter
    def value(self, runs: Runs) -> None:
        if runs.current != self._value.current:
            self.mine = {}  # another run's records: read again
        self._value = runs

    def note(self, ids: list[int]) -> None:
        if ids and self._value.current is not None:
            mine = self.mine
            mine.update(dict.fromkeys(ids))
            while len(mine) > self.MINE:
                del mine[next(iter(mine))]
