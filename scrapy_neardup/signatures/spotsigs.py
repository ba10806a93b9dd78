"""SpotSigs (Theobald, Siddharth, Paepcke, SIGIR 2008): spot signatures as a multiset.

A spot starts at an *antecedent*, a frequent function word, and chains the next ``c``
content words taken every ``d`` words, skipping antecedents and stopwords on the way
(the paper's "is:designed:play" from "is designed to play"). Function words cluster
in running prose and are rare in navigation and ads, so spots describe the article
rather than its template. A page is the multiset of its spot hashes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._hashing import combine, mix64

# The paper's best English set: the articles and the forms of be, can, will, have, do.
# The other languages follow the same recipe: articles (where the language has them) and
# the common forms of the auxiliaries.
ANTECEDENTS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "a an the is are was were be been being am can could will would have has had do does did".split()
    ),
    "de": frozenset(
        "der die das den dem des ein eine einen einem einer eines ist sind war waren sein bin bist gewesen "
        "wird werden wurde wurden kann können konnte hat haben hatte hatten".split()
    ),
    "fr": frozenset(
        "le la les l un une des du est sont était étaient être été a ont avait avaient avoir "
        "peut peuvent pouvait sera seront fait font".split()
    ),
    "es": frozenset(
        "el la los las un una unos unas lo es son era eran fue fueron ser sido está están estaba "
        "ha han había haber puede pueden podía será serán hace hacen".split()
    ),
    # Chinese is tokenized by character: structural particles, the copula and common auxiliaries,
    # simplified and traditional forms alike.
    "zh": frozenset("的 是 了 在 有 和 一 个 個 这 這 也 就 都 与 與 被 把 将 將 会 會 能 可 为 為".split()),
    "ja": frozenset("の は が を に で と も へ や".split()),
}

# Words skipped inside a chain (the paper drops stopwords from chains as well).
STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "of to in and or for on at by with from as that this these those it its which who whom but not no "
        "so if than then there their they he she we you i his her our your them also".split()
    ),
    "de": frozenset(
        "und oder zu von mit auf für im in an am zum zur bei aus als dass nicht auch sich es er sie wir "
        "ich du ihr um über nach wie".split()
    ),
    "fr": frozenset(
        "et ou de d à au aux en dans par pour sur avec que qu qui ne pas se s il elle ils elles nous vous "
        "je ce cette son sa ses plus".split()
    ),
    "es": frozenset(
        "y o de a en por para con que se no del al su sus como más pero le les me mi este esta".split()
    ),
    "zh": frozenset("们 們 着 著 地 得 吗 嗎 呢 吧 啊".split()),
    "ja": frozenset("た て だ".split()),
}

# The words that tell languages apart in ``text.detect_language`` (CJK is told by its script).
LANGUAGE_VOTES: dict[str, frozenset[str]] = {
    lang: ANTECEDENTS[lang] | STOPWORDS[lang] for lang in ("en", "de", "fr", "es")
}


@dataclass(frozen=True, eq=False)
class SpotSet:
    """A multiset of spot signatures: sorted unique uint64 ``hashes`` with their uint32 ``counts``."""

    hashes: np.ndarray
    counts: np.ndarray

    @property
    def size(self) -> int:
        """|d| in the paper: the number of spots counted with multiplicity."""
        return int(self.counts.sum())

    def __len__(self) -> int:
        return len(self.hashes)


def spot_signatures(
    tokens: list[str],
    hashes: np.ndarray,
    language: str,
    specs: tuple[tuple[int, int], ...] = ((1, 2),),
) -> SpotSet:
    """The spot multiset of a token list for every ``(d, c)`` spec at once.

    ``hashes`` are the tokens' hashes (``_hashing.token_hashes``). A language without an
    antecedent set makes every word an antecedent, so the spots become plain word n-grams.
    """
    antecedents = ANTECEDENTS.get(language)
    stop = STOPWORDS.get(language, frozenset())
    if antecedents is None:
        is_ante = np.ones(len(tokens), dtype=bool)
        is_chain = np.fromiter((t not in stop for t in tokens), dtype=bool, count=len(tokens))
    else:
        is_ante = np.fromiter((t in antecedents for t in tokens), dtype=bool, count=len(tokens))
        is_chain = ~is_ante & np.fromiter((t not in stop for t in tokens), dtype=bool, count=len(tokens))
    ante_pos = np.flatnonzero(is_ante)
    chain_pos = np.flatnonzero(is_chain)
    parts = []
    for d, c in specs:
        # Index (into chain_pos) of the first chain word after each antecedent.
        first = np.searchsorted(chain_pos, ante_pos, side="right")
        offsets = d * np.arange(1, c + 1) - 1
        picks = first[:, None] + offsets[None, :]
        valid = picks[:, -1] < len(chain_pos)
        if not valid.any():
            continue
        chains = hashes[chain_pos[picks[valid]]]
        acc = mix64(hashes[ante_pos[valid]] ^ np.uint64((d << 8) | c))
        for col in range(c):
            acc = combine(acc, chains[:, col])
        parts.append(acc)
    if not parts:
        return SpotSet(np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint32))
    unique, counts = np.unique(np.concatenate(parts), return_counts=True)
    return SpotSet(unique, counts.astype(np.uint32))
