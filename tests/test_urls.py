"""Learned URL rules: the model (urls.py) alone, then crawls of tests/url_site.py on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import logging
import math
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from crawling import ADDON, Server, crawl
from url_site import LATE_KINDS, PLAIN, Changes, handler, page_of, pages, synthetic

from scrapy_neardup import urls
from scrapy_neardup.crawl import kept_requests
from scrapy_neardup.detector import Detector
from scrapy_neardup.report import write_report
from scrapy_neardup.url_rule import HOST, PARAM, SEGMENT, Rule, RuleKey, adopt_after, checks_needed, read_rule
from scrapy_neardup.urls import Form, UrlModel, difference, explored

COUNT = 24
# Rules adopted after 14 pages of the same content (29 by default): a site of 24 articles has the
# copies of their last ten to skip.
RULES = {**ADDON, "NEARDUP_URL_MAX_ERROR": 0.2}


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
    assert rule.bound < 0.1  # 29 pages of the same content and none other: under 10 % at 95 %
    assert adopt_after() == 29 and adopt_after(0.01) == 299


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


def test_pages_of_one_text_are_one_content_whatever_cluster_a_near_match_gave_them():
    """An article whose plain page is a sure copy of its longer view=full page (0.82) when it is
    met first, and a copy of its print view (0.99) once that is admitted: its tracking copies
    must not count against the rules they differ by (the measured case: article 156 of the
    URL-variant site revoked 5 rules in one crawl of 5)."""
    model, text = UrlModel(), 0xA11CE
    model.observe("http://x/a?id=1&view=full", cluster=10)
    model.observe("http://x/a?id=1", cluster=model.cluster_of_text(text, 10))
    model.observe("http://x/print/a?id=1", cluster=20)  # let through: a weak match of the long page
    later = model.cluster_of_text(text, 20)  # the same text, now a copy of the print view
    assert later == 10
    ref = RuleKey("http://x", "", PARAM, "ref")
    assert model.observe("http://x/a?id=1&ref=home", cluster=later).same == [ref]
    unmapped = UrlModel()
    order = (("a?id=1&view=full", 10), ("a?id=1", 10), ("print/a?id=1", 20), ("a?id=1&ref=home", 20))
    for url, cluster in order:
        evidence = unmapped.observe(f"http://x/{url}", cluster)
    assert evidence.differ == [ref]  # what the crawl counted against the rule before
    assert model.cluster_of_text(None, 20) == 20 and model.cluster_of_text(text, None) is None


def test_a_rule_refused_on_a_host_joined_to_its_own_is_withdrawn():
    model = UrlModel()
    model.observe("http://x/a?id=1", cluster=1)
    view_x, view_y = (RuleKey(h, "", PARAM, "view") for h in ("http://x", "http://y"))
    joined = RuleKey("", "", HOST, "http://x http://y")
    model.rules = {view_x: Rule(view_x, 40, 0, "adopted"), view_y: Rule(view_y, 3, 1, "refused")}
    model.rules_changed()
    assert model.predict("http://x/a?id=1&view=full") == ("http://x/a?id=1", [view_x])
    model.rules[joined] = Rule(joined, 40, 0, "adopted")
    model.rules_changed()
    assert model.predict("http://x/a?id=1&view=full") is None  # y's pages say view matters
    assert model.predict("http://y/a?id=1") == ("http://x/a?id=1", [joined])
    assert model.withdrawn() == [view_x]  # what it skipped while in force is fetched after all


def test_the_check_before_closing_draws_enough_to_catch_a_rule_changing_a_twentieth():
    assert [checks_needed(n) for n in (0, 1, 10, 150, 100_000)] == [0, 1, 10, 65, 90]
    assert checks_needed(150, share=0.0) == 0
    for predicted in (20, 75, 150, 1000):  # the chance to miss every changed page is under 1 %
        changed, drawn = max(1, -(-predicted // 20)), checks_needed(predicted)
        assert math.comb(predicted - changed, drawn) / math.comb(predicted, drawn) <= 0.01
        if drawn < predicted:
            assert math.comb(predicted - changed, drawn - 1) / math.comb(predicted, drawn - 1) > 0.01


@pytest.mark.slow
@pytest.mark.parametrize("late", LATE_KINDS)
def test_a_variant_that_changes_only_the_last_pages_loses_none_of_them(tmp_path, late):
    """One variant (a parameter, the other host) changes the last four articles only, after its
    rule was adopted on the others: the check before closing fetches what the rule skipped,
    finds a changed page and revives the rest."""
    db = tmp_path / "late.sqlite"
    changes = Changes(late=late, late_from=COUNT - 4)
    settings = {**RULES, "NEARDUP_INDEX": str(db), "CONCURRENT_REQUESTS": 4, "NEARDUP_WORKERS": 0}
    with url_site(COUNT, changes) as base:
        result = crawl(tmp_path, [base + "/list?page=0"], settings)
    assert fetched(result, changes) == pages(COUNT, changes)
    assert result["stats"].get("neardup/urls/checked", 0) + result["stats"]["neardup/urls/explored"] > 0


def test_explored_requests_are_a_twentieth_and_the_same_ones_each_time():
    urls = [f"http://x/a?id={n}&utm_source=n" for n in range(20_000)]
    share = sum(map(explored, urls)) / len(urls)
    assert 0.04 < share < 0.06
    assert [explored(u) for u in urls[:100]] == [explored(u) for u in urls[:100]]


@contextlib.contextmanager
def url_site(count: int, changes: Changes = PLAIN) -> Iterator[str]:
    port: list[int] = []
    server = Server(("127.0.0.1", 0), handler(synthetic(count), port, changes))
    port.append(server.server_address[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        server.shutdown()
        server.server_close()


def fetched(result: dict, changes: Changes = PLAIN) -> set[tuple]:
    """The distinct pages a crawl fetched, by the URLs that reached its spider."""
    keys = set()
    for url in result["parsed"]:
        parts = urlsplit(url)
        keys.add(page_of(parts.path, parse_qs(parts.query), changes, parts.netloc))
    return keys


def rules(db) -> dict[str, set[str]]:
    """Each rule's kind and name, with its statuses on the site's hosts."""
    found: dict[str, set[str]] = {}
    with sqlite3.connect(db) as con:
        for rule, status in con.execute("SELECT rule, status FROM url_rules"):
            key = RuleKey.parse(rule)
            found.setdefault(f"{key.kind}\t{key.name}", set()).add(status)
    return found


@pytest.fixture(scope="module")
def without(tmp_path_factory) -> dict:
    """The URL site crawled without the add-on, once for the tests of this module that compare."""
    with url_site(COUNT) as base:
        return crawl(tmp_path_factory.mktemp("without"), [base + "/list?page=0"], {"CONCURRENT_REQUESTS": 16})


@pytest.mark.slow(15)
@pytest.mark.parametrize("concurrency, verify", [(1, 0.0), (16, None)])
def test_a_crawl_skips_copies_before_their_download_and_fetches_every_page(
    tmp_path, concurrency, verify, without
):
    """With the check before closing (the default), a site this small has most of what each rule
    skipped fetched at its end: fewer copies are saved than without it."""
    db = tmp_path / "urls.sqlite"
    settings = {**RULES, "NEARDUP_INDEX": str(db), "CONCURRENT_REQUESTS": concurrency, "NEARDUP_WORKERS": 0}
    if verify is not None:
        settings["NEARDUP_URL_VERIFY"] = verify
    with url_site(COUNT) as base:
        result = crawl(tmp_path, [base + "/list?page=0"], settings)
    assert fetched(without) == pages(COUNT)
    assert fetched(result) == pages(COUNT)  # no page is lost to a rule
    copies_without = len(without["parsed"]) - len(pages(COUNT))
    copies_with = len(result["parsed"]) - len(pages(COUNT))
    assert copies_with < (0.5 if verify == 0 else 0.8) * copies_without  # copies never downloaded
    assert result["stats"]["neardup/urls/skipped"] > 0
    assert (result["stats"].get("neardup/urls/checked", 0) > 0) == (verify is None)
    learned = rules(db)
    assert "adopted" in learned["param\tutm_source"] and "adopted" in learned["param\tsid"]
    assert "adopted" not in learned["param\tview"] | learned["param\tlang"] | learned["param\tid"]
    report = json.loads(write_report(db, tmp_path / "report.json", "json").read_text())
    adopted = [rule for rule in report["url_rules"] if rule["status"] == "adopted"]
    assert all(rule["error_bound"] < 0.2 and rule["differ"] == 0 for rule in adopted)
    assert sum(rule["skipped"] for rule in adopted) >= result["stats"]["neardup/urls/skipped"] > 0
    clean = [c["clean_url"] for c in report["clusters"]]  # named without what the rules drop
    assert clean and not any("sid=" in url or "utm_source" in url for url in clean)
    skips = report["url_skips"]  # each skipped request once, with its rule and predicted original
    assert len(skips) == result["stats"]["neardup/urls/skipped"]
    assert all(s["rules"] and s["predicted_copy_of"] in result["parsed"] for s in skips)
    page = write_report(db, tmp_path / "report.html").read_text()
    top = page.index('href="#nd-rules"')
    assert top < page.index("<h2>Charts</h2>") < page.index('id="nd-rules"') < page.index('id="nd-skipped"')
    assert f"{len(skips):,} requests skipped" in page[top : top + 400]
    rows = write_report(db, tmp_path / "report.csv", "csv").read_text().splitlines()
    assert sum(",not_fetched," in row for row in rows) == len(skips)
    table = list(csv.DictReader(rows))  # each page's clean URL beside it
    with_sid = [row for row in table if "sid=" in row["url"] and row["status"] != "not_fetched"]
    assert with_sid and all("sid=" not in row["clean_url"] for row in with_sid)


def seeded_index(db, rules: dict[str, str]) -> None:
    """An index holding URL rules already (with one pair of evidence each)."""
    from scrapy_neardup import DedupConfig
    from scrapy_neardup.index import SQLiteIndex

    with SQLiteIndex(db, DedupConfig()) as index:
        index.add_url_evidence({rule: (1, 0) for rule in rules}, 29)
        for rule, status in rules.items():
            index.set_url_rule(rule, status, 0.0)


@pytest.mark.slow
def test_a_rule_met_by_a_counter_example_is_revoked_and_its_requests_are_fetched(tmp_path):
    """The view parameter adopted wrongly (it changes every fourth page): a predicted copy fetched
    to check it differs, the rule is revoked, and every request it skipped is fetched after all."""
    db = tmp_path / "revoke.sqlite"
    settings = {
        **RULES, "NEARDUP_INDEX": str(db), "CONCURRENT_REQUESTS": 4, "NEARDUP_WORKERS": 0,
        "NEARDUP_URL_EXPLORE": 0.3,
    }  # fmt: skip
    with url_site(COUNT) as base:
        other = base.replace("127.0.0.1", "localhost")
        seeded_index(db, {RuleKey(host, "", PARAM, "view").text(): "adopted" for host in (base, other)})
        result = crawl(tmp_path, [base + "/list?page=0"], settings)
    assert fetched(result) == pages(COUNT)
    stats = result["stats"]
    assert stats["neardup/urls/revoked"] >= 1
    assert "revoked" in rules(db)["param\tview"]
    with sqlite3.connect(db) as con:  # every request the rule skipped was scheduled again
        by_view = "SELECT COUNT(*) FROM url_skips JOIN url_skip_rules ON skip = url_skips.id WHERE "
        by_view += 'rule LIKE \'%"param", "view"]\''
        assert con.execute(by_view + " AND revived = 0").fetchone() == (0,)
        # (the explored share is drawn afresh in every crawl: the first check may come before a skip)
        # (and the check before closing may have fetched some before the revocation)
        fetched_after = stats.get("neardup/urls/revived", 0) + stats.get("neardup/urls/checked", 0)
        assert fetched_after >= con.execute(by_view).fetchone()[0]


@pytest.mark.slow
def test_requests_a_revoked_rule_skipped_before_a_kill_are_fetched_by_the_resumed_crawl(tmp_path):
    from scrapy import Request

    db = tmp_path / "resume.sqlite"
    with url_site(COUNT) as base:
        rule = RuleKey(base, "", PARAM, "custom").text()
        seeded_index(db, {rule: "revoked"})
        kept = kept_requests.keep(Request(base + "/a?id=5&custom=x", meta={"note": "kept"}), None)
        from scrapy_neardup import DedupConfig
        from scrapy_neardup.index import SQLiteIndex

        with SQLiteIndex(db, DedupConfig()) as index:
            index.add_url_skip([rule], base + "/a?id=5&custom=x", base + "/a?id=5", kept)
        settings = {**RULES, "NEARDUP_INDEX": str(db), "NEARDUP_WORKERS": 0}
        result = crawl(tmp_path, [base + "/a?id=7"], settings)
    assert base + "/a?id=5&custom=x" in result["parsed"]  # linked from no page: revived
    assert result["stats"]["neardup/urls/revived"] == 1


@pytest.mark.slow(15)
def test_a_rerun_and_another_crawler_use_the_rules_the_index_holds(tmp_path, redis_url):
    prefix = f"urls:{uuid.uuid4().hex}"
    settings = {
        **RULES, "NEARDUP_INDEX": f"{redis_url}?prefix={prefix}",
        "NEARDUP_WORKERS": 0, "CONCURRENT_REQUESTS": 4,
    }  # fmt: skip
    with url_site(COUNT) as base:
        first = crawl(tmp_path, [base + "/list?page=0"], settings)
        again = crawl(tmp_path, [base + "/list?page=0"], settings)
    assert first["stats"]["neardup/urls/adopted"] >= 4
    # The rules are shared: the re-run starts with them in force (and may add one still learning).
    assert again["stats"].get("neardup/urls/adopted", 0) < first["stats"]["neardup/urls/adopted"]
    assert again["stats"]["neardup/urls/skipped"] >= first["stats"]["neardup/urls/skipped"]
    assert fetched(first) == fetched(again) == pages(COUNT)


def test_the_model_forgets_the_pages_fetched_longest_ago(monkeypatch):
    monkeypatch.setattr(urls, "MAX_PAGES", 3)
    model = UrlModel()
    key = RuleKey("http://x", "", PARAM, "utm_source")
    model.rules[key] = Rule(key, same=40, status="adopted")
    model.rules_changed()
    for n in range(5):
        model.observe(f"http://x/a?id={n}", cluster=n)
    assert model.predict("http://x/a?id=0&utm_source=z") is None  # forgotten: fetched again
    assert model.predict("http://x/a?id=4&utm_source=z") == ("http://x/a?id=4", [key])
    assert len(model._fetched_urls) == len(model._fetched) == 3
    assert all(len(near) <= 3 for near in model._near.values())


def test_a_counter_example_of_adopted_rules_spares_those_the_page_shows_harmless():
    model = UrlModel()
    view, utm = (RuleKey("http://x", "", PARAM, n) for n in ("view", "utm_source"))
    model.rules = {k: Rule(k, same=40, status="adopted") for k in (view, utm)}
    model.rules_changed()
    model.observe("http://x/a?id=1", cluster=1)
    model.observe("http://x/a?id=1&view=full", cluster=2)
    evidence = model.observe("http://x/a?id=1&view=full&utm_source=n", cluster=2)
    assert evidence.differ == [view]  # utm_source changed nothing on this very page
    alone = UrlModel()  # no page says which: both are blamed
    alone.rules = dict(model.rules)
    alone.rules_changed()
    alone.observe("http://x/a?id=1", cluster=1)
    assert set(alone.observe("http://x/a?id=1&view=full&utm_source=n", cluster=2).differ) == {view, utm}
    # Nor the rules that changed nothing on the other page: a=1&sid=z is the page a=1.
    other = UrlModel()
    sid = RuleKey("http://x", "", PARAM, "sid")
    other.rules = {k: Rule(k, same=40, status="adopted") for k in (view, sid)}
    other.rules_changed()
    other.observe("http://x/a?id=1", cluster=1)
    other.observe("http://x/a?id=1&sid=z", cluster=1)
    assert set(other.observe("http://x/a?id=1&view=full&sid=q", cluster=2).differ) == {view}


def test_an_index_failure_costs_the_evidence_never_the_page(tmp_path, caplog):
    """The index gone under a crawl (closed here; a full disk or Redis down alike): learning
    says so once and returns, so the page it came with goes on to the spider."""
    from scrapy.http import HtmlResponse, Request
    from scrapy.utils.test import get_crawler

    from scrapy_neardup import DedupConfig
    from scrapy_neardup.crawl.url_rules import UrlRules
    from scrapy_neardup.index import SQLiteIndex
    from scrapy_neardup.verdict import Verdict

    caplog.set_level(logging.DEBUG, logger="scrapy_neardup")
    index = SQLiteIndex(tmp_path / "gone.sqlite", DedupConfig())
    rules = UrlRules(Detector(DedupConfig(), index).lanes, get_crawler().stats)
    rules.start(forget=False)
    index.close()
    for n in range(3):  # each article, then its tracking-parameter copy: evidence for a rule
        for url, verdict in (
            (f"http://x/a?id={n}", Verdict(f"http://x/a?id={n}", n + 1, False)),
            (f"http://x/a?id={n}&utm_source=mail", Verdict("", n + 10, True, duplicate_of=n + 1)),
        ):
            request = Request(url)
            asyncio.run(rules.learn(request, HtmlResponse(url, request=request), verdict))
    said = [r.levelname for r in caplog.records if "could not record" in r.getMessage()]
    assert said == ["WARNING"] + ["DEBUG"] * 4  # the first page teaches nothing yet


def test_an_index_failure_at_the_start_leaves_the_skipped_requests_for_later(tmp_path, caplog):
    """Reviving what a withdrawn rule skipped when the index is gone: one warning, no traceback
    from the spider_opened handler, and the requests stay in the index for the next try."""
    from scrapy.utils.test import get_crawler

    from scrapy_neardup import DedupConfig
    from scrapy_neardup.crawl.url_rules import UrlRules
    from scrapy_neardup.index import SQLiteIndex

    db = tmp_path / "gone.sqlite"
    seeded_index(db, {RuleKey("http://x", "", PARAM, "view").text(): "revoked"})
    index = SQLiteIndex(db, DedupConfig())
    crawler = get_crawler()
    crawler.engine, crawler.spider = object(), object()  # crawling, as far as revive can tell
    rules = UrlRules(Detector(DedupConfig(), index).lanes, crawler.stats, crawler)
    rules.start(forget=False)
    index.close()
    asyncio.run(rules.revive_withdrawn())
    said = [r.levelname for r in caplog.records if "could not schedule again" in r.getMessage()]
    assert said == ["WARNING"] and rules._withdrawn == set()


def test_the_crawl_stays_open_while_a_revoked_rule_s_requests_are_claimed(tmp_path):
    """A revival under way (the index not yet asked which skipped requests are this crawler's)
    keeps the crawl open: an engine closing meanwhile would drop a request the index then holds
    as revived, and no later crawl would fetch it."""
    from types import SimpleNamespace

    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler

    from scrapy_neardup import DedupConfig
    from scrapy_neardup.crawl.hosts import Hosts
    from scrapy_neardup.crawl.url_rules import UrlRules
    from scrapy_neardup.index import SQLiteIndex

    db = tmp_path / "open.sqlite"
    rule = RuleKey("http://x", "", PARAM, "view").text()
    seeded_index(db, {rule: "revoked"})
    crawler, scheduled = get_crawler(), []
    crawler.engine = SimpleNamespace(crawl=scheduled.append)
    crawler.spider = Spider("s", allowed_domains=["x"])
    with SQLiteIndex(db, DedupConfig()) as index:
        for n in range(3):
            kept = kept_requests.keep(Request(f"http://x/a?id={n}&view=print"), crawler.spider)
            index.add_url_skip([rule], f"http://x/a?id={n}&view=print", f"http://x/a?id={n}", kept)
    index = SQLiteIndex(db, DedupConfig())
    rules = UrlRules(Detector(DedupConfig(), index).lanes, crawler.stats, crawler, Hosts(crawler))
    rules.start(forget=False)

    async def revive() -> list[bool]:
        rules.revive_later()
        open_while = [rules.reviving]
        while rules.reviving:
            await asyncio.sleep(0.01)
            open_while.append(rules.reviving or len(scheduled) == 3)
        return open_while

    assert all(asyncio.run(revive()))  # open until every claimed request was scheduled
    assert sorted(r.url for r in scheduled) == [f"http://x/a?id={n}&view=print" for n in range(3)]
    assert crawler.stats.get_value("neardup/urls/revived") == 3
    index.close()


def test_a_request_whose_rule_is_revoked_while_its_skip_is_written_is_fetched(tmp_path):
    """The revocation's revival reads the index's skipped requests before this one's row is in
    it: the request is fetched at once, its row claimed, rather than skipped for good."""
    from types import SimpleNamespace

    from scrapy import Request, Spider
    from scrapy.exceptions import IgnoreRequest
    from scrapy.utils.test import get_crawler

    from scrapy_neardup import DedupConfig
    from scrapy_neardup.crawl.batches import Batch
    from scrapy_neardup.crawl.hosts import Hosts
    from scrapy_neardup.crawl.url_rules import FETCH, UrlRules
    from scrapy_neardup.index import SQLiteIndex

    db = tmp_path / "race.sqlite"
    key = RuleKey("http://x", "", PARAM, "view")
    seeded_index(db, {key.text(): "adopted"})
    crawler, scheduled = get_crawler(), []
    crawler.engine = SimpleNamespace(crawl=scheduled.append)
    crawler.spider = Spider("s", allowed_domains=["x"])
    index = SQLiteIndex(db, DedupConfig())
    lanes = Detector(DedupConfig(), index).lanes
    rules = UrlRules(lanes, crawler.stats, crawler, Hosts(crawler), explore=0.0)
    rules.start(forget=False)
    rules.model.observe("http://x/a?id=1", cluster=1)

    async def revoked_meanwhile(rows):
        rules._take(key, 29, 1, "revoked")
        rules.model.rules_changed()
        await rules.revive_withdrawn()  # finds no row yet
        return await lanes.run(lambda lane: lane.index.add_url_skips(rows))

    rules._skips = Batch(revoked_meanwhile)
    request = Request("http://x/a?id=1&view=print")
    try:
        asyncio.run(rules.before_download(request, crawler.spider))
    except IgnoreRequest:
        pytest.fail("skipped by a rule revoked before its row was written: fetched by no one")
    assert request.meta[FETCH] and not scheduled
    stats = crawler.stats
    assert stats.get_value("neardup/urls/skipped") == stats.get_value("neardup/urls/revived") == 1
    assert index.url_skips([key.text()]) == []  # its row claimed: no later crawl fetches it again
    index.close()


def stored(result: dict) -> set[tuple]:
    """The distinct pages whose items reached the feed."""
    return {
        page_of(urlsplit(item["url"]).path, parse_qs(urlsplit(item["url"]).query)) for item in result["items"]
    }


@pytest.mark.slow(15)
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_rerun_that_meets_a_copy_first_stores_every_page_again(tmp_path, backend, request):
    """The first crawl learns that tracking parameters change nothing; the re-run meets every
    article under a tracking URL first: a revisit of the first run's page, its item stored."""
    settings = {**RULES, "NEARDUP_WORKERS": 0, "CONCURRENT_REQUESTS": 4}
    if backend == "redis":
        url = request.getfixturevalue("redis_url")
        settings.update(NEARDUP_INDEX=f"{url}?prefix={uuid.uuid4().hex}")
    else:
        settings["NEARDUP_INDEX"] = str(tmp_path / "rerun.sqlite")
    with url_site(COUNT) as base:
        first = crawl(tmp_path, [base + "/list?page=0"], settings)
        copies_first = [f"{base}/a?id={n}&utm_source=newsletter&utm_medium=email" for n in range(COUNT)]
        again = crawl(tmp_path, [*copies_first, base + "/list?page=0"], settings)
    assert first["stats"]["neardup/urls/adopted"] >= 2
    assert stored(again) >= stored(first) == pages(COUNT)  # every page of the first run stored again
    assert again["stats"].get("neardup/revisits", 0) >= COUNT
    urls = [item["url"] for item in again["items"]]
    assert len(urls) == len(set(urls)) and len(again["items"]) <= len(first["items"]) + 2
    canonical = {url: meta["canonical"] for url, meta in again["meta"].items() if meta}
    assert canonical[copies_first[1]] == f"{base}/a?id=1"  # the rules' clean URL


@pytest.mark.slow(15)
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_tag_mode_skips_nothing_and_reports_what_the_rules_would_skip(tmp_path, backend, request, without):
    db = tmp_path / "tag.sqlite"
    settings = {**RULES, "NEARDUP_INDEX": str(db), "NEARDUP_WORKERS": 0, "NEARDUP_ACTION": "tag"}
    if backend == "redis":
        prefix = f"tag:{uuid.uuid4().hex}"
        redis_url = request.getfixturevalue("redis_url")
        settings.update(NEARDUP_INDEX=f"{redis_url}?prefix={prefix}")
    with url_site(COUNT) as base:
        result = crawl(tmp_path, [base + "/list?page=0"], settings)
    stats = result["stats"]
    assert "neardup/urls/skipped" not in stats and "neardup/urls/checked" not in stats
    assert stats["neardup/urls/would_skip"] > 0 and stats["neardup/urls/adopted"] >= 2
    assert len(result["parsed"]) == len(without["parsed"])  # every request fetched
    if backend == "redis":
        from scrapy_neardup.config import DedupConfig
        from scrapy_neardup.index.engines.redis import RedisIndex

        index = RedisIndex(redis_url, DedupConfig(), prefix)
    else:
        from scrapy_neardup.index import SQLiteIndex

        index = SQLiteIndex.open_existing(db)
    from scrapy_neardup.report.clusters import load_clusters
    from scrapy_neardup.report.url_rules import url_rules_html, url_rules_link

    clusters = load_clusters(index)
    would = [s for s in clusters.url_skips if not s.skipped]
    assert len(would) == stats["neardup/urls/would_skip"] and would == clusters.url_skips
    assert all(s.predicted_copy_of in result["parsed"] and s.url in result["parsed"] for s in would)
    assert all(skipped == 0 for skipped, _ in index.url_skip_counts().values())  # none skipped
    assert index.url_skips([r[0] for r in index.url_rules()]) == []  # nothing to schedule again
    page = url_rules_link(clusters.url_rules, clusters.url_skips) + url_rules_html(
        clusters.url_rules, clusters.url_skips
    )
    assert "0 requests skipped" in page and f"{len(would):,} they would have skipped" in page
    assert 'id="nd-would-skip"' in page and 'id="nd-skipped"' not in page


@pytest.mark.slow(15)
def test_sqlite_and_redis_indexes_learn_the_same_rules_at_the_same_pages(tmp_path, redis_url):
    """One request at a time, each page decided before the next download (ignore mode waits for the
    verdict in the downloader), none explored or checked: a crawl is the same on any index, the rules
    adopted at the same page and the same requests skipped, whatever the index returns as bytes."""
    import redis

    settings = {**RULES, "NEARDUP_WORKERS": 0, "CONCURRENT_REQUESTS": 1, "NEARDUP_URL_EXPLORE": 0.0}
    settings["NEARDUP_ACTION"] = "ignore"
    settings["NEARDUP_URL_VERIFY"] = 0.0  # none checked before closing: the draw differs by crawl
    prefix = uuid.uuid4().hex
    on_redis = {"NEARDUP_INDEX": f"{redis_url}?prefix={prefix}"}
    with url_site(COUNT) as base:
        sqlite = crawl(
            tmp_path, [base + "/list?page=0"], {**settings, "NEARDUP_INDEX": str(tmp_path / "s.db")}
        )
        on = crawl(tmp_path, [base + "/list?page=0"], {**settings, **on_redis})
    with sqlite3.connect(tmp_path / "s.db") as con:
        in_sqlite = con.execute("SELECT rule, status FROM url_rules").fetchall()
    in_redis = redis.Redis.from_url(redis_url).hgetall(f"{prefix}:url_status").items()
    assert adopted(in_sqlite) == adopted(in_redis) >= {"param utm_source", "param sid", "param ref"}
    assert sqlite["stats"]["neardup/urls/skipped"] == on["stats"]["neardup/urls/skipped"] > 0
    assert sqlite["parsed"] == on["parsed"]  # the same pages, in the same order


def adopted(rows) -> set[str]:
    """The adopted rules among (key, status) rows as an index stores them, by kind and name."""
    keys = (read_rule((rule, 0, 0, status)) for rule, status in rows)
    return {f"{key.kind} {key.name}" for key, _, _, status in keys if status == "adopted"}


def test_a_wrong_prediction_blames_only_the_rules_its_own_content_does_not_clear():
    """A predicted copy fetched to check the rules turns out other content: of the rules that made
    the prediction, a parameter its own copies show harmless is spared; the others are blamed."""
    model = UrlModel()
    sid, view = (RuleKey("http://h", "", PARAM, name) for name in ("sid", "view"))
    model.observe("http://h/a?id=1&view=full", 2)
    evidence = model.observe("http://h/a?id=1&view=full&sid=7", 2)
    assert model.blamed([sid, view], evidence.harmless) == [view]
    assert model.blamed([sid, view], set()) == [sid, view]
    assert model.blamed([sid], evidence.harmless) == [sid]  # one rule: it is the one to blame


def test_a_wrong_prediction_spares_what_the_predicted_pages_own_copies_clear():
    """The predicted page was fetched as ``?ref=home`` and as itself, of one content: a check of
    ``?view=full`` that finds other content blames ``view``, not ``ref``."""
    model = UrlModel()
    ref, view = (RuleKey("http://h", "", PARAM, name) for name in ("ref", "view"))
    model.observe("http://h/a?id=1&ref=home", 1)
    model.observe("http://h/a?id=1", 1)
    assert model.blamed([ref, view], model.harmless_for("http://h/a?id=1&ref=home")) == [view]
    assert model.harmless_for("http://h/a?id=9") == set()  # a page never fetched clears nothing


def test_a_prediction_names_the_clean_page_when_it_was_fetched():
    """A copy is predicted of the page no rule rewrites, whatever URL of it came first: a wrong
    prediction then blames the rules of the request alone."""
    model = UrlModel()
    ref, sid = (RuleKey("http://h", "", PARAM, name) for name in ("ref", "sid"))
    model.rules = {ref: Rule(ref, 40, 0, "adopted"), sid: Rule(sid, 40, 0, "adopted")}
    model.rules_changed()
    model.observe("http://h/a?id=1&ref=home", 1)
    assert model.predict("http://h/a?id=1&sid=3") == ("http://h/a?id=1&ref=home", [ref, sid])
    model.observe("http://h/a?id=1", 1)
    assert model.predict("http://h/a?id=1&sid=3") == ("http://h/a?id=1", [sid])


def test_a_page_of_other_content_blames_the_fewest_rules_that_explain_it():
    """A late ``lang=de`` page differs from three copies of its article, each by lang and one
    other adopted rule: lang alone explains the three pairs and is the only one blamed."""
    model = UrlModel()
    names = ("lang", "ref", "sid")
    keys = {name: RuleKey("http://h", "", PARAM, name) for name in names}
    model.rules = {k: Rule(k, 40, 0, "adopted") for k in keys.values()}
    model.rules_changed()
    for url in ("http://h/a?id=1&ref=home", "http://h/a?id=1&sid=3"):
        model.observe(url, 1)
    assert model.observe("http://h/a?id=1&lang=de", 2).differ == [keys["lang"]]
    # One pair alone: its two rules tie, and both are blamed.
    model = UrlModel()
    model.rules = {k: Rule(k, 40, 0, "adopted") for k in keys.values()}
    model.rules_changed()
    model.observe("http://h/a?id=1&ref=home", 1)
    assert sorted(model.observe("http://h/a?id=1&lang=de", 2).differ, key=RuleKey.text) == sorted(
        [keys["lang"], keys["ref"]], key=RuleKey.text
    )
    lang, ref, sid = keys["lang"], keys["ref"], keys["sid"]
    host = RuleKey("", "", HOST, "http://g http://h")
    assert urls._fewest_to_blame([[lang, ref], [lang, sid], [host, lang]]) == [lang]
    assert set(urls._fewest_to_blame([[lang, ref], [lang, sid], [ref]])) == {lang, ref}


def test_the_requests_kept_for_the_check_are_a_bounded_uniform_sample():
    """A long crawl keeps, for each rule, a sample as large as its check can draw, not every URL
    it skipped; late skips are as likely in it as early ones."""
    from scrapy_neardup.crawl.url_rules import Skipped, UrlRules

    rules = UrlRules(lanes=None, stats=None)
    for n in range(20_000):
        rules._sample(Skipped(f"http://h/a?id={n}&sid=1", f"http://h/a?id={n}", ("sid",), n, b"{}"))
    met, sample = rules._unchecked["sid"]
    assert met == 20_000 and len(sample) == checks_needed(10**9) == 90
    late = sum(int(s.url.split("id=")[1].split("&")[0]) >= 10_000 for s in sample)
    assert 25 <= late <= 65  # about half (binomial, 90 draws: outside this range once in 10^4)


def test_the_report_folds_refused_rules_away():
    """Refused rules (most of them a site's own page names) sit in a closed <details> below the
    rules that matter, so that the table shows what the crawl adopted or revoked."""
    from scrapy_neardup.report.url_rules import UrlRuleRow, url_rules_html

    def row(status: str, name: str) -> UrlRuleRow:
        kind = SEGMENT if status == "refused" else PARAM
        return UrlRuleRow(status, kind, name, "http://x", "", 30, 0, 0.1, 5, 0)

    rows = [row("adopted", "utm_source")] + [row("refused", f"story-{n}") for n in range(60)]
    page = url_rules_html(rows)
    table, folded = page.split("<details>")
    assert "utm_source" in table and "story-" not in table
    assert "<summary>60 refused rules" in folded and folded.count("story-") == 60
