"""Run one crawl for the crawl tests, in its own process (a Twisted reactor runs once per process).

    python tests/crawl_runner.py CONFIG.json

CONFIG: {"start_urls": [...], "settings": {...}, "out": "result.json", "skip_pattern": "...",
"dont_filter": false, "item_pattern": "...", "spider_args": {...}, "close_delay": seconds}. The
result file gets the crawl's stats, the URLs that reached the spider's callback and, per URL,
the ``neardup`` meta the middleware left; a failure to start prints the error and exits with
status 2.
"""

from __future__ import annotations

import json
import re
import sys
import time

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.http import TextResponse
from scrapy.logformatter import LogFormatter


class SiteSpider(scrapy.Spider):
    """Follows every link of the test site, each URL yielded once (as the dupefilter would keep
    it: the requests it drops cost Scrapy's spider middlewares and scheduler a third of a crawl);
    yields one item per HTML page with its HTML, and each entry of a JSON list (an API's items)
    as it is."""

    name = "site"

    def __init__(
        self,
        start_urls: list[str],
        skip_pattern: str = "",
        dont_filter: bool = False,
        item_pattern: str = "",
        **kw,
    ):
        super().__init__(**kw)
        self.start_urls = start_urls
        self.skip_pattern = skip_pattern
        self.dont_filter = dont_filter
        self.item_pattern = re.compile(item_pattern)  # items only of the pages it finds: articles
        self.parsed: list[str] = []
        self.page_meta: dict[str, object] = {}
        self.linked: set[str] = set()

    async def start(self):
        for url in self.start_urls:
            yield self.request(url, dont_filter=self.dont_filter)

    def start_requests(self):  # Scrapy < 2.13
        for url in self.start_urls:
            yield self.request(url, dont_filter=self.dont_filter)

    def request(self, url: str, dont_filter: bool = False) -> scrapy.Request:
        meta = {"neardup_skip": True} if self.skip_pattern and self.skip_pattern in url else {}
        return scrapy.Request(url, callback=self.parse, meta=meta, dont_filter=dont_filter)

    def parse(self, response):
        self.parsed.append(response.url)
        self.page_meta[response.url] = response.meta.get("neardup")
        if "json" in response.headers.get("Content-Type", b"").decode():
            entries = json.loads(response.text)
            yield from entries if isinstance(entries, list) else []
            return
        if (
            not isinstance(response, TextResponse)
            or "html" not in response.headers.get("Content-Type", b"").decode()
        ):
            return
        if self.item_pattern.search(response.url):
            yield {"url": response.url, "html": response.text}
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            if self.dont_filter or url not in self.linked:
                self.linked.add(url)
                yield self.request(url)


class ItemUrlLogFormatter(LogFormatter):
    """Scrapy's log lines, an item named by its URL: each item holds its page's HTML, which the
    DEBUG log would otherwise format and write in full (up to a third of a crawl's time)."""

    def scraped(self, item, response, spider):
        entry = super().scraped(item, response, spider)
        entry["args"]["item"] = brief(item)
        return entry

    def dropped(self, item, exception, response, spider):
        entry = super().dropped(item, exception, response, spider)
        entry["args"]["item"] = brief(item)
        return entry


def brief(item) -> str:
    return f"{{'url': {item.get('url')!r}, ...}}" if isinstance(item, dict) else repr(item)[:200]


def fill_index(crawler, pages_left: int) -> None:
    """Let the crawl's index grow by ``pages_left`` pages of the file only (PRAGMA max_page_count)."""
    from scrapy_neardup.crawl.session import CrawlSession

    db = CrawlSession.for_crawler(crawler).detector.index.db
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0] + pages_left}")


def main() -> int:
    with open(sys.argv[1]) as handle:
        config = json.load(handle)
    settings = {
        "LOG_LEVEL": "DEBUG",
        "LOG_FORMATTER": ItemUrlLogFormatter,
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
        **config.get("settings", {}),
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(SiteSpider)
    failures = []
    deferred = process.crawl(
        crawler,
        start_urls=config["start_urls"],
        skip_pattern=config.get("skip_pattern", ""),
        dont_filter=config.get("dont_filter", False),
        item_pattern=config.get("item_pattern", ""),
        **config.get("spider_args", {}),
    )
    deferred.addErrback(lambda failure: failures.append(failure.getErrorMessage() or repr(failure.value)))
    if config.get("close_delay"):  # a slow close (a feed stored far away): time to kill it meanwhile

        def slow(spider) -> None:
            spider.logger.info("Closing slowly (%s s)", config["close_delay"])
            time.sleep(config["close_delay"])

        crawler.signals.connect(slow, signals.spider_closed)
    if config.get("index_pages_left") is not None:  # a full disk, as SQLite meets it: SQLITE_FULL

        def fill(spider) -> None:  # a function held by this frame: signals keep weak references
            fill_index(crawler, config["index_pages_left"])

        crawler.signals.connect(fill, signals.spider_opened)
    process.start()
    if failures:
        print("CRAWL FAILED TO START:", failures[0], file=sys.stderr)
        return 2
    spider = crawler.spider
    result = {
        "stats": {
            k: (v if isinstance(v, (int, float, str)) else str(v))
            for k, v in crawler.stats.get_stats().items()
        },
        "parsed": spider.parsed,
        "meta": spider.page_meta,
    }
    with open(config["out"], "w") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
