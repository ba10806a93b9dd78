"""NEARDUP_COMMENTS: a real article's comment view is a copy of the article with the setting off,
and a page of its own with it on (tests/comment_pages.py appends the comments)."""

from __future__ import annotations

import json
import re

import pytest
from comment_pages import comment_sentences, with_comments
from crawling import ADDON, crawl, path_of, serve

from scrapy_neardup.cli import main

# Real articles whose appended comment section every extractor finds (on some pages of the set
# trafilatura finds none: there the view stays a copy, setting or not).
ARTICLES = ("04a6711c", "06ee19", "076f4f")


def article(aeb_pages: dict[str, bytes], prefix: str) -> str:
    return next(body for key, body in aeb_pages.items() if key.startswith(prefix)).decode("utf-8", "replace")


def others(aeb_truth: dict[str, dict], prefix: str) -> list[str]:
    """The text of the other articles, the comments' raw material."""
    return [page["articleBody"] for key, page in sorted(aeb_truth.items()) if not key.startswith(prefix)]


def compare_json(capsys, a, b, *flags: str) -> dict:
    main(["compare", str(a), str(b), "--json", *flags])
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("extractor", ["trafilatura", "trafilatura-fast", "auto", "resiliparse"])
def test_a_comment_view_is_a_copy_unless_comments_count(tmp_path, capsys, aeb_pages, aeb_truth, extractor):
    html = article(aeb_pages, ARTICLES[0])
    sentences = comment_sentences(others(aeb_truth, ARTICLES[0])[5:], 500)
    assert 480 <= sum(len(s.split()) for s in sentences) <= 540
    (tmp_path / "a.html").write_text(html, encoding="utf-8")
    (tmp_path / "view.html").write_text(with_comments(html, sentences), encoding="utf-8")
    off = compare_json(capsys, tmp_path / "a.html", tmp_path / "view.html", "--extractor", extractor)
    assert off["decided_by"] == "exact" and off["crawl"]["decision"] == "drop"
    on = compare_json(
        capsys, tmp_path / "a.html", tmp_path / "view.html", "--extractor", extractor, "--comments", "1"
    )
    assert on["duplicate"] is False and on["crawl"]["decision"] == "keep"
    assert on["b"]["tokens"] >= off["b"]["tokens"] + 400


def test_short_comments_make_a_near_duplicate(tmp_path, capsys, aeb_pages, aeb_truth):
    html = article(aeb_pages, ARTICLES[0])
    sentences = comment_sentences(others(aeb_truth, ARTICLES[0])[5:], 150)
    (tmp_path / "a.html").write_text(html, encoding="utf-8")
    (tmp_path / "view.html").write_text(with_comments(html, sentences), encoding="utf-8")
    on = compare_json(capsys, tmp_path / "a.html", tmp_path / "view.html", "--comments", "true")
    assert on["duplicate"] is True and on["decided_by"] == "spotsigs" and 0.65 <= on["spotsigs"] < 0.95


def comment_site(folder, aeb_pages, aeb_truth) -> None:
    """A home page linking three real articles, each linking its comment view; the articles'
    own links are cut so the crawl stays on the site."""
    links = []
    for n, prefix in enumerate(ARTICLES):
        html = re.sub(r"\shref=", " data-href=", article(aeb_pages, prefix), flags=re.IGNORECASE)
        view = with_comments(html, comment_sentences(others(aeb_truth, prefix)[5 + 10 * n :], 500))
        more = f'<p><a href="/comments/{n}.html">Comments</a></p></body>'
        (folder / "news").mkdir(parents=True, exist_ok=True)
        (folder / "comments").mkdir(exist_ok=True)
        (folder / f"news/{n}.html").write_text(html.replace("</body>", more, 1), encoding="utf-8")
        (folder / f"comments/{n}.html").write_text(view, encoding="utf-8")
        links.append(f'<li><a href="/news/{n}.html">Story {n}</a></li>')
    (folder / "index.html").write_text(f"<html><body><ul>{''.join(links)}</ul></body></html>")


def test_comment_views_are_stored_only_with_comments_on(tmp_path, aeb_pages, aeb_truth):
    """Off, the views are copies; a second crawl on the same index with it on stores them (the
    setting does not shape the index) and lets the articles through as unchanged revisits."""
    site = tmp_path / "site"
    comment_site(site, aeb_pages, aeb_truth)
    stored = {}
    with serve(site) as base:
        for comments in (False, True):
            settings = {**ADDON, "NEARDUP_INDEX": str(tmp_path / "news.sqlite"), "NEARDUP_COMMENTS": comments}
            result = crawl(tmp_path, [base + "/index.html"], settings, item_pattern=r"/(news|comments)/")
            stored[comments] = {path_of(item["url"]) for item in result["items"]}
            revisits = result["stats"].get("neardup/revisits", 0)
    news = {f"/news/{n}.html" for n in range(3)}
    views = {f"/comments/{n}.html" for n in range(3)}
    assert stored[False] == news
    assert stored[True] == news | views and revisits >= 3
