"""Equality lookups of a page, ``key -> document``: its raw body's hash, and each configured
method's lookup values (``methods.Method.lookup``: the exact hash, SimHash blocks, LSH bands...).

Two pages that a method may call duplicates share one of that method's keys (its LSH
condition), so looking the keys up finds every such pair. A key is a 64-bit hash of
(kind, scope, value), signed as SQLite stores it.
"""

from __future__ import annotations

import xxhash

from ..config import DedupConfig
from ..methods import BY_NAME, Fingerprint
from .codecs import signed

# The kind of a raw body's hash (the methods' kinds are in ``methods``).
RAW_KIND = 7
MASK = (1 << 64) - 1


def key(*parts: int) -> int:
    """A signed 64-bit lookup key for a tuple of ints, each taken modulo 2**64 (a scope id read
    from a damaged index may be anything)."""
    return signed(xxhash.xxh3_64_intdigest(b"".join((p & MASK).to_bytes(8, "little") for p in parts)))


def lookup_keys(
    fp: Fingerprint, scope: int, config: DedupConfig, *, simhash: bool = True, raw: bool = False
) -> list[int]:
    """Keys of a page for every configured equality-lookup method; with ``raw``, its raw body's
    too (stored pages); ``simhash`` False leaves the SimHash blocks out."""
    kinds = []
    if raw and fp.raw_hash is not None:
        kinds.append((RAW_KIND, fp.raw_hash >> 64))
    for name in config.methods:
        method = BY_NAME[name]
        if method.lookup is not None and (simhash or name != "simhash"):
            kinds += [(method.kind, *values) for values in method.lookup(fp, config)]
    return [key(kind, scope, *values) for kind, *values in kinds]


def raw_key(raw: int, scope: int) -> int:
    """The key of a raw body's hash: byte-identical pages, found before extraction."""
    return key(RAW_KIND, scope, raw >> 64)


def exact_key(exact: int, scope: int) -> int:
    """The key of a page's exact hash: its copies of the same text, looked up first."""
    return key(BY_NAME["exact"].kind, scope, exact >> 64)
