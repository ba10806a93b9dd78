"""Deterministic 64-bit hashing shared by the signature modules.

Tokens are hashed once with xxh3-64 (fixed seed), then combined with numpy arithmetic:
the same text gives the same signature in every process and on every machine, which
Python's salted ``hash()`` would not.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import xxhash

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S33 = np.uint64(33)


def mix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer: a bijection that spreads every input bit over the output."""
    x = x ^ (x >> _S33)
    x = x * _M1
    x = x ^ (x >> _S33)
    x = x * _M2
    return x ^ (x >> _S33)


def token_hashes(tokens: Sequence[str] | Sequence[bytes]) -> np.ndarray:
    """xxh3-64 of every token's UTF-8 bytes (``text.words``, or ``text.tokenize``'s strings), as a
    uint64 array.

    A C-level map to each digest's 8 bytes (big-endian), joined and read as one array: a fifth
    faster than converting a Python int a token, and faster than caching repeated tokens.
    """
    utf8 = tokens if not tokens or isinstance(tokens[0], bytes) else map(str.encode, tokens)
    digests = b"".join(map(xxhash.xxh3_64_digest, utf8))
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64)


@lru_cache(maxsize=64)
def _word_slots(words: frozenset[str]) -> tuple[np.uint64, np.ndarray]:
    """A direct-mapped table of a word set's token hashes: each at the slot of its low bits, with
    as many bits as make the slots distinct; an empty slot holds a value of another slot."""
    hashes = np.unique(token_hashes(sorted(words)))
    bits = max(1, len(hashes)).bit_length() + 1
    while len(np.unique(hashes & np.uint64((1 << bits) - 1))) < len(hashes):
        bits += 1
    mask = np.uint64((1 << bits) - 1)
    table = np.arange(1 << bits, dtype=np.uint64) ^ np.uint64(1)
    table[hashes & mask] = hashes
    return mask, table


def members(hashes: np.ndarray, words: frozenset[str]) -> np.ndarray:
    """Which tokens (by their hashes) are in ``words``: one table lookup each, no Python loop."""
    mask, table = _word_slots(words)
    return table[hashes & mask] == hashes


@lru_cache(maxsize=16)
def _sets_slots(sets: tuple[frozenset[str], ...]) -> tuple[np.uint64, np.ndarray, np.ndarray]:
    """The direct-mapped table of the union of word sets, and each slot's bit mask of the sets
    (bit i: ``sets[i]``) holding its word."""
    mask, table = _word_slots(frozenset().union(*sets))
    bits = np.zeros(len(table), dtype=np.uint64)
    for i, words in enumerate(sets):
        bits[token_hashes(sorted(words)) & mask] |= np.uint64(1 << i)
    return mask, table, bits


def weights_in(hashes: np.ndarray, weights: np.ndarray, sets: tuple[frozenset[str], ...]) -> list[int]:
    """For each word set, the summed ``weights`` of the tokens (by their hashes) in it: one table
    lookup a token for all the sets, then work on the few tokens found."""
    mask, table, bits = _sets_slots(sets)
    slots = hashes & mask
    found = np.flatnonzero(table[slots] == hashes)
    held, weight = bits[slots[found]], weights[found]
    return [int(weight[(held >> np.uint64(i)) & np.uint64(1) == 1].sum()) for i in range(len(sets))]


def combine(acc: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """Order-sensitive combination of two hash arrays, element by element."""
    return mix64(acc * _GOLDEN + nxt)


def ngram_hashes(hashes: np.ndarray, n: int) -> np.ndarray:
    """Hashes of every run of ``n`` consecutive tokens; a text shorter than ``n`` is one n-gram.

    A polynomial over the token hashes, finalized once: cheaper than mixing at every step,
    and still order-sensitive since each position is multiplied by another odd power.
    """
    if len(hashes) == 0:
        return hashes.copy()
    n = min(n, len(hashes))
    m = len(hashes) - n + 1
    acc = (hashes[:m] ^ np.uint64(n)) * _GOLDEN
    for i in range(1, n):
        acc += hashes[i : i + m]
        acc *= _GOLDEN
    return mix64(acc)


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (``np.unique`` without counts is several times slower on numpy 2)."""
    if len(values) == 0:
        return values.copy()
    ordered = np.sort(values)
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def seeded(seed: int, count: int) -> np.ndarray:
    """``count`` well-mixed uint64 constants derived from ``seed``."""
    return mix64(np.arange(count, dtype=np.uint64) + np.uint64((seed * int(_GOLDEN)) % 2**64))


def bytes_key(values: np.ndarray, seed: int) -> int:
    """xxh3-64 of an array's little-endian bytes: a lookup key for a band or super-shingle."""
    return xxhash.xxh3_64_intdigest(
        np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes(), seed
    )
