"""The item the news spider stores: one per HTML page."""

from __future__ import annotations

import scrapy


class PageItem(scrapy.Item):
    """A crawled page: its URL, its ``<title>`` and its whole HTML.

    ``html`` is the field the near-duplicate pipeline reads (``NEARDUP_ITEM_FIELD``);
    ``neardup`` receives the verdict in tag mode (``NEARDUP_ACTION = "tag"``) and stays
    unset, so out of the feed, in drop mode.
    """

    url = scrapy.Field()
    title = scrapy.Field()
    html = scrapy.Field()
    neardup = scrapy.Field()
