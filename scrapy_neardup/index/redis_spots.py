"""The SpotSigs side of a Redis index: the frozen spot order and the keys a page posts and probes.

A spot list is a string key ``<prefix>:sl:<posting key>`` (``spot_search.SpotKeys``) holding
little-endian uint32 document ids, appended to by each admitted page; a probe reads one key
a spot and partition it reaches, in one MGET.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..config import DedupConfig
from ..signatures.spotsigs import SpotSet
from .codecs import blob_spots
from .pruning import SpotClasses, overlap_needed, partition_of, partitions_covering, walk
from .spot_search import SpotKeys

try:
    from redis import WatchError
except ImportError:  # pragma: no cover - without the extra, RedisIndex refuses to start
    WatchError = ()  # type: ignore[assignment,misc]

# Admitted pages with spots after which the spot order is frozen (as ``sqlite_spots.FREEZE_AT``).
FREEZE_AT = 5000


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

    def _searched(self, spots: SpotSet) -> bool:
        return "spotsigs" in self.config.methods and spots.size >= self.config.spotsigs_least_spots

    def _posting_keys(self, spots: SpotSet, scope_id: int) -> list[bytes]:
        """The spot lists an admitted page of these spots is appended to."""
        if not self._searched(spots):
            return []
        return [
            self.k("sl", key)
            for key in self.keys.posting_keys(walk(spots, self.classes), scope_id, self.classes)
        ]

    def _load_order(self) -> None:
        if self.classes is None and self.r.hget(self.k("meta"), "spot_order"):
            rows = self.r.hgetall(self.k("classes"))
            spots = np.array([int(s) for s in rows], dtype=np.int64).astype(np.uint64)
            classes = np.array([int(c) for c in rows.values()], dtype=np.int64)
            order = np.argsort(spots)
            self.classes = SpotClasses(spots[order], classes[order])

    def _freeze_if_due(self) -> None:
        """Freeze the spot order once enough pages are admitted: its own transaction, before a page's."""
        if "spotsigs" not in self.config.methods or self.classes is not None:
            return
        if self.r.hget(self.k("meta"), "spot_order") or self.r.scard(self.k("spotted")) < FREEZE_AT:
            return
        with self.r.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(self.k("meta"), self.k("spotted"))
                if pipe.hget(self.k("meta"), "spot_order"):
                    return
                ids = sorted(int(i) for i in pipe.smembers(self.k("spotted")))
                rows = self._hmget([self.k("doc", i) for i in ids], (b"scope", b"spots"))
                sets = [(i, int(row[0]), blob_spots(row[1])) for i, row in zip(ids, rows, strict=True)]
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
                pipe.hset(self.k("meta"), "spot_order", "classes")
                for doc, scope, spot_set in sets:
                    if self._searched(spot_set):
                        for key in self.keys.posting_keys(walk(spot_set, classes), scope, classes):
                            pipe.append(self.k("sl", key), doc.to_bytes(4, "little"))
                pipe.execute()
            except WatchError:
                return  # another process froze it or admitted a page: the next check looks again

    def _probe_keys(self, spots: SpotSet, scope_id: int) -> tuple[list[int], range, list[int]]:
        """The spot list keys a probe reads (each spot's range of partitions, key by key)."""
        if not self._searched(spots):
            return [], range(0), []
        order, tau = walk(spots, self.classes), self.config.spotsigs_threshold
        parts = partitions_covering(spots.size, tau)
        own = self.keys.overlap_in(partition_of(spots.size, tau))
        asked = [min(own, self.keys.overlap_in(p)) for p in parts]
        needed = {k: overlap_needed(order, tau, k) for k in set(asked)}
        needs = [needed[k] for k in asked]
        ranges = self.keys.probe_ranges(order, scope_id, parts, needs, self.classes)
        return [key for low, high in ranges.tolist() for key in range(low, high + 1)], parts, needs
