"""The SpotSigs side of a Redis index: the frozen spot order and the lists a page posts and probes.

A posting key (``spot_search.SpotKeys``: scope, spot, partition) is a field of the hash
``<prefix>:sl:<key >> BUCKET_SHIFT>``, whose value is the list's little-endian uint32 document
ids. A spot's partitions are fields of one hash, so a probe reads one HMGET a spot; and a
few dozen lists share a hash, which Redis keeps compact (a key of its own a list cost about
5 KB a page; at 3,000 pages, benchmarks/bench_redis.py). Appending to a field is a script.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....config import DedupConfig
from ....signatures.spotsigs import SpotSet
from ...codecs import blob_spots, sound_spots_blob
from ...pruning import SpotClasses, walk
from ...spot_search import SpotKeys
from ...stores import DOC, MAPS
from .replies import reply_ids, reply_int

MARK = next(store.redis for store in MAPS.values() if store.marks)  # the meta: its presence is the index's

try:
    from redis import WatchError
except ImportError:  # pragma: no cover - without the extra, RedisIndex refuses to start
    WatchError = ()  # type: ignore[assignment,misc]

# Admitted pages with spots after which the spot order is frozen (as ``sqlite_spots.FREEZE_AT``).
FREEZE_AT = 5000

# A posting key's hash: its bits above the partition (12) and the spot's low 16 bits, so the
# partitions of one spot share a hash, and a scope's lists spread over 65,536 hashes.
BUCKET_SHIFT = 28

# Fields are a posting key's 8 bytes (big-endian), so a hash's fields pass as one string
# (Lua's numbers could not hold 64-bit keys). Append ARGV[1] (a document id's 4 bytes) to
# field ARGV[i + 1] of hash KEYS[i], for every i.
APPEND = """
for i = 1, #KEYS do
  local old = redis.call('HGET', KEYS[i], ARGV[i + 1])
  redis.call('HSET', KEYS[i], ARGV[i + 1], (old or '') .. ARGV[1])
end
return #KEYS
"""

# Remove ARGV[1] (a document id's 4 bytes) from field ARGV[i + 1] of hash KEYS[i], for every i;
# a list left empty goes.
REMOVE = """
for i = 1, #KEYS do
  local old = redis.call('HGET', KEYS[i], ARGV[i + 1])
  if old then
    local kept = {}
    for at = 1, #old, 4 do
      local id = string.sub(old, at, at + 3)
      if id ~= ARGV[1] then kept[#kept + 1] = id end
    end
    if #kept == 0 then
      redis.call('HDEL', KEYS[i], ARGV[i + 1])
    else
      redis.call('HSET', KEYS[i], ARGV[i + 1], table.concat(kept))
    end
  end
end
return #KEYS
"""

# The lists a probe reads in one command: ARGV[i] holds the fields of hash KEYS[i], 8 bytes
# each; the reply is every field's value in that order (nil where none).
GATHER = """
local out = {}
for i = 1, #KEYS do
  local fields = {}
  for at = 1, #ARGV[i], 8 do fields[#fields + 1] = string.sub(ARGV[i], at, at + 7) end
  local values = redis.call('HMGET', KEYS[i], unpack(fields))
  for j = 1, #fields do out[#out + 1] = values[j] end
end
return out
"""


def field(key: int) -> bytes:
    """A posting key as a hash field: its 8 bytes."""
    return (key & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")


class RedisSpots:
    """The spot order and posting keys of a Redis index (``r``, ``k``, ``config``, ``keys``)."""

    r: Any
    config: DedupConfig
    keys: SpotKeys
    classes: SpotClasses | None

    def k(self, *parts: object) -> bytes:
        raise NotImplementedError

    def _hmget(self, keys: list[bytes], fields: tuple[bytes, ...]) -> list[list[Any]]:
        raise NotImplementedError

    def _gather(self, buckets: list[tuple[bytes, list[int]]]) -> tuple:
        """The command that reads these lists (``GATHER``), for ``_query``."""
        names = [b"".join(field(key) for key in keys) for _, keys in buckets]
        return ("EVALSHA", self._gather_sha, len(buckets), *(bucket for bucket, _ in buckets), *names)

    @property
    def _gather_sha(self) -> str:
        if getattr(self, "_gather_loaded", None) is None:
            self._gather_loaded = self.r.script_load(GATHER)
        return self._gather_loaded

    @property
    def _append_script(self) -> Any:
        if getattr(self, "_script", None) is None:
            self._script = self.r.register_script(APPEND)
        return self._script

    def _searched(self, spots: SpotSet) -> bool:
        return "spotsigs" in self.config.methods and spots.size >= self.config.spotsigs_least_spots

    def _bucket(self, key: int) -> bytes:
        return self.k("sl", key >> BUCKET_SHIFT)

    def _posting_fields(self, spots: SpotSet, scope_id: int) -> list[tuple[bytes, bytes]]:
        """(hash, field) of each list an admitted page of these spots is appended to."""
        if not self._searched(spots):
            return []
        keys = self.keys.posting_keys(walk(spots, self.classes), scope_id, self.classes)
        return [(self._bucket(key), field(key)) for key in keys]

    def _append(self, pipe: Any, doc_id: int, fields: list[tuple[bytes, bytes]]) -> None:
        """Queue the append of a document to these lists."""
        if fields:
            args = [doc_id.to_bytes(4, "little"), *(name for _, name in fields)]
            self._append_script(keys=[bucket for bucket, _ in fields], args=args, client=pipe)

    def _remove(self, pipe: Any, doc_id: int, fields: list[tuple[bytes, bytes]]) -> None:
        """Queue the removal of a document from these lists."""
        if fields:
            if getattr(self, "_remover", None) is None:
                self._remover = self.r.register_script(REMOVE)
            args = [doc_id.to_bytes(4, "little"), *(name for _, name in fields)]
            self._remover(keys=[bucket for bucket, _ in fields], args=args, client=pipe)

    def _load_order(self) -> None:
        rows = [(reply_int(s), reply_int(c)) for s, c in self.r.hgetall(self.k("classes")).items()]
        rows = [(s, c) for s, c in rows if s is not None and c is not None]  # but a damaged one
        spots = np.array([s for s, _ in rows], dtype=np.int64).astype(np.uint64)
        classes = np.array([c for _, c in rows], dtype=np.int64)
        order = np.argsort(spots)
        self.classes = SpotClasses(spots[order], classes[order])

    def _freeze(self) -> None:
        """Count spot frequencies over the admitted pages, fix the classes and post the pages again,
        in a transaction of its own (a check meeting a due freeze makes it, then is judged again)."""
        with self.r.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(self.k(MARK), self.k("spotted"))
                if pipe.hget(self.k(MARK), "spot_order"):
                    return
                ids = sorted(reply_ids(pipe.smembers(self.k("spotted"))))
                rows = self._hmget([self.k(DOC.redis or DOC.name, i) for i in ids], (b"scope", b"spots"))
                sets = [(i, reply_int(row[0]), _spots(row[1])) for i, row in zip(ids, rows, strict=True)]
                sets = [
                    (i, scope, spots) for i, scope, spots in sets if scope is not None and spots is not None
                ]
                spots, df = np.unique(np.concatenate([s.hashes for _, _, s in sets]), return_counts=True)
                classes = SpotClasses.from_frequencies(spots, df)
                old = list(self.r.scan_iter(match=self.k("sl", "*"), count=1000))
                pipe.multi()
                for start in range(0, len(old), 1000):
                    pipe.unlink(*old[start : start + 1000])
                pipe.hset(
                    self.k("classes"),
                    mapping=dict(zip(classes.spots.tolist(), classes.classes.tolist(), strict=True)),
                )
                pipe.hset(self.k(MARK), "spot_order", "classes")
                lists: dict[bytes, dict[bytes, bytes]] = {}
                for doc, scope, spot_set in sets:
                    if self._searched(spot_set):
                        for key in self.keys.posting_keys(walk(spot_set, classes), scope, classes):
                            bucket = lists.setdefault(self._bucket(key), {})
                            bucket[field(key)] = bucket.get(field(key), b"") + doc.to_bytes(4, "little")
                for bucket, fields in lists.items():
                    pipe.hset(bucket, mapping=fields)
                pipe.execute()
            except WatchError:
                return  # another process froze it or admitted a page: the next check looks again

    def _probe_fields(
        self, spots: SpotSet, scope_id: int
    ) -> tuple[list[tuple[bytes, list[int]]], range, list[int]]:
        """The lists a probe reads, as (hash, its fields): a spot's range of partitions is one hash."""
        if not self._searched(spots):
            return [], range(0), []
        ranges, parts, needs = self.keys.probe(walk(spots, self.classes), scope_id, self.classes)
        by_bucket: dict[bytes, list[int]] = {}
        for low, high in ranges.tolist():
            by_bucket.setdefault(self._bucket(low), []).extend(range(low, high + 1))
        return list(by_bucket.items()), parts, needs


def _spots(blob: bytes | None) -> SpotSet | None:
    """A record's stored spots, None for a damaged one (left out of the frequencies)."""
    return blob_spots(blob) if sound_spots_blob(blob) else None
