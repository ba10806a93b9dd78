"""Broder's shingles with super-shingles (Broder 1997; Henzinger 2006 used 84/6/14).

84 min-hashes over word shingles are grouped into 6 super-shingles of 14 values each;
two pages match when at least 2 super-shingles agree. A super-shingle is a single
lookup key, so an index finds candidates with six equality lookups.
"""

from __future__ import annotations

import numpy as np

from ._hashing import bytes_key
from .minhash import minhash

MINHASHES = 84
GROUPS = 6
PER_GROUP = MINHASHES // GROUPS
_SEED = 0xB20D


def super_shingles(hashes: np.ndarray, shingle: int = 5) -> np.ndarray:
    """The 6 super-shingle keys (uint64) of a page, from its token hashes."""
    values = minhash(hashes, MINHASHES, shingle, seed=_SEED)
    keys = [bytes_key(values[g * PER_GROUP : (g + 1) * PER_GROUP], seed=g) for g in range(GROUPS)]
    return np.array(keys, dtype=np.uint64)
