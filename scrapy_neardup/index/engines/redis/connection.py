"""A Redis index's connection: its meta checked at opening, and its optimistic transactions.

A transaction WATCHes each key before it reads it (``_query`` sends the WATCH and the reads in
one round trip, on the transaction's own connection) and queues its writes, which go in one
MULTI/EXEC when it ends; a key changed by another client in between makes EXEC write nothing
(``Conflict``: the Detector judges the page again).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

from ....config import DedupConfig
from ....exceptions import IndexFileError
from ... import schema
from ...base import Conflict
from ...stores import KINDS, MAPS, ORDERS
from . import spots as redis_spots
from .replies import reply_count, reply_int, reply_text
from .spots import MARK

logger = logging.getLogger(__name__)

try:
    import redis
except ImportError:  # pragma: no cover - without the extra, RedisIndex refuses to start
    redis = None


def read_as_missing(commands: list[tuple], replies: list[Any]) -> list[Any]:
    """Replies with each error (a key of another type, written by another program) read as a
    missing key's reply: the index leaves out what it cannot read."""
    empty = {"HMGET": lambda c: [None] * (len(c) - 2), "SMEMBERS": lambda c: set(), "HGETALL": lambda c: {}}
    return [
        (
            empty.get(str(command[0]).upper(), lambda c: None)(command)
            if isinstance(reply, Exception)
            else reply
        )
        for command, reply in zip(commands, replies, strict=True)
    ]


def unlink_keys(r: Any, keys: list[bytes], kinds: list[bytes]) -> int:
    """Delete ``keys`` and every ``<kind>:*`` key of ``kinds`` (a kind's own glob characters
    escaped), a thousand at a time; how many there were."""
    found = list(keys)
    for kind in kinds:
        found += r.scan_iter(match=re.sub(rb"([*?\[\]\\])", rb"\\\1", kind) + b":*", count=1000)
    return sum(r.unlink(*found[start : start + 1000]) for start in range(0, len(found), 1000))


def _hold_connection(pipe: Any) -> None:
    """Give a transaction's pipeline its connection without a round trip (``pipe.watch`` would
    spend one on its own): its first read sends the WATCH."""
    try:
        pipe.connection = pipe.connection_pool.get_connection()
    except TypeError:  # redis-py 5 names the command a connection is for
        pipe.connection = pipe.connection_pool.get_connection("WATCH")
    pipe.watching = True  # so that a transaction given up UNWATCHes before the pool has it back


def unreachable(exc: Exception) -> str:
    """What a failure to open the index means, and what to do."""
    refused = redis is not None and isinstance(exc, redis.AuthenticationError)
    if refused or "HELLO must be called" in str(exc):
        return f"refused us ({exc}); check the user and password in the URL"
    if "WRONGTYPE" in str(exc):
        return f"holds keys of another kind under this prefix ({exc}); choose another ?prefix="
    return f"cannot be reached ({exc}); is redis-server running there?"


# The type of each of an index's own keys of fixed name (but its meta, checked before).
KEY_TYPES = {
    **{kind.counter: b"string" for kind in KINDS.values() if kind.counter},
    **{store.redis: b"hash" for store in MAPS.values() if not store.marks}, "classes": b"hash",
    **{kind.listing: b"zset" if kind.ordered else b"set" for kind in KINDS.values() if kind.listing},
    **{f"rank:{order.name}": b"zset" for order in ORDERS.values()}, "spotted": b"set",
}  # fmt: skip
# A missing key's reply to each read ``ReadsAsMissing`` answers for.
_MISSING: dict[str, Callable[..., Any]] = {
    "get": lambda *a: None, "hget": lambda *a: None, "hgetall": lambda *a: {},
    "smembers": lambda *a: set(), "zrange": lambda *a: [], "hmget": lambda key, *fields: [None] * len(fields),
}  # fmt: skip


class ReadsAsMissing:
    """A Redis client whose reads of a key of another type (written by another program) answer
    as for a missing key, so that one such key costs what it holds, not every read after it."""

    def __init__(self, client: Any) -> None:
        self._client = client
        for name, missing in _MISSING.items():
            setattr(self, name, _as_missing(getattr(client, name), missing))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _as_missing(read: Callable[..., Any], missing: Callable[..., Any]) -> Callable[..., Any]:
    def tolerant(*args: Any, **kwargs: Any) -> Any:
        try:
            return read(*args, **kwargs)
        except redis.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            return missing(*args)

    return tolerant


class RedisConnection:
    """Opening and transactions of a Redis index (``r``, ``k``, ``config``, ``path``)."""

    r: Any
    path: str
    config: DedupConfig
    _probe_simhash: bool
    _watching: Any
    _writes: list[Callable[[Any], None]]
    _docs: dict[tuple[str, int], dict[str, Any]]  # each document's fields a transaction read
    _unsent_watch: list[bytes]  # keys to WATCH with the transaction's first read
    _checks: int

    def k(self, *parts: object) -> bytes:
        raise NotImplementedError

    def _open(self, fresh_server: bool = True) -> None:
        """Create the index's meta when missing (refusing a prefix that holds other keys, unless the
        server lost the index mid-crawl and these keys are its own), then check it."""
        meta_key = self.k(MARK)
        with self.r.pipeline() as pipe:
            try:
                pipe.watch(meta_key)
                if not pipe.exists(meta_key):
                    taken = fresh_server and [name for name in KEY_TYPES if pipe.exists(self.k(name))]
                    if taken:
                        raise IndexFileError(
                            self.path,
                            f"holds keys that are no scrapy-neardup index ({self.k(taken[0]).decode()}); "
                            "choose another ?prefix=",
                        )
                    pipe.multi()
                    pipe.hset(meta_key, mapping=dict(schema.meta_rows(self.config, self._probe_simhash)))
                    pipe.execute()
            except redis.WatchError:
                pass  # another process created it meanwhile
        meta = {reply_text(k): reply_text(v) for k, v in self.r.hgetall(meta_key).items()}
        if meta.get("schema") != str(schema.SCHEMA_VERSION):
            found = str(meta.get("schema"))[:20]
            raise IndexFileError(self.path, f"has schema version {found}; this release reads 1")
        try:
            remedy = "another prefix in NEARDUP_INDEX (or NEARDUP_RESET)"
            self.keys, self.stores_simhash = schema.spot_keys(meta, self.config, self.path, remedy)
        except (KeyError, ValueError, TypeError, IndexError) as exc:
            raise IndexFileError(self.path, f"has damaged settings in its meta ({exc!r})") from None
        if self._probe_simhash and not self.stores_simhash and "simhash" in self.config.methods:
            raise IndexFileError(
                self.path,
                "has no SimHash lookup keys, which this NEARDUP_SIMHASH_CONFIRM needs; use a new prefix",
            )
        self._mend_counters()

    def _mend_counters(self) -> None:
        """Counters a damaged index holds (written by another program) made counters again, so
        that one bad value does not stop every record: an id counter past every id in use (with
        a margin), a total dropped (the report counts it afresh)."""
        pipe = self.r.pipeline(transaction=False)
        for name in KEY_TYPES:
            pipe.type(self.k(name))
        for name, found in zip(KEY_TYPES, pipe.execute(), strict=True):
            if found not in (KEY_TYPES[name], b"none"):
                kind = found.decode()
                logger.warning("%s: key %s is no key of the index (a %s); deleted", self.path, name, kind)
                self.r.delete(self.k(name))
        ids = {kind.counter: kind.redis or kind.name for kind in KINDS.values() if kind.counter}
        for name, kind in ids.items():
            value = self.r.get(self.k(name))
            if reply_count(value) is not None:
                continue
            # Lost or damaged: past every id in use, so that no record is written over another.
            used = [self.k(kind, "")] if kind else []
            found = (reply_int(key.rsplit(b":", 1)[1]) or 0 for key in self._scan(used))
            top = max((i for i in found if i < 1 << 60), default=0)
            if value is None and not top:
                continue  # a new index
            logger.warning("%s: counter %s is damaged; set past the ids in use (%d)", self.path, name, top)
            self.r.delete(self.k(name))
            self.r.set(self.k(name), top + 1_000_000)
        for meta in (store for store in MAPS.values() if store.counters):
            found = self.r.hmget(self.k(meta.redis), *meta.counters)
            for field, value in zip(meta.counters, found, strict=True):
                if value is not None and reply_count(value) is None:  # past every number in use
                    logger.warning("%s: counter %s is damaged; set past the numbers in use", self.path, field)
                    self.r.hset(self.k(meta.redis), field, self._highest_in_use() + 1_000_000)
        for total in (store.redis for store in MAPS.values() if store.totals):
            bad = [f for f, v in self.r.hgetall(self.k(total)).items() if reply_count(v) is None]
            if bad:
                self.r.hdel(self.k(total), *bad)

    def _highest_in_use(self) -> int:
        """The highest number a map's values hold (ids a counter gave, as scopes' ids)."""
        found = [reply_count(v) or 0 for store in MAPS.values() if store.first_wins
                 for v in self.r.hgetall(self.k(store.redis)).values()]  # fmt: skip
        return max(found, default=0)

    def _scan(self, prefixes: list[bytes]) -> Iterator[bytes]:
        for prefix in prefixes:
            yield from self.r.scan_iter(match=re.sub(rb"([*?\[\]\\])", rb"\\\1", prefix) + b"*", count=1000)

    # --- transactions ---------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Reads WATCHed as they are made, writes queued and sent in one MULTI/EXEC at the end.
        The meta's WATCH (a freeze of the spot order changes it) goes with the first read."""
        with self.r.pipeline(transaction=True) as pipe:
            self._watching, self._writes, self._docs = pipe, [], {}
            try:
                _hold_connection(pipe)
                self._unsent_watch = [self.k(MARK)]
                self._checks += 1
                look = self._checks % 256 == 1  # whether the server lost the index
                order = self.classes is None and "spotsigs" in self.config.methods
                if look or order:
                    meta, spotted = self.k(MARK), self.k("spotted")
                    frozen, spotted, present = self._query(
                        [("HGET", meta, "spot_order"), ("SCARD", spotted), ("EXISTS", meta)]
                    )
                    if not present:
                        pipe.reset()
                        self._lost()
                        raise Conflict(self.path)  # judged again in the index made anew
                    if order and frozen:
                        self._load_order()
                    elif order and spotted >= redis_spots.FREEZE_AT:
                        pipe.reset()
                        self._freeze()
                        raise Conflict(self.path)  # judged again, in the frozen order
                yield
                pipe.multi()
                for write in self._writes:
                    write(pipe)
                pipe.execute()
            except redis.WatchError:
                raise Conflict(self.path) from None
            finally:
                self._watching, self._writes, self._docs, self._unsent_watch = None, [], {}, []

    def _lost(self) -> None:
        """The server lost the index (restarted without persistence, or flushed): make it anew."""
        logger.warning(
            "%s: the index is gone from Redis (a restart without persistence, or a flush); it starts "
            "again empty, and pages seen before it are new to it",
            self.path,
        )
        self.classes = None
        self._open(fresh_server=False)

    def batch(self) -> contextlib.AbstractContextManager[Any]:
        """Each page is its own transaction in Redis (a scan's batch is no larger unit here)."""
        return contextlib.nullcontext(self)

    def _query(self, commands: list[tuple], watch: list[bytes] | tuple = ()) -> list[Any]:
        """Send ``commands`` in one round trip; inside a transaction, WATCH ``watch`` first in the same
        trip, on the transaction's connection (a key must be watched before it is read)."""
        if self._watching is None:
            pipe = self.r.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            return read_as_missing(commands, pipe.execute(raise_on_error=False)) if commands else []
        if not commands:
            return []
        watch, self._unsent_watch = [*self._unsent_watch, *watch], []
        watched = [("WATCH", *watch)] if watch else []
        connection = self._watching.connection  # the transaction's own (``_hold_connection``)
        connection.send_packed_command(connection.pack_commands([*watched, *commands]))
        replies = []
        for _ in range(len(watched) + len(commands)):
            try:
                replies.append(connection.read_response())
            except redis.exceptions.ResponseError as exc:  # every reply is read, to keep the connection
                replies.append(exc)
        if any(isinstance(reply, redis.exceptions.NoScriptError) for reply in replies):
            self._gather_loaded = None  # a restarted server forgot the script
            commands = [(c[0], self._gather_sha, *c[2:]) if c[0] == "EVALSHA" else c for c in commands]
            return self._query(commands, watch)
        if watched and isinstance(replies[0], Exception):
            raise replies[0]
        return read_as_missing(commands, replies[len(watched) :])

    def _read(self, keys: list[bytes], fetch: Callable[[Any, bytes], Any]) -> list[Any]:
        """WATCH ``keys`` (inside a transaction), then read them: ``fetch(key)`` is each key's command."""
        return self._query([fetch(key) for key in keys], keys) if keys else []

    def _write(self, work: Callable[[Any], None]) -> None:
        if self._watching is None:  # outside a transaction: a write of its own
            with self.r.pipeline(transaction=True) as pipe:
                work(pipe)
                pipe.execute()
        else:
            self._writes.append(work)
