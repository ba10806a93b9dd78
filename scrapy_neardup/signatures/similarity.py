"""Similarity measures between two pages' signatures; pure functions, no thresholds."""

from __future__ import annotations

import numpy as np

from .spotsigs import SpotSet


def multiset_jaccard(a: SpotSet, b: SpotSet) -> float:
    """Σ min(freq) / Σ max(freq) over the union; 1.0 for two empty sets (nothing tells them apart)."""
    total = a.size + b.size
    if total == 0:
        return 1.0
    _, ia, ib = np.intersect1d(a.hashes, b.hashes, assume_unique=True, return_indices=True)
    shared = int(np.minimum(a.counts[ia], b.counts[ib]).sum())
    return shared / (total - shared)


def jaccard_upper_bound(size_a: int, size_b: int) -> float:
    """sim(A, B) <= |A|/|B| for |A| <= |B|: what makes SpotSigs length partitions safe."""
    small, large = sorted((size_a, size_b))
    return 1.0 if large == 0 else small / large


def hamming(a: int, b: int) -> int:
    """Number of differing bits of two 64-bit fingerprints."""
    return (a ^ b).bit_count()


def minhash_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Share of equal min-hash values: an unbiased estimate of the shingle-set Jaccard."""
    if len(a) != len(b) or len(a) == 0:
        raise ValueError("MinHash signatures must be non-empty and of equal length")
    return float(np.mean(a == b))


def super_shingle_agreement(a: np.ndarray, b: np.ndarray) -> int:
    """Number of the 6 super-shingles two pages share position by position."""
    return int(np.sum(a == b))


def imatch_agreement(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Number of I-Match lexicons on which two pages have the same signature."""
    return sum(1 for x, y in zip(a, b, strict=False) if x == y and x != 0)
