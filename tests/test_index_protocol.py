"""The storage protocol, the same tests on every backend (``conftest.BACKENDS``).

The Detector decides and an index stores; these tests hold each backend to what the Detector
needs: atomic pages, rollbacks that leave nothing behind, byte-identical copies found before
extraction, I-Match statistics, runs, and the read side the report uses.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BACKENDS, make_index
from detectors import sqlite_detector

from scrapy_neardup import DedupConfig, fingerprint
from scrapy_neardup.decision import SURE_SIMILARITY
from scrapy_neardup.detector import Arrival, Detector
from scrapy_neardup.scope import url_key
from scrapy_neardup.signatures.exact import raw_hash
from scrapy_neardup.url_rule import RuleKey, read_rule

CONFIG = DedupConfig(extractor="text", min_tokens=5)
STORY = " ".join(f"the river survey counted {n} herons near the old mill this spring" for n in range(8))
OTHER = " ".join(f"a concert in the park drew {n} listeners despite the cold wind" for n in range(8))
# Six of STORY's eight sentences, then two others: STORY matches it under the sure bar.
LISTING = " ".join(
    [*(f"the river survey counted {n} herons near the old mill this spring" for n in range(6)),
     *(f"a concert in the park drew {n} listeners despite the cold wind" for n in range(2))]
)  # fmt: skip


class Boom(Exception):
    pass


def test_a_page_that_fails_inside_its_transaction_leaves_nothing(open_detector):
    detector = open_detector(CONFIG)
    first = detector.check("http://a.example/1", STORY)
    with pytest.raises(Boom), detector.index.transaction():
        detector.index.record("http://b.example/2", fingerprint(OTHER, CONFIG), "")
        raise Boom
    assert detector.index.stats() | {"bytes": 0} == {
        "documents": 1, "unique": 1, "duplicates": 0, "skipped": 0, "forgotten": 0, "bytes": 0,
    }  # fmt: skip
    again = detector.check("http://b.example/2", OTHER)
    assert not again.duplicate and again.doc_id > first.doc_id
    if open_detector.backend not in ("redis", "postgres"):  # ids taken before the commit leave a gap
        assert again.doc_id == first.doc_id + 1


def test_a_batch_keeps_its_good_pages_and_drops_a_failed_one(open_detector):
    detector = open_detector(CONFIG)
    with detector.index.batch():
        detector.check("http://a.example/1", STORY)
        with pytest.raises(Boom), detector.index.transaction():
            detector.index.record("http://a.example/bad", fingerprint(OTHER, CONFIG), "")
            raise Boom
        copy = detector.check("http://a.example/copy", STORY + " again")
    assert copy.duplicate
    assert [r["url"] for r in detector.index.documents()] == ["http://a.example/1", "http://a.example/copy"]


def test_a_failed_batch_leaves_nothing(open_detector):
    if open_detector.backend in ("redis", "postgres"):
        pytest.skip("on a server each page of a batch is its own transaction: a batch is no unit")
    detector = open_detector(CONFIG)
    detector.check("http://a.example/0", OTHER)
    with pytest.raises(Boom), detector.index.batch():
        detector.check("http://a.example/1", STORY)
        raise Boom
    assert [r["url"] for r in detector.index.documents()] == ["http://a.example/0"]
    assert not detector.check("http://b.example/1", STORY).duplicate  # the lost page is not findable


def test_byte_identical_copies_are_found_before_extraction(open_detector):
    detector = open_detector(CONFIG)
    first = detector.check("http://a.example/1", STORY)
    copy = detector.copy_of(Arrival("http://mirror.example/1", STORY))
    assert copy is not None and copy.duplicate and copy.duplicate_of == first.doc_id
    assert copy.method == "exact" and copy.duplicate_of_url == "http://a.example/1"
    record = detector.index.get(copy.doc_id)
    assert record["status"] == "duplicate" and record["tokens"] == detector.index.get(first.doc_id)["tokens"]
    assert detector.copy_of(Arrival("http://a.example/1", STORY)) is None  # its own record: a revisit decides
    assert detector.copy_of(Arrival("http://other.example/", OTHER)) is None


def test_a_copy_recorded_meanwhile_by_another_process_is_recorded_once(open_detector):
    # find_raw is a hint read outside any transaction: between it and record_copy another
    # crawl may record the same URL (or a scan the same source). The copy is then not recorded
    # twice: record_copy declines, and the full check finds the page a revisit.
    detector = open_detector(CONFIG)
    first = detector.check("http://a.example/1", STORY)
    index, raw = detector.index, raw_hash(STORY)
    for url, key, source in (("http://mirror.example/1", url_key("http://mirror.example/1"), None),
                             ("file:///saved/1.html", None, "saved/1.html")):  # fmt: skip
        original = index.find_raw(raw, "", key)
        assert original == first.doc_id
        other = detector.check(url, STORY, source=source)  # the other process, in between
        assert other.duplicate
        assert index.record_copy(url, raw, original, "", source, key) is None
        again = detector.check(url, STORY, source=source)
        assert again.revisit is not None and again.doc_id == other.doc_id
    assert index.stats()["documents"] == 3


def test_skipped_pages_are_recorded_and_never_candidates(open_detector):
    detector = open_detector(CONFIG)
    short = detector.check("http://a.example/short", "too few words")
    assert short.skip_reason == "too_short" and short.doc_id is not None
    assert not detector.check("http://a.example/1", STORY).duplicate
    assert detector.index.get(short.doc_id)["status"] == "skipped"


def test_the_read_side_agrees_with_the_verdicts(open_detector):
    detector = open_detector(DedupConfig(extractor="text", min_tokens=5, keep_text=30))
    verdicts = [
        detector.check(url, text, source=f"/saved/{i}.txt")
        for i, (url, text) in enumerate(
            [
                ("http://a.example/1", STORY),
                ("http://b.example/1", STORY + " more"),
                ("http://c.example/", OTHER),
            ]
        )
    ]
    index = detector.index
    assert [r["id"] for r in index.documents()] == [v.doc_id for v in verdicts]
    assert list(index.match_edges()) == [
        (verdicts[1].doc_id, verdicts[0].doc_id, verdicts[1].similarity, "spotsigs")
    ]
    assert index.text(verdicts[2].doc_id) == OTHER[:30]
    assert index.contains_source("/saved/1.txt") and not index.contains_source("/saved/9.txt")
    assert index.stats()["duplicates"] == 1 and index.get(10_000) is None
    assert index.url_of(verdicts[0].doc_id) == "http://a.example/1"


def test_imatch_statistics_count_admitted_pages_only(open_detector):
    config = DedupConfig(extractor="text", min_tokens=5, methods=("imatch",))
    detector = open_detector(config)
    detector.check("http://a.example/1", STORY)
    detector.check("http://a.example/2", STORY)  # a duplicate: not counted
    detector.check("http://a.example/3", OTHER)
    stats = detector.index.term_stats(("herons", "concert", "nowhere"))
    assert stats.n_docs == 2 and dict(stats.df) == {"herons": 1, "concert": 1}


def test_runs_record_the_action(open_detector):
    detector = open_detector(CONFIG)
    assert detector.index.last_action() is None
    detector.index.begin_run("tag")
    detector.check("http://a.example/1", STORY)
    detector.index.end_run()
    assert detector.index.last_action() == "tag"
    assert not detector.index.interrupted_runs and detector.index.unconfirmed([1]) == set()


def test_scopes_keep_pages_apart(open_detector):
    detector = open_detector(DedupConfig(extractor="text", min_tokens=5, scope="host"))
    detector.check("http://a.example/1", STORY)
    assert not detector.check("http://b.example/1", STORY + " more").duplicate
    assert detector.check("http://a.example/2", STORY + " more").duplicate


def test_a_page_let_through_is_an_original_and_its_copies_are_sure_duplicates(open_detector):
    """A page under the sure bar goes on: it is admitted, so its exact copies are dropped as its."""
    detector = open_detector(CONFIG)
    home = detector.check("http://a.example/", LISTING)
    first = detector.check("http://a.example/story", STORY)
    assert first.duplicate and first.duplicate_of == home.doc_id and not first.weak
    assert first.similarity < SURE_SIMILARITY  # not sure: the crawl lets it through
    record = detector.index.get(first.doc_id)
    assert (record["status"], record["duplicate_of"], record["method"]) == ("unique", home.doc_id, "spotsigs")
    copies = [("http://a.example/story?utm_source=x", STORY), ("http://b.example/story", STORY + "  ")]
    for url, body in copies:  # a byte copy (found before extraction), then a copy of its text
        copy = detector.check(url, body)
        assert (copy.duplicate, copy.method, copy.duplicate_of) == (True, "exact", first.doc_id)
    edges = [edge[1:] for edge in detector.index.match_edges()]
    assert edges[1:] == [(first.doc_id, 1.0, "exact")] * 2
    assert edges[0][0] == home.doc_id and edges[0][2] == "spotsigs"  # the weak link, for the report
    assert detector.index.stats()["unique"] == 2


def test_a_bar_of_zero_records_every_match_as_a_duplicate(tmp_path):
    with Detector(CONFIG, make_index("memory", CONFIG, tmp_path), drop_above=0.0) as detector:
        detector.check("http://a.example/", LISTING)
        first = detector.check("http://a.example/story", STORY)
        assert first.duplicate and detector.index.get(first.doc_id)["status"] == "duplicate"


@pytest.mark.slow
def test_every_backend_records_the_same_pages(tmp_path, aeb_pages, redis_url, postgres_url):
    """Real pages with copies and revisits through each backend: the same verdicts and records."""
    bodies = list(aeb_pages.values())[:12]
    pages = [(f"http://a.example/{i}", b) for i, b in enumerate(bodies)]
    pages += [
        (f"http://copy.example/{i}", b.replace(b"<body", b"<body data-x='1'"))
        for i, b in enumerate(bodies[:6])
    ]
    pages += pages[:3] + [(f"http://a.example/{i}", bodies[i + 1]) for i in range(3)]  # revisits, changed
    config = DedupConfig()
    results = []
    for backend in BACKENDS:
        url = {"redis": redis_url, "postgres": postgres_url}.get(backend)
        with Detector(config, make_index(backend, config, tmp_path, redis_url=url)) as detector:
            verdicts = [detector.check(url, body) for url, body in pages]
            records = [{k: v for k, v in r.items() if k != "seen_at"} for r in detector.index.documents()]
            results.append(([v.as_dict() for v in verdicts], records))
            if backend in ("redis", "postgres"):
                detector.index.remove()
    assert all(result == results[0] for result in results[1:])
    assert sum(v["duplicate"] for v in results[0][0]) >= 6


SQLITE_UTILS = shutil.which("sqlite-utils", path=str(Path(sys.executable).parent)) or shutil.which(
    "sqlite-utils"
)


@pytest.mark.skipif(SQLITE_UTILS is None, reason="sqlite-utils is not installed (the test extra has it)")
def test_a_user_can_query_the_index_with_sqlite_utils(tmp_path):
    path = tmp_path / "index.sqlite"
    with sqlite_detector(path, CONFIG) as detector:
        detector.check("http://a.example/1", STORY)
        detector.check("http://b.example/1", STORY + " more")
    tool = SQLITE_UTILS
    views = subprocess.run(
        [tool, "views", str(path), "--json-cols"], capture_output=True, text=True, check=True
    )
    assert {v["view"] for v in json.loads(views.stdout)} == {"pages", "duplicates"}
    rows = subprocess.run([tool, "rows", str(path), "duplicates"], capture_output=True, text=True, check=True)
    assert [(r["url"], r["original_url"], r["method"]) for r in json.loads(rows.stdout)] == [
        ("http://b.example/1", "http://a.example/1", "spotsigs")
    ]
    query = "select status, count(*) as n from pages group by status order by status"
    counts = subprocess.run([tool, "query", str(path), query], capture_output=True, text=True, check=True)
    assert json.loads(counts.stdout) == [{"status": "duplicate", "n": 1}, {"status": "unique", "n": 1}]


def test_url_rule_evidence_and_status_change_in_one_step(open_detector):
    """Counts and status change together, so that crawlers sharing an index never adopt a rule
    another one has just found a counter-example to."""
    index = open_detector(CONFIG).index
    rule, other = (RuleKey("http://x", "", "param", name).text() for name in ("utm_source", "view"))
    assert index.add_url_evidence({rule: (28, 0), other: (3, 0)}, 29) == {
        rule: (28, 0, "learning", "learning"), other: (3, 0, "learning", "learning")
    }  # fmt: skip
    assert index.add_url_evidence({rule: (1, 0), other: (1, 1)}, 29) == {
        rule: (29, 0, "learning", "adopted"), other: (4, 1, "learning", "refused")
    }  # fmt: skip
    assert index.add_url_evidence({other: (40, 0)}, 29)[other] == (44, 1, "refused", "refused")
    assert index.add_url_evidence({rule: (0, 1)}, 29)[rule] == (29, 1, "adopted", "revoked")
    read = {key.text(): rest for key, *rest in map(read_rule, index.url_rules())}
    assert read == {rule: [29, 1, "revoked"], other: [44, 1, "refused"]}


def test_skipped_requests_and_tag_modes_would_be_skips_read_back_apart(open_detector):
    """A request kept for revival is skipped; one kept with no request (tag mode fetched it) is
    listed as a would-be skip, never scheduled again and not counted as skipped."""
    index = open_detector(CONFIG).index
    rule = RuleKey("http://x", "", "param", "sid").text()
    index.add_url_evidence({rule: (1, 0)}, 29)
    index.add_url_skip([rule], "http://x/a?sid=1", "http://x/a", b'{"url": "http://x/a?sid=1"}')
    index.add_url_skip([rule], "http://x/b?sid=2", "http://x/b", b"")
    assert [skip[1:] for skip in index.url_skips([rule])] == [
        ("http://x/a?sid=1", b'{"url": "http://x/a?sid=1"}')
    ]
    assert index.url_skip_counts() == {rule: (1, 0)}
    assert index.url_skipped() == [
        ("http://x/a?sid=1", "http://x/a", False, [rule]), ("http://x/b?sid=2", "http://x/b", None, [rule])
    ]  # fmt: skip
    skip = index.url_skips([rule])[0][0]
    assert index.claim_url_skips([skip]) == [skip] and index.claim_url_skips([skip]) == []  # once
    assert index.url_skip_counts() == {rule: (1, 1)} and index.url_skips([rule]) == []
    assert [row[2] for row in index.url_skipped()] == [True, None]


def test_a_pages_comments_are_stored_and_read_back(open_detector, aeb_pages, aeb_truth):
    """Every backend keeps a page's comments (their words and hash): a comment view met after its
    article is no copy of it, the view met again under another URL is one; the article met after
    the view is no copy of it either, and the article's print view met after that is one."""
    from comment_pages import comment_sentences, with_comments

    key = next(k for k in sorted(aeb_pages) if k.startswith("04a6711c"))
    article = aeb_pages[key].decode("utf-8", "replace")
    bodies = [page["articleBody"] for k, page in sorted(aeb_truth.items()) if k != key]
    view = with_comments(article, comment_sentences(bodies, 200))
    detector = open_detector(DedupConfig())
    first = detector.check("http://a.example/story", article)
    own = detector.check("http://a.example/story?view=comments", view)
    assert not first.duplicate and not own.duplicate and detector.index.get(own.doc_id)["status"] == "unique"
    again = detector.check(
        "http://b.example/story?view=comments", view.replace("<body", "<body class='b'", 1)
    )
    assert (again.duplicate, again.duplicate_of, again.method) == (True, own.doc_id, "exact")
    fresh = open_detector(DedupConfig(), "second.db")
    fresh.check("http://a.example/story?view=comments", view)
    story = fresh.check("http://a.example/story", article)
    assert not story.duplicate and fresh.index.get(story.doc_id)["status"] == "unique"
    printed = fresh.check("http://a.example/print/story", article.replace("<body", "<body class='p'", 1))
    assert (printed.duplicate, printed.duplicate_of, printed.method) == (True, story.doc_id, "exact")
