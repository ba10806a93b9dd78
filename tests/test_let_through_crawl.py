"""A crawl keeps each article once: a page let through as a weak match is an original, so its
copies (tracking parameters, a second host name) are dropped as its copies (tests/weak_site.py)."""

from __future__ import annotations

import collections
import uuid

import pytest
from crawling import ADDON, crawl, serve
from weak_site import build


def repeated_items(items: list[dict]) -> int:
    """Items byte-identical to an earlier item of the same feed."""
    seen = collections.Counter(item["html"] for item in items)
    return sum(n - 1 for n in seen.values())


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_weak_match_let_through_has_its_copies_dropped(tmp_path, backend, request):
    site = tmp_path / "site"
    story = build(site)
    if backend == "redis":
        redis_url = request.getfixturevalue("redis_url")
        index = {
            "NEARDUP_INDEX": f"{redis_url}?prefix={uuid.uuid4().hex}",
        }
    else:
        index = {"NEARDUP_INDEX": str(tmp_path / "news.sqlite")}
    with serve(site) as base:
        alias = base.replace("127.0.0.1", "localhost")  # the same server under a second host name
        starts = [base + "/index.html", alias + story, alias + story + "?utm_campaign=spring"]
        result = crawl(tmp_path, starts, {**ADDON, **index}, item_pattern=r"/news/")
    items = result["items"]
    assert repeated_items(items) == 0
    copies = [url for url in result["parsed"] if story in url]
    assert len(copies) >= 6  # the story under every URL the site links it by, and under the alias
    assert sum(story in item["url"] for item in items) == 1
    # The site tests what it means to: the first of them was a weak match, let through.
    assert result["stats"]["neardup/uncertain"] == 1
