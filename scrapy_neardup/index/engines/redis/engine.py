"""The Redis engine: the engine protocol over one key prefix, and the index's own search.

A document is a hash (``<prefix>:doc:<id>``), listed in a sorted set or a set of its kind; a
set is a Redis set, a map a Redis hash. Inside a transaction every read WATCHes its keys and
every write is queued for one MULTI/EXEC (``connection``), so the ledger's check and record
are atomic against every crawler sharing the index: another process that changed what was
read makes the transaction fail (``Conflict``) and the page is judged again. Values are
stored as Redis keeps them (bytes) and read back by the ledger's field types; every store is
laid out as it is declared (``stores``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from ....config import DedupConfig
from ....methods import Fingerprint
from ....text import storable
from ...bounds import may_match
from ...codecs import SIGNATURE_FIELDS, damaged_record
from ...lookup_keys import lookup_keys
from ...records import stored_fingerprint
from ...spot_search import shared
from ...stores import DOC, KINDS, LOOKUP, MAPS, SETS
from .connection import RedisConnection, read_as_missing, unlink_keys
from .replies import reply_float, reply_ids, reply_int, reply_text
from .spots import RedisSpots

# Each kind's documents (hashes) are keyed ``<prefix>:<part>:<id>``, its ids listed under its
# declared listing (a sorted set where ordered, else a set) and counted by its counter.
KEYS = {kind.name: kind.redis or kind.name for kind in KINDS.values()}
# INCR KEYS[1] until no key KEYS[2]..id exists (one round trip, as INCR alone).
NEW_ID = """
local id = redis.call('INCR', KEYS[1])
while redis.call('EXISTS', KEYS[2] .. id) == 1 do id = redis.call('INCR', KEYS[1]) end
return id
"""
_READ = {int: reply_int, float: reply_float, str: reply_text, bytes: lambda v: v}
# What a candidate is verified with (``records.stored_fingerprint``), and where it is; its URL,
# which a verdict names, read with them.
SIGNATURES = ("status", "scope", "url", "raw_hash", *SIGNATURE_FIELDS[1:])
# What the exact bounds read of each candidate before its signatures (``bounds``).
_BOUNDS = ("status", "scope", "exact", "simhash", "spot_size", "spots")


class RedisEngine(RedisConnection, RedisSpots):
    """Storage and search over the keys of one prefix (``r``, ``k``: ``index.RedisIndex`` opens it)."""

    search: RedisEngine

    def __init__(self, r: Any, prefix: str, config: DedupConfig, path: str) -> None:
        self.r, self.prefix, self.config, self.path, self.name = r, prefix, config, path, prefix
        self._probe_simhash = not config.simhash_within_spotsigs
        self.classes = None
        self._watching: Any = None  # the transaction's pipeline, WATCHing what it reads
        self._writes: list = []
        self._docs: dict[tuple[str, int], dict[str, Any]] = {}
        self._unsent_watch: list[bytes] = []
        self._checks = 0  # transactions begun: every 256th looks whether the server lost the index
        self.search = self
        self._open()

    def k(self, *parts: object) -> bytes:
        """A key of this index."""
        return ":".join([self.prefix, *map(str, parts)]).encode("utf-8", "surrogatepass")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """A page's transaction; one begun inside another (a page of a scan's batch) is part of it."""
        if self._watching is not None:
            yield
            return
        with RedisConnection.transaction(self):
            yield

    # --- documents ------------------------------------------------------------------------

    def new_id(self, kind: str) -> int:
        """The counter's next value that no key holds (a counter written back by another program
        must not put a record over one, or over a key of another type)."""
        if getattr(self, "_new_id", None) is None:
            self._new_id = self.r.register_script(NEW_ID)
        return int(self._new_id(keys=[self.k(KINDS[kind].counter), self.k(KEYS[kind], "")]))

    def put(self, kind: str, doc: int, fields: dict[str, Any]) -> None:
        listing, ordered = KINDS[kind].listing, KINDS[kind].ordered
        self._hash_set(self.k(KEYS[kind], doc), fields)
        if listing and ordered:
            self._write(lambda pipe: pipe.zadd(self.k(listing), {doc: doc}))
        elif listing:
            self._write(lambda pipe: pipe.sadd(self.k(listing), doc))

    def _hash_set(self, key: bytes, values: dict[str, Any]) -> None:
        """Queue the fields of a hash set, and those set to None removed."""
        present = {field: value for field, value in values.items() if value is not None}
        gone = [field for field, value in values.items() if value is None]

        def write(pipe: Any) -> None:
            if present:
                pipe.hset(key, mapping=present)
            if gone:
                pipe.hdel(key, *gone)

        self._write(write)

    def get(
        self, kind: str, docs: Sequence[int], fields: Sequence[str] | None = None
    ) -> list[dict[str, Any] | None]:
        return self._fields(kind, list(docs), tuple(fields or KINDS[kind].fields))

    def _fields(self, kind: str, docs: list[int], names: tuple[str, ...]) -> list[dict[str, Any] | None]:
        """These fields of each document, read by their types (None for a missing document). Inside
        a transaction a document's fields read before are not read again: its key is WATCHed,
        and the transaction's own writes are not seen until it ends, in Redis as here."""
        types, present = KINDS[kind].fields, KINDS[kind].present
        names = names if present in names else (*names, present)
        known, wanted = {doc: self._docs.get((kind, doc), {}) for doc in docs}, set(names)
        unread = [doc for doc in docs if not known[doc].keys() >= wanted]
        rows = self._read([self.k(KEYS[kind], doc) for doc in unread], lambda key: ("HMGET", key, *names))
        for doc, row in zip(unread, rows, strict=True):
            known[doc] = dict(zip(names, row, strict=True))
            if self._watching is not None:
                self._docs[kind, doc] = known[doc]
        found: list[dict[str, Any] | None] = []
        for doc in docs:
            values = {name: _READ[types.get(name, str)](known[doc][name]) for name in names}
            found.append({k: v for k, v in values.items() if v is not None} if values[present] else None)
        return found

    def compare_and_set(self, kind: str, doc: int, field: str, expected: Any, value: Any) -> bool:
        """The field read WATCHed and written in the transaction's MULTI: another process's change
        in between fails the transaction (``Conflict``), and the caller reads it again."""
        if self._watching is None:
            with self.transaction():
                return self.compare_and_set(kind, doc, field, expected, value)
        found = self._fields(kind, [doc], (field,))[0]
        if found is None or found.get(field) != expected:
            return False
        self._hash_set(self.k(KEYS[kind], doc), {field: value})
        return True

    def delete(self, kind: str, doc: int) -> None:
        key, listing, ordered = self.k(KEYS[kind], doc), KINDS[kind].listing, KINDS[kind].ordered

        def write(pipe: Any) -> None:
            pipe.delete(key)
            if listing and ordered:
                pipe.zrem(self.k(listing), doc)
            elif listing:
                pipe.srem(self.k(listing), doc)

        self._write(write)

    def listing(self, kind: str) -> Iterator[int]:
        listing = self.k(KINDS[kind].listing)
        if not KINDS[kind].ordered:
            yield from sorted(reply_ids(self.r.smembers(listing)))
            return
        start = 0
        while chunk := reply_ids(self.r.zrange(listing, start, start + 999)):
            yield from chunk
            start += 1000

    # --- sets and maps ----------------------------------------------------------------------

    def _set(self, name: str, key: Hashable) -> bytes:
        parts = key if isinstance(key, tuple) else (key,)
        return self.k(SETS[name].redis, *(storable(p) if isinstance(p, str) else p for p in parts))

    def add(self, name: str, key: Hashable, doc: int) -> None:
        set_key = self._set(name, key)
        self._write(lambda pipe: pipe.sadd(set_key, doc))

    def discard(self, name: str, key: Hashable, doc: int) -> None:
        set_key = self._set(name, key)
        self._write(lambda pipe: pipe.srem(set_key, doc))

    def members(self, name: str, keys: Sequence[Hashable]) -> list[set[int]]:
        replies = self._read([self._set(name, key) for key in keys], lambda key: ("SMEMBERS", key))
        return [set(reply_ids(members or ())) for members in replies]

    def map_get(self, name: str, fields: Sequence[str] | None = None) -> dict[str, Any]:
        key = self.k(MAPS[name].redis)
        if fields is None:
            (reply,) = self._read([key], lambda k: ("HGETALL", k))
            pairs = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=True)
        else:
            fields = list(fields)
            (reply,) = self._read([key], lambda k: ("HMGET", k, *fields)) if fields else ([],)
            pairs = zip(fields, reply, strict=True)
        found = {}
        for field, value in pairs:
            if value is not None:
                field = reply_text(field) if isinstance(field, bytes) else field
                found[field] = reply_int(value) if reply_int(value) is not None else reply_text(value)
        return found

    def map_set(self, name: str, values: dict[str, Any]) -> None:
        self._hash_set(self.k(MAPS[name].redis), values)

    def bump(self, name: str, field: str, by: int = 1) -> None:
        """Add to a counter without reading it: no other crawler's count conflicts with this page."""
        key = self.k(MAPS[name].redis)
        self._write(lambda pipe: pipe.hincrby(key, field, by))

    def incr(self, name: str, field: str, by: int = 1) -> int:
        key = self.k(MAPS[name].redis)
        if self._watching is None:
            return int(self.r.hincrby(key, field, by))
        (old,) = self._read([key], lambda k: ("HGET", k, field))
        self._write(lambda pipe: pipe.hincrby(key, field, by))
        return (reply_int(old) or 0) + by

    # --- orders ----------------------------------------------------------------------------

    def rank(self, name: str, doc: int, score: float | None) -> None:
        key = self.k("rank", name)
        self._write(lambda pipe: pipe.zrem(key, doc) if score is None else pipe.zadd(key, {doc: score}))

    def ranked(self, name: str, below: float | None = None, beyond: int | None = None) -> list[int]:
        key, found = self.k("rank", name), {}
        if below is not None:
            found.update(self.r.zrangebyscore(key, "-inf", f"({below!r}", withscores=True))
        if beyond is not None:
            found.update(self.r.zrange(key, 0, -beyond - 1, withscores=True))
        order = sorted((score, doc) for doc, score in found.items() if reply_int(doc) is not None)
        return [int(doc) for _, doc in order]

    def clear(self, names: Sequence[str], kinds: Sequence[str]) -> None:
        keys = [self.k(MAPS[n].redis) for n in names if n in MAPS] + [self.k("rank", n) for n in names]
        keys += [self.k(KINDS[k].listing) for k in kinds if KINDS[k].listing]
        keys += [self.k(KINDS[k].counter) for k in kinds if KINDS[k].counter]
        prefixes = [self.k(SETS[n].redis) for n in names if n in SETS] + [self.k(KEYS[k]) for k in kinds]
        unlink_keys(self.r, keys, prefixes)

    def _hmget(self, keys: list[bytes], fields: tuple[bytes, ...]) -> list[list[Any]]:
        """These fields of each hash, unwatched (the spot order's freeze reads every page so)."""
        pipe = self.r.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(key, *fields)
        return read_as_missing([("HMGET", key, *fields) for key in keys], pipe.execute(raise_on_error=False))

    def size(self) -> int:
        return int(self.r.info("memory").get("used_memory", 0))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.r.close()

    # --- the search (``engine.Search``) -------------------------------------------------------

    def ready(self) -> None:
        """Nothing to do: a transaction loads the frozen spot order, or makes it, as it begins."""

    def post(self, doc_id: int, fp: Fingerprint, scope_id: int) -> None:
        fields = self._posting_fields(fp.spots, scope_id)
        if fields:
            self._write(
                lambda pipe: (self._append(pipe, doc_id, fields), pipe.sadd(self.k("spotted"), doc_id))
            )

    def unpost(self, doc_id: int, fp: Fingerprint, scope_id: int) -> None:
        """A page no longer admitted leaves its spot lists and the freeze's count."""
        fields = self._posting_fields(fp.spots, scope_id)
        self._write(lambda pipe: (self._remove(pipe, doc_id, fields), pipe.srem(self.k("spotted"), doc_id)))

    def find(self, probe: Fingerprint, scope_id: int) -> Iterator[tuple[int, Fingerprint]]:
        """The admitted pages of the scope sharing a lookup key or enough spot lists with ``probe``,
        each read WATCHed: the bounds' fields first, every signature only for those that pass."""
        keys = [
            self.k(LOOKUP.redis, key)
            for key in lookup_keys(probe, scope_id, self.config, simhash=self._probe_simhash)
        ]
        buckets, parts, needs = self._probe_fields(probe.spots, scope_id)
        commands = [("SMEMBERS", key) for key in keys] + ([self._gather(buckets)] if buckets else [])
        answers = self._query(commands, [*keys, *(bucket for bucket, _ in buckets)])
        found = {i for members in answers[: len(keys)] for i in reply_ids(members or ())}
        if buckets and isinstance(answers[-1], list):  # (None: a bucket of another type)
            fields = [field for _, bucket_fields in buckets for field in bucket_fields]
            lists = [(field, blob) for field, blob in zip(fields, answers[-1], strict=True) if blob]
            found.update(shared(lists, parts, needs))
        ids = sorted(found)
        rows = [(i, doc) for i, doc in zip(ids, self._fields(DOC.name, ids, _BOUNDS), strict=True) if doc]
        admitted = [(i, d) for i, d in rows if d.get("status") == "unique" and d.get("scope") == scope_id]
        bounds = [
            (i, d.get("exact"), d.get("simhash"), d.get("spot_size"), d.get("spots")) for i, d in admitted
        ]
        survivors = [row[0] for row in may_match(probe, bounds, self.config)]
        for doc_id, doc in zip(survivors, self.get(DOC.name, survivors, SIGNATURES), strict=True):
            if doc and doc.get("status") == "unique" and doc.get("scope") == scope_id:
                try:
                    yield doc_id, stored_fingerprint(doc_id, doc)
                except (ValueError, TypeError, OverflowError, RecursionError) as exc:
                    damaged_record(self.path, doc_id, exc)
