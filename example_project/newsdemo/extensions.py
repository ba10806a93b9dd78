"""A small extension that saves the crawl's stats, so ``run_demo.py`` can print them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


class StatsFile:
    """Write every stat of the crawl as a JSON object to the file named by ``STATS_FILE`` at close."""

    def __init__(self, stats: StatsCollector, path: Path) -> None:
        self.stats = stats
        self.path = path

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatsFile:
        path = crawler.settings.get("STATS_FILE")
        if not path:
            raise NotConfigured("STATS_FILE is not set")
        extension = cls(crawler.stats, Path(path))
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_closed(self, spider: Spider, reason: str) -> None:
        stats = dict(self.stats.get_stats())
        stats.setdefault("finish_reason", reason)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(
            json.dumps(stats, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
        )
