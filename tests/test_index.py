from __future__ import annotations

import collections
import itertools
import os
import random
import sqlite3
import sys
import time
import uuid
from pathlib import Path

import forked
import numpy as np
import pytest
from detectors import admit, sqlite_detector
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from race import clean_processes

from scrapy_neardup import DedupConfig, fingerprint
from scrapy_neardup import detector as detector_module
from scrapy_neardup.config import METHODS
from scrapy_neardup.decision import SURE_SIMILARITY, sure
from scrapy_neardup.detector import Detector
from scrapy_neardup.exceptions import IndexFileError
from scrapy_neardup.fingerprint import Fingerprint, needed_methods
from scrapy_neardup.index import (
    MemoryIndex,
    SQLiteIndex,
    codecs,
    lookup_keys,
    schema,
    spot_search,
)
from scrapy_neardup.index.engines.sqlite import file as sqlite_file
from scrapy_neardup.index.engines.sqlite import spots as sqlite_spots
from scrapy_neardup.index.pruning import (
    SpotClasses,
    overlap_needed,
    partition_bounds,
    partition_of,
    partitions_covering,
    prefix,
    probe_reach,
    walk,
)
from scrapy_neardup.methods import SIMHASH, decision_order, simhash_keys, with_stats
from scrapy_neardup.scope import scope_key
from scrapy_neardup.signatures.imatch import CollectionStats
from scrapy_neardup.signatures.similarity import multiset_jaccard
from scrapy_neardup.signatures.spotsigs import SpotSet
from scrapy_neardup.text import main_text
from scrapy_neardup.verify import compare

FUNCTION = ["the", "a", "an", "is", "was", "are", "were", "has", "have", "had", "can", "will", "would", "do"]
CONTENT = [f"word{i}" for i in range(60)]


def brute_force(config: DedupConfig, pages: list[tuple[str, str]]) -> list[tuple[bool, int | None]]:
    """Expected verdicts: the Detector over the in-memory index, where every admitted page of a
    scope is a candidate of every page (``test_memory_index_is_the_pairwise_check``)."""
    with Detector(config, MemoryIndex(config)) as detector:
        return [(v.duplicate, v.duplicate_of) for v in (detector.check(url, text) for url, text in pages)]


def pairwise(config: DedupConfig, pages: list[tuple[str, str]]) -> list[tuple[bool, int | None]]:
    """Each page against every admitted earlier page of its scope, pair by pair, by hand."""
    admitted: list[tuple[int, str, object]] = []
    expected = []
    term_df: collections.Counter[str] = collections.Counter()  # I-Match idf: the admitted pages'
    for doc_id, (url, text) in enumerate(pages, start=1):
        fp = fingerprint(text, config)
        if not fp.judged:
            expected.append((False, None))
            continue
        if "imatch" in config.methods:
            fp = with_stats(fp, config, CollectionStats(len(admitted), term_df))
        scope = scope_key(url, config.scope)
        best = None
        for other_id, other_scope, other in admitted:
            if other_scope != scope:
                continue
            result = compare(fp, other, config, index_methods(config))
            if result.duplicate:
                rank = (decision_order().index(result.method), -(result.similarity or 0.0), other_id, result)
                best = min(best, rank, key=lambda r: r[:3]) if best else rank
        # A match not sure enough to drop is let through: admitted like a page of no match.
        if best is None or not sure(best[3].method, best[3].similarity, best[3].weak, SURE_SIMILARITY):
            admitted.append((doc_id, scope, fp))
            term_df.update(fp.terms)
        expected.append((best is not None, best[2] if best else None))
    return expected


def index_methods(config: DedupConfig) -> tuple[str, ...]:
    needed = needed_methods(config)
    return tuple(m for m in decision_order() if m in needed)


def run_index(path: Path, config: DedupConfig, pages: list[tuple[str, str]]) -> list[tuple[bool, int | None]]:
    with sqlite_detector(path, config) as detector:
        return [(v.duplicate, v.duplicate_of) for v in (detector.check(url, text) for url, text in pages)]


def edited_corpus(aeb_pages: dict, size: int, copies: int, every: int, seed: int) -> list[tuple[str, str]]:
    """``size`` real pages on a.example, then edited copies of the first ``copies`` on b.example.

    One word in ``every`` is replaced, so only SpotSigs can find the copies.
    """
    rng = random.Random(seed)
    plain = DedupConfig(extractor="plain")
    texts = [fingerprint(body, plain).text for body in list(aeb_pages.values())[:size]]
    pages = [(f"http://a.example/{i}", text) for i, text in enumerate(texts)]
    for i, text in enumerate(texts[:copies]):
        words = text.split()
        for _ in range(len(words) // every):
            words[rng.randrange(len(words))] = "edited"
        pages.append((f"http://b.example/{i}", " ".join(words)))
    return pages


@st.composite
def corpora(draw):
    """Documents over a small vocabulary, many of them edited copies of earlier ones."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    docs: list[list[str]] = []
    pages = []
    for _ in range(draw(st.integers(2, 14))):
        if docs and rng.random() < 0.6:
            words = list(rng.choice(docs))
            for _ in range(int(len(words) * rng.choice([0.0, 0.02, 0.05, 0.1, 0.3]))):
                words[rng.randrange(len(words))] = rng.choice(CONTENT + FUNCTION)
            if rng.random() < 0.3:
                words = words[: int(len(words) * rng.uniform(0.6, 1.0))]
        else:
            words = [
                rng.choice(FUNCTION if rng.random() < 0.35 else CONTENT) for _ in range(rng.randint(20, 160))
            ]
        docs.append(words)
        pages.append((f"http://h{rng.randint(0, 2)}.example/{len(pages)}", " ".join(words)))
    return pages


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpora(),
    st.sampled_from([("spotsigs",), ("exact", "spotsigs", "simhash"), METHODS, ("minhash", "shingles")]),
    st.sampled_from([0.3, 0.5, 0.7, 0.9]),
    st.sampled_from(["global", "host"]),
    st.sampled_from(["blocks", "permuted"]),
    st.sampled_from([-1, 16, 32]),
    st.sampled_from([0.0, 0.3, 0.6]),
    st.sampled_from([150, 8]),
)
def test_index_finds_exactly_what_brute_force_finds(
    tmp_path_factory, monkeypatch, pages, methods, tau, scope, tables, few, confirm, large
):
    """``large`` 8: pages from 8 spots on are posted for 6 shared spots, smaller ones for 3."""
    config = DedupConfig(
        extractor="text", min_tokens=5, methods=methods, spotsigs_threshold=tau, scope=scope,
        minhash_threshold=tau, simhash_distance=6, simhash_tables=tables, spotsigs_few_spots_bits=few,
        simhash_confirm=confirm,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("idx") / "index.db"
    with monkeypatch.context() as patch:
        patch.setattr(spot_search, "LARGE_PAGE_SPOTS", large)
        assert run_index(path, config, pages) == brute_force(config, pages)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpora(),
    st.sampled_from([("spotsigs",), ("exact", "spotsigs", "simhash"), METHODS, ("minhash", "shingles")]),
    st.sampled_from([0.3, 0.5, 0.9]),
    st.sampled_from(["global", "host"]),
)
def test_memory_index_is_the_pairwise_check(pages, methods, tau, scope):
    """The oracle of the other tests: the in-memory index finds what a pair-by-pair check finds."""
    config = DedupConfig(
        extractor="text", min_tokens=5, methods=methods, spotsigs_threshold=tau, scope=scope,
        minhash_threshold=tau, simhash_distance=6,
    )  # fmt: skip
    distinct = list(dict((text, (url, text)) for url, text in pages).values())  # no raw copies: by hand
    assert brute_force(config, distinct) == pairwise(config, distinct)


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpora(),
    st.sampled_from([("spotsigs",), ("exact", "spotsigs", "simhash"), METHODS, ("minhash", "shingles")]),
    st.sampled_from([0.3, 0.5, 0.9]),
    st.sampled_from(["global", "host"]),
)
@pytest.mark.parametrize("engine", ["toy", "sqlite"])
def test_an_engine_under_the_ledger_gives_the_oracle_s_verdicts(
    tmp_path_factory, engine, pages, methods, tau, scope
):
    """tests/toy_index.py (a dict in a JSON file, under 200 lines) and the SQLite engine, under
    the ledger written once."""
    from toy_index import ToyIndex

    config = DedupConfig(
        extractor="text", min_tokens=5, methods=methods, spotsigs_threshold=tau, scope=scope,
        minhash_threshold=tau, simhash_distance=6,
    )  # fmt: skip
    path = tmp_path_factory.mktemp(engine) / "index"
    with Detector(config, (ToyIndex if engine == "toy" else SQLiteIndex)(path, config)) as detector:
        found = [(v.duplicate, v.duplicate_of) for v in (detector.check(url, text) for url, text in pages)]
    assert found == brute_force(config, pages)


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpora(),
    st.sampled_from([("spotsigs",), ("exact", "spotsigs", "simhash"), METHODS, ("minhash", "shingles")]),
    st.sampled_from([0.3, 0.5, 0.9]),
    st.sampled_from(["global", "host"]),
    st.sampled_from([150, 8]),
)
@pytest.mark.parametrize("server", ["redis", "postgres"])
def test_a_server_index_finds_exactly_what_brute_force_finds(
    request, server, monkeypatch, pages, methods, tau, scope, large
):
    from scrapy_neardup.index.engines.postgres import PostgresIndex
    from scrapy_neardup.index.engines.redis import RedisIndex

    config = DedupConfig(
        extractor="text", min_tokens=5, methods=methods, spotsigs_threshold=tau, scope=scope,
        minhash_threshold=tau, simhash_distance=6,
    )  # fmt: skip
    with monkeypatch.context() as patch:
        patch.setattr(spot_search, "LARGE_PAGE_SPOTS", large)
        url = request.getfixturevalue(f"{server}_url")
        opened = RedisIndex if server == "redis" else PostgresIndex
        index = opened(url, config, prefix=f"prop_{uuid.uuid4().hex}")
        try:
            with Detector(config, index) as detector:
                found = [(v.duplicate, v.duplicate_of) for v in (detector.check(u, t) for u, t in pages)]
        finally:
            index.remove()
    assert found == brute_force(config, pages)


@pytest.mark.slow
def test_real_pages_index_equals_brute_force(tmp_path, aeb_pages):
    config = DedupConfig(methods=METHODS, extractor="plain", spotsigs_threshold=0.4)
    rng = random.Random(11)
    pages = []
    for i, body in enumerate(list(aeb_pages.values())[:25]):
        text = fingerprint(body, config).text
        pages.append((f"http://site{i % 3}.example/{i}", text))
        words = text.split()
        for _ in range(len(words) // 20):
            words[rng.randrange(len(words))] = "edited"
        pages.append((f"http://copy.example/{i}", " ".join(words)))
    text_config = DedupConfig(methods=METHODS, extractor="text", spotsigs_threshold=0.4)
    found = run_index(tmp_path / "real.db", text_config, pages)
    assert found == brute_force(text_config, pages)
    assert sum(dup for dup, _ in found) >= 20


def test_imatch_takes_idf_from_the_index(tmp_path, aeb_pages):
    """I-Match's idf band comes from the index's own document frequencies of admitted pages."""
    config = DedupConfig(methods=("imatch",), extractor="plain", imatch_idf_low=0.05, imatch_idf_high=0.9)
    bodies = list(aeb_pages.values())[:30]
    with sqlite_detector(tmp_path / "imatch.db", config) as detector:
        verdicts = [detector.check(f"http://a.example/{i}", body) for i, body in enumerate(bodies)]
        copy = detector.check("http://b.example/copy", bodies[7])
        db = detector.index.db
        n = int(db.execute("SELECT value FROM meta WHERE key = 'term_docs'").fetchone()[0])
        the_df = dict(db.execute("SELECT term, df FROM term_df WHERE term IN ('the', 'and')").fetchall())
        stored = db.execute("SELECT imatch FROM documents WHERE id = ?", (verdicts[-1].doc_id,)).fetchone()[0]
    assert n == sum(not v.duplicate for v in verdicts if v.judged) and the_df["the"] >= n // 2
    # The last page's signatures are the ones its idf band gave with the counts before it.
    fps = [fingerprint(body, config) for body in bodies]
    admitted = [fp for fp, v in zip(fps, verdicts, strict=True) if not v.duplicate]
    df = collections.Counter(t for fp in admitted for t in fp.terms)
    df.subtract(fps[-1].terms)
    expected = with_stats(fps[-1], config, CollectionStats(n - 1, +df))
    assert stored == np.asarray(expected.imatch, dtype="<u8").tobytes()
    assert copy.duplicate


@pytest.mark.parametrize(
    "methods, bucket_bits", [(("spotsigs",), 20), (("exact", "spotsigs", "simhash"), 20), (("spotsigs",), 4)]
)
def test_frozen_rarest_first_order_stays_exact(tmp_path, aeb_pages, monkeypatch, methods, bucket_bits):
    """The spot order switches to frequency classes mid-run, and rare spots to shared lists (with
    4 bucket bits, 16 lists a partition for all of them); answers still equal brute force."""
    monkeypatch.setattr(sqlite_spots, "FREEZE_AT", 40)
    monkeypatch.setattr(spot_search, "RARE_BUCKET_BITS", bucket_bits)
    rng = random.Random(5)
    pages = []
    for i, body in enumerate(list(aeb_pages.values())[:90]):
        text = fingerprint(body, DedupConfig(extractor="plain")).text
        pages.append((f"http://site{i % 2}.example/{i}", text))
        if i % 3 == 0:
            words = text.split()
            for _ in range(len(words) // 15):
                words[rng.randrange(len(words))] = "edited"
            pages.append((f"http://copy.example/{i}", " ".join(words[: int(len(words) * 0.9)])))
    config = DedupConfig(methods=methods, extractor="text", spotsigs_threshold=0.45)
    found = run_index(tmp_path / "frozen.db", config, pages)
    assert found == brute_force(config, pages)
    assert sum(dup for dup, _ in found) >= 25
    with sqlite3.connect(tmp_path / "frozen.db") as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'spot_order'").fetchone() == ("classes",)
        frequent = {spot for (spot,) in db.execute("SELECT spot FROM spot_classes")}
    assert frequent
    heads = {(key >> 12) & 0xFFFFFFFF for key in posting_lists(tmp_path / "frozen.db")}
    rare = heads - frequent
    assert len(rare) > 10 and all(head % (1 << (32 - bucket_bits)) == 0 for head in rare)
    if bucket_bits == 4:
        assert len(rare) <= 16
    # A process opening the file later reads the same frozen order and the same answers.
    with sqlite_detector(tmp_path / "frozen.db", config) as detector:
        verdict = detector.check("http://late.example/", fp=fingerprint(pages[1][1], config))
        assert verdict.duplicate and detector.index.spots.classes is not None


@pytest.mark.parametrize("bucket_bits", [20, 4])
def test_redis_frozen_order_stays_exact(redis_url, aeb_pages, monkeypatch, bucket_bits):
    """Redis freezes the spot order in a transaction of its own, re-posting the admitted pages."""
    from scrapy_neardup.index.engines.redis import index as redis_index
    from scrapy_neardup.index.engines.redis import spots as redis_spots

    monkeypatch.setattr(redis_spots, "FREEZE_AT", 40)
    monkeypatch.setattr(spot_search, "RARE_BUCKET_BITS", bucket_bits)
    pages = edited_corpus(aeb_pages, 60, copies=30, every=15, seed=4)
    config = DedupConfig(methods=("exact", "spotsigs", "simhash"), extractor="text", spotsigs_threshold=0.45)
    index = redis_index.RedisIndex(redis_url, config, prefix=f"frozen:{uuid.uuid4().hex}")
    try:
        with Detector(config, index) as detector:
            found = [(v.duplicate, v.duplicate_of) for v in (detector.check(u, t) for u, t in pages)]
            assert (
                index.engine.classes is not None and index.r.hget(index.k("meta"), "spot_order") == b"classes"
            )
    finally:
        index.remove()
    assert found == brute_force(config, pages)
    assert sum(dup for dup, _ in found) >= 20


def test_pages_added_unchecked_to_a_frozen_file_are_found(tmp_path, aeb_pages, monkeypatch):
    """``add`` posts in the file's frozen spot order, even as the first call of a new process."""
    monkeypatch.setattr(sqlite_spots, "FREEZE_AT", 20)
    pages = edited_corpus(aeb_pages, 40, copies=20, every=15, seed=6)
    config = DedupConfig(methods=("spotsigs",), extractor="text")
    path, checked = tmp_path / "frozen.db", tmp_path / "checked.db"
    assert not any(dup for dup, _ in run_index(checked, config, pages[:40]))
    run_index(path, config, pages[:20])  # the 20th check freezes the order
    with sqlite_detector(path, config) as detector:
        for i, (url, text) in enumerate(pages[20:40], start=21):
            assert admit(detector, url, fingerprint(text, config)).doc_id == i
    assert posting_lists(path) == posting_lists(checked)
    found = run_index(path, config, pages[40:])
    assert found == brute_force(config, pages)[40:]
    assert sum(dup for dup, _ in found) >= 15


def _spot_set(counts: dict[int, int]) -> SpotSet:
    keys = sorted(counts)
    return SpotSet(np.array(keys, dtype=np.uint64), np.array([counts[k] for k in keys], dtype=np.uint32))


@settings(max_examples=300)
@given(
    st.dictionaries(st.integers(1, 40), st.integers(1, 6), min_size=1, max_size=30),
    st.dictionaries(st.integers(1, 40), st.integers(1, 6), min_size=1, max_size=30),
    st.sampled_from([0.2, 0.3, 0.5, 0.8]),
    st.integers(1, 3),
    st.booleans(),
    st.lists(st.integers(1, 7), min_size=20, max_size=20),
)
def test_extended_prefixes_share_the_spots_the_count_filter_asks_for(a, b, tau, most, ranked, asked):
    """Any pair at Jaccard >= tau shares ``overlap_needed`` spots in the probe's and the stored prefix.

    ``asked``: what the probe asks of its other partitions, which may differ (large pages).
    """
    spots_a, spots_b = _spot_set(a), _spot_set(b)
    if multiset_jaccard(spots_a, spots_b) < tau:
        return
    # Heavy counts make few shared spots enough: then fewer are asked for.
    classes = SpotClasses(np.arange(1, 41, dtype=np.uint64), np.arange(40) % 3) if ranked else None
    walk_a, walk_b = walk(spots_a, classes), walk(spots_b, classes)
    need = overlap_needed(walk_a, tau, most)
    probe = set(prefix(walk_a, tau, need).tolist())
    stored = set(prefix(walk_b, tau, most).tolist())
    assert len(probe & stored) >= need
    # The probe reads a spot only up to the partition it reaches: B's partition is among them.
    parts, part_b = partitions_covering(spots_a.size, tau), partition_of(spots_b.size, tau)
    assert part_b in parts
    needs = [need if p == part_b else overlap_needed(walk_a, tau, asked[i]) for i, p in enumerate(parts)]
    for overlap in (need, needs):
        rare, reach = probe_reach(walk_a, tau, overlap, parts)
        assert set(rare.tolist()) <= set(prefix(walk_a, tau, max(needs)).tolist())
        read = {s for s, last in zip(rare.tolist(), reach.tolist(), strict=True) if last >= part_b}
        assert len(read & stored) >= need


@st.composite
def spot_corpora(draw) -> list[dict[int, int]]:
    """Spot multisets of 2 to 40 spots over a small universe, most of them reshaped copies."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    sets: list[dict[int, int]] = []
    for _ in range(draw(st.integers(2, 25))):
        if sets and rng.random() < 0.7:
            counts = {k: v for k, v in rng.choice(sets).items() if rng.random() > 0.3}
            for _ in range(rng.randint(0, 15)):
                spot = rng.randint(1, 80)
                counts[spot] = counts.get(spot, 0) + 1
        else:
            counts = {rng.randint(1, 80): rng.randint(1, 2) for _ in range(rng.randint(2, 40))}
        if counts:
            sets.append(counts)
    return sets


@pytest.mark.slow
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spot_corpora(), st.sampled_from([0.2, 0.3, 0.5]), st.sampled_from([4, 10, 20]), st.booleans())
def test_larger_pages_asking_more_shared_spots_find_what_brute_force_finds(
    tmp_path_factory, monkeypatch, sets, tau, large, frozen
):
    """Pages from ``large`` spots on are posted for 6 shared spots, smaller ones for 3: pairs
    across that size, with and without frozen spot classes, are all still found."""
    config = DedupConfig(
        methods=("spotsigs",), extractor="text", spotsigs_threshold=tau, spotsigs_min_spots=1
    )
    spot_sets = [_high_spot_set(counts) for counts in sets]
    path = tmp_path_factory.mktemp("idx") / "index.db"
    with monkeypatch.context() as patch:
        patch.setattr(spot_search, "LARGE_PAGE_SPOTS", large)
        patch.setattr(sqlite_spots, "FREEZE_AT", 3 if frozen else 5000)
        assert _spot_verdicts(SQLiteIndex(path, config), config, spot_sets) == _brute_verdicts(spot_sets, tau)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spot_corpora(), st.sampled_from([0.2, 0.3, 0.5]), st.sampled_from([4, 10, 20]), st.booleans())
def test_postgres_counts_a_large_page_by_its_own_partition_and_finds_what_brute_force_finds(
    postgres_url, monkeypatch, sets, tau, large, frozen
):
    """PostgreSQL's lists mix partitions (``packing``): counted partition by partition, pairs
    across the large-page size are all still found."""
    from scrapy_neardup.index.engines.postgres import PostgresIndex
    from scrapy_neardup.index.engines.postgres import search as postgres_search

    config = DedupConfig(
        methods=("spotsigs",), extractor="text", spotsigs_threshold=tau, spotsigs_min_spots=1
    )
    spot_sets = [_high_spot_set(counts) for counts in sets]
    with monkeypatch.context() as patch:
        patch.setattr(spot_search, "LARGE_PAGE_SPOTS", large)
        patch.setattr(postgres_search, "FREEZE_AT", 3 if frozen else 5000)
        index = PostgresIndex(postgres_url, config, prefix=f"large_{uuid.uuid4().hex}")
        try:
            assert _spot_verdicts(index, config, spot_sets) == _brute_verdicts(spot_sets, tau)
        finally:
            index.remove()


def _high_spot_set(counts: dict[int, int]) -> SpotSet:
    """Spots in the top 32 bits, where a spot's key takes them from."""
    keys = sorted(counts)
    return SpotSet(np.array(keys, dtype=np.uint64) << np.uint64(32), np.array([counts[k] for k in keys]))


def _brute_verdicts(spot_sets: list[SpotSet], tau: float) -> list[int | None]:
    """Each page's original: the earliest most similar admitted page at ``tau`` or above."""
    expected: list[int | None] = []
    for i, spots in enumerate(spot_sets):
        similar = [(multiset_jaccard(spots, spot_sets[j]), -j) for j in range(i) if expected[j] is None]
        best = max(similar, default=(0.0, 0))
        expected.append(1 - best[1] if best[0] >= tau - 1e-9 else None)
    return expected


def _spot_verdicts(index, config: DedupConfig, spot_sets: list[SpotSet]) -> list[int | None]:
    # A bar of 0: every match is recorded a duplicate, as the brute force has it.
    with Detector(config, index, drop_above=0.0) as detector:
        fps = [Fingerprint(token_count=50, spots=spots) for spots in spot_sets]
        found = [detector.check(f"http://a.example/{i}", fp=fp) for i, fp in enumerate(fps)]
    return [verdict.duplicate_of for verdict in found]


@given(st.lists(st.integers(0, 40), max_size=300), st.integers(0, 6), st.sampled_from([None, 1, 2, 5, 12]))
def test_a_hashed_count_keeps_every_id_that_occurs_often_enough(ids, need, bits):
    """Ids sharing a slot of the count's table only add to its count: every id that occurs
    ``need`` times is kept with each of its occurrences, at any table size (one or two bits: all
    ids collide), and the count of lists finds exactly those."""
    array = np.array(ids, dtype="<u4")
    often = sorted(i for i, n in collections.Counter(ids).items() if n >= need)
    kept = array[spot_search.may_be_often(array, need, bits)].tolist()
    assert all(kept.count(i) == ids.count(i) for i in often)
    rows = [(array[k : k + 7].tobytes(),) for k in range(0, len(array), 7)]
    assert spot_search.counted(rows, need) == often


def test_count_filter_cuts_chance_candidates():
    """Pages sharing one rare spot by chance are not read; a copy sharing many is."""
    spots = _spot_set({k: 1 for k in range(100)})
    assert overlap_needed(walk(spots), 0.3, 2) == 2
    heavy = _spot_set({1: 40, 2: 1, 3: 1})  # one spot holds most of the mass: one shared may do
    assert overlap_needed(walk(heavy), 0.3, 2) == 1


def posting_lists(path: Path) -> dict[int, list[int]]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT key, docs FROM spot_lists").fetchall()
    return {key: np.frombuffer(docs, "<u4").tolist() for key, docs in rows}


def test_pages_with_more_spot_keys_than_one_query_binds(tmp_path, aeb_pages):
    """Key ranges beyond SQLite's variable limit are queried in chunks whose counts add up."""
    pages = edited_corpus(aeb_pages, 25, copies=10, every=10, seed=4)
    config = DedupConfig(methods=("spotsigs",), extractor="text")
    with sqlite_detector(tmp_path / "chunks.db", config) as detector:
        detector.index.spots.max_ranges = 1  # one key range a query: every count is summed
        found = [(v.duplicate, v.duplicate_of) for v in (detector.check(u, t) for u, t in pages)]
    assert found == brute_force(config, pages)
    assert sum(dup for dup, _ in found) >= 8


def test_partitions_follow_the_paper():
    assert partition_bounds(0.5)[:6] == (1, 2, 4, 8, 16, 32)
    assert partition_bounds(0.8)[:6] == (1, 2, 3, 4, 5, 7)
    for tau in (0.3, 0.5, 0.8):
        bounds = partition_bounds(tau)
        for low, high in itertools.pairwise(bounds):
            assert high - low >= (1 - tau) * high - 1e-9
        for size in range(1, 300):
            covering = partitions_covering(size, tau)
            for other in range(1, 1000):
                if tau * size <= other <= size / tau:
                    assert partition_of(other, tau) in covering


def test_reopening_gives_the_same_answers(tmp_path, aeb_pages):
    bodies = list(aeb_pages.values())[:6]
    path = tmp_path / "reopen.db"
    with sqlite_detector(path) as detector:
        for i, body in enumerate(bodies):
            assert not detector.check(f"http://a.example/{i}", body).duplicate
    with sqlite_detector(path) as detector:
        verdict = detector.check("http://b.example/copy", bodies[2])
        assert verdict.duplicate and verdict.duplicate_of_url == "http://a.example/2"
        stats = detector.index.stats()
    assert stats["documents"] == 7 and stats["duplicates"] == 1


def test_every_page_is_recorded_including_skips_and_duplicates(tmp_path, aeb_pages):
    body = next(iter(aeb_pages.values()))
    with sqlite_detector(tmp_path / "all.db") as detector:
        detector.check("http://a.example/1", body)
        detector.check("http://a.example/2", body)
        skipped = detector.check("http://a.example/img", b"\x89PNG\r\n\x1a\n....")
        assert skipped.skip_reason == "binary" and not skipped.duplicate
        records = list(detector.index.documents())
        edges = list(detector.index.match_edges())
    assert [r["status"] for r in records] == ["unique", "duplicate", "skipped"]
    assert edges == [(2, 1, 1.0, "exact")]
    assert records[2]["skip_reason"] == "binary"


def test_titles_and_texts_are_kept_for_the_report(tmp_path, aeb_pages):
    body = next(iter(aeb_pages.values()))
    with sqlite_detector(tmp_path / "t.db", DedupConfig(keep_text=500)) as detector:
        verdict = detector.check("http://a.example/1", body)
        record = detector.index.get(verdict.doc_id)
        text = detector.index.text(verdict.doc_id)
    fp = fingerprint(body, DedupConfig())
    assert record["title"] and record["title"] == fp.title
    assert text == fp.text[:500]
    with sqlite_detector(tmp_path / "none.db", DedupConfig(keep_text=0)) as detector:
        assert detector.index.text(detector.check("http://a.example/1", body).doc_id) is None


def test_scope_domain_uses_registered_domains():
    assert scope_key("https://news.bbc.co.uk/a", "domain") == "bbc.co.uk"
    assert scope_key("https://www.bbc.co.uk/b", "domain") == "bbc.co.uk"
    assert scope_key("https://news.bbc.co.uk/a", "host") == "news.bbc.co.uk"
    assert scope_key("https://news.bbc.co.uk/a", "global") == ""


def test_files_that_are_not_indexes_fail_clearly(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(IndexFileError, match=r"garbage\.db"):
        SQLiteIndex(garbage, DedupConfig())
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(IndexFileError, match="not a scrapy-neardup index"):
        SQLiteIndex(other, DedupConfig())
    newer = tmp_path / "newer.db"
    SQLiteIndex(newer, DedupConfig()).close()
    con = sqlite3.connect(newer)
    con.execute("PRAGMA user_version = 99")
    con.close()
    with pytest.raises(IndexFileError, match="schema version 99"):
        SQLiteIndex(newer, DedupConfig())


def test_changed_threshold_is_refused_with_the_setting_name(tmp_path):
    SQLiteIndex(tmp_path / "i.db", DedupConfig()).close()
    with pytest.raises(IndexFileError, match="NEARDUP_SPOTSIGS_THRESHOLD"):
        SQLiteIndex(tmp_path / "i.db", DedupConfig(spotsigs_threshold=0.7))
    said = r"not 0\.6 \(NEARDUP_PRESET = 'strict' sets it\).*NEARDUP_RESET"
    with pytest.raises(IndexFileError, match=said):
        SQLiteIndex(tmp_path / "i.db", DedupConfig(preset="strict"))


def test_unwritable_location_fails_clearly(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(IndexFileError, match="cannot"):
        SQLiteIndex(blocker / "sub" / "i.db", DedupConfig())


def _checker(path: str, texts: list[str], out) -> None:
    config = DedupConfig(extractor="text")
    with sqlite_detector(path, config) as detector:
        out.put(
            [detector.check(f"http://p{os.getpid()}.example/{i}", t).duplicate for i, t in enumerate(texts)]
        )


def test_two_processes_sharing_a_file_admit_each_page_once(tmp_path, aeb_truth):
    texts = [v["articleBody"] for v in list(aeb_truth.values())[:30]]
    path = str(tmp_path / "shared.db")
    SQLiteIndex(path, DedupConfig(extractor="text")).close()
    ctx = clean_processes()
    out = ctx.Queue()
    procs = [ctx.Process(target=_checker, args=(path, texts, out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    admitted = [sum(not dup for dup in r) for r in results]
    distinct = len({" ".join(t.split()) for t in texts})
    assert sum(admitted) == distinct
    with SQLiteIndex(path, DedupConfig(extractor="text")) as index:
        assert index.stats()["unique"] == distinct and index.stats()["documents"] == 2 * len(texts)


KILL_SCRIPT = """
import sys, os
from scrapy_neardup import DedupConfig, fingerprint
from scrapy_neardup.detector import Detector
from scrapy_neardup.index import MemoryIndex, SQLiteIndex
config = DedupConfig(extractor="text", min_tokens=5)
index = SQLiteIndex(sys.argv[1], config)
detector = Detector(config, index)
for i in range(20):
    detector.check(f"http://c.example/{i}", fp=fingerprint(f"the committed page {i} " * 20, config))
with index.batch():
    for i in range(20):
        detector.check(f"http://b.example/{i}", fp=fingerprint(f"the batched page {i} " * 20, config))
    os._exit(9)  # killed in the middle of a batch
"""


def test_killed_process_leaves_a_valid_index_with_committed_pages(tmp_path):
    path = tmp_path / "killed.db"
    proc = forked.run([sys.executable, "-c", KILL_SCRIPT, str(path)], capture_output=True)
    assert proc.returncode == 9
    with SQLiteIndex(path, DedupConfig(extractor="text", min_tokens=5)) as index:
        assert index.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        urls = [r["url"] for r in index.documents()]
    assert urls == [f"http://c.example/{i}" for i in range(20)]


def test_wal_is_copied_back_beside_the_checks_and_the_thread_stops_on_close(tmp_path):
    """The writer checkpoints itself only at WAL_AUTOCHECKPOINT pages; the background thread sooner."""
    path = tmp_path / "wal.db"
    config = DedupConfig(extractor="text", min_tokens=5)
    index = SQLiteIndex(path, config)
    for i in range(30):
        Detector(config, index).check(
            f"http://w.example/{i}", fp=fingerprint(f"page {i} of the wal test " * 30, config)
        )
    pages = index.db.execute("PRAGMA page_count").fetchone()[0]
    assert pages < sqlite_file.WAL_AUTOCHECKPOINT
    deadline = time.monotonic() + 20
    while path.stat().st_size < pages * schema.PAGE_SIZE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.stat().st_size >= pages * schema.PAGE_SIZE  # every page is in the file itself
    thread = index.file._checkpointer._thread
    assert thread.is_alive()
    index.close()
    assert not thread.is_alive()
    assert not Path(f"{path}-wal").exists()  # the last connection closed checkpoints and removes it


def test_an_index_without_a_wal_starts_no_checkpoint_thread():
    config = DedupConfig(extractor="text", min_tokens=5)
    with SQLiteIndex(":memory:", config) as index:
        Detector(config, index).check(
            "http://m.example/", fp=fingerprint("the one page in memory " * 20, config)
        )
        assert index.db.execute("PRAGMA journal_mode").fetchone()[0] == "memory"
        assert index.file._checkpointer._thread is None  # none made, none started


def test_byte_identical_copies_skip_extraction(tmp_path, aeb_pages, monkeypatch):
    bodies = list(aeb_pages.values())[:2]
    with sqlite_detector(tmp_path / "raw.db") as detector:
        first = detector.check("http://a.example/1", bodies[0])
        detector.check("http://a.example/2", bodies[1])

        def no_extraction(*args, **kwargs):
            raise AssertionError("an identical body was extracted again")

        with monkeypatch.context() as patch:
            patch.setattr(detector_module, "fingerprint", no_extraction)
            copy = detector.check("http://mirror.example/1?utm_source=x", bodies[0])
        assert copy.duplicate and copy.duplicate_of == first.doc_id and copy.method == "exact"
        record = detector.index.get(copy.doc_id)
        assert record["tokens"] == detector.index.get(first.doc_id)["tokens"] > 0
        assert record["title"] == detector.index.get(first.doc_id)["title"]
        # In another scope the same body is judged afresh (and admitted there).
    config = DedupConfig(scope="host")
    with sqlite_detector(tmp_path / "host.db", config) as detector:
        detector.check("http://a.example/1", bodies[0])
        assert not detector.check("http://b.example/1", bodies[0]).duplicate


def test_copies_of_a_text_are_found_before_the_spot_search(tmp_path, aeb_pages, monkeypatch):
    """An exact copy outranks every other match, so its page is judged without a spot search,
    and the copy it names is the oldest one, as when every candidate is compared."""
    texts = [main_text(body) for body in list(aeb_pages.values())[:2]]
    near = texts[0].replace(".", ". Indeed,", 3)
    with sqlite_detector(tmp_path / "copies.db", DedupConfig(extractor="text")) as detector:
        # Admitted unchecked: a near-duplicate older than the text, then the text, twice.
        near_id, first_id, _ = (
            admit(detector, url, fingerprint(text, detector.config)).doc_id
            for url, text in [("http://a.example/near", near), ("http://a.example/1", texts[0]),
                              ("http://a.example/2", texts[0])]
        )  # fmt: skip
        assert near_id < first_id
        searched = []
        spot_candidates = sqlite_spots.SpotLists.candidates
        monkeypatch.setattr(
            sqlite_spots.SpotLists, "candidates", lambda *a: searched.append(1) or spot_candidates(*a)
        )
        copy = detector.check("http://b.example/copy", texts[0] + "\n")  # not byte-identical
        assert (copy.duplicate_of, copy.method, searched) == (first_id, "exact", [])
        assert not detector.check("http://b.example/other", texts[1]).duplicate and searched == [1]


def _open_and_check(path: str, text: str, barrier, results) -> None:
    barrier.wait()  # every process creates the same new file at the same moment
    try:
        config = DedupConfig(extractor="text", min_tokens=5)
        with SQLiteIndex(path, config) as index:
            url = f"http://same.example/{os.getpid()}"  # one page, copied: no revisit of another's
            verdict = Detector(config, index).check(url, fp=fingerprint(text, config))
            results.put(verdict.duplicate)
    except Exception as exc:  # reported to the parent, which fails the test with it
        results.put(repr(exc))


@pytest.mark.slow(15)
def test_processes_creating_one_new_index_at_once(tmp_path):
    # Not forked from here: a child would inherit SQLite's locks as this process's threads held
    # them (the checkpoints of indexes earlier tests left open), and may wait on one forever.
    ctx = clean_processes()
    text = " ".join(f"the word{i} is here and the other{i} was there" for i in range(30))
    for round_ in range(5):
        path = str(tmp_path / f"new-{round_}.db")
        barrier, results = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_open_and_check, args=(path, text, barrier, results)) for _ in range(4)]
        for proc in procs:
            proc.start()
        outcomes = [results.get(timeout=60) for _ in procs]
        for proc in procs:
            proc.join()
        assert sorted(map(str, outcomes)) == ["False", "True", "True", "True"]


def test_pages_with_few_spots_are_found_with_a_simhash_witness(tmp_path):
    # 3 spots a page: under min_spots, so only the SimHash witness lets SpotSigs decide.
    text = "the harbour opened on monday after repairs lasting months while crews watched"
    copy = text.replace("monday", "tuesday")
    other = "a storm closed every road near the coast and schools sent children home early today"
    pages = [("http://a.example/1", text), ("http://b.example/2", other), ("http://c.example/3", copy)]
    config = DedupConfig(extractor="text", methods=("spotsigs",), min_tokens=5)
    fps = [fingerprint(t, config) for _, t in pages]
    assert all(0 < fp.spots.size < config.spotsigs_min_spots for fp in fps)
    assert fps[0].simhash is not None  # computed for the witness although simhash is not a method
    found = run_index(tmp_path / "few.db", config, pages)
    assert found == brute_force(config, pages)
    assert found[2] == (True, 1)
    hard_cut = DedupConfig(extractor="text", methods=("spotsigs",), min_tokens=5, spotsigs_few_spots_bits=-1)
    assert run_index(tmp_path / "cut.db", hard_cut, pages)[2] == (False, None)


@pytest.mark.parametrize("tau, confirm", [(0.3, 0.3), (0.9, 0.3), (0.9, 0.0)])
def test_simhash_blocks_are_probed_only_where_the_spot_search_can_miss_a_simhash_match(
    tmp_path, aeb_pages, tau, confirm
):
    """A SimHash match needs SpotSigs >= confirm: from confirm >= tau on, the spot search finds it."""
    pages = edited_corpus(aeb_pages, size=30, copies=30, every=40, seed=5)
    config = DedupConfig(
        extractor="text", methods=("exact", "spotsigs", "simhash"), spotsigs_threshold=tau,
        simhash_distance=6, simhash_confirm=confirm,
    )  # fmt: skip
    found = run_index(tmp_path / "i.db", config, pages)
    assert found == brute_force(config, pages)
    with SQLiteIndex(tmp_path / "i.db", config) as index:
        methods = {r["method"] for r in index.documents() if r["duplicate_of"]}
        fp, scope = fingerprint(pages[0][1], config), index._scope_id("")
        blocks = {
            lookup_keys.key(SIMHASH.kind, scope, table, bits) for table, bits in simhash_keys(fp.simhash, 6)
        }
        posted = lookup_keys.lookup_keys(fp, scope, config, simhash=index.file.stores_simhash, raw=True)
        probed = lookup_keys.lookup_keys(fp, scope, config, simhash=index.engine.search.probe_simhash)
        assert (blocks <= set(posted)) == (confirm < tau)
        assert (blocks <= set(probed)) == (confirm < tau)
        stored = {k for (k,) in index.db.execute("SELECT key FROM lookup_keys")}
        assert bool(blocks & stored) == (confirm < tau)
    # Under tau, SimHash decides copies SpotSigs alone would not match: what the blocks are probed for.
    assert ("simhash" in methods) == (confirm < tau)


def test_a_file_without_simhash_tables_refuses_a_confirm_that_needs_them(tmp_path, aeb_pages):
    """Files made with the default confirm hold no SimHash keys; a file that has them keeps them."""
    pages = edited_corpus(aeb_pages, size=20, copies=20, every=40, seed=6)
    trusting = DedupConfig(extractor="text", simhash_distance=6, simhash_confirm=0.0)
    run_index(tmp_path / "default.db", DedupConfig(extractor="text"), pages[:20])
    refusal = r"default\.db.*NEARDUP_SIMHASH_CONFIRM = 0\.0.*at least 0\.3"
    with pytest.raises(IndexFileError, match=refusal):
        SQLiteIndex(tmp_path / "default.db", DedupConfig(extractor="text", simhash_confirm=0.0))
    with SQLiteIndex.open_existing(tmp_path / "default.db") as index:  # as the report opens it
        assert index.stats()["documents"] == 20
    # Built with the tables; pages added by a config that never probes them still get their keys.
    run_index(tmp_path / "both.db", trusting, pages[:10])
    run_index(tmp_path / "both.db", DedupConfig(extractor="text", simhash_distance=6), pages[10:20])
    assert run_index(tmp_path / "both.db", trusting, pages[20:]) == brute_force(trusting, pages)[20:]
    with SQLiteIndex(tmp_path / "both.db", trusting) as index:
        scope = index._scope_id("")
        stored = {k for (k,) in index.db.execute("SELECT key FROM lookup_keys")}
    for _, text in pages[:20]:
        blocks = simhash_keys(fingerprint(text, trusting).simhash, 6)
        assert {lookup_keys.key(SIMHASH.kind, scope, t, bits) for t, bits in blocks} <= stored


def test_stored_spot_sets_read_back_in_every_form():
    """Spots are stored listed, Elias-Fano coded (form 4) or as they are (form 3, a page of a
    few); pages with many repeats keep counts."""
    rng = np.random.default_rng(7)
    sets = [
        SpotSet(np.sort(rng.choice(2**32, size=n, replace=False)).astype(np.uint64), counts.astype(np.uint32))
        for n, counts in [
            (40, np.ones(40)), (30, np.r_[np.ones(27), 2, 2, 3]), (25, rng.integers(1, 9, 25)),
            (12, np.r_[np.ones(11), 300]), (1, np.ones(1)),
        ]
    ]  # fmt: skip
    overlapping = np.sort(np.r_[sets[0].hashes[:30], rng.choice(2**32, size=20, replace=False)])
    sets.append(
        SpotSet(overlapping.astype(np.uint64), np.ones(50, dtype=np.uint32))
    )  # shares 30 with the first
    blobs = [codecs.spots_blob(s) for s in sets]
    assert [b[0] for b in blobs] == [4, 4, 1, 2, 3, 4]
    for spots, blob in zip(sets, blobs, strict=True):
        assert codecs.sound_spots_blob(blob)
        back = codecs.blob_spots(blob)
        assert back.hashes.tolist() == spots.hashes.tolist() and back.counts.tolist() == spots.counts.tolist()
        width = 2 if spots.counts.max() > 255 else 1  # bytes a count takes in the counted form
        assert len(blob) <= min(1 + (4 + width) * len(spots), 1 + 4 * int(spots.counts.sum()))
    for probe in sets:
        expected = [multiset_jaccard(probe, s) for s in sets]
        assert spot_search.blob_jaccard(probe, blobs) == pytest.approx(expected)
        assert spot_search.blob_jaccard(probe, blobs[::-1]) == pytest.approx(expected[::-1])


def test_document_ids_past_the_posting_lists_range_fail_clearly(tmp_path, aeb_pages, monkeypatch):
    """Posting lists hold uint32 ids: a file past that says so instead of wrapping ids around."""
    monkeypatch.setattr(sqlite_spots, "MAX_DOC", 2)
    texts = [fingerprint(body, DedupConfig(extractor="plain")).text for body in list(aeb_pages.values())[:3]]
    with sqlite_detector(tmp_path / "full.db", DedupConfig(extractor="text")) as detector:
        detector.check("http://a.example/1", texts[0])
        detector.check("http://a.example/2", texts[1])
        with pytest.raises(IndexFileError, match=r"full\.db.*below 2\*\*32"):
            detector.check("http://a.example/3", texts[2])
        assert detector.index.stats()["documents"] == 2  # the failed check left nothing behind
