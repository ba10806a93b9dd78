"""K longest sentences: one hash over a page's K longest sentences.

The longest sentences are the article's own prose, rarely boilerplate; hashing them
is fast and precise but misses copies whose long sentences were edited (low recall).
"""

from __future__ import annotations

import xxhash

_SEED = 0x4B5E


def ksentence_hash(sentences: list[list[str]], k: int = 3) -> int | None:
    """Hash of the ``k`` longest tokenized sentences, order-free; None when there is none."""
    joined = [" ".join(tokens) for tokens in sentences if tokens]
    if not joined:
        return None
    longest = sorted(joined, key=lambda s: (-len(s.split(" ")), s))[:k]
    return xxhash.xxh3_64_intdigest("\n".join(sorted(longest)).encode("utf-8"), _SEED)
