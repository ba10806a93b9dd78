"""SpotSigs (Theobald, Siddharth, Paepcke, SIGIR 2008): spot signatures as a multiset.

A spot starts at an *antecedent*, a frequent function word, and chains the next ``c``
content words taken every ``d`` words, skipping antecedents and stopwords on the way
(the paper's "is:designed:play" from "is designed to play"). Function words cluster
in running prose and are rare in navigation and ads, so spots describe the article
rather than its template. A page is the multiset of its spot hashes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._hashing import combine, members, mix64, token_hashes


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The paper's best English set: the articles and the forms of be, can, will, have, do.
# The other languages follow the same recipe: articles (where the language has them) and
# the common forms of the auxiliaries.
ANTECEDENTS: dict[str, frozenset[str]] = {
    "en": _words(
        """
        a am an are be been being can could did do does had has have is the was were will would
        """
    ),
    "de": _words(
        """
        bin bist das dem den der des die ein eine einem einen einer eines gewesen haben hat hatte hatten
        ist kann konnte können sein sind war waren werden wird wurde wurden
        """
    ),
    "fr": _words(
        """
        a avaient avait avoir des du est fait font l la le les ont peut peuvent pouvait sera seront sont
        un une étaient était été être
        """
    ),
    "es": _words(
        """
        el era eran es estaba está están fue fueron ha haber había hace hacen han la las lo los podía
        puede pueden ser será serán sido son un una unas unos
        """
    ),
    "pt": _words(
        """
        a as era eram estava está estão faz fazem foi foram o os pode podem podia ser será serão sido
        sou são tem ter tido tinha têm um uma umas uns é
        """
    ),
    "it": _words(
        """
        avere aveva era erano essere fa fanno gli ha hanno i il l la le lo possono può saranno sarà sono
        stata stato un una uno è
        """
    ),
    "nl": _words(
        """
        ben de doet een geweest had hebben heeft het is kan kon kunnen waren was zal zijn zou zullen
        """
    ),
    # Chinese is tokenized by character: structural particles, the copula and common auxiliaries,
    # simplified and traditional forms alike.
    "zh": _words(
        """
        一 与 个 为 也 了 会 個 可 和 在 将 將 就 把 是 會 有 為 的 能 與 被 这 這 都
        """
    ),
    "ja": _words(
        """
        が で と に の は へ も や を
        """
    ),
}

# Words skipped inside a chain (the paper drops stopwords from chains as well).
STOPWORDS: dict[str, frozenset[str]] = {
    "en": _words(
        """
        also and as at but by for from he her his i if in it its no not of on or our she so than that
        their them then there these they this those to we which who whom with you your
        """
    ),
    "de": _words(
        """
        als am an auch auf aus bei dass du er es für ich ihr im in mit nach nicht oder sich sie um und
        von wie wir zu zum zur über
        """
    ),
    "fr": _words(
        """
        au aux avec ce cette d dans de elle elles en et il ils je ne nous ou par pas plus pour qu que
        qui s sa se ses son sur vous à
        """
    ),
    "es": _words(
        """
        a al como con de del en esta este le les me mi más no o para pero por que se su sus y
        """
    ),
    "pt": _words(
        """
        ao aos com como da das de do dos e em mais mas na nas no nos não ou para por que se seu sua à às
        """
    ),
    "it": _words(
        """
        al alla anche che come con da dal dei del della delle di e in ma nel nella non o per più si
        """
    ),
    "nl": _words(
        """
        aan als bij dat die en er in met naar niet of om ook op te van voor zich
        """
    ),
    "zh": _words(
        """
        们 們 吗 吧 呢 啊 嗎 地 得 着 著
        """
    ),
    "ja": _words(
        """
        た だ て
        """
    ),
}

# The words that tell languages apart in ``text.detect_language`` (CJK is told by its script).
LANGUAGE_VOTES: dict[str, frozenset[str]] = {
    lang: ANTECEDENTS[lang] | STOPWORDS[lang] for lang in ("en", "de", "fr", "es", "pt", "it", "nl")
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


def spot_chains(
    tokens: Sequence[str] | Sequence[bytes], language: str, d: int, c: int, hashes: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Token positions of every spot for one ``(d, c)`` spec: antecedents (m,) and their chains (m, c).

    A language without an antecedent set makes every word an antecedent, so the spots
    become plain word n-grams. Antecedents too near the end for a full chain give no spot.
    Pass the tokens' ``hashes`` when they are at hand (``_hashing.token_hashes``).
    """
    if hashes is None:
        hashes = token_hashes(tokens)
    antecedents = ANTECEDENTS.get(language)
    not_stop = ~members(hashes, STOPWORDS.get(language, frozenset()))
    if antecedents is None:
        is_ante = np.ones(len(hashes), dtype=bool)
        is_chain = not_stop
    else:
        is_ante = members(hashes, antecedents)
        is_chain = ~is_ante & not_stop
    ante_pos = np.flatnonzero(is_ante)
    chain_pos = np.flatnonzero(is_chain)
    # Index (into chain_pos) of the first chain word after each antecedent, then every d-th one.
    first = np.searchsorted(chain_pos, ante_pos, side="right")
    picks = first[:, None] + (d * np.arange(1, c + 1) - 1)[None, :]
    valid = picks[:, -1] < len(chain_pos)
    return ante_pos[valid], chain_pos[picks[valid]]


def spot_signatures(
    tokens: Sequence[str] | Sequence[bytes],
    hashes: np.ndarray,
    language: str | tuple[str, ...],
    specs: tuple[tuple[int, int], ...] = ((1, 2),),
) -> SpotSet:
    """The spot multiset of a token list for every ``(d, c)`` spec at once.

    ``hashes`` are the tokens' hashes (``_hashing.token_hashes``); a spot's hash covers its
    spec, its antecedent and its chain in order. Several ``language``s (a page in two scripts)
    give the spots of each: their antecedent sets do not overlap, so no spot is counted twice.
    """
    parts = []
    for lang in (language,) if isinstance(language, str) else language:
        for d, c in specs:
            ante, chains = spot_chains(tokens, lang, d, c, hashes)
            acc = mix64(hashes[ante] ^ np.uint64((d << 8) | c))
            for col in range(c):
                acc = combine(acc, hashes[chains[:, col]])
            parts.append(acc)
    spots = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    unique, counts = np.unique(spots, return_counts=True)
    return SpotSet(unique.astype(np.uint64), counts.astype(np.uint32))


def spots32(spots: SpotSet) -> SpotSet:
    """The multiset with each spot cut to the top 32 bits of its hash (the stored form)."""
    if not len(spots):
        return spots
    high = (spots.hashes >> np.uint64(32)).astype(np.uint64)
    if len(high) > 1 and not np.all(high[1:] != high[:-1]):  # a 32-bit collision: merge counts
        keys, inverse = np.unique(high, return_inverse=True)
        counts = np.bincount(inverse, weights=spots.counts, minlength=len(keys)).astype(np.uint32)
        return SpotSet(keys, counts)
    return SpotSet(high, spots.counts)
