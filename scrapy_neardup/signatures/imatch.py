"""I-Match (Chowdhury, Frieder, Grossman, McCabe 2002) with randomized lexicons (Kolcz,
Chowdhury, Alspector 2004).

I-Match keeps only the terms of mid collection frequency (an idf band: very common
words carry no identity, very rare ones are typos and ids that vary between copies)
and hashes the sorted unique set with SHA-1. One signature is brittle: a single
changed term in the band changes it. Kolcz's fix is several extra lexicons, each
leaving out a random share of the terms; a pair matching on any signature matches.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import xxhash

_LEXICON_SEED = 0x1A7C4


@dataclass(frozen=True)
class CollectionStats:
    """Document frequencies of terms in a collection of ``n_docs`` documents."""

    n_docs: int
    df: Mapping[str, int] = field(default_factory=dict)

    def normalized_idf(self, term: str) -> float:
        """idf scaled to [0, 1] by its maximum log(N); an unseen term counts as seen once."""
        if self.n_docs < 2:
            return 0.5
        seen = max(1, min(self.df.get(term, 0), self.n_docs))
        return math.log(self.n_docs / seen) / math.log(self.n_docs)


def lexicon_terms(
    terms: Iterable[str],
    stats: CollectionStats | None,
    idf_low: float,
    idf_high: float,
    stopwords: frozenset[str] = frozenset(),
) -> list[str]:
    """The sorted unique terms inside the idf band.

    Without collection statistics (a single pair compared by hand, an empty index) the
    band is approximated by leaving out the language's function words.
    """
    unique = set(terms)
    if stats is None or stats.n_docs < 2:
        kept = {t for t in unique if t not in stopwords}
    else:
        kept = {t for t in unique if idf_low <= stats.normalized_idf(t) <= idf_high}
    return sorted(kept)


def _digest(terms: list[str]) -> int:
    """First 64 bits of SHA-1 over the terms, as I-Match prescribes SHA-1 of the sorted set."""
    return int.from_bytes(hashlib.sha1("\x1f".join(terms).encode("utf-8")).digest()[:8], "big")


def imatch_signatures(lexicon: list[str], extra_lexicons: int = 4, drop: float = 0.33) -> tuple[int, ...]:
    """The main signature followed by one per randomized lexicon; () when no term is in the band."""
    if not lexicon:
        return ()
    signatures = [_digest(lexicon)]
    cut = int(drop * 2**64)
    for j in range(1, extra_lexicons + 1):
        kept = [t for t in lexicon if xxhash.xxh3_64_intdigest(t.encode("utf-8"), _LEXICON_SEED + j) >= cut]
        signatures.append(_digest(kept) if kept else 0)
    return tuple(signatures)
