"""The item the news spider stores: one per HTML page."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PageItem:
    """A crawled page: its URL, its ``<title>`` and its whole HTML.

    ``html`` is the field the near-duplicate pipeline reads (``NEARDUP_ITEM_FIELD``).
    """

    url: str
    title: str
    html: str
