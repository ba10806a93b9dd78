"""Fingerprint: everything the enabled methods need about a page, computed once.

``fingerprint()`` is the whole path from bytes to signatures (DESIGN.md section 1). A
page that cannot be judged yields a Fingerprint with ``skip_reason`` set instead of an
exception, so callers count it and move on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .config import DedupConfig
from .exceptions import SkipPage
from .signatures._hashing import token_hashes
from .signatures.exact import exact_hash, raw_hash
from .signatures.imatch import CollectionStats, imatch_signatures, lexicon_terms
from .signatures.ksentence import ksentence_hash
from .signatures.minhash import band_keys, minhash
from .signatures.shingles import super_shingles
from .signatures.simhash import simhash
from .signatures.spotsigs import ANTECEDENTS, LANGUAGE_VOTES, STOPWORDS, SpotSet, spot_signatures
from .text import detect_language, extract_page, split_sentences, tokenize

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

    @property
    def judged(self) -> bool:
        """False when the page was skipped; ``skip_reason`` says why."""
        return self.skip_reason is None


def needed_methods(config: DedupConfig) -> frozenset[str]:
    """The signatures the configured methods read: SimHash confirmation needs SpotSigs too, and
    SpotSigs on pages with few spots needs SimHash (``spotsigs_few_spots_bits``)."""
    methods = set(config.methods)
    if "simhash" in methods and config.simhash_confirm > 0:
        methods.add("spotsigs")
    if "spotsigs" in methods and config.spotsigs_few_spots_bits >= 0 and config.spotsigs_min_spots > 1:
        methods.add("simhash")
    return frozenset(methods)


def fingerprint(
    body: bytes | str,
    config: DedupConfig,
    *,
    content_type: str | None = None,
    stats: CollectionStats | None = None,
    methods: frozenset[str] | None = None,
    extractor: str | None = None,
) -> Fingerprint:
    """Decode, extract, tokenize and sign one page.

    ``methods`` overrides which signatures are computed (``compare`` asks for all);
    ``stats`` are the collection's document frequencies for I-Match; ``extractor``
    overrides the configured one (``text`` for a body that is main text already).
    """
    if extractor is not None:
        config = dataclasses.replace(config, extractor=extractor)
    wanted = needed_methods(config) if methods is None else methods
    body_hash = raw_hash(body)
    try:
        text, title = extract_page(body, config.extractor, content_type, config.max_body)
    except SkipPage as skip:
        return Fingerprint(skip_reason=skip.reason, skip_detail=skip.detail, raw_hash=body_hash)
    tokens = tokenize(text)
    language = detect_language(tokens, LANGUAGE_VOTES) if config.language == "auto" else config.language
    if len(tokens) < max(1, config.min_tokens):
        return Fingerprint(
            skip_reason="too_short",
            skip_detail=f"{len(tokens)} tokens < min_tokens {config.min_tokens}",
            raw_hash=body_hash,
            token_count=len(tokens),
            language=language,
            text=text,
            title=title,
        )
    hashes = token_hashes(tokens)
    values: dict[str, object] = {}
    if "exact" in wanted:
        values["exact"] = exact_hash(tokens)
    if "spotsigs" in wanted:
        values["spots"] = spot_signatures(tokens, hashes, language, config.spotsigs_specs)
    if "simhash" in wanted:
        values["simhash"] = simhash(hashes, config.simhash_shingle)
    if "minhash" in wanted:
        mh = minhash(hashes, config.minhash_perm, config.minhash_shingle)
        values["minhash"] = mh
        values["minhash_bands"] = tuple(band_keys(mh, *config.minhash_lsh))
    if "shingles" in wanted:
        values["super_shingles"] = super_shingles(hashes, config.shingles_size)
    if "imatch" in wanted:
        lexicon = lexicon_terms(
            tokens, stats, config.imatch_idf_low, config.imatch_idf_high, _function_words(language)
        )
        values["imatch"] = imatch_signatures(lexicon, config.imatch_lexicons, config.imatch_drop)
        values["terms"] = tuple(sorted(set(tokens)))
    if "ksentence" in wanted:
        sentences = [tokenize(s) for s in split_sentences(text)]
        values["ksentence"] = ksentence_hash(sentences, config.ksentence_k)
    return Fingerprint(
        raw_hash=body_hash,
        token_count=len(tokens),
        language=language,
        text=text,
        title=title,
        **values,  # type: ignore[arg-type]
    )


def imatch_with_stats(fp: Fingerprint, config: DedupConfig, stats: CollectionStats) -> Fingerprint:
    """The fingerprint with I-Match signatures recomputed from collection statistics (an index's)."""
    lexicon = lexicon_terms(
        fp.terms, stats, config.imatch_idf_low, config.imatch_idf_high, _function_words(fp.language)
    )
    signatures = imatch_signatures(lexicon, config.imatch_lexicons, config.imatch_drop)
    return dataclasses.replace(fp, imatch=signatures)


def _function_words(language: str) -> frozenset[str]:
    """Words I-Match leaves out when it has no collection statistics."""
    return ANTECEDENTS.get(language, frozenset()) | STOPWORDS.get(language, frozenset())
