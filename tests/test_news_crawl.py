"""The one-line setup on a news site (tests/news_site.py): every story stored once, whatever the order."""

from __future__ import annotations

import collections
import json

import pytest
from crawling import ADDON, crawl, serve
from news_site import build

from scrapy_neardup.cli import main

# A news spider takes items from article pages (and their print versions), not from its listings.
ARTICLES = r"/(news|print|blog)/"


def path_of(url: str) -> str:
    """A crawled URL's path and query, or an API entry's own (relative) URL."""
    return url if url.startswith("/") else "/" + url.split("/", 3)[3]


def stored_stories(result: dict, holds: dict[str, str]) -> collections.Counter:
    """How many items of each story reached the feed (pages of no story left out)."""
    held = (holds[path_of(item["url"])] for item in result["items"])
    return collections.Counter(what for what in held if what.startswith("story:"))


@pytest.mark.slow
@pytest.mark.parametrize(("concurrency", "seed"), [(1, 0), (16, 1), (16, 2), (1, 3)])
def test_the_addon_line_stores_every_story_once(tmp_path, concurrency, seed):
    site = tmp_path / "site"
    holds = build(site, seed)
    stories = {what for what in holds.values() if what.startswith("story:")}
    settings = {**ADDON, "NEARDUP_INDEX": str(tmp_path / "news.sqlite"), "CONCURRENT_REQUESTS": concurrency}
    with serve(site) as base:
        result = crawl(tmp_path, [base + "/index.html"], settings, item_pattern=ARTICLES)
    assert stored_stories(result, holds) == collections.Counter(stories)
    meta = {path_of(url): result["meta"].get(url) or {} for url in result["parsed"]}
    # A listing that repeats its twin was judged a duplicate, and reached the spider all the same.
    twins = [p for p in meta if holds[p].startswith("page:") and meta[p].get("sure")]
    assert twins, "no listing page was a sure duplicate of its twin: the site tests nothing"
    stats = result["stats"]
    assert stats["neardup/dropped"] >= 10 and "neardup/ignored" not in stats
    assert stats["neardup/duplicates/exact"] >= 4 and stats["neardup/duplicates/near"] >= 8


def test_ignoring_duplicate_responses_loses_a_story_only_a_twin_links_to(tmp_path):
    """Why drop mode follows a duplicate's links: with the response ignored, the story that only
    the second listing of a pair links to is never fetched."""
    site = tmp_path / "site"
    holds = build(site, 0)
    settings = {**ADDON, "NEARDUP_INDEX": str(tmp_path / "news.sqlite"), "NEARDUP_ACTION": "ignore"}
    settings["NEARDUP_WORKERS"] = 0  # inline: a pool's workers cost 3 s of CPU and change no verdict
    with serve(site) as base:
        result = crawl(tmp_path, [base + "/index.html"], settings, item_pattern=ARTICLES)
    stored = stored_stories(result, holds)
    lost = {what for what in holds.values() if what.startswith("story:")} - set(stored)
    assert lost and result["stats"]["neardup/ignored"] >= 1


def saved(site, url: str, tmp_path):
    """The file holding what the crawl judged at ``url``: the page's file, or an API entry written out."""
    path = path_of(url).split("?")[0]
    if not path.startswith("/api/"):
        return site / path.lstrip("/")
    entry = next(e for e in json.loads((site / "api/stories.json").read_text()) if e["url"] == path)
    out = tmp_path / (path.replace("/", "_") + (".html" if "html" in entry else ".txt"))
    out.write_text(entry.get("html") or entry["text"], encoding="utf-8")
    return out


@pytest.mark.parametrize("bar", [None, "0.9"])
def test_compare_states_the_crawls_decision_on_every_duplicate(tmp_path, capsys, bar):
    """``compare`` on (original, page) for each duplicate a drop-mode crawl met: drop exactly when
    the crawl called it sure, uncertain otherwise."""
    site = tmp_path / "site"
    build(site, 0)
    settings = {**ADDON, "NEARDUP_INDEX": str(tmp_path / "news.sqlite"), "CONCURRENT_REQUESTS": 1}
    settings["NEARDUP_WORKERS"] = 0  # inline: a pool's workers cost 3 s of CPU and change no verdict
    settings.update({"NEARDUP_DROP_ABOVE": float(bar)} if bar else {})
    with serve(site) as base:
        result = crawl(tmp_path, [base + "/index.html"], settings, item_pattern=ARTICLES)
    decisions = collections.Counter()
    for url in result["parsed"]:
        meta = result["meta"].get(url) or {}
        if not meta.get("duplicate"):
            continue
        a, b = saved(site, meta["duplicate_of"], tmp_path), saved(site, url, tmp_path)
        main(
            [
                "compare",
                str(a),
                str(b),
                "--json",
                "--min-tokens",
                "30",
                *(["--drop-above", bar] if bar else []),
            ]
        )
        stated = json.loads(capsys.readouterr().out)["crawl"]
        decisions[stated["decision"]] += 1
        assert stated["decision"] == ("drop" if meta["sure"] else "uncertain"), (url, meta, stated)
    assert decisions["drop"] >= 20 and decisions["uncertain"] >= 1, decisions
