"""The detection methods, one registry: what each signs, how two pages compare, how it is found.

Each method says which Fingerprint fields it fills (``sign``), how similar two fingerprints
are on a 0-1 scale and whether that is a duplicate (``result``), its threshold on that scale
(``threshold``, for the report), its threshold knob, the equality lookups an index finds
its candidates by (``lookup``; SpotSigs is found by its own partitioned search instead), how
indexes store its fields (``stored``), and how reports and ``compare`` name and draw it.
``ALL`` is in decision order (``register`` adds one): the first method that matches a pair names the verdict.
Config, fingerprint, verify, the indexes and the report read this; nothing else lists methods.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from .signatures.exact import exact_hash
from .signatures.imatch import CollectionStats, imatch_signatures, lexicon_terms
from .signatures.ksentence import ksentence_hash
from .signatures.minhash import band_keys, minhash
from .signatures.shingles import GROUPS, super_shingles
from .signatures.simhash import BITS, simhash
from .signatures.similarity import (
    hamming,
    imatch_agreement,
    minhash_similarity,
    multiset_jaccard,
    super_shingle_agreement,
)
from .signatures.spotsigs import ANTECEDENTS, STOPWORDS, SpotSet, spot_signatures
from .signatures.stored import Stored, uint64, uint_array
from .tokens import split_sentences, tokenize

# The detection settings, a config.DedupConfig: config.py reads this registry to check the method
# names it is given, so that class is not imported here.
Config = Any


_EMPTY_SPOTS = SpotSet(np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint32))


@dataclass(frozen=True, eq=False)
class Fingerprint:
    """A page's signatures. Fields of methods that were not computed stay empty (None or ())."""

    skip_reason: str | None = None
    skip_detail: str = ""
    raw_hash: int | None = None
    token_count: int = 0
    language: str = "und"
    text: str = ""
    title: str = ""
    exact: int | None = None
    spots: SpotSet = field(default=_EMPTY_SPOTS)
    simhash: int | None = None
    minhash: np.ndarray | None = None
    minhash_bands: tuple[int, ...] = ()
    super_shingles: np.ndarray | None = None
    imatch: tuple[int, ...] = ()
    terms: tuple[str, ...] = ()  # sorted unique tokens, for I-Match with the index's statistics
    ksentence: int | None = None
    # Signatures of registered methods without a field of their own (``methods.register``):
    # JSON values (ints, strings, lists of them), stored by every index as they are.
    extra: Mapping[str, Any] = field(default_factory=dict)
    # Readers' comments the extractor found apart from the main text: their words, and a hash of
    # them (the same comments, or other ones). Stored with ``extra``.
    comment_words: int = 0
    comment_hash: int = 0

    @property
    def judged(self) -> bool:
        """False when the page was skipped; ``skip_reason`` says why."""
        return self.skip_reason is None


@dataclass(frozen=True)
class Page:
    """What a method signs: a page's main text, its words (``text.words``: the tokens' UTF-8 bytes)
    and their hashes, its language."""

    text: str
    words: list[bytes]
    hashes: np.ndarray
    language: str
    stats: CollectionStats | None = None  # the collection's document frequencies (I-Match)
    languages: tuple[str, ...] = ()  # every language the page holds, main first (SpotSigs)

    @cached_property
    def tokens(self) -> list[str]:
        """The words as strings (``text.tokenize``), made only for a method that reads them."""
        return list(map(bytes.decode, self.words))


@dataclass(frozen=True)
class MethodResult:
    """One method's view of a pair.

    ``similarity`` is in [0, 1] for every method (SimHash: 1 - distance/64) so methods
    can be charted together; ``raw`` is the method's own measure (a distance, a count).
    ``weak``: a match on thin evidence (SpotSigs over few spots, or of texts of unequal length),
    which a crawl does not drop on its own (``NEARDUP_DROP_ABOVE``).
    """

    method: str
    similarity: float
    raw: float | int | bool
    shown: str
    threshold: str
    duplicate: bool
    weak: bool = False
    weak_why: tuple[str, ...] = ()  # what makes the match weak, said to a user (``compare``)


@dataclass(frozen=True)
class Method:
    name: str
    knob: str  # the setting its threshold is (without NEARDUP_)
    sign: Callable[[Page, Config], dict[str, Any]]
    result: Callable[[Fingerprint, Fingerprint, Config], MethodResult | None]
    threshold: Callable[[Config], float]
    # Lookup values of a page (each a tuple of ints below 2**64) under this method's ``kind``: two
    # pages the method may call duplicates share one. None: found by the SpotSigs search.
    lookup: Callable[[Fingerprint, Config], list[tuple[int, ...]]] | None = None
    kind: int = 0  # stored in index files: never reuse a number
    # Its Fingerprint fields as indexes store them, a column each (a registered method keeps its
    # signature in ``Fingerprint.extra`` instead). The exact hash, SimHash and spots are stored
    # by every index in columns of its own, since its bounds and searches read them.
    stored: tuple[Stored, ...] = ()
    # Signs a probe again with the index's statistics of the admitted pages' terms (I-Match's
    # idf); an index counts those terms where a configured method has this.
    with_stats: Callable[[Fingerprint, CollectionStats, Config], Fingerprint] | None = None
    label: str = ""  # what people call it
    description: str = ""  # one line: what makes two pages its duplicates
    color: str = "#777777"  # in the report's charts
    measure: str = ""  # its raw measure's key in ``compare --json`` (default: its name)


def function_words(language: str) -> frozenset[str]:
    """Words I-Match leaves out when it has no collection statistics."""
    return ANTECEDENTS.get(language, frozenset()) | STOPWORDS.get(language, frozenset())


def imatch_of(terms: Any, language: str, stats: CollectionStats | None, config: Config) -> tuple[int, ...]:
    """I-Match signatures of a page's terms, with a collection's statistics where there are some."""
    low, high = config.imatch_idf_low, config.imatch_idf_high
    lexicon = lexicon_terms(terms, stats, low, high, function_words(language))
    return imatch_signatures(lexicon, config.imatch_lexicons, config.imatch_drop)


# --- exact ------------------------------------------------------------------------------------


def _equal(method: str, a: Any, b: Any) -> MethodResult | None:
    if a is None or b is None:
        return None
    same = a == b
    return MethodResult(method, float(same), same, "equal" if same else "different", "equal", same)


EXACT = Method(
    "exact", "methods",
    sign=lambda page, config: {"exact": exact_hash(page.words)},
    result=lambda a, b, config: _equal("exact", a.exact, b.exact),
    threshold=lambda config: 1.0,
    lookup=lambda fp, config: [] if fp.exact is None else [(fp.exact >> 64,)],
    kind=1, label="exact", description="the same main text, word for word", color="#2f6fd6",
)  # fmt: skip


# --- K longest sentences ----------------------------------------------------------------------


def _ksentence_sign(page: Page, config: Config) -> dict[str, Any]:
    sentences = [tokenize(s) for s in split_sentences(page.text)]
    return {"ksentence": ksentence_hash(sentences, config.ksentence_k)}


KSENTENCE = Method(
    "ksentence", "ksentence_k",
    sign=_ksentence_sign,
    result=lambda a, b, config: _equal("ksentence", a.ksentence, b.ksentence),
    threshold=lambda config: 1.0,
    lookup=lambda fp, config: [] if fp.ksentence is None else [(fp.ksentence,)],
    kind=6, stored=(uint64("ksentence"),), label="K longest sentences",
    description="the same K longest sentences", color="#7b5cd6",
)  # fmt: skip


# --- I-Match ----------------------------------------------------------------------------------


def _imatch_sign(page: Page, config: Config) -> dict[str, Any]:
    return {
        "imatch": imatch_of(page.tokens, page.language, page.stats, config),
        "terms": tuple(sorted(set(page.tokens))),
    }


def _imatch_result(a: Fingerprint, b: Fingerprint, config: Config) -> MethodResult | None:
    if not a.imatch or not b.imatch:
        return None
    agree = imatch_agreement(a.imatch, b.imatch)
    n = min(len(a.imatch), len(b.imatch))
    return MethodResult("imatch", agree / n, agree, f"{agree} of {n} lexicons agree", ">= 1", agree >= 1)


IMATCH = Method(
    "imatch", "imatch_lexicons",
    sign=_imatch_sign,
    result=_imatch_result,
    threshold=lambda config: 1.0 / (1 + config.imatch_lexicons),
    lookup=lambda fp, config: [(j, sig) for j, sig in enumerate(fp.imatch) if sig],
    kind=5, stored=(uint_array("imatch", "<u8", as_tuple=True),),
    with_stats=lambda fp, stats, config: dataclasses.replace(
        fp, imatch=imatch_of(fp.terms, fp.language, stats, config)
    ),
    label="I-Match", description="the same set of mid-frequency terms, in one of several lexicons",
    color="#c2419a",
)  # fmt: skip


# --- SpotSigs ---------------------------------------------------------------------------------

# A SpotSigs match over fewer spots than spotsigs_min_spots is strong evidence all the same when
# the SimHash distance is this small: a short article's copy under another template (the same 60
# to 180 words) is within it, short distinct pages of one site are not (benchmarks/short_texts.py,
# docs/quality.md "Short articles").
SURE_FEW_SPOTS_BITS = 6
# ... and so is one whose pages share most of their spots: a brief's print or AMP view has its spots,
# while the template's words move SimHash (benchmarks/short_texts.py, docs/quality.md "Short
# articles": no short distinct pair of ours shares as many).
SURE_FEW_SPOTS_JACCARD = 0.8


def _spotsigs_result(a: Fingerprint, b: Fingerprint, config: Config) -> MethodResult | None:
    if not a.spots.size or not b.spots.size:
        return None
    sim = multiset_jaccard(a.spots, b.spots)
    tau, least = config.spotsigs_threshold, config.spotsigs_min_spots
    bits = config.spotsigs_few_spots_bits
    small = min(a.spots.size, b.spots.size)
    distance = hamming(a.simhash, b.simhash) if a.simhash is not None and b.simhash is not None else None
    trusted = config.spotsigs_trusted(small, distance)
    bar = config.spotsigs_bar(a.token_count, b.token_count)
    threshold = f">= {bar:.2f}"
    if bar > tau:
        threshold += f" (the shorter text is under {config.spotsigs_length_ratio:.2f} of the longer)"
    if least > 1:
        # A Jaccard over few spots is weak evidence: under min_spots, SimHash must agree too.
        witness = f" or SimHash <= {bits} bits" if bits >= 0 else ""
        threshold += f", >= {least} spots each{witness}"
    duplicate = sim >= bar and trusted
    # Thin evidence: few spots (unless SimHash all but agrees, as a short text's copy does), or
    # uneven lengths.
    few = small < least and not (distance is not None and distance <= SURE_FEW_SPOTS_BITS)
    few = few and sim < SURE_FEW_SPOTS_JACCARD
    weak = duplicate and (few or bar > tau)
    why_weak = _weak_why(a, b, few and (small, least, distance), bar > tau) if weak else ()
    return MethodResult("spotsigs", sim, sim, f"{sim:.3f} Jaccard", threshold, duplicate, weak, why_weak)


def _weak_why(a: Fingerprint, b: Fingerprint, few: Any, unequal: bool) -> tuple[str, ...]:
    """What makes a SpotSigs match weak, said to a user (``few``: its spots, the least and the
    SimHash distance, when they are few). Only for a weak match: a check compares many."""
    why = [
        f"few spots ({few[0]}, under {few[1]}, and SimHash {few[2]} bits apart)" if few else "",
        "texts of unequal length ({} and {} tokens)".format(*sorted((a.token_count, b.token_count)))
        if unequal
        else "",
    ]
    return tuple(w for w in why if w)


SPOTSIGS = Method(
    "spotsigs", "spotsigs_threshold",
    sign=lambda page, config: {
        "spots": spot_signatures(
            page.words, page.hashes, page.languages or page.language, config.spotsigs_specs
        )
    },
    result=_spotsigs_result,
    threshold=lambda config: float(config.spotsigs_threshold),
    label="SpotSigs", description="multiset Jaccard of spot signatures (stopword-anchored chains)",
    color="#3f9142",
)  # fmt: skip


# --- MinHash ----------------------------------------------------------------------------------


def _minhash_sign(page: Page, config: Config) -> dict[str, Any]:
    mh = minhash(page.hashes, config.minhash_perm, config.minhash_shingle)
    return {"minhash": mh, "minhash_bands": tuple(band_keys(mh, *config.minhash_lsh))}


def _minhash_result(a: Fingerprint, b: Fingerprint, config: Config) -> MethodResult | None:
    if a.minhash is None or b.minhash is None:
        return None
    sim = minhash_similarity(a.minhash, b.minhash)
    t = config.minhash_threshold
    # MinHash *with LSH banding*: a pair that shares no band is never a candidate, so it is
    # never a match either; an index then finds exactly what a pairwise check would.
    banded = not (a.minhash_bands and b.minhash_bands) or bool(set(a.minhash_bands) & set(b.minhash_bands))
    threshold = f">= {t:.2f}, a shared LSH band"
    return MethodResult("minhash", sim, sim, f"{sim:.3f} est. Jaccard", threshold, sim >= t and banded)


MINHASH = Method(
    "minhash", "minhash_threshold",
    sign=_minhash_sign,
    result=_minhash_result,
    threshold=lambda config: float(config.minhash_threshold),
    lookup=lambda fp, config: [(k,) for k in fp.minhash_bands],
    kind=3, stored=(uint_array("minhash", "<u4"), uint_array("minhash_bands", "<u8", as_tuple=True)),
    label="MinHash", description="estimated Jaccard of word shingles, found by LSH bands", color="#2aa198",
)  # fmt: skip


# --- Broder shingles --------------------------------------------------------------------------


def _shingles_result(a: Fingerprint, b: Fingerprint, config: Config) -> MethodResult | None:
    if a.super_shingles is None or b.super_shingles is None:
        return None
    agree = super_shingle_agreement(a.super_shingles, b.super_shingles)
    need = config.shingles_min_agree
    shown, threshold = f"{agree} of {GROUPS} agree", f">= {need} of {GROUPS}"
    return MethodResult("shingles", agree / GROUPS, agree, shown, threshold, agree >= need)


SHINGLES = Method(
    "shingles", "shingles_min_agree",
    sign=lambda page, config: {"super_shingles": super_shingles(page.hashes, config.shingles_size)},
    result=_shingles_result,
    threshold=lambda config: config.shingles_min_agree / GROUPS,
    lookup=lambda fp, config: [] if fp.super_shingles is None else [(int(k),) for k in fp.super_shingles],
    kind=4, stored=(uint_array("super_shingles", "<u8"),), label="Broder shingles",
    description="super-shingles of Broder's shingles that agree", color="#d9822b", measure="super_shingles",
)  # fmt: skip


# --- SimHash ----------------------------------------------------------------------------------


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


def _simhash_result(a: Fingerprint, b: Fingerprint, config: Config) -> MethodResult | None:
    if a.simhash is None or b.simhash is None:
        return None
    dist = hamming(a.simhash, b.simhash)
    near = dist <= config.simhash_distance
    threshold = f"<= {config.simhash_distance} bits"
    if near and config.simhash_confirm > 0:
        confirm = multiset_jaccard(a.spots, b.spots) if a.spots.size and b.spots.size else 0.0
        near = confirm >= config.simhash_confirm
        threshold += f", SpotSigs >= {config.simhash_confirm:.2f}"
    return MethodResult("simhash", 1 - dist / BITS, dist, f"distance {dist} bits", threshold, near)


SIMHASH = Method(
    "simhash", "simhash_distance",
    sign=lambda page, config: {"simhash": simhash(page.hashes, config.simhash_shingle)},
    result=_simhash_result,
    threshold=lambda config: 1.0 - config.simhash_distance / BITS,
    lookup=lambda fp, config: []
    if fp.simhash is None
    else list(simhash_keys(fp.simhash, config.simhash_distance, config.simhash_tables)),
    kind=2, label="SimHash", description="64-bit SimHash within a few bits, confirmed by SpotSigs",
    color="#b58900", measure="simhash_distance",
)  # fmt: skip


ALL: list[Method] = [EXACT, KSENTENCE, IMATCH, SPOTSIGS, MINHASH, SHINGLES, SIMHASH]
BY_NAME = {m.name: m for m in ALL}
BUILT_IN = tuple(m.name for m in ALL)
# The fields every index keeps a column of, for the built-in methods that declare them (a
# registered method keeps its signature in ``Fingerprint.extra``).
STORED_FIELDS: tuple[Stored, ...] = tuple(stored for m in ALL for stored in m.stored)
_RANK = {name: i for i, name in enumerate(BUILT_IN)}


def counts_terms(config: Config) -> bool:
    """Whether an index of ``config`` counts the admitted pages' terms (a method signs with them)."""
    return any(BY_NAME[name].with_stats is not None for name in config.methods if name in BY_NAME)


def with_stats(fp: Fingerprint, config: Config, stats: CollectionStats) -> Fingerprint:
    """A probe signed again, by each configured method that reads them, with the index's term statistics."""
    for name in config.methods:
        method = BY_NAME.get(name)
        if method is not None and method.with_stats is not None:
            fp = method.with_stats(fp, stats, config)
    return fp


def decision_order() -> tuple[str, ...]:
    """Method names, most precise first: the first that matches a pair names the verdict."""
    return tuple(m.name for m in ALL)


def rank(name: str) -> int:
    """A method's place in the decision order."""
    return _RANK[name]


def register(method: Method, before: str | None = None) -> None:
    """Add a method (a plugin's, a test's) before the named one in the decision order, or last.

    Its signature goes in ``Fingerprint.extra`` (``sign`` returns ``{"extra": {...}}``), which
    every index stores as JSON; its ``kind`` must be one no other method uses.
    """
    if method.name in BY_NAME or any(m.kind == method.kind for m in ALL if method.kind):
        raise ValueError(f"method {method.name!r} or its kind {method.kind} is taken")
    if method.stored:
        raise ValueError(f"method {method.name!r}: a registered method stores its signature in extra")
    at = next((i for i, m in enumerate(ALL) if m.name == before), len(ALL))
    ALL.insert(at, method)
    BY_NAME[method.name] = method
    _RANK.clear()
    _RANK.update({m.name: i for i, m in enumerate(ALL)})


def unregister(name: str) -> None:
    """Remove a registered method (built-in ones stay)."""
    if name in BUILT_IN or name not in BY_NAME:
        raise ValueError(f"{name!r} is not a registered method")
    ALL.remove(BY_NAME.pop(name))
    _RANK.clear()
    _RANK.update({m.name: i for i, m in enumerate(ALL)})
