"""Exact duplicates: xxh3-128 of the normalized text, and of the raw body.

The raw-body hash lets a byte-identical page be recognized before any extraction.
"""

from __future__ import annotations

from collections.abc import Sequence

import xxhash


def exact_hash(tokens: Sequence[str] | Sequence[bytes]) -> int:
    """xxh3-128 of the normalized text (tokens, or their UTF-8 bytes, joined by single spaces)."""
    if tokens and isinstance(tokens[0], bytes):
        return xxhash.xxh3_128_intdigest(b" ".join(tokens))
    return xxhash.xxh3_128_intdigest(" ".join(tokens).encode("utf-8"))


def raw_hash(body: bytes | str) -> int:
    """xxh3-128 of the body exactly as received."""
    data = body.encode("utf-8", errors="surrogatepass") if isinstance(body, str) else body
    return xxhash.xxh3_128_intdigest(data)
