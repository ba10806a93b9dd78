"""Learned URL rules: the model (urls.py) alone, then crawls of tests/url_site.py on 127.0.0.1."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from crawling import ADDON, crawl
from url_site import handler, page_of, pages, synthetic

from scrapy_neardup.urls import HOST, PARAM, SEGMENT, Form, Rule, RuleKey, UrlModel, difference, explored


def test_a_difference_is_of_parameters_of_one_segment_or_of_the_host():
    def diff(a: str, b: str):
        return difference(Form.of(a), Form.of(b))

    assert diff("http://x/a?id=1", "http://x/a?id=1&utm_source=n&utm_medium=e") == (
        PARAM, frozenset({"utm_source", "utm_medium"})
    )  # fmt: skip
    assert diff("http://x/list?page=1&sort=asc", "http://x/list?sort=desc&page=1") == (
        PARAM,
        frozenset({"sort"}),
    )
    assert diff("http://x/a?id=1", "http://x/a?id=2") == (PARAM, frozenset({"id"}))
    assert diff("http://x/print/a?id=1", "http://x/a?id=1") == (SEGMENT, frozenset({"print"}))
    assert diff("http://x/a/amp?id=1", "http://x/a?id=1") == (SEGMENT, frozenset({"amp"}))
    assert diff("http://x/a?id=1", "http://y/a?id=1") == (HOST, frozenset({"http://x http://y"}))
    assert diff("http://x/news/story.html", "http://x/news") is None  # a page below its section
    assert diff("http://x/a?id=1", "http://x/b?id=2") is None
    assert diff("http://x/a?a=1&b=1&c=1&d=1", "http://x/a") is None  # more than three parameters


def test_a_rule_needs_the_evidence_to_bound_its_error():
    rule = Rule(RuleKey("http://x", "", PARAM, "utm_source"))
    rule.same = 28
    assert rule.bound > 0.1
    rule.same = 29
    assert rule.bound < 0.1  # 29 pairs of the same content and none other: under 10 % at 95 %


def test_the_model_finds_evidence_and_predicts_copies_by_adopted_rules():
    model = UrlModel()
    assert model.observe("http://x/a?id=1", cluster=1).same == []
    same = model.observe("http://x/a?id=1&utm_source=n", cluster=1).same
    assert same == [RuleKey("http://x", "", PARAM, "utm_source")]
    differ = model.observe("http://x/a?id=1&view=full", cluster=3).differ
    assert differ == [RuleKey("http://x", "", PARAM, "view")]
    model.observe("http://x/a?id=2", cluster=2)
    assert model.predict("http://x/a?id=2&utm_source=z") is None  # no rule adopted yet
    key = RuleKey("http://x", "", PARAM, "utm_source")
    model.rules[key] = Rule(key, same=40, status="adopted")
    model.rules_changed()
    assert model.predict("http://x/a?id=2&utm_source=z") == ("http://x/a?id=2", [key])
    assert model.predict("http://x/a?id=2") is None  # the page itself
    assert model.predict("http://x/a?id=3&utm_source=z") is None  # no such page fetched
    # A pair that differs only by an adopted rule and is not the same content counts against it.
    assert key in model.observe("http://x/a?id=2&utm_source=q", cluster=9).differ


def test_explored_requests_are_a_twentieth_and_the_same_ones_each_time():
    urls = [f"http://x/a?id={n}&utm_source=n" for n in range(20_000)]
    share = sum(map(explored, urls)) / len(urls)
    assert 0.04 < share < 0.06
    assert [explored(u) for u in urls[:100]] == [explored(u) for u in urls[:100]]


@contextlib.contextmanager
def url_site(count: int) -> Iterator[str]:
    port: list[int] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(synthetic(count), port))
    port.append(server.server_address[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        server.shutdown()
        server.server_close()


def fetched(result: dict) -> set[tuple]:
    """The distinct pages a crawl fetched, by the URLs that reached its spider."""
    keys = set()
    for url in result["parsed"]:
        parts = urlsplit(url)
        keys.add(page_of(parts.path, parse_qs(parts.query)))
    return keys


def rules(db) -> dict[str, set[str]]:
    """Each rule's kind and name, with its statuses on the site's hosts."""
    found: dict[str, set[str]] = {}
    with sqlite3.connect(db) as con:
        for rule, status in con.execute("SELECT rule, status FROM url_rules"):
            found.setdefault(rule.split("\t", 2)[2], set()).add(status)
    return found


COUNT = 48


@pytest.mark.parametrize("concurrency", [1, 16])
def test_a_crawl_skips_copies_before_their_download_and_fetches_every_page(tmp_path, concurrency):
    db = tmp_path / "urls.sqlite"
    settings = {**ADDON, "NEARDUP_DB": str(db), "CONCURRENT_REQUESTS": concurrency, "NEARDUP_WORKERS": 0}
    with url_site(COUNT) as base:
        without = crawl(tmp_path, [base + "/list?page=0"], {"CONCURRENT_REQUESTS": concurrency})
        result = crawl(tmp_path, [base + "/list?page=0"], settings)
    assert fetched(without) == pages(COUNT)
    assert fetched(result) == pages(COUNT)  # no page is lost to a rule
    copies_without = len(without["parsed"]) - len(pages(COUNT))
    copies_with = len(result["parsed"]) - len(pages(COUNT))
    assert copies_with < 0.5 * copies_without  # most copies were never downloaded
    assert result["stats"]["neardup/urls/skipped"] > 0
    learned = rules(db)
    assert "adopted" in learned["param\tutm_source"] and "adopted" in learned["param\tsid"]
    assert "adopted" not in learned["param\tview"] | learned["param\tlang"] | learned["param\tid"]
