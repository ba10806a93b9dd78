"""The Scrapy components in process, built the way Scrapy tests its own middlewares.

``scrapy.utils.test.get_crawler`` gives a crawler with real settings and stats; responses and
items are made by hand, so each component's contract is checked without a crawl. The
subprocess crawls against a local server (test_crawl.py and others) stay beside these.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path

import pytest
from scrapy import Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Request, TextResponse
from scrapy.utils.test import get_crawler

from scrapy_neardup.crawl.middleware import NearDupDownloaderMiddleware, NearDupSpiderMiddleware
from scrapy_neardup.crawl.pipeline import NearDuplicateItem, NearDupPipeline
from scrapy_neardup.crawl.session import CrawlSession
from scrapy_neardup.index import SQLiteIndex

SITE = Path(__file__).resolve().parent / "site"
ARTICLE = (SITE / "articles" / "library.html").read_bytes()
OTHER = (SITE / "articles" / "heron.html").read_bytes()


class NewsSpider(Spider):
    name = "news"


def make_crawler(tmp_path, **settings):
    settings = {"NEARDUP_ENABLED": True, "NEARDUP_INDEX": str(tmp_path / "i.sqlite"), **settings}
    crawler = get_crawler(NewsSpider, settings)
    crawler.spider = crawler._create_spider()
    return crawler


def respond(url: str, body: bytes, **meta) -> tuple[Request, HtmlResponse]:
    request = Request(url, meta=meta)
    return request, HtmlResponse(url, body=body, request=request, headers={"Content-Type": "text/html"})


def run(coroutine):
    return asyncio.run(coroutine)


def outputs(spider_middleware, response, result) -> list:
    """What NearDupSpiderMiddleware passes on of a callback's ``result``, read to its end."""

    async def callback():
        for output in result:
            yield output

    async def read():
        return [output async for output in spider_middleware.process_spider_output(response, callback())]

    return run(read())


def test_in_drop_mode_a_copy_reaches_the_spider_and_its_items_are_dropped(tmp_path):
    crawler = make_crawler(tmp_path, ITEM_PIPELINES={NearDupPipeline: 200})
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    spider_middleware = NearDupSpiderMiddleware.from_crawler(crawler)
    pipeline = NearDupPipeline.from_crawler(crawler)
    items = []
    for url in ("http://a.example/library", "http://mirror.example/library?ref=1"):
        request, response = respond(url, ARTICLE)
        assert run(middleware.process_response(request, response)) is response  # links followed
        items += outputs(spider_middleware, response, [{"url": url, "html": response.text}])
    assert request.meta["neardup"]["duplicate_of"] == "http://a.example/library"
    assert run(pipeline.process_item(items[0])) is items[0]
    with pytest.raises(NearDuplicateItem, match=r"near-duplicate of http://a\.example/library"):
        run(pipeline.process_item(items[1]))
    stats = crawler.stats.get_stats()
    assert stats["neardup/checked"] == 2 and stats["neardup/dropped"] == 1  # the item, not the page
    assert stats["neardup/duplicates/exact"] == 1 and "neardup/ignored" not in stats


def test_in_ignore_mode_a_copy_is_ignored_before_the_spider(tmp_path):
    crawler = make_crawler(tmp_path, NEARDUP_ACTION="ignore")
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    request, response = respond("http://a.example/library", ARTICLE)
    assert run(middleware.process_response(request, response)) is response
    copy_request, copy = respond("http://mirror.example/library?ref=1", ARTICLE)
    with pytest.raises(IgnoreRequest, match=r"near-duplicate of http://a\.example/library"):
        run(middleware.process_response(copy_request, copy))
    stats = crawler.stats.get_stats()
    assert stats["neardup/ignored"] == 1 and "neardup/dropped" not in stats


def test_drop_mode_without_the_pipeline_says_its_items_are_stored(tmp_path, caplog):
    NearDupDownloaderMiddleware.from_crawler(make_crawler(tmp_path))
    assert "NearDupPipeline, which is not in ITEM_PIPELINES" in caplog.text
    caplog.clear()
    NearDupDownloaderMiddleware.from_crawler(make_crawler(tmp_path, ITEM_PIPELINES={NearDupPipeline: 200}))
    assert "ITEM_PIPELINES" not in caplog.text


def test_the_middleware_tags_in_tag_mode(tmp_path):
    crawler = make_crawler(tmp_path, NEARDUP_ACTION="tag")
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    first, response = respond("http://a.example/library", ARTICLE)
    run(middleware.process_response(first, response))
    copy, response = respond("http://b.example/library", ARTICLE)
    assert run(middleware.process_response(copy, response)) is response
    assert first.meta["neardup"]["duplicate"] is False
    assert copy.meta["neardup"]["duplicate"] is True
    assert copy.meta["neardup"]["duplicate_of"] == "http://a.example/library"
    assert crawler.stats.get_value("neardup/tagged") == 1


def unjudged(reason: str) -> tuple[Request, TextResponse]:
    """A response the middleware passes on unjudged for ``reason``."""
    if reason == "opted_out":
        return respond("http://a.example/x", ARTICLE, neardup_skip=True)
    request = Request("http://a.example/x")
    if reason == "http_status":
        return request, HtmlResponse(request.url, status=404, body=ARTICLE, request=request)
    plain = {"Content-Type": "text/plain"}
    return request, TextResponse(request.url, body=b"plain text", headers=plain, request=request)


@pytest.mark.parametrize("reason", ["opted_out", "http_status", "not_html"])
def test_the_middleware_passes_what_it_does_not_judge(tmp_path, reason):
    crawler = make_crawler(tmp_path)
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    spider_middleware = NearDupSpiderMiddleware.from_crawler(crawler)
    pipeline = NearDupPipeline.from_crawler(crawler)
    request, response = unjudged(reason)
    assert run(middleware.process_response(request, response)) is response
    assert crawler.stats.get_value(f"neardup/unjudged/{reason}") == 1
    assert crawler.stats.get_value("neardup/checked") is None
    # Only an opted-out page's items skip the pipeline's own check.
    entry = {"url": "http://x/1", "text": OTHER.decode()}
    (item,) = outputs(spider_middleware, response, [entry])
    run(pipeline.process_item(item))
    assert crawler.stats.get_value("neardup/checked") == (None if reason == "opted_out" else 1)


def test_items_of_a_json_response_are_judged_from_their_field(tmp_path):
    crawler = make_crawler(tmp_path, ITEM_PIPELINES={NearDupPipeline: 200})
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    spider_middleware = NearDupSpiderMiddleware.from_crawler(crawler)
    pipeline = NearDupPipeline.from_crawler(crawler)
    request, page = respond("http://a.example/library", ARTICLE)
    run(middleware.process_response(request, page))
    (story,) = outputs(spider_middleware, page, [{"url": page.url, "html": page.text}])
    assert run(pipeline.process_item(story)) is story
    request = Request("http://a.example/api/stories")
    api = TextResponse(request.url, body=b"[]", headers={"Content-Type": "application/json"}, request=request)
    assert run(middleware.process_response(request, api)) is api
    entries = [
        {"url": "http://a.example/api/1", "html": ARTICLE.decode()},  # an exact copy of the page
        {"url": "http://a.example/api/2", "html": OTHER.decode()},
    ]
    first, second = outputs(spider_middleware, api, entries)
    with pytest.raises(NearDuplicateItem, match=r"near-duplicate of http://a\.example/library"):
        run(pipeline.process_item(first))
    assert run(pipeline.process_item(second)) is second
    assert crawler.stats.get_value("neardup/checked") == 3
    assert crawler.stats.get_value("neardup/unjudged/not_html") == 1


def test_an_empty_page_is_recorded_not_judged_and_met_again_it_is_a_copy(tmp_path):
    crawler = make_crawler(tmp_path)
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    for _ in range(2):
        request, response = respond("http://a.example/x", b"   ")
        assert run(middleware.process_response(request, response)) is response
    assert crawler.stats.get_value("neardup/unjudged/empty") == 1
    assert crawler.stats.get_value("neardup/duplicates/url") == 1
    assert crawler.stats.get_value("neardup/checked") == 2


def test_a_page_met_again_is_a_copy_within_a_crawl_and_a_revisit_in_the_next(tmp_path):
    for crawl_ in ("first", "next"):
        crawler = make_crawler(tmp_path)
        middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
        request, response = respond("http://a.example/library", ARTICLE)
        assert run(middleware.process_response(request, response)) is response
        if crawl_ == "first":  # the same URL again within the crawl: its links followed, a copy
            request, response = respond("http://a.example/library", ARTICLE)
            assert run(middleware.process_response(request, response)) is response
            assert response.meta["neardup"]["method"] == "url" and response.meta["neardup"]["duplicate"]
            assert crawler.stats.get_value("neardup/duplicates/url") == 1
        else:
            assert crawler.stats.get_value("neardup/revisits") == 1
            assert crawler.stats.get_value("neardup/duplicates/url") is None
        middleware.session.spider_closed(crawler.spider)


def test_items_reuse_their_page_verdict_through_the_spider_middleware(tmp_path):
    crawler = make_crawler(tmp_path, NEARDUP_ACTION="tag")
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    spider_middleware = NearDupSpiderMiddleware.from_crawler(crawler)
    pipeline = NearDupPipeline.from_crawler(crawler)
    assert middleware.session is spider_middleware.session is pipeline.session  # one per crawl
    pages = [respond("http://a.example/library", ARTICLE), respond("http://b.example/copy", ARTICLE)]
    items = []
    for request, response in pages:
        run(middleware.process_response(request, response))
        items += outputs(spider_middleware, response, [{"html": response.text}])
    tagged = [run(pipeline.process_item(item)) for item in items]
    assert [item["neardup"]["duplicate"] for item in tagged] == [False, True]
    assert crawler.stats.get_value("neardup/checked") == 2  # no item was judged again
    assert crawler.stats.get_value("neardup/tagged") == 1  # counted once, by the page


def test_the_pipeline_judges_items_by_themselves(tmp_path):
    crawler = make_crawler(tmp_path)
    pipeline = NearDupPipeline.from_crawler(crawler)
    first = {"url": "http://api.example/1", "text": OTHER.decode()}
    assert run(pipeline.process_item(first)) is first
    with pytest.raises(NearDuplicateItem, match=r"near-duplicate of http://api\.example/1"):
        run(pipeline.process_item({"url": "http://api.example/2", "text": OTHER.decode()}))
    nothing = {"url": "http://api.example/3", "title": "no content field"}
    assert run(pipeline.process_item(nothing)) is nothing
    assert crawler.stats.get_value("neardup/unjudged/no_content") == 1


def _api_item_then_its_page(crawler, text: str | None = None) -> tuple[dict, dict]:
    """An API item carrying the article's web URL and its text (or ``text``), then the HTML page
    of that URL: what the pipeline and the spider middleware pass on of each."""
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    spider_middleware = NearDupSpiderMiddleware.from_crawler(crawler)
    pipeline = NearDupPipeline.from_crawler(crawler)
    url = "http://a.example/library"
    if text is None:
        text = HtmlResponse(url, body=ARTICLE).xpath("string(//article)").get()
    outcome: dict = {}
    try:
        outcome["api"] = run(pipeline.process_item({"url": url, "text": text}))
    except NearDuplicateItem:
        outcome["api"] = None
    request, response = respond(url, ARTICLE)
    run(middleware.process_response(request, response))
    (item,) = outputs(spider_middleware, response, [{"url": url, "html": response.text}])
    try:
        outcome["page"] = run(pipeline.process_item(item))
    except NearDuplicateItem:
        outcome["page"] = None
    middleware.session.spider_closed(crawler.spider)
    return outcome, response.meta.get("neardup") or {}


def test_an_api_item_and_the_page_of_its_url_are_stored_once_a_crawl(tmp_path):
    """One crawl stores a content once: the page of a URL an item already carried is a copy of
    it (not a revisit), and a re-run meets both as revisits of what the first stored."""
    first, verdict = _api_item_then_its_page(make_crawler(tmp_path))
    assert first["api"] is not None and first["page"] is None  # the item stored, the page dropped
    assert verdict["duplicate"] and verdict["method"] == "url"
    crawler = make_crawler(tmp_path)
    again, verdict = _api_item_then_its_page(crawler)
    assert again["api"] is not None and again["page"] is None  # the re-run stores it once again
    assert crawler.stats.get_value("neardup/revisits") >= 1


@pytest.mark.parametrize("words", [12, 80])
def test_the_page_of_a_url_an_item_carried_with_other_text_is_stored(tmp_path, words):
    """An API item of a short summary (too short to judge, or judged) under the article's URL,
    then the article's page: other content under one URL, so both are stored."""
    summary = " ".join(f"word{n % 40} of the summary" for n in range(words // 4))
    outcome, verdict = _api_item_then_its_page(make_crawler(tmp_path), summary)
    assert outcome["api"] is not None and outcome["page"] is not None
    assert not verdict.get("duplicate")


def test_a_page_met_again_under_its_own_url_is_not_called_a_copy_of_itself(tmp_path, caplog):
    """A re-run that meets a copy first puts its content out under the copy's URL; the page
    met after it is dropped as met again, and says so rather than "a copy of itself"."""
    from scrapy_neardup.crawl.policy import Outcome, why_dropped
    from scrapy_neardup.verdict import Verdict

    url = "http://a.example/edit-copy"
    again = Verdict(url, 2, True, duplicate_of=2, duplicate_of_url=url, similarity=1.0, method="url")
    assert why_dropped(again) == "met again under its URL, whose content this crawl has put out already"
    session = CrawlSession.for_crawler(make_crawler(tmp_path, NEARDUP_DEBUG=True))
    with caplog.at_level("DEBUG", logger="scrapy_neardup"):
        session.acted(again, Outcome.DROPPED)
    assert f"{url} of its own URL, met again (its content is out already) (url," in caplog.text
    copy = dataclasses.replace(again, url="http://b.example/copy")
    assert why_dropped(copy) == f"near-duplicate of {url}"


def test_items_without_a_content_field_are_named_once(tmp_path, caplog):
    pipeline = NearDupPipeline.from_crawler(make_crawler(tmp_path))
    for n in range(3):
        item = {"url": f"http://api.example/{n}", "title": "t", "summary": "a field of another name"}
        assert run(pipeline.process_item(item)) is item
    warnings = [r.getMessage() for r in caplog.records if "NEARDUP_ITEM_FIELD" in r.getMessage()]
    assert len(warnings) == 1
    assert "tried html, body, text, content; it has url, title, summary" in warnings[0]


def test_closing_the_crawl_ends_its_run_and_writes_the_report(tmp_path):
    report = tmp_path / "report.html"
    crawler = make_crawler(tmp_path, NEARDUP_REPORT=str(report))
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    for url in ("http://a.example/library", "http://b.example/library"):
        request, response = respond(url, ARTICLE)
        with contextlib.suppress(IgnoreRequest):
            run(middleware.process_response(request, response))
    session = CrawlSession.for_crawler(crawler)
    session.spider_closed()
    assert report.exists() and "b.example/library" in report.read_text(encoding="utf-8")
    assert crawler.stats.get_value("neardup/report") == str(report)
    with SQLiteIndex.open_existing(tmp_path / "i.sqlite") as index:
        assert index.last_action() == "drop"
        assert index.db.execute("SELECT COUNT(*) FROM runs WHERE ended_at IS NULL").fetchone()[0] == 0


def test_a_disabled_add_on_builds_no_component(tmp_path):
    from scrapy.exceptions import NotConfigured

    crawler = make_crawler(tmp_path, NEARDUP_ENABLED=False)
    for component in (NearDupDownloaderMiddleware, NearDupSpiderMiddleware, NearDupPipeline):
        with pytest.raises(NotConfigured):
            component.from_crawler(crawler)
    assert not (tmp_path / "i.sqlite").exists()


def test_only_sure_duplicates_are_dropped(tmp_path):
    from scrapy_neardup.crawl.policy import Action, Outcome, Policy
    from scrapy_neardup.verdict import Verdict

    def verdict(method: str, similarity: float, weak: bool = False) -> Verdict:
        return Verdict("http://b/", 2, True, duplicate_of=1, similarity=similarity, method=method, weak=weak)

    policy = CrawlSession.for_crawler(make_crawler(tmp_path)).policy
    assert policy.action is Action.DROP and policy.drop_above == 0.65  # the defaults
    assert policy.outcome(verdict("spotsigs", 0.8), item=True) is Outcome.DROPPED
    assert policy.outcome(verdict("spotsigs", 0.8)) is None  # the page goes on, its links followed
    assert policy.outcome(verdict("spotsigs", 0.6), item=True) is Outcome.UNCERTAIN
    assert policy.outcome(verdict("spotsigs", 0.9, weak=True), item=True) is Outcome.UNCERTAIN
    assert policy.outcome(verdict("exact", 1.0, weak=True), item=True) is Outcome.DROPPED
    assert policy.as_dict(verdict("spotsigs", 0.6))["sure"] is False
    every = Policy(Action.DROP, 0.0, False)
    assert every.outcome(verdict("spotsigs", 0.4, weak=True), item=True) is Outcome.DROPPED
    ignoring = Policy(Action.IGNORE, 0.65, False)
    assert ignoring.outcome(verdict("spotsigs", 0.8)) is Outcome.IGNORED
    assert ignoring.outcome(verdict("spotsigs", 0.6)) is Outcome.UNCERTAIN


def test_a_third_backend_is_one_module_and_one_registry_line(tmp_path, monkeypatch):
    """tests/toy_index.py and one line in index.BACKENDS: a crawl keeps its index there, drops a
    copy, writes the report from it, and the next crawl reopens it (a revisit); its reset
    refuses a file not its own."""
    from scrapy_neardup import index as index_module

    monkeypatch.setitem(index_module.BACKENDS, "toy", "toy_index:ToyIndex")
    path, report = tmp_path / "toy.pickle", tmp_path / "report.json"
    settings = {"NEARDUP_INDEX": f"toy:{path}", "NEARDUP_REPORT": str(report)}
    crawler = make_crawler(tmp_path, ITEM_PIPELINES={NearDupPipeline: 200}, **settings)
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    verdicts = []
    for url in ("http://a.example/library", "http://b.example/library"):
        request, response = respond(url, ARTICLE)
        run(middleware.process_response(request, response))
        verdicts.append(request.meta["_neardup_verdict"])
    assert not verdicts[0].duplicate and verdicts[1].duplicate and verdicts[1].method == "exact"
    CrawlSession.for_crawler(crawler).spider_closed()
    assert path.exists() and "b.example/library" in report.read_text()
    again = NearDupDownloaderMiddleware.from_crawler(make_crawler(tmp_path, **settings))
    request, response = respond("http://a.example/library", ARTICLE)
    run(again.process_response(request, response))
    assert request.meta["_neardup_verdict"].revisit == "unchanged"
    (tmp_path / "other.pickle").write_bytes(b"another program's file")
    with pytest.raises(Exception, match="is not a toy index"):
        CrawlSession.for_crawler(
            make_crawler(
                tmp_path,
                NEARDUP_INDEX=f"toy:{tmp_path / 'other.pickle'}",
                NEARDUP_RESET=True,
            )
        )


@pytest.mark.parametrize("original_items", [0, 1])
def test_a_copy_keeps_its_item_when_its_original_gave_none(tmp_path, original_items):
    """A home page that shows an article in full is judged first: the article's own page is its
    copy. Its item is dropped only when the spider took an item from the original."""
    crawler = make_crawler(tmp_path, ITEM_PIPELINES={NearDupPipeline: 200})
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)
    spider_middleware = NearDupSpiderMiddleware.from_crawler(crawler)
    pipeline = NearDupPipeline.from_crawler(crawler)
    request, home = respond("http://a.example/", ARTICLE)
    run(middleware.process_response(request, home))
    taken = [{"url": home.url, "html": home.text}][:original_items]  # a listing gives no item
    for item in outputs(spider_middleware, home, taken):
        run(pipeline.process_item(item))
    request, story = respond("http://a.example/story", ARTICLE)
    run(middleware.process_response(request, story))
    (item,) = outputs(spider_middleware, story, [{"url": story.url, "html": story.text}])
    if original_items:
        with pytest.raises(NearDuplicateItem):
            run(pipeline.process_item(item))
    else:
        assert run(pipeline.process_item(item))["neardup"]["duplicate_of"] == home.url  # kept, tagged
        assert crawler.stats.get_value("neardup/kept/first") == 1
