"""SimHash (Charikar 2002; Manku, Jain, Das Sarma 2007): a 64-bit sketch whose Hamming
distance tracks the cosine distance of the weighted feature vectors.

Features are word shingles hashed with xxhash, weighted by how often they occur. The
bit sums come from a histogram of each byte of the feature hashes.
"""

from __future__ import annotations

import numpy as np

from ._hashing import ngram_hashes

BITS = 64
# Row b: the 8 bits of byte value b, lowest first.
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little").astype(int)


def simhash(hashes: np.ndarray, shingle: int = 3) -> int:
    """The 64-bit SimHash (an unsigned int) of a page from its token hashes; 0 for no tokens."""
    features = ngram_hashes(hashes, shingle)
    if len(features) == 0:
        return 0
    # A feature that occurs k times counts k times, which is exactly weighting it by frequency.
    # Per bit: features with the bit set, from a histogram of each of the 8 bytes of the features.
    columns = features.astype("<u8").view(np.uint8).reshape(-1, 8).T
    ones = np.stack([np.bincount(column, minlength=256) for column in columns]) @ _BYTE_BITS
    majority = np.packbits(2 * ones.ravel() > len(features), bitorder="little")
    return int.from_bytes(majority.tobytes(), "little")
