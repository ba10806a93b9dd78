"""RedisIndex: the index in Redis, so crawlers on many machines dedup against each other.

The ledger over the Redis engine (``engine``), with the same lookup keys (``lookup_keys``,
``SpotKeys``) and the same records as SQLite, so the Detector gives the same verdicts on
either. Every key starts with the index's prefix (``<spider>:neardup`` by default, as
scrapy-redis names its keys).

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
from typing import TYPE_CHECKING, Any

from ....config import DedupConfig
from ....exceptions import IndexFileError, MissingExtraError
from ... import schema
from ...ledger import Ledger
from ...location import fit_key_prefix, safe_url
from ...stores import MAPS, SETS
from .connection import KEY_TYPES, MARK, ReadsAsMissing, unlink_keys, unreachable
from .engine import KEYS, RedisEngine
from .replies import reply_text

if TYPE_CHECKING:
    from ...location import IndexSpec

try:
    import redis
except ImportError:  # pragma: no cover - the extra is missing
    redis = None

# The index's keys: single ones, and kinds with one key an id or value (``<prefix>:<kind>:...``).
OWN_KEYS = (*KEY_TYPES, *(store.redis for store in MAPS.values() if store.marks))
OWN_KINDS = ("sl", *KEYS.values(), *(store.redis for store in SETS.values()))


def _require_redis() -> None:
    if redis is None:
        raise MissingExtraError("a Redis index (NEARDUP_INDEX = 'redis://...')", "redis", "redis")


class RedisIndex(Ledger):
    """Candidate search over admitted pages kept in Redis, with every verdict recorded."""

    def __init__(self, url: str, config: DedupConfig, prefix: str = "neardup", timeout: float = 5.0) -> None:
        _require_redis()
        self.url, self.prefix = url, prefix
        path = f"{safe_url(url)} {prefix}"  # what messages name
        if not fit_key_prefix(prefix):
            raise IndexFileError(path, f"{prefix!r} cannot prefix an index's keys (empty, spaces or *?[]\\)")
        try:
            r = ReadsAsMissing(
                redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
            )
            r.ping()
            engine = RedisEngine(r, prefix, config, path)
        except redis.RedisError as exc:
            raise IndexFileError(path, unreachable(exc)) from None
        except ValueError as exc:  # a malformed URL
            raise IndexFileError(path, f"is not a Redis URL ({exc})") from None
        super().__init__(engine, config)
        self.engine: RedisEngine = engine
        self.r = r
        self._timeout = timeout

    # One: checks at once conflict (each WATCHes the spot lists it probes, which the others post
    # to) and are made again; on the LLVM docs crawl, 2 lanes made 123 conflicts of 659 pages and
    # 4 made 246, each crawl slower than one lane's (benchmarks/bench_index_crawl.py).
    lanes = 1

    def another(self) -> RedisIndex:
        return self._joined(RedisIndex(self.url, self.config, self.prefix, self._timeout))

    @classmethod
    def open_existing(cls, url: str, prefix: str = "neardup") -> RedisIndex:
        """Open an index with the settings it was built with (for reports and exports)."""
        _require_redis()
        path = f"{safe_url(url)} {prefix}"
        try:
            r = redis.Redis.from_url(url)
        except ValueError as exc:  # a malformed URL
            raise IndexFileError(path, f"is not a Redis URL ({exc})") from None
        try:
            key = ":".join([prefix, MARK]).encode("utf-8", "surrogatepass")
            meta = {reply_text(k): reply_text(v) for k, v in r.hgetall(key).items()}
        except redis.RedisError as exc:
            raise IndexFileError(path, unreachable(exc)) from None
        finally:
            r.close()
        if "config" not in meta:
            raise IndexFileError(path, "holds no scrapy-neardup index")
        return cls(url, schema.config_from_meta(meta, path), prefix)

    @classmethod
    def from_spec(cls, spec: IndexSpec, config: DedupConfig) -> RedisIndex:
        return cls(spec.where, config, spec.key or "neardup")

    @classmethod
    def existing(cls, spec: IndexSpec) -> RedisIndex:
        return cls.open_existing(spec.where, spec.key or "neardup")

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
        path = f"{safe_url(url)} {prefix}"
        r = None
        try:
            r = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0)
            if r.exists(_key(prefix, MARK)):
                _remove(r, prefix)
        except redis.RedisError as exc:
            raise IndexFileError(path, unreachable(exc)) from None
        except ValueError as exc:  # a malformed URL
            raise IndexFileError(path, f"is not a Redis URL ({exc})") from None
        finally:
            if r is not None:
                with contextlib.suppress(Exception):
                    r.close()

    def k(self, *parts: object) -> bytes:
        """A key of this index."""
        return self.engine.k(*parts)

    def remove(self) -> int:
        """Delete this index's own keys (NEARDUP_RESET), nothing else under the prefix; the number."""
        return _remove(self.r, self.prefix)


def _key(prefix: str, *parts: Any) -> bytes:
    return ":".join([prefix, *map(str, parts)]).encode("utf-8", "surrogatepass")


def _remove(r: Any, prefix: str) -> int:
    return unlink_keys(
        r, [_key(prefix, name) for name in OWN_KEYS], [_key(prefix, kind) for kind in OWN_KINDS]
    )
