from __future__ import annotations

import dataclasses

import numpy as np

from scrapy_neardup import DedupConfig, Fingerprint
from scrapy_neardup.signatures.spotsigs import SpotSet
from scrapy_neardup.verify import compare


def spots(*values: int) -> SpotSet:
    hashes, counts = np.unique(np.array(values, dtype=np.uint64), return_counts=True)
    return SpotSet(hashes, counts.astype(np.uint32))


BASE = Fingerprint(token_count=100, language="en", exact=1, spots=spots(1, 2, 3, 4), simhash=0b1011)


def test_identical_pages_are_decided_by_the_most_precise_method():
    result = compare(BASE, BASE, DedupConfig())
    assert result.duplicate and result.method == "exact" and result.similarity == 1.0


def test_simhash_match_needs_spotsigs_confirmation():
    near_simhash = dataclasses.replace(BASE, exact=2, simhash=0b1000, spots=spots(7, 8, 9, 10))
    config = DedupConfig(methods=("simhash",))
    rejected = compare(BASE, near_simhash, config)
    assert not rejected.duplicate
    assert rejected.results["simhash"].raw == 2
    accepted = compare(BASE, near_simhash, DedupConfig(methods=("simhash",), simhash_confirm=0))
    assert accepted.duplicate and accepted.method == "simhash"


def test_only_configured_methods_decide():
    variant = dataclasses.replace(BASE, exact=2, spots=spots(1, 2, 3, 5), simhash=(1 << 40) - 1)
    assert compare(BASE, variant, DedupConfig(methods=("exact",))).duplicate is False
    config = DedupConfig(methods=("exact", "spotsigs"), spotsigs_threshold=0.6, spotsigs_min_spots=4)
    result = compare(BASE, variant, config)
    assert result.duplicate and result.method == "spotsigs"
    assert result.similarity == 3 / 5
    # Below spotsigs_min_spots a Jaccard is not trusted to decide.
    assert not compare(BASE, variant, DedupConfig(methods=("spotsigs",), spotsigs_threshold=0.6)).duplicate


def test_methods_without_signatures_are_left_out():
    result = compare(BASE, BASE, DedupConfig())
    assert set(result.results) == {"exact", "spotsigs", "simhash"}


def test_few_spots_need_a_simhash_witness():
    variant = dataclasses.replace(BASE, exact=2, spots=spots(1, 2, 3, 5), simhash=0b1010)
    config = DedupConfig(methods=("spotsigs",), spotsigs_threshold=0.6)
    assert config.spotsigs_min_spots > 4
    result = compare(BASE, variant, config)
    assert result.duplicate and result.method == "spotsigs"
    assert "SimHash <= 20 bits" in result.results["spotsigs"].threshold
    far = dataclasses.replace(variant, simhash=(1 << 24) - 1)  # 21 bits from BASE
    assert not compare(BASE, far, config).duplicate
    no_simhash = dataclasses.replace(variant, simhash=None)
    assert not compare(BASE, no_simhash, config).duplicate
    hard_cut = DedupConfig(methods=("spotsigs",), spotsigs_threshold=0.6, spotsigs_few_spots_bits=-1)
    assert not compare(BASE, variant, hard_cut).duplicate
    # The witness only lets the Jaccard decide; it never replaces the threshold.
    assert not compare(BASE, variant, DedupConfig(methods=("spotsigs",), spotsigs_threshold=0.7)).duplicate


def test_pages_of_unequal_length_need_the_higher_bar():
    # Jaccard 0.5 on 20 spots each: enough for pages of about equal length, not for a page
    # under three quarters of the other's length (a sibling sharing sections, usually).
    shared = list(range(100, 120))
    a = dataclasses.replace(BASE, exact=2, token_count=1000, spots=spots(*shared[:14], *range(1, 7)))
    b = dataclasses.replace(BASE, exact=3, token_count=800, spots=spots(*shared[:14], *range(7, 13)))
    config = DedupConfig(methods=("spotsigs",))
    result = compare(a, b, config)
    assert result.results["spotsigs"].similarity == 14 / 26 and result.duplicate
    shorter = dataclasses.replace(b, token_count=700)
    uneven = compare(a, shorter, config)
    assert not uneven.duplicate
    assert uneven.results["spotsigs"].threshold.startswith(">= 0.70 (the shorter text is under 0.75")
    assert compare(a, shorter, DedupConfig(methods=("spotsigs",), spotsigs_uneven_threshold=0.5)).duplicate
    assert compare(a, shorter, DedupConfig(methods=("spotsigs",), spotsigs_length_ratio=0)).duplicate
    assert compare(a, shorter, DedupConfig(methods=("spotsigs",), preset="loose")).duplicate
    # The higher bar only ever raises the threshold.
    assert DedupConfig(spotsigs_threshold=0.8).spotsigs_bar(100, 10) == 0.8


def test_a_match_on_few_spots_or_of_unequal_lengths_is_weak():
    shared = list(range(100, 130))
    a = dataclasses.replace(BASE, exact=2, token_count=1000, spots=spots(*shared, 1, 2))
    b = dataclasses.replace(BASE, exact=3, token_count=950, spots=spots(*shared, 3, 4))
    config = DedupConfig(methods=("spotsigs",))
    strong = compare(a, b, config)
    assert strong.duplicate and not strong.weak and not strong.results["spotsigs"].weak
    shorter = dataclasses.replace(b, token_count=700)  # under 0.75 of the other: the higher bar
    uneven = compare(a, shorter, config)
    assert uneven.duplicate and uneven.weak
    ten_bits_off = 0b1011 ^ 0b1111111111
    few = compare(
        BASE, dataclasses.replace(BASE, exact=9, spots=spots(1, 2, 3, 5), simhash=ten_bits_off), config
    )
    assert few.duplicate and few.weak  # 4 spots: the SimHash witness (under 20 bits) let the Jaccard decide
    assert not compare(a, b, DedupConfig(methods=("exact",))).weak  # no match, nothing weak


def test_a_few_spots_match_is_strong_when_simhash_all_but_agrees_or_every_spot_is_shared():
    """A short text's copy: under spotsigs_min_spots spots, weak unless the SimHash distance is
    within SURE_FEW_SPOTS_BITS (the same few words under another template), or the pages share
    most of their spots (a brief's print view: the template's words move SimHash, not spots)."""
    from scrapy_neardup.methods import SURE_FEW_SPOTS_BITS, SURE_FEW_SPOTS_JACCARD

    config = DedupConfig()
    short = dataclasses.replace(BASE, spots=spots(*range(1, 10)), simhash=0)
    ten_bits = (1 << (SURE_FEW_SPOTS_BITS + 4)) - 1
    close = dataclasses.replace(short, exact=2, simhash=(1 << SURE_FEW_SPOTS_BITS) - 1)  # 6 bits off
    same_spots = dataclasses.replace(short, exact=3, simhash=ten_bits)
    far = dataclasses.replace(short, exact=4, simhash=ten_bits, spots=spots(*range(1, 8), 98, 99))  # 7 of 11
    assert short.spots.size < config.spotsigs_min_spots
    eight_of_ten = dataclasses.replace(short, exact=5, simhash=ten_bits, spots=spots(*range(1, 9), 99))
    assert compare(eight_of_ten, short, config).similarity == SURE_FEW_SPOTS_JACCARD == 0.8
    for other in (close, same_spots, eight_of_ten):
        strong = compare(other, short, config)
        assert strong.duplicate and strong.method == "spotsigs" and not strong.weak
    weak = compare(far, short, config)
    assert (
        weak.duplicate
        and weak.method == "spotsigs"
        and weak.weak
        and weak.similarity < SURE_FEW_SPOTS_JACCARD
    )


def test_a_page_with_comments_of_its_own_is_no_copy_unless_comments_are_off():
    """NEARDUP_COMMENTS (on by default): a comment view (the article's main text and 577 words of
    readers' comments) met after its article is no copy of it, nor the article met after the
    view; off, an exact copy that differs by text the extractor left out (``comments_apart``).
    Under 100 words, or the same comments: a copy."""
    from scrapy_neardup.comments import COMMENT_WORDS

    article = dataclasses.replace(BASE, exact=2, token_count=2405, spots=spots(*range(100, 500)))
    view = dataclasses.replace(article, comment_words=577, comment_hash=7)
    on, off = compare(view, article, DedupConfig()), compare(view, article, DedupConfig(comments=False))
    assert not on.duplicate and on.comments_apart == 577
    assert off.duplicate and off.method == "exact" and off.comments_apart == 577
    few = dataclasses.replace(view, comment_words=COMMENT_WORDS - 1)
    near = compare(few, article, DedupConfig())
    assert near.duplicate and not near.comments_apart
    other = dataclasses.replace(view, comment_hash=8)  # other comments of as many words
    assert not compare(other, view, DedupConfig()).duplicate
    assert compare(dataclasses.replace(view), view, DedupConfig()).duplicate  # the same comments
    back = compare(article, view, DedupConfig())  # the article met after its comment view
    assert not back.duplicate and back.comments_apart == 577
