"""SpotSigs search space pruning (Theobald et al. 2008, section 4): pure arithmetic, no I/O.

Length partitions. Multiset Jaccard obeys ``sim(A, B) <= |A| / |B|`` for ``|A| <= |B|``,
so a page of size ``|d|`` can only match pages whose size lies in ``[tau*|d|, |d|/tau]``.
Partition bounds grow by the factor ``1/tau`` (``p_{k+1} = ceil(p_k / tau)``, the smallest
bound with ``p_{k+1} - p_k >= (1 - tau) * p_{k+1}``), and a page probes only the
partitions that overlap its range.

Prefix filtering. If ``sim(A, B) >= tau`` then the shared mass ``sum(min)`` is at least
``tau * sum(max) >= tau * |A|``. Walk A's spots in one fixed global order; the first spot
A and B share starts before A's mass ``(1 - tau) * |A|`` has been walked, or the shared
mass could not fit after it. The same holds for B with the same spot. So it is enough to
post, and to probe, each document's *prefix*: the spots that start before ``(1 - tau)``
of its mass. The order must be the same for every document at every time; the spot hash
is such an order (document frequency is not: it changes while the crawl grows).

Two shared spots. The prefix above only promises one shared spot, and at ``tau = 0.3``
most candidates it yields share just that one by chance. Extend a prefix by ``E_{k-1}``,
the mass of the document's ``k - 1`` most frequent spots: then the ``k``-th spot A and B
share (in the order) also starts within both prefixes, since what follows it holds at
least ``I - E_{k-1}`` of the shared mass ``I >= tau * |A|``. And when ``E_{k-1}(A) <
tau * |A|``, A cannot reach ``tau`` with fewer than ``k`` shared spots at all. So with
prefixes extended for ``k``, a candidate that shares fewer than ``k`` spots in them is
no candidate: one or two more postings a document buy a count filter that drops nearly
every chance candidate before it is read (``overlap_needed``).

Tighter for larger partitions (probe side). ``J(A, B) >= tau`` means a shared mass
``I >= tau * (|A| + |B|) / (1 + tau)``, so a match in a partition whose sizes start at ``p``
shares at least ``I_p = tau * (|A| + max(p, tau*|A|)) / (1 + tau)``, and the ``k``-th shared
spot starts before ``|A| - I_p + E_{k-1}`` of A's mass. A probe's spot past that bound need
not look in that partition or above (``probe_reach``); at the lowest partition the bound is
the prefix's own. The stored side keeps its prefix: it must serve probes of every size.

More shared spots for larger pages. The argument above needs only ``k`` at most what
the stored prefix was extended for: a prefix extended further holds the ``k``-th shared
spot all the same. So partitions may be posted for different ``k`` and a probe asks each
partition at most its own (``probe_reach`` takes a ``k`` a partition). Large pages meet
many pages sharing three rare spots by chance; asking more of them costs a large page
only a few more postings.

Rarest first. The paper walks spots rarest first, so that the prefix holds rare spots
with short inverted lists. A live document frequency cannot serve (see above), so the
index freezes one: once it holds enough documents it counts each spot's document
frequency, keeps ``floor(log2(df))`` as the spot's *class*, and from then on orders spots
by (class, hash) - rare classes first - re-posting the documents it already holds. The
order is then fixed again for good, and exactness holds; on the synthetic corpus of
``benchmarks/corpus.py`` it cuts the postings a query reads by about 30x.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..signatures.spotsigs import SpotSet

_MAX_SIZE = 1 << 40


@lru_cache(maxsize=16)
def partition_bounds(tau: float) -> tuple[int, ...]:
    """Lower bounds of the length partitions for threshold ``tau``: 1, then each ``ceil(p / tau)``."""
    bounds = [1]
    while bounds[-1] < _MAX_SIZE:
        nxt = max(bounds[-1] + 1, math.ceil(bounds[-1] / tau - 1e-9))
        bounds.append(nxt)
    return tuple(bounds)


def partition_of(size: int, tau: float) -> int:
    """The partition a document of ``size`` spots (with multiplicity) lives in."""
    return max(0, bisect.bisect_right(partition_bounds(tau), max(size, 1)) - 1)


def partitions_covering(size: int, tau: float) -> range:
    """Partitions holding every size in ``[tau*size, size/tau]``: the only ones that can match."""
    low = partition_of(math.ceil(tau * size - 1e-9), tau)
    high = partition_of(math.floor(size / tau + 1e-9), tau)
    return range(low, high + 1)


@dataclass(frozen=True, eq=False)
class Walk:
    """A page's spots in the global order, with the masses the bounds read: built once a check.

    The probe, the count filter and the page's own postings all read it, so the class
    lookups and sorts behind it are paid once.
    """

    hashes: np.ndarray  # the spots, in the order
    classes: np.ndarray  # each one's frequency class (0 for all without frozen classes)
    before: np.ndarray  # the mass walked before each (strictly increasing)
    size: int  # |A|, with multiplicity
    heaviest: np.ndarray  # E_1, E_2, ...: the mass of the 1, 2, ... most frequent spots

    def top_mass(self, k: int) -> int:
        """``E_k``: the mass of the ``k`` most frequent spots (0 for ``k <= 0``)."""
        if k <= 0 or not len(self.heaviest):
            return 0
        return int(self.heaviest[min(k, len(self.heaviest)) - 1])

    def upto(self, mass: float) -> int:
        """How many spots start at or before ``mass`` walked: a prefix is always a leading slice."""
        return int(np.searchsorted(self.before, mass, side="right"))


def walk(spots: SpotSet, classes: SpotClasses | None = None) -> Walk:
    """``spots`` in the global order: by hash without ``classes`` (``spots.hashes`` is sorted
    already), by (class, hash) with them, the rarest spots first."""
    hashes, counts = spots.hashes, spots.counts
    ranks = np.zeros(len(hashes), dtype=np.int64)
    if classes is not None and len(spots):
        ranks = classes.of(hashes)
        order = np.lexsort((hashes, ranks))
        hashes, counts, ranks = hashes[order], counts[order], ranks[order]
    before = np.cumsum(counts, dtype=np.int64) - counts
    heaviest = np.cumsum(np.sort(counts)[::-1], dtype=np.int64)
    return Walk(hashes, ranks, before, spots.size, heaviest)


def prefix(w: Walk, tau: float, overlap: int = 1) -> np.ndarray:
    """The spots that start before ``(1 - tau)`` of the mass plus ``E_{overlap-1}``, in the order."""
    return w.hashes[: w.upto((1.0 - tau) * w.size + w.top_mass(overlap - 1) + 1e-9)]


def probe_reach(
    w: Walk, tau: float, overlap: int | Sequence[int], parts: range
) -> tuple[np.ndarray, np.ndarray]:
    """A probe's prefix spots and, for each, the last of ``parts`` where a match can share it.

    ``parts`` are the partitions the probe covers, lowest first; every prefix spot reaches
    at least ``parts.start``. ``overlap`` is the shared spots asked of a match, one for all
    partitions or one each. A spot is read in every partition up to its last (a superset
    where a larger partition asks for more spots, so one key range a spot still does).
    The spots are a leading slice of the walk.
    """
    size = w.size
    overlaps = np.broadcast_to(np.asarray(overlap), (len(parts),))
    extra = np.array([w.top_mass(k - 1) for k in overlaps.tolist()], dtype=np.float64)
    bounds = partition_bounds(tau)
    least = np.maximum(np.array([bounds[k] for k in parts], dtype=np.float64), tau * size)
    walked = size - tau * (size + least) / (1.0 + tau) + extra + 1e-9
    walked = np.maximum.accumulate(walked[::-1])[::-1]  # non-increasing in k
    kept = w.before[: w.upto(walked[0])]
    reach = parts.start + np.searchsorted(-walked, -kept, side="right") - 1
    return w.hashes[: len(kept)], reach


def overlap_needed(w: Walk, tau: float, most: int) -> int:
    """How many distinct spots a page with Jaccard >= ``tau`` shares with these, up to ``most``.

    The largest ``k <= most`` with ``E_{k-1} < tau * |A|``; probe with ``prefix(..., overlap=k)``
    against postings made with ``overlap=most``, and keep candidates with ``k`` hits.
    """
    k = 1
    while k < most and k <= len(w.heaviest) and w.heaviest[k - 1] < tau * w.size - 1e-9:
        k += 1
    return k


class SpotClasses:
    """Frozen frequency classes of the spots seen often enough: ``floor(log2(df))``, 0 for the rest."""

    def __init__(self, spots: np.ndarray, classes: np.ndarray) -> None:
        order = np.argsort(spots)
        self.spots = np.asarray(spots, dtype=np.uint64)[order]
        self.classes = np.asarray(classes, dtype=np.int64)[order]

    @classmethod
    def from_frequencies(cls, spots: np.ndarray, df: np.ndarray) -> SpotClasses:
        keep = df >= 2
        return cls(spots[keep], np.floor(np.log2(df[keep])).astype(np.int64))

    @classmethod
    def from_rows(cls, rows: list[tuple[int, int]]) -> SpotClasses:
        """The classes as a database keeps them: (spot as a signed 64-bit integer, class) rows."""
        spots = np.array([spot for spot, _ in rows], dtype=np.int64).astype(np.uint64)
        return cls(spots, np.array([c for _, c in rows], dtype=np.int64))

    def of(self, hashes: np.ndarray) -> np.ndarray:
        if not len(self.spots):
            return np.zeros(len(hashes), dtype=np.int64)
        at = np.minimum(np.searchsorted(self.spots, hashes), len(self.spots) - 1)
        return np.where(self.spots[at] == hashes, self.classes[at], 0)
