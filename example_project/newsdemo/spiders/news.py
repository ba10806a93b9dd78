"""The ``news`` spider: crawl one site from its start URL and store every HTML page as an item."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import HtmlResponse
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor

from newsdemo.items import PageItem

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response


class NewsSpider(scrapy.Spider):
    """Follow every link within the start URL's site (same host and port), one item per HTML page.

    The start URL comes from ``-a start_url=http://...`` or else the ``NEWS_START_URL`` setting.
    PDFs and other non-HTML links are fetched too (the near-duplicate middleware lets them
    through untouched), but only HTML pages become items.
    """

    name = "news"
    # Keep .pdf links: the demo shows that non-HTML responses pass through untouched.
    link_extractor = LinkExtractor(deny_extensions=[ext for ext in IGNORED_EXTENSIONS if ext != "pdf"])

    def __init__(self, start_url: str | None = None, seed: str = "1", *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.start_url = start_url
        self.site = ""
        # ``-a seed=0``: another crawler seeds a shared queue (scrapy-redis); this one only takes from it.
        self.seed = seed not in ("0", "false", "no")

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> NewsSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        start_url = spider.start_url or crawler.settings.get("NEWS_START_URL")
        if not start_url:
            raise ValueError(
                "news spider: give a start URL, -a start_url=http://host:port/ or -s NEWS_START_URL=..."
            )
        parts = urlsplit(start_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"news spider: start_url must be an http(s) URL, got {start_url!r}")
        spider.start_url = start_url
        spider.site = parts.netloc
        spider.allowed_domains = [parts.hostname]
        return spider

    async def start(self) -> AsyncIterator[scrapy.Request]:
        if self.seed:
            yield scrapy.Request(self.start_url, callback=self.parse)

    def parse(self, response: Response) -> Iterator[PageItem | scrapy.Request]:
        if not isinstance(response, HtmlResponse):
            return
        title = " ".join(response.css("title::text").get(default="").split())
        yield PageItem(url=response.url, title=title, html=response.text)
        for link in self.link_extractor.extract_links(response):
            if urlsplit(link.url).netloc == self.site:
                yield response.follow(link, callback=self.parse)
