"""Exact duplicates: xxh3-128 of the normalized text, and of the raw body.

The raw-body hash lets a byte-identical page be recognized before any extraction.
"""

from __future__ import annotations

import xxhash


def exact_hash(tokens: list[str]) -> int:
    """xxh3-128 of the normalized text (tokens joined by single spaces)."""
    return xxhash.xxh3_128_intdigest(" ".join(tokens).encode("utf-8"))


def raw_hash(body: bytes | str) -> int:
    """xxh3-128 of the body exactly as received."""
    data = body.encode("utf-8", errors="surrogatepass") if isinstance(body, str) else body
    return xxhash.xxh3_128_intdigest(data)
