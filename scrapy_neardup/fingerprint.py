"""fingerprint(): everything the enabled methods need about a page, computed once.

``fingerprint()`` is the whole path from bytes to signatures (DESIGN.md section 1). A
page that cannot be judged yields a Fingerprint with ``skip_reason`` set instead of an
exception, so callers count it and move on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .comments import comment_signature
from .config import DedupConfig
from .exceptions import SkipPage
from .methods import ALL, CollectionStats, Fingerprint, Page
from .signatures._hashing import token_hashes
from .signatures.exact import raw_hash
from .signatures.spotsigs import LANGUAGE_VOTES
from .text import extract_parts
from .tokens import detect_languages, words

__all__ = ["Fingerprint", "fingerprint", "needed_methods"]


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
    raw: int | None = None,
) -> Fingerprint:
    """Decode, extract, tokenize and sign one page.

    ``methods`` overrides which signatures are computed (``compare`` asks for all);
    ``stats`` are the collection's document frequencies (a method that signs with them); ``extractor``
    overrides the configured one (``text`` for a body that is main text already); ``raw`` is
    the body's ``raw_hash`` where the caller made it already.
    """
    if extractor is not None:
        config = dataclasses.replace(config, extractor=extractor)
    wanted = needed_methods(config) if methods is None else methods
    body_hash = raw if raw is not None else raw_hash(body)
    try:
        text, title, comments = extract_parts(body, config.extractor, content_type, config.max_body)
    except SkipPage as skip:
        return Fingerprint(skip_reason=skip.reason, skip_detail=skip.detail, raw_hash=body_hash)
    utf8 = words(text)
    hashes = token_hashes(utf8)
    if config.language == "auto":
        languages = detect_languages(utf8, LANGUAGE_VOTES, hashes)
    else:
        languages = (config.language,)
    language = languages[0]
    if len(utf8) < max(1, config.min_tokens):
        return Fingerprint(
            skip_reason="too_short",
            skip_detail=f"{len(utf8)} tokens < min_tokens {config.min_tokens}",
            raw_hash=body_hash,
            token_count=len(utf8),
            language=language,
            text=text,
            title=title,
        )
    page = Page(text, utf8, hashes, language, stats, languages)
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for method in ALL:
        if method.name in wanted:
            signed = method.sign(page, config)
            extra.update(signed.pop("extra", {}))
            values.update(signed)
    if extra:
        values["extra"] = extra
    values["comment_words"], values["comment_hash"] = comment_signature(comments)
    return Fingerprint(
        raw_hash=body_hash,
        token_count=len(utf8),
        language=language,
        text=text,
        title=title,
        **values,  # type: ignore[arg-type]
    )
