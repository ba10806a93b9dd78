"""MinHash (Broder 1997) with LSH banding.

Each of the ``n`` permutations is a multiply-add hash ``(a*x + b) mod 2^32`` of the high
32 bits of the shingle's xxhash value, with odd ``a``: a bijection whose order is set by
its high bits, as in Dietzfelbinger's multiply-shift family. 32-bit lanes vectorize
where 64-bit multiplies do not, and the estimate's spread is the same (checked in the
tests against the binomial error bound).
Band keys let an index find every pair whose estimated Jaccard is likely
above a threshold: a pair with Jaccard ``s`` collides in some band with probability
``1 - (1 - s^r)^b``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ._hashing import bytes_key, ngram_hashes, seeded, unique_sorted

_CHUNK = 256  # feature rows per block: a 256 x 128 block of uint32 stays in the CPU cache
_HIGH = np.uint64(32)


@lru_cache(maxsize=16)
def _permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    a = (seeded(seed, num_perm) >> _HIGH).astype(np.uint32) | np.uint32(1)  # odd multipliers
    b = (seeded(seed + 0x5EED, num_perm) >> _HIGH).astype(np.uint32)
    a.setflags(write=False)
    b.setflags(write=False)
    return a, b


def minhash_features(features: np.ndarray, num_perm: int = 128, seed: int = 1) -> np.ndarray:
    """``num_perm`` min-hash values (uint32) over a set of uint64 feature hashes."""
    a, b = _permutations(num_perm, seed)
    result = np.full(num_perm, np.iinfo(np.uint32).max, dtype=np.uint32)
    keys = (features >> _HIGH).astype(np.uint32)
    for start in range(0, len(keys), _CHUNK):
        block = keys[start : start + _CHUNK, None] * a[None, :]
        block += b[None, :]
        np.minimum(result, block.min(axis=0), out=result)
    return result


def minhash(hashes: np.ndarray, num_perm: int = 128, shingle: int = 3, seed: int = 1) -> np.ndarray:
    """MinHash of a page over its word ``shingle``-grams, from its token hashes."""
    return minhash_features(unique_sorted(ngram_hashes(hashes, shingle)), num_perm, seed)


def band_keys(values: np.ndarray, bands: int, rows: int) -> list[int]:
    """One 64-bit key per band of ``rows`` consecutive min-hash values."""
    return [bytes_key(values[i * rows : (i + 1) * rows], seed=i) for i in range(bands)]


def collision_probability(similarity: float, bands: int, rows: int) -> float:
    """Probability that a pair with this Jaccard shares at least one band key."""
    return 1.0 - (1.0 - similarity**rows) ** bands


def _area(y: np.ndarray, x: np.ndarray) -> float:
    """Trapezoid rule (np.trapezoid is numpy >= 2 only)."""
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0) if len(x) > 1 else 0.0


@lru_cache(maxsize=64)
def lsh_params(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) minimizing the false-positive plus false-negative area around ``threshold``.

    Missing a duplicate and proposing a wrong candidate weigh the same here; candidates
    are verified afterwards, so the choice only moves cost, never correctness.
    """
    grid = np.linspace(0.0, 1.0, 1001)
    below, above = grid <= threshold, grid >= threshold
    best, best_cost = (1, num_perm), float("inf")
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            p = 1.0 - (1.0 - grid**r) ** b
            cost = _area(p[below], grid[below]) + _area(1.0 - p[above], grid[above])
            if cost < best_cost:
                best, best_cost = (b, r), cost
    return best
