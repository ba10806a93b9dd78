"""SimHash (Charikar 2002; Manku, Jain, Das Sarma 2007): a 64-bit sketch whose Hamming
distance tracks the cosine distance of the weighted feature vectors.

Features are word shingles hashed with xxhash, weighted by how often they occur. The
bit sums are one matrix product over the unpacked feature bits.
"""

from __future__ import annotations

import numpy as np

from ._hashing import ngram_hashes

BITS = 64


def simhash(hashes: np.ndarray, shingle: int = 3) -> int:
    """The 64-bit SimHash (an unsigned int) of a page from its token hashes; 0 for no tokens."""
    features = ngram_hashes(hashes, shingle)
    if len(features) == 0:
        return 0
    unique, weights = np.unique(features, return_counts=True)
    bits = np.unpackbits(unique.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    # Per bit: sum of weights where the bit is 1 minus where it is 0. A float64 product (BLAS) is
    # exact for integer sums below 2**53 and several times faster than an int64 one.
    totals = 2 * (weights.astype(np.float64) @ bits.astype(np.float64)) - float(weights.sum())
    return int.from_bytes(np.packbits(totals > 0, bitorder="little").tobytes(), "little")
