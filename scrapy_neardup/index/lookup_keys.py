"""Equality lookups of a page, ``key -> document``: its raw and exact hashes, SimHash blocks,
MinHash bands, super-shingles, I-Match and K-sentence signatures.

Two pages that a method may call duplicates share one of that method's keys (its LSH
condition), so looking the keys up finds every such pair. A key is a 64-bit hash of
(kind, scope, value), signed as SQLite stores it.
"""

from __future__ import annotations

import itertools

import xxhash

from ..config import DedupConfig
from ..fingerprint import Fingerprint
from .codecs import signed

KIND = {"exact": 1, "simhash": 2, "minhash": 3, "shingles": 4, "imatch": 5, "ksentence": 6, "raw": 7}


def key(*parts: int) -> int:
    """A signed 64-bit lookup key for a tuple of non-negative ints below 2**64."""
    return signed(xxhash.xxh3_64_intdigest(b"".join(p.to_bytes(8, "little") for p in parts)))


def simhash_keys(value: int, distance: int, layout: str = "blocks") -> list[tuple[int, int]]:
    """(table, bits) keys such that two fingerprints within ``distance`` bits share one.

    ``blocks``: ``distance + 1`` contiguous blocks; a pair within the distance agrees on a
    whole block. ``permuted`` (Manku et al. 2007): ``distance + 2`` blocks, keyed by every
    pair of them, since such a pair agrees on at least two blocks; each key then has ~26
    bits instead of 16, so a million pages give far fewer chance candidates per key.
    """
    blocks = distance + 1 if layout == "blocks" else distance + 2
    edges = [round(i * 64 / blocks) for i in range(blocks + 1)]
    parts = [(value >> lo) & ((1 << (hi - lo)) - 1) for lo, hi in itertools.pairwise(edges)]
    if layout == "blocks":
        return list(enumerate(parts))
    pairs = itertools.combinations(range(blocks), 2)
    return [(t, (parts[i] << 32) | parts[j]) for t, (i, j) in enumerate(pairs)]


def lookup_keys(
    fp: Fingerprint, scope: int, config: DedupConfig, *, simhash: bool = True, raw: bool = False
) -> list[int]:
    """Keys of a page for every configured equality-lookup method; with ``raw``, its raw body's
    too (stored pages); ``simhash`` False leaves the SimHash blocks out."""
    kinds, methods = [], set(config.methods)
    if raw and fp.raw_hash is not None:
        kinds.append((KIND["raw"], fp.raw_hash >> 64))
    if "exact" in methods and fp.exact is not None:
        kinds.append((KIND["exact"], fp.exact >> 64))
    if "simhash" in methods and fp.simhash is not None and simhash:
        tables = simhash_keys(fp.simhash, config.simhash_distance, config.simhash_tables)
        kinds += [(KIND["simhash"], t, bits) for t, bits in tables]
    if "minhash" in methods:
        kinds += [(KIND["minhash"], k) for k in fp.minhash_bands]
    if "shingles" in methods and fp.super_shingles is not None:
        kinds += [(KIND["shingles"], int(k)) for k in fp.super_shingles]
    if "imatch" in methods:
        kinds += [(KIND["imatch"], j, sig) for j, sig in enumerate(fp.imatch) if sig]
    if "ksentence" in methods and fp.ksentence is not None:
        kinds.append((KIND["ksentence"], fp.ksentence))
    return [key(kind, scope, *values) for kind, *values in kinds]


def raw_key(raw: int, scope: int) -> int:
    """The key of a raw body's hash: byte-identical pages, found before extraction."""
    return key(KIND["raw"], scope, raw >> 64)
