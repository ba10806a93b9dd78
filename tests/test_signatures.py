from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from scrapy_neardup.signatures._hashing import members, ngram_hashes, token_hashes, weights_in
from scrapy_neardup.signatures.exact import exact_hash, raw_hash
from scrapy_neardup.signatures.imatch import CollectionStats, imatch_signatures, lexicon_terms
from scrapy_neardup.signatures.ksentence import ksentence_hash
from scrapy_neardup.signatures.minhash import band_keys, minhash, minhash_features
from scrapy_neardup.signatures.shingles import GROUPS, super_shingles
from scrapy_neardup.signatures.simhash import simhash
from scrapy_neardup.signatures.similarity import (
    hamming,
    jaccard_upper_bound,
    minhash_similarity,
    multiset_jaccard,
    super_shingle_agreement,
)
from scrapy_neardup.signatures.spotsigs import ANTECEDENTS, SpotSet, spot_chains, spot_signatures
from scrapy_neardup.tokens import normalize, tokenize

VOCAB = [f"w{i}" for i in range(3000)]


def spot_set(values) -> SpotSet:
    hashes, counts = np.unique(np.asarray(values, dtype=np.uint64), return_counts=True)
    return SpotSet(hashes, counts.astype(np.uint32))


multisets = st.lists(st.integers(0, 40), max_size=60)


# --- multiset Jaccard -------------------------------------------------------------------------


def test_spotsigs_worked_examples():
    assert multiset_jaccard(spot_set([1, 1, 2, 2, 2, 3]), spot_set([2, 2, 3, 3, 4, 4])) == pytest.approx(
        3 / 9
    )
    a = spot_set([1] * 3 + [2] * 4 + [4] * 2)
    b = spot_set([1] * 2 + [3] * 3 + [4] * 1)
    assert multiset_jaccard(a, b) == pytest.approx(3 / 12)


@given(multisets, multisets)
def test_multiset_jaccard_symmetric_bounded_and_brute_force(xs, ys):
    a, b = spot_set(xs), spot_set(ys)
    sim = multiset_jaccard(a, b)
    assert sim == multiset_jaccard(b, a)
    assert 0.0 <= sim <= 1.0
    ca, cb = Counter(xs), Counter(ys)
    union = sum((ca | cb).values())
    expected = sum((ca & cb).values()) / union if union else 1.0
    assert sim == pytest.approx(expected)
    assert sim <= jaccard_upper_bound(a.size, b.size) + 1e-12


@given(multisets)
def test_multiset_jaccard_is_one_for_equal_multisets(xs):
    assert multiset_jaccard(spot_set(xs), spot_set(list(reversed(xs)))) == 1.0


# --- SpotSigs ---------------------------------------------------------------------------------

PAPER = (
    "At a rally to kick off a weeklong campaign for the South Carolina primary, Obama tried to set the "
    "record straight from an attack circulating widely on the Internet that is designed to play into "
    "prejudices against Muslims and fears of terrorism."
)


def readable(tokens, language, d, c):
    ante, chains = spot_chains(tokens, language, d, c)
    return [":".join([tokens[i], *(tokens[j] for j in row)]) for i, row in zip(ante, chains, strict=True)]


def test_spot_chains_reproduce_the_papers_example():
    tokens = tokenize(normalize(PAPER))
    assert readable(tokens, "en", 1, 2) == [
        "a:rally:kick", "a:weeklong:campaign", "the:south:carolina", "the:record:straight",
        "an:attack:circulating", "the:internet:designed", "is:designed:play",
    ]  # fmt: skip
    assert readable(tokens, "en", 2, 1)[:2] == ["a:kick", "a:campaign"]


def test_spot_multiset_counts_repeats_and_combines_specs():
    tokens = tokenize(normalize(PAPER + " " + PAPER))
    spots = spot_signatures(tokens, token_hashes(tokens), "en", ((1, 2),))
    assert spots.size == 14 and len(spots) == 7 and set(spots.counts.tolist()) == {2}
    both = spot_signatures(tokens, token_hashes(tokens), "en", ((1, 2), (2, 1)))
    assert both.size == 28
    assert np.all(np.diff(both.hashes.astype(np.float64)) > 0)


GERMAN = (
    "Der Hafen der Altstadt ist nach dem Sturm wieder geöffnet worden. Die Fischer haben gesagt, dass "
    "die Reparaturen schneller waren als erwartet. Ein Sprecher der Stadt hat die Arbeiten gelobt, und "
    "die Händler können ihre Stände wieder aufbauen. Das Wetter wird am Wochenende freundlich sein."
)


def test_german_and_chinese_spots_come_from_their_own_antecedents(zh_texts):
    for text, language in ((GERMAN, "de"), (zh_texts[0], "zh")):
        tokens = tokenize(normalize(text))
        ante, _ = spot_chains(tokens, language, 1, 2)
        assert len(ante) >= 5
        assert {tokens[i] for i in ante} <= ANTECEDENTS[language]
        english_ante, _ = spot_chains(tokens, "en", 1, 2)
        assert len(english_ante) < len(ante)


def test_language_without_antecedents_falls_back_to_word_ngrams():
    tokens = ["один", "два", "три", "четыре", "пять"]
    assert readable(tokens, "und", 1, 2) == ["один:два:три", "два:три:четыре", "три:четыре:пять"]


# --- SimHash ----------------------------------------------------------------------------------

long_texts = st.lists(st.sampled_from(VOCAB), min_size=300, max_size=600)


@given(long_texts)
def test_simhash_of_equal_text_is_equal(words):
    assert hamming(simhash(token_hashes(words)), simhash(token_hashes(list(words)))) == 0


@given(st.lists(st.sampled_from(VOCAB), min_size=300, max_size=600, unique=True), st.data())
def test_simhash_one_word_edit_on_long_text_is_small(words, data):
    # Words of a real text (not one word repeated 300 times, whose shingles are all one feature,
    # so that one edit moves every bit's sum by a third of it).
    position = data.draw(st.integers(0, len(words) - 1))
    edited = [*words[:position], "replacement", *words[position + 1 :]]
    assert hamming(simhash(token_hashes(words)), simhash(token_hashes(edited))) <= 10


@given(st.lists(st.integers(0, 2**64 - 1), max_size=300), st.integers(1, 4))
def test_simhash_is_the_majority_of_feature_bits(values, shingle):
    hashes = np.array(values, dtype=np.uint64)
    features = [int(f) for f in ngram_hashes(hashes, shingle)]
    expected = sum(1 << bit for bit in range(64) if 2 * sum(f >> bit & 1 for f in features) > len(features))
    assert simhash(hashes, shingle) == expected


@given(st.sets(st.text(min_size=1, max_size=5), max_size=80), st.lists(st.text(min_size=1, max_size=5)))
def test_members_is_set_membership(words, tokens):
    tokens += sorted(words)[:5]
    found = members(token_hashes(tokens), frozenset(words))
    assert found.tolist() == [token in words for token in tokens]


@given(
    st.lists(st.sets(st.text(min_size=1, max_size=4), max_size=40), min_size=1, max_size=6),
    st.lists(st.tuples(st.text(min_size=1, max_size=4), st.integers(0, 50))),
)
def test_weights_in_sums_the_weights_of_each_sets_tokens(sets, weighted):
    sets = tuple(frozenset(words) for words in sets)
    weighted += [(word, 3) for words in sets for word in sorted(words)[:2]]
    tokens, weights = [t for t, _ in weighted], np.array([w for _, w in weighted], dtype=np.int64)
    expected = [sum(w for t, w in weighted if t in words) for words in sets]
    assert weights_in(token_hashes(tokens), weights, sets) == expected


@given(st.lists(st.text(max_size=12)))
def test_token_hashes_are_xxh3_of_the_utf8_bytes(tokens):
    utf8 = [token.encode("utf-8", "surrogatepass") for token in tokens]
    expected = [xxhash.xxh3_64_intdigest(token) for token in utf8]
    assert token_hashes(utf8).tolist() == expected
    assert token_hashes(utf8).dtype == np.uint64


def test_simhash_of_unrelated_texts_is_far():
    rng = np.random.default_rng(7)
    a = [VOCAB[i] for i in rng.integers(0, 3000, 500)]
    b = [VOCAB[i] for i in rng.integers(0, 3000, 500)]
    assert hamming(simhash(token_hashes(a)), simhash(token_hashes(b))) > 16


def test_simhash_is_unsigned_64_bit():
    value = simhash(token_hashes(VOCAB[:100]))
    assert 0 <= value < 2**64
    assert simhash(token_hashes([])) == 0


# --- MinHash ----------------------------------------------------------------------------------


@given(st.integers(20, 400), st.integers(0, 400), st.integers(0, 400), st.integers(0, 2**32))
def test_minhash_estimate_within_its_error_bound(shared, only_a, only_b, seed):
    rng = np.random.default_rng(seed)
    pool = np.unique(rng.integers(0, 2**63, shared + only_a + only_b + 50, dtype=np.uint64))
    rng.shuffle(pool)
    common, rest = pool[:shared], pool[shared:]
    a = np.concatenate([common, rest[:only_a]])
    b = np.concatenate([common, rest[only_a : only_a + only_b]])
    truth = len(np.intersect1d(a, b)) / len(np.union1d(a, b))
    estimate = minhash_similarity(minhash_features(a, 128), minhash_features(b, 128))
    bound = 4.5 * math.sqrt(truth * (1 - truth) / 128) + 0.03
    assert abs(estimate - truth) <= bound


def test_minhash_equal_texts_and_bands():
    hashes = token_hashes(VOCAB[:200])
    mh = minhash(hashes, 128, 3)
    assert mh.dtype == np.uint32 and len(mh) == 128
    assert minhash_similarity(mh, minhash(hashes.copy(), 128, 3)) == 1.0
    keys = band_keys(mh, 16, 8)
    assert len(keys) == 16 and len(set(keys)) == 16
    other = minhash(token_hashes(VOCAB[1000:1200]), 128, 3)
    assert not set(keys) & set(band_keys(other, 16, 8))


def test_minhash_handles_huge_pages_in_chunks():
    features = np.arange(50_000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    whole = minhash_features(features, 64)
    assert np.array_equal(
        whole, np.minimum(minhash_features(features[:30_000], 64), minhash_features(features[30_000:], 64))
    )


def test_ngram_hashes_shapes():
    hashes = token_hashes(["a", "b", "c", "d"])
    assert len(ngram_hashes(hashes, 3)) == 2
    assert len(ngram_hashes(hashes, 9)) == 1
    assert len(ngram_hashes(hashes[:0], 3)) == 0
    assert ngram_hashes(hashes, 2)[0] != ngram_hashes(token_hashes(["b", "a", "c", "d"]), 2)[0]


# --- super-shingles, I-Match, K-sentences, exact -------------------------------------------------


def test_super_shingles_agree_fully_on_copies_and_not_on_strangers():
    text = VOCAB[:400]
    a = super_shingles(token_hashes(text), 5)
    assert len(a) == GROUPS
    assert super_shingle_agreement(a, super_shingles(token_hashes(list(text)), 5)) == GROUPS
    assert super_shingle_agreement(a, super_shingles(token_hashes(VOCAB[500:900]), 5)) == 0
    edited = [*text[:399], "changed"]
    assert super_shingle_agreement(a, super_shingles(token_hashes(edited), 5)) >= 2


def test_imatch_idf_band_and_randomized_lexicons():
    stats = CollectionStats(n_docs=1000, df={"common": 900, "mid": 30, "topic": 10, "rare": 1})
    kept = lexicon_terms(["common", "mid", "topic", "rare", "mid"], stats, 0.2, 0.95)
    assert kept == ["mid", "topic"]
    sigs = imatch_signatures(kept, extra_lexicons=4, drop=0.33)
    assert len(sigs) == 5
    assert imatch_signatures(kept, 4, 0.33) == sigs
    assert imatch_signatures([], 4, 0.33) == ()


def test_imatch_randomized_lexicons_survive_one_removed_term():
    """A lexicon that leaves the removed term out keeps its signature (about a third of them)."""
    terms = sorted(VOCAB[:60])
    a, b = imatch_signatures(terms, 10, 0.33), imatch_signatures(terms[1:], 10, 0.33)
    assert a[0] != b[0]
    assert 1 <= sum(x == y for x, y in zip(a[1:], b[1:], strict=True)) <= 9


def test_imatch_without_stats_leaves_out_function_words():
    assert lexicon_terms(["the", "harbour", "is", "open"], None, 0.2, 0.95, ANTECEDENTS["en"]) == [
        "harbour",
        "open",
    ]


def test_ksentence_is_order_free_and_takes_the_longest():
    s1, s2, s3, short = ["a", "b", "c", "d", "e"], ["f", "g", "h", "i"], ["j", "k", "l"], ["z"]
    assert ksentence_hash([s1, s2, s3], 2) == ksentence_hash([short, s2, s1], 2)
    assert ksentence_hash([s1, s2, s3], 2) != ksentence_hash([s1, s3], 2)
    assert ksentence_hash([], 3) is None


def test_exact_hashes():
    assert exact_hash(["a", "b"]) == exact_hash(["a", "b"]) != exact_hash(["a", "b", "c"])
    assert exact_hash(["ab"]) != exact_hash(["a", "b"])
    assert 0 <= exact_hash(["a"]) < 2**128
    assert raw_hash(b"<p>x</p>") == raw_hash("<p>x</p>")
