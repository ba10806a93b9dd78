"""RedisIndex: the index in Redis, so crawlers on many machines dedup against each other.

Storage only, like ``SQLiteIndex``, with the same keys (``lookup_keys``, ``SpotKeys``) and the
same records, so the Detector gives the same verdicts on either. Every key starts with the
index's prefix (``<spider>:neardup`` by default, as scrapy-redis names its keys).

**Atomic check-and-add, optimistically.** A check WATCHes each key before it reads it: the
page's revisit set, each lookup key's set, each spot list it probes, each document it
compares, and the index's meta; its writes are queued and sent in one MULTI/EXEC at its end.
If another process changed any watched key in between, EXEC writes nothing and the Detector
judges the page again (``Conflict``). Two pages that match always meet on a key: the one
admitted first wrote a key the other reads (its lookup key, or a spot list of its prefix that
the other's probe reads: the exactness argument of ``pruning``), so the second either reads
it after the first's EXEC, or its own EXEC fails. A page's writes are one EXEC: all or none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ....config import DedupConfig
from ....exceptions import IndexFileError, MissingExtraError
from ....methods import CollectionStats, Fingerprint, counts_terms
from ....text import storable
from ....verdict import Verdict
from ... import schema
from ...base import Earlier, Match
from ...bounds import may_match
from ...codecs import INTEGER_FIELDS, SIGNATURE_FIELDS, damaged_record, row_fingerprint, unsigned
from ...location import fit_key_prefix, safe_url
from ...lookup_keys import lookup_keys, raw_key
from ...pruning import SpotClasses
from ...records import earlier_of, stored_row, verdict_of
from ...spot_search import shared
from .connection import ReadsAsMissing, RedisConnection, unlink_keys, unreachable
from .crawl_runs import RedisRuns
from .reading import RedisReading
from .replies import reply_count, reply_ids, reply_int, reply_text
from .spots import RedisSpots
from .urls import URL_KEYS, URL_KINDS, RedisUrls

if TYPE_CHECKING:
    from ...location import IndexSpec

try:
    import redis
except ImportError:  # pragma: no cover - the extra is missing
    redis = None

logger = logging.getLogger(__name__)

_SIGNATURES = tuple(
    name.encode() for name in ("url", "status", "scope", *SIGNATURE_FIELDS[1:], "run", "raw_hash")
)
# The index's keys: single ones, and kinds with one key an id or value (``<prefix>:<kind>:...``).
OWN_KEYS = (
    "meta", "next", "scope_next", "scopes", "runs", "run_next", "ids", "counts", "dups", "urls",
    "spotted", "classes", "df", "term_docs", *URL_KEYS,
)  # fmt: skip
OWN_KINDS = ("doc", "lk", "sl", "url", "src", "text", "run", *URL_KINDS)

# Each signature field (but the id) as a record's hash holds it, and how its reply is read.
_TEXTS = ("language", "extra")
_READERS = tuple(
    (name.encode(), reply_int if name in INTEGER_FIELDS else reply_text if name in _TEXTS else None)
    for name in SIGNATURE_FIELDS[1:]
)
# What the exact bounds read of each candidate before its signatures (``bounds``).
_BOUNDS = (b"url", b"status", b"scope", b"exact", b"simhash", b"spot_size", b"spots")
# What a byte-identical copy's record takes from its original's.
_COPIED = (b"title", b"tokens", b"language", b"raw_hash", b"exact", b"simhash", b"spot_size")


class RedisIndex(RedisConnection, RedisReading, RedisSpots, RedisRuns, RedisUrls):
    """Candidate search over admitted pages kept in Redis, with every verdict recorded."""

    def __init__(self, url: str, config: DedupConfig, prefix: str = "neardup", timeout: float = 5.0) -> None:
        if redis is None:
            raise MissingExtraError(
                "the Redis index needs the redis package: pip install 'scrapy-neardup[redis]'"
            )
        self.url, self.prefix, self.config = url, prefix, config
        self.path = f"{safe_url(url)} {prefix}"  # what messages name
        if not fit_key_prefix(prefix):
            raise IndexFileError(
                self.path, f"{prefix!r} cannot prefix an index's keys (empty, spaces or *?[]\\)"
            )
        self._probe_simhash = not config.simhash_within_spotsigs
        self._scope_ids: dict[str, int] = {}
        self._run: int | None = None
        self._unclean: frozenset[int] = frozenset()
        self._beside: frozenset[int] = frozenset()  # runs that were running when this one began
        self.classes: SpotClasses | None = None
        self._watching: Any = None  # the transaction's pipeline, WATCHing what it reads
        self._writes: list[Callable[[Any], None]] = []
        self._urls: dict[int, bytes] = {}  # URLs of the records a transaction read (``url_of``)
        self._checks = 0  # transactions begun: every 256th looks whether the server lost the index
        try:
            self.r = ReadsAsMissing(
                redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
            )
            self.r.ping()
            self._open()
        except redis.RedisError as exc:
            raise IndexFileError(self.path, unreachable(exc)) from None
        except ValueError as exc:  # a malformed URL
            raise IndexFileError(self.path, f"is not a Redis URL ({exc})") from None

    @classmethod
    def open_existing(cls, url: str, prefix: str = "neardup") -> RedisIndex:
        """Open an index with the settings it was built with (for reports and exports)."""
        probe = cls.__new__(cls)
        probe.prefix = prefix
        try:
            r = redis.Redis.from_url(url)
        except ValueError as exc:  # a malformed URL
            raise IndexFileError(f"{safe_url(url)} {prefix}", f"is not a Redis URL ({exc})") from None
        try:
            meta = {reply_text(k): reply_text(v) for k, v in r.hgetall(probe.k("meta")).items()}
        except redis.RedisError as exc:
            raise IndexFileError(f"{safe_url(url)} {prefix}", unreachable(exc)) from None
        finally:
            r.close()
        if "config" not in meta:
            raise IndexFileError(f"{safe_url(url)} {prefix}", "holds no scrapy-neardup index")
        return cls(url, schema.config_from_meta(meta, f"{safe_url(url)} {prefix}"), prefix)

    @classmethod
    def from_spec(cls, spec: IndexSpec, config: DedupConfig) -> RedisIndex:
        return cls(spec.where, config, spec.key or "neardup")

    @classmethod
    def existing(cls, spec: IndexSpec) -> RedisIndex:
        return cls.open_existing(spec.where, spec.key or "neardup")

    @property
    def name(self) -> str:
        """What a report calls it: its keys' prefix."""
        return self.prefix

    def is_storage_error(self, exc: Exception) -> bool:
        return isinstance(exc, OSError) or type(exc).__module__.startswith("redis")

    @classmethod
    def failure_line(cls, spec: IndexSpec, exc: Exception) -> str | None:
        return None  # its failures are errors of its own already, met where they happen

    def failure_advice(self, exc: Exception) -> str:
        """What to do when the server fails under a crawl."""
        return f"the Redis index {self.path} failed; pages are judged again once it answers"

    @classmethod
    def reset(cls, spec: IndexSpec) -> None:
        cls.reset_keys(spec.where, spec.key or "neardup")

    @classmethod
    def reset_keys(cls, url: str, prefix: str) -> None:
        """NEARDUP_RESET: delete the index under ``prefix``, whatever settings built it. Keys there
        that are no index's are left, and refused when the index is made anew (as at any opening)."""
        if redis is None:
            return  # making the index says which extra is missing
        probe = cls.__new__(cls)
        probe.prefix, probe.path = prefix, f"{safe_url(url)} {prefix}"
        try:
            probe.r = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0)
            if probe.r.exists(probe.k("meta")):
                probe.remove()
        except redis.RedisError as exc:
            raise IndexFileError(probe.path, unreachable(exc)) from None
        except ValueError as exc:  # a malformed URL
            raise IndexFileError(probe.path, f"is not a Redis URL ({exc})") from None
        finally:
            probe.close()

    def k(self, *parts: object) -> bytes:
        """A key of this index."""
        return ":".join([self.prefix, *map(str, parts)]).encode("utf-8", "surrogatepass")

    # --- a page's own records -----------------------------------------------------------------

    def source_record(self, source: str) -> tuple[int, str, str | None] | None:
        """Read WATCHed inside a transaction, like ``earlier``: two scans of one source meet here."""
        (doc,) = self._read([self.k("src", storable(source))], lambda k: ("GET", k))
        doc = reply_int(doc)
        if doc is None:
            return None
        ((status, reason),) = self._read(
            [self.k("doc", doc)], lambda k: ("HMGET", k, "status", "skip_reason")
        )
        return doc, reply_text(status) or "", reply_text(reason)

    def earlier(self, key: str | None, scope: str, many: bool = False) -> Earlier | None:
        if key is None:
            return None
        scope_id = self._scope_id(scope, create=self._watching is not None)  # see candidates
        if scope_id is None:
            return None
        (members,) = self._read([self.k("url", scope_id, storable(key))], lambda k: ("SMEMBERS", k))
        ids = sorted(reply_ids(members), reverse=True)
        rows = self._read([self.k("doc", i) for i in ids], lambda k: ("HMGET", k, "status", "exact", "run"))
        rows = [
            (i, reply_text(s), exact if isinstance(exact, bytes) else None, reply_int(run))
            for i, (s, exact, run) in zip(ids, rows, strict=True)
            if s is not None
        ]
        return earlier_of(rows, many, self._run)

    def signatures(self, ids: list[int] | tuple[int, ...], scope: str) -> list[tuple[int, Fingerprint]]:
        scope_id = self._scope_id(scope, create=False)
        return list(self._sound(self._admitted(sorted(ids), scope_id)))

    def restamp(self, doc_id: int) -> None:
        run = self._run
        self._write(lambda pipe: pipe.hset(self.k("doc", doc_id), "run", run if run is not None else ""))

    def url_of(self, doc_id: int) -> str:
        return reply_text(self._urls.get(doc_id) or self.r.hget(self.k("doc", doc_id), "url")) or ""

    # --- byte-identical copies --------------------------------------------------------------

    def find_raw(self, raw: int, scope: str = "", key: str | None = None) -> int | None:
        scope_id = self._scope_id(scope, create=False)
        if scope_id is None or self.earlier(key, scope) is not None:
            return None
        ids = sorted(reply_ids(self.r.smembers(self.k("lk", raw_key(raw, scope_id)))))
        return ids[0] if ids and not self.unconfirmed([ids[0]]) else None

    def record_copy(
        self,
        url: str,
        raw: int,
        original: int,
        scope: str = "",
        source: str | None = None,
        key: str | None = None,
    ) -> Verdict | None:
        """None, recording nothing, when the page's key or source got a record since ``find_raw``;
        ``Conflict`` when another process recorded one while this one was being written."""
        first = self.r.hgetall(self.k("doc", original))
        if not isinstance(first.get(b"url"), bytes):  # a damaged record: the full check decides
            return None
        scope_id = self._scope_id(scope)
        with self.transaction():  # the key's and the source's records are read WATCHed
            if (source is not None and self.source_record(source)) or self.earlier(key, scope):
                return None
            doc_id = int(self.r.incr(self.k("next")))
            row = {
                b"url": storable(url), b"source": storable(source) if source else None, b"scope": scope_id,
                b"seen_at": time.time(), b"status": "duplicate", b"duplicate_of": original,
                b"similarity": 1.0, b"method": "exact", b"run": self._run, b"url_key": key,
                **{f: first.get(f) for f in _COPIED},
            }  # fmt: skip
            self._write(lambda pipe: self._store(pipe, doc_id, row, None, scope_id, key, source, url))
        dup_url = reply_text(first[b"url"]) or ""
        return Verdict(
            url, doc_id, True, duplicate_of=original, duplicate_of_url=dup_url, similarity=1.0, method="exact"
        )

    # --- term statistics and candidates ------------------------------------------------------

    def term_stats(self, terms: tuple[str, ...]) -> CollectionStats:
        docs_key, df_key = self.k("term_docs"), self.k("df")
        commands = [("GET", docs_key)] + ([("HMGET", df_key, *terms)] if terms else [])
        docs, *more = self._query(commands, [docs_key, df_key])
        counts = more[0] if more else []
        df = {t: reply_int(n) for t, n in zip(terms, counts, strict=True)}
        return CollectionStats(max(0, reply_int(docs) or 0), {t: n for t, n in df.items() if n and n > 0})

    def candidates(self, probe: Fingerprint, scope: str) -> Iterator[tuple[int, Fingerprint]]:
        # A new scope is made now, not at the record: its keys must exist for this check to WATCH
        # them (two first pages of a scope would otherwise both find nothing to watch).
        scope_id = self._scope_id(scope)
        keys = [
            self.k("lk", k) for k in lookup_keys(probe, scope_id, self.config, simhash=self._probe_simhash)
        ]
        buckets, parts, needs = self._probe_fields(probe.spots, scope_id)
        commands = [("SMEMBERS", key) for key in keys] + ([self._gather(buckets)] if buckets else [])
        answers = self._query(commands, [*keys, *(bucket for bucket, _ in buckets)])
        found = {i for members in answers[: len(keys)] for i in reply_ids(members)}
        if buckets and isinstance(answers[-1], list):  # (None: a bucket of another type)
            fields = [field for _, bucket_fields in buckets for field in bucket_fields]
            lists = [(field, blob) for field, blob in zip(fields, answers[-1], strict=True) if blob]
            found.update(shared(lists, parts, needs))
        # The few fields the bounds need first; every signature only for the candidates that pass.
        rows = self._admitted(sorted(found), scope_id, _BOUNDS)
        bounds = [
            (i, v[b"exact"], reply_int(v[b"simhash"]), reply_int(v[b"spot_size"]), v[b"spots"])
            for i, v in rows
        ]
        survivors = [row[0] for row in may_match(probe, bounds, self.config)]
        yield from self._sound(self._admitted(survivors, scope_id))

    def _rows(self, ids: list[int], fields: tuple[bytes, ...] = ()) -> list[tuple[int, dict[bytes, Any]]]:
        """These documents' ``fields`` (default ``_SIGNATURES``, URL first), WATCHed, in id order."""
        fields = fields or _SIGNATURES
        rows = self._read([self.k("doc", i) for i in ids], lambda k: ("HMGET", k, *fields))
        found = [(i, dict(zip(fields, row, strict=True))) for i, row in zip(ids, rows, strict=True) if row[0]]
        self._urls.update((i, values[b"url"]) for i, values in found)
        return found

    def _sound(self, rows: list[tuple[int, dict[bytes, Any]]]) -> Iterator[tuple[int, Fingerprint]]:
        """(id, signatures) of the rows that read as the index wrote them (``sound_fingerprints``)."""
        for i, values in rows:
            try:
                yield i, self._fingerprint(i, values)
            except (ValueError, TypeError, OverflowError, RecursionError) as exc:
                damaged_record(self.path, i, exc)

    @staticmethod
    def _fingerprint(doc: int, values: dict[bytes, Any]) -> Fingerprint:
        row = [doc]
        for key, read in _READERS:
            value = values[key]
            row.append(read(value) if read is not None else value)
        row[-3] = row[-3] or 0  # tokens
        fp = row_fingerprint(tuple(row))
        raw = reply_int(values[b"raw_hash"])
        return dataclasses.replace(fp, raw_hash=unsigned(raw) << 64) if raw is not None else fp

    def _admitted(
        self, ids: list[int], scope_id: int | None, fields: tuple[bytes, ...] = ()
    ) -> list[tuple[int, dict[bytes, Any]]]:
        """The rows of those ``ids`` that are admitted pages of the scope (their URLs kept for ``url_of``)."""
        return [
            (i, v)
            for i, v in self._rows(ids, fields)
            if v[b"status"] == b"unique" and reply_int(v[b"scope"]) == scope_id
        ]

    # --- storage --------------------------------------------------------------------------

    def _scope_id(self, name: str, create: bool = True) -> int | None:
        if name not in self._scope_ids:
            value = self.r.hget(self.k("scopes"), storable(name))
            if value is None and not create:
                return None
            if value is None:
                self.r.hsetnx(self.k("scopes"), storable(name), self.r.incr(self.k("scope_next")))
                value = self.r.hget(self.k("scopes"), storable(name))
            if reply_count(value) is None:  # damaged: the scope gets a new id
                value = self.r.incr(self.k("scope_next"))
                self.r.hset(self.k("scopes"), storable(name), value)
            self._scope_ids[name] = int(value)
        return self._scope_ids[name]

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
        scope_id = self._scope_id(scope)
        row = {
            name.encode(): value
            for name, value in stored_row(url, fp, scope_id, match, source, key, self._run, admit).items()
        }
        status, spots = row[b"status"], fp.spots
        old = self._rows([replace.id]) if replace is not None else []
        doc_id = replace.id if replace is not None else int(self.r.incr(self.k("next")))
        posting = []
        if status == "unique":
            posting = [
                self.k("lk", k)
                for k in lookup_keys(fp, scope_id, self.config, simhash=self.stores_simhash, raw=True)
            ]
        spot_fields = self._posting_fields(spots, scope_id) if status == "unique" else []
        text = None
        if self.config.keep_text and fp.text:
            text = zlib.compress(storable(fp.text[: self.config.keep_text]).encode("utf-8"), 6)
        terms = fp.terms if status == "unique" and counts_terms(self.config) else ()

        def write(pipe: Any) -> None:
            self._store(pipe, doc_id, row, old[0] if old else None, scope_id, key, source, url)
            for lk in posting:
                pipe.sadd(lk, doc_id)
            if spot_fields:
                self._append(pipe, doc_id, spot_fields)
                pipe.sadd(self.k("spotted"), doc_id)
            if terms:
                for term in terms:
                    pipe.hincrby(self.k("df"), term, 1)
                pipe.incr(self.k("term_docs"))
            if text is not None:
                pipe.set(self.k("text", doc_id), text)
            else:
                pipe.delete(self.k("text", doc_id))

        self._write(write)
        return verdict_of(url, doc_id, fp, match, self.url_of(match[0]) if match else None)

    def _store(
        self, pipe: Any, doc_id: int, row: dict, old: tuple | None, scope_id: int, key, source, url
    ) -> None:
        """Queue a record's own keys: its hash, its place in the listings and counts, and, for a
        revisit, the removal of its old content's lookup keys (its stale spot postings stay: they
        only add candidates, which are verified against the stored spots)."""
        doc = self.k("doc", doc_id)
        if old is not None:
            old_id, values = old
            old_status = reply_text(values[b"status"]) or ""
            pipe.hincrby(self.k("counts"), old_status, -1)
            if old_status == "unique":
                for _, old_fp in self._sound([(old_id, values)]):
                    keys = lookup_keys(old_fp, scope_id, self.config, simhash=self.stores_simhash, raw=True)
                    for lk in keys:
                        pipe.srem(self.k("lk", lk), doc_id)
                pipe.srem(self.k("spotted"), doc_id)
            row = {f: v for f, v in row.items() if f != b"seen_at"}
        present = {f: v for f, v in row.items() if v is not None}
        pipe.hset(doc, mapping=present)
        gone = [f for f, v in row.items() if v is None]
        if gone:
            pipe.hdel(doc, *gone)
        pipe.zadd(self.k("ids"), {doc_id: doc_id})
        pipe.hincrby(self.k("counts"), row[b"status"], 1)
        if row[b"status"] == "duplicate":
            pipe.sadd(self.k("dups"), doc_id)
        else:
            pipe.srem(self.k("dups"), doc_id)
        if key is not None:
            pipe.sadd(self.k("url", scope_id, storable(key)), doc_id)
        if source:
            pipe.set(self.k("src", storable(source)), doc_id, nx=True)
        pipe.hsetnx(self.k("urls"), storable(url), doc_id)

    def stored(self, doc_id: int) -> tuple[Fingerprint, str | None, str | None]:
        """A record's stored signatures, source and revisit key (to copy the index elsewhere)."""
        rows = self._rows([doc_id])
        fp = next((fp for _, fp in self._sound(rows)), Fingerprint())
        source, key = self.r.hmget(self.k("doc", doc_id), "source", "url_key")
        return fp, reply_text(source), reply_text(key)

    def remove(self) -> int:
        """Delete this index's own keys (NEARDUP_RESET), nothing else under the prefix; the number."""
        return unlink_keys(self.r, [self.k(name) for name in OWN_KEYS], [self.k(kind) for kind in OWN_KINDS])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.r.close()

    def __enter__(self) -> RedisIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
