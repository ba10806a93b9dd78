"""The SpotSigs search's storage arithmetic: how posting keys are packed, the count filter
over the lists a probe reads, and the multiset Jaccard of a probe with many stored sets at once.

Pure functions of the index's stored settings (``SpotKeys``); ``pruning`` says which spots
are posted and probed, this module says under which keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..signatures.spotsigs import SpotSet
from .codecs import blob_spots, listed_spots
from .pruning import (
    SpotClasses,
    Walk,
    overlap_needed,
    partition_bounds,
    partition_of,
    partitions_covering,
    prefix,
    probe_reach,
)

# Distinct spots a SpotSigs match must share in both prefixes (``pruning.overlap_needed``): the
# fastest check of those tried (docs/index.md, "What the index stores").
SPOT_OVERLAP = 3

# Pages of at least LARGE_PAGE_SPOTS spots (the partitions starting there) post prefixes for
# SPOT_OVERLAP_LARGE shared spots: a large page meets many pages sharing three rare spots by
# chance, each of them a candidate to read and compare.
LARGE_PAGE_SPOTS, SPOT_OVERLAP_LARGE = 150, 6

# Once the spot order is frozen, a spot of the rarest class (seen in one page or none at the
# freeze) is keyed by its top RARE_BUCKET_BITS bits, so the rare spots of one bucket share
# lists: most rare spots are in one page only, and a row costs more than the ids it holds.
RARE_BUCKET_BITS = 20

# Posting lists hold document ids as uint32s.
MAX_DOC = 0xFFFFFFFF

# Capping the partition in a posting key merges far partitions, and cutting the scope can mix
# scopes: both only add candidates, which are read back with their real scope and size, so
# the search stays exact.
_MAX_PART, _SCOPE_MASK = 4095, (1 << 20) - 1


@dataclass(frozen=True)
class SpotKeys:
    """Posting keys of one index: scope (20 bits) | spot (32) | length partition (12).

    A probe reads one key range a spot for all the partitions it covers. Once the spot order
    is frozen (``classes``), a rare spot is keyed by its bucket: a bucket's other spots only
    add candidates, which the count filter and the Jaccard drop, so the search stays exact.
    """

    tau: float
    overlap: int = SPOT_OVERLAP
    large: tuple[int, int] | None = (LARGE_PAGE_SPOTS, SPOT_OVERLAP_LARGE)
    bucket_bits: int = RARE_BUCKET_BITS

    def overlap_in(self, part: int) -> int:
        """The shared spots the prefixes of a partition's documents are posted for."""
        if self.large and partition_bounds(self.tau)[part] >= self.large[0]:
            return self.large[1]
        return self.overlap

    def posting_keys(self, order: Walk, scope: int, classes: SpotClasses | None) -> list[int]:
        """A stored page's posting keys: its prefix, extended for the overlap, in its partition."""
        part = partition_of(order.size, self.tau)
        rare = prefix(order, self.tau, self.overlap_in(part))
        last = np.full(len(rare), part)
        ranges = self.key_ranges(rare, order.classes[: len(rare)], part, last, scope, classes)
        return ranges[:, 0].tolist()

    def probe_ranges(
        self, order: Walk, scope: int, parts: range, needs: list[int], classes: SpotClasses | None
    ) -> np.ndarray:
        """Posting key ranges a probe reads: each prefix spot over the partitions it reaches."""
        rare, reach = probe_reach(order, self.tau, needs, parts)
        return self.key_ranges(rare, order.classes[: len(rare)], parts.start, reach, scope, classes)

    def key_ranges(
        self,
        spots: np.ndarray,
        spot_classes: np.ndarray,
        first: int,
        last: np.ndarray,
        scope: int,
        classes: SpotClasses | None,
    ) -> np.ndarray:
        """Signed (low, high) keys, a row a range, of each spot (of these frequency classes)
        over partitions ``first`` to its ``last``; low and high differ in the low bits only."""
        scope, first = scope & _SCOPE_MASK, min(first, _MAX_PART)
        last = np.minimum(last, _MAX_PART).astype(np.uint64)
        heads = spots.astype(np.uint64)
        if classes is not None:
            bucket = np.uint64(((1 << self.bucket_bits) - 1) << (32 - self.bucket_bits))
            heads = np.where(spot_classes == 0, heads & bucket, heads)
        bases = ((np.uint64(scope) << np.uint64(32)) | heads) << np.uint64(12)
        return np.stack([bases | np.uint64(first), bases | last], axis=1).view(np.int64)

    def probe(
        self, order: Walk, scope: int, classes: SpotClasses | None
    ) -> tuple[np.ndarray, range, list[int]]:
        """A probe's key ranges, the partitions it covers and the shared spots each asks.

        A probe may ask fewer shared spots than a partition was posted for: a page asks what
        its own size is posted for, so smaller pages read no longer prefixes.
        """
        parts = partitions_covering(order.size, self.tau)
        own = self.overlap_in(partition_of(order.size, self.tau))
        asked = [min(own, self.overlap_in(p)) for p in parts]
        needed = {k: overlap_needed(order, self.tau, k) for k in set(asked)}
        needs = [needed[k] for k in asked]
        return self.probe_ranges(order, scope, parts, needs, classes), parts, needs

    @staticmethod
    def partition(key: int) -> int:
        """The length partition a posting key is of."""
        return key & 4095


def counted(lists: list[tuple], need: int) -> list[int]:
    """The documents posted at least ``need`` times in rows ending in a posting list."""
    if not lists:
        return []
    try:
        joined = b"".join(row[-1] for row in lists)
    except TypeError:  # a damaged list (a file edited by hand): the others still count
        joined = b"".join(row[-1] for row in lists if isinstance(row[-1], bytes))
    ids = np.frombuffer(joined[: len(joined) - len(joined) % 4], dtype="<u4")
    # Sorted, a document is posted ``need`` times where an id equals the one ``need - 1`` on.
    ids = np.sort(ids[may_be_often(ids, need)])
    step = max(need, 1) - 1
    if len(ids) <= step:
        return []
    return np.unique(ids[step:][ids[step:] == ids[: len(ids) - step]]).tolist()


def may_be_often(ids: np.ndarray, need: int, bits: int | None = None) -> np.ndarray:
    """Which of ``ids`` (uint32) may occur ``need`` times or more: every one that does, and a few
    that do not (a superset, for an exact count of the few).

    Counted in a hash table of ``2**bits`` slots, by default four to eight for each id: ids that
    share a slot only add to its count, so none is missed. A check meets thousands of ids and
    few occur often: counting them in the table and sorting only those left costs about a
    third of sorting them all (docs/scale.md, "Where the median goes").
    """
    if need <= 1:
        return np.ones(len(ids), dtype=bool)
    bits = bits if bits is not None else min(max(len(ids).bit_length() + 2, 10), 22)
    # Fibonacci hashing: the top bits of each id times 2**32 over the golden ratio.
    slots = (ids.astype(np.uint32, copy=False) * np.uint32(0x9E3779B1)) >> np.uint32(32 - bits)
    return np.bincount(slots, minlength=1 << bits)[slots] >= need


def shared(lists: list[tuple], parts: range, needs: list[int]) -> list[int]:
    """Documents of each of ``parts`` posted at least its ``needs`` times in ``lists``.

    Rows end in a posting list; where partitions ask different counts, a row is (key, list)
    and its key tells the partition (a document is in one).
    """
    if min(needs) == max(needs):
        return counted(lists, needs[0])
    part = np.array([SpotKeys.partition(row[0]) for row in lists], dtype=np.int64)
    need = np.array(needs)[np.clip(part - parts.start, 0, len(needs) - 1)].tolist()
    return [
        doc
        for value in set(needs)
        for doc in counted([row for row, n in zip(lists, need, strict=True) if n == value], value)
    ]


def batch_jaccard(probe: SpotSet, sets: list[SpotSet]) -> np.ndarray:
    """Multiset Jaccard of ``probe`` with each of ``sets`` in one vectorized pass."""
    if not sets:
        return np.zeros(0)
    hashes = np.concatenate([s.hashes for s in sets])
    counts = np.concatenate([s.counts for s in sets])
    return _jaccard_flat(probe, hashes, counts, [len(s) for s in sets])


def blob_jaccard(probe: SpotSet, blobs: list[bytes]) -> np.ndarray:
    """``batch_jaccard`` straight from stored blobs: one numpy decode for each form."""
    forms = {blob[0] for blob in blobs}
    if len(forms) > 1:  # pages with a few or with many spots among them, or an earlier file
        result = np.zeros(len(blobs))
        for form in forms:
            at = [i for i, blob in enumerate(blobs) if blob[0] == form]
            result[at] = blob_jaccard(probe, [blobs[i] for i in at])
        return result
    if forms <= {3, 4}:
        return _jaccard_flat(probe, *listed_spots(blobs))
    if forms == {1}:
        lengths = [(len(b) - 1) // 5 for b in blobs]
        pairs = list(zip(blobs, lengths, strict=True))
        hashes = np.frombuffer(b"".join([b[1 : 1 + 4 * n] for b, n in pairs]), "<u4")
        counts = np.frombuffer(b"".join([b[1 + 4 * n :] for b, n in pairs]), "u1")
        return _jaccard_flat(probe, hashes.astype(np.uint64), counts.astype(np.int64), lengths)
    return batch_jaccard(probe, [blob_spots(b) for b in blobs])  # counts over 255: rare


def _jaccard_flat(probe: SpotSet, hashes: np.ndarray, counts: np.ndarray, lengths: list[int]) -> np.ndarray:
    """Jaccard of ``probe`` with consecutive multisets laid end to end (``lengths`` spots each)."""
    if not len(probe) or not lengths:
        return np.zeros(len(lengths))
    owner = np.repeat(np.arange(len(lengths)), lengths)
    at = np.minimum(np.searchsorted(probe.hashes, hashes), len(probe) - 1)
    shared = np.where(probe.hashes[at] == hashes, np.minimum(counts, probe.counts[at]), 0)
    overlap = np.bincount(owner, weights=shared, minlength=len(lengths))
    sizes = np.bincount(owner, weights=counts, minlength=len(lengths))
    return overlap / (probe.size + sizes - overlap)
