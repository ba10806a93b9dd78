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
"""

from __future__ import annotations

import math
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
    bounds = partition_bounds(tau)
    return max(0, int(np.searchsorted(bounds, max(size, 1), side="right")) - 1)


def partitions_covering(size: int, tau: float) -> range:
    """Partitions holding every size in ``[tau*size, size/tau]``: the only ones that can match."""
    low = partition_of(math.ceil(tau * size - 1e-9), tau)
    high = partition_of(math.floor(size / tau + 1e-9), tau)
    return range(low, high + 1)


def prefix(spots: SpotSet, tau: float) -> np.ndarray:
    """The spot hashes that start before ``(1 - tau)`` of the mass, in ascending hash order.

    ``spots.hashes`` is already sorted ascending: the global order is the hash itself.
    """
    if len(spots) == 0:
        return spots.hashes
    before = np.cumsum(spots.counts, dtype=np.int64) - spots.counts
    return spots.hashes[before <= (1.0 - tau) * spots.size + 1e-9]
