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
    # A feature that occurs k times is k rows here, which is exactly weighting it by frequency.
    bits = np.unpackbits(features.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    # Per bit: rows with the bit set minus rows without. A float64 product (BLAS) is exact for
    # integer sums below 2**53 and several times faster than an integer sum.
    ones = np.ones(len(features), dtype=np.float64)
    totals = 2 * (ones @ bits.astype(np.float64)) - len(features)
    return int.from_bytes(np.packbits(totals > 0, bitorder="little").tobytes(), "little")
