"""NEARDUP_COMMENTS: a real article's comment view is a page of its own by default, and a copy of
the article with the setting off (tests/comment_pages.py appends the comments)."""

from __future__ import annotations

import json
import re

import pytest
from comment_pages import comment_sentences, with_comments
from crawling import ADDON, QuietHandler, crawl, path_of, serve

from scrapy_neardup.cli import main
from scrapy_neardup.config import DedupConfig
from scrapy_neardup.fingerprint import fingerprint

# Real articles whose appended comment section every extractor finds (on some pages of the set
# trafilatura finds none: there the view stays a copy, setting or not).
ARTICLES = ("04a6711c", "06ee19", "076f4f")


def article(aeb_pages: dict[str, bytes], prefix: str) -> str:
    return next(body for key, body in aeb_pages.items() if key.startswith(prefix)).decode("utf-8", "replace")


def others(aeb_truth: dict[str, dict], prefix: str) -> list[str]:
    """The text of the other articles, the comments' raw material."""
    return [page["articleBody"] for key, page in sorted(aeb_truth.items()) if not key.startswith(prefix)]


@pytest.mark.parametrize(
    ("html", "named"),
    [
        ('<div class="post comment-list">', True),
        ("<section id=Comments>", True),
        ("<div data-x='1' class='article-comments wide'>", True),
        ("<p>Leave a comment below.</p><a href='/comments'>", False),  # in text or a link, not a class
        ('<div class="COMMENTS">', False),  # trafilatura's XPaths find no section there either
        ("comment", False),
    ],
)
def test_names_comments_finds_what_trafilaturas_comment_xpaths_can_match(html, named):
    from trafilatura.utils import load_html

    from scrapy_neardup.comments import names_comments, readers_comments

    assert names_comments(html) is named
    if not named:  # no section the search would have found
        page = f"<html><body>{html}<p>{'A reader wrote this. ' * 30}</p></div></body></html>"
        assert readers_comments(load_html(page)) == ""


def compare_json(capsys, a, b, *flags: str) -> dict:
    main(["compare", str(a), str(b), "--json", *flags])
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("extractor", ["trafilatura", "trafilatura-fast", "auto", "resiliparse"])
def test_a_comment_view_is_a_page_of_its_own_unless_comments_are_off(
    tmp_path, capsys, aeb_pages, aeb_truth, extractor
):
    """By default (every extractor that finds comments) a view with 500 words of comments is no
    copy of its article; with the setting off it is an exact copy. The comments are never part of
    the main text: the two pages' texts are the same either way."""
    html = article(aeb_pages, ARTICLES[0])
    sentences = comment_sentences(others(aeb_truth, ARTICLES[0])[5:], 500)
    assert 480 <= sum(len(s.split()) for s in sentences) <= 540
    (tmp_path / "a.html").write_text(html, encoding="utf-8")
    (tmp_path / "view.html").write_text(with_comments(html, sentences), encoding="utf-8")
    on = compare_json(capsys, tmp_path / "a.html", tmp_path / "view.html", "--extractor", extractor)
    assert on["duplicate"] is False and on["crawl"]["decision"] == "keep"
    assert "readers' comments of its own" in on["crawl"]["why"]
    assert on["b"]["comment_words"] >= 450 and on["a"]["tokens"] == on["b"]["tokens"]
    off = compare_json(
        capsys, tmp_path / "a.html", tmp_path / "view.html", "--extractor", extractor, "--comments", "0"
    )
    assert off["decided_by"] == "exact" and off["crawl"]["decision"] == "drop"


def test_a_few_words_of_comments_leave_a_copy(tmp_path, capsys, aeb_pages, aeb_truth):
    """Under 100 words of comments (``COMMENT_WORDS``) a view is still a sure copy; so is a page
    met again with the same comments."""
    html = article(aeb_pages, ARTICLES[0])
    few = with_comments(html, comment_sentences(others(aeb_truth, ARTICLES[0])[5:], 60))
    many = with_comments(html, comment_sentences(others(aeb_truth, ARTICLES[0])[5:], 300))
    (tmp_path / "a.html").write_text(html, encoding="utf-8")
    (tmp_path / "few.html").write_text(few, encoding="utf-8")
    (tmp_path / "many.html").write_text(many, encoding="utf-8")
    (tmp_path / "many-again.html").write_text(
        many.replace("<body", "<body data-seen='2'", 1), encoding="utf-8"
    )
    few_words = compare_json(capsys, tmp_path / "a.html", tmp_path / "few.html")
    assert 0 < few_words["b"]["comment_words"] < 100
    assert few_words["decided_by"] == "exact" and few_words["crawl"]["decision"] == "drop"
    again = compare_json(capsys, tmp_path / "many.html", tmp_path / "many-again.html")
    assert again["b"]["comment_words"] >= 250 and again["crawl"]["decision"] == "drop"


def test_a_comment_widget_s_script_form_and_notices_are_no_comments(tmp_path, capsys, aeb_pages, aeb_truth):
    """A comment section that holds no reader's words (a comment widget's script, the reply form
    and a privacy notice under it, 200 words in all) leaves a print view a sure copy of the page;
    a reader's comments beside them are counted alone."""
    html = article(aeb_pages, ARTICLES[0])
    notice = " ".join(comment_sentences(others(aeb_truth, ARTICLES[0])[5:], 120))
    script = "var disqus_url = 'https://example.com/a'; " + "var x = 'one two three four five six'; " * 8
    widget = (
        "<div class='comments' id='comments'><h3>Leave a comment</h3>"
        f"<script>{script}</script><form id='commentform'><label for='c'>Comment</label>"
        "<textarea id='c'></textarea>"
        "<button>Post Comment</button></form>"
        f"<div class='form-privacy-notice'><p>{notice}</p></div></div>"
    )
    page = html.replace("</body>", widget + "</body>", 1)
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    (tmp_path / "print.html").write_text(html, encoding="utf-8")
    bare = compare_json(capsys, tmp_path / "print.html", tmp_path / "page.html")
    assert bare["b"]["comment_words"] < 10 and bare["crawl"]["decision"] == "drop"
    said = comment_sentences(others(aeb_truth, ARTICLES[0])[40:], 150)
    with_readers = page.replace(widget, widget.replace("<h3>", f"<p>{' '.join(said)}</p><h3>", 1), 1)
    (tmp_path / "readers.html").write_text(with_readers, encoding="utf-8")
    readers = compare_json(capsys, tmp_path / "print.html", tmp_path / "readers.html")
    assert 140 <= readers["b"]["comment_words"] <= 170 and readers["crawl"]["decision"] == "keep"


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


def test_comment_views_are_stored_unless_comments_are_off(tmp_path, aeb_pages, aeb_truth):
    """Off, the views are copies; a second crawl on the same index with it on (the default)
    stores them (the setting does not shape the index) and lets the articles through as
    unchanged revisits."""
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


class ViewHandler(QuietHandler):
    """Serves ``<path>?view=comments`` from ``comments/<path>``: the article with its comments."""

    def send_head(self):
        path, _, query = self.path.partition("?")
        if query == "view=comments":
            self.path = "/comments" + path
        return super().send_head()


def view_site(folder, aeb_pages, aeb_truth, commented: bool, articles: int = 20) -> set[str]:
    """``articles`` real articles, each linking its ``?view=comments``: the article and 150
    words of readers' comments (``commented``), or the article alone; the paths of the views.
    Only articles whose comments the default extractor finds, and that have none of their own."""
    config = DedupConfig()
    links, views = [], set()
    for key, body in sorted(aeb_pages.items()):
        html = re.sub(r"\shref=", " data-href=", body.decode("utf-8", "replace"), flags=re.IGNORECASE)
        view = with_comments(html, comment_sentences(others(aeb_truth, key[:8])[len(links) :], 150))
        if fingerprint(html, config).comment_words or fingerprint(view, config).comment_words < 100:
            continue
        n = len(links)
        (folder / "news").mkdir(parents=True, exist_ok=True)
        (folder / "comments/news").mkdir(parents=True, exist_ok=True)
        more = f'<p><a href="/news/{n}.html?view=comments">Comments</a></p></body>'
        (folder / f"news/{n}.html").write_text(html.replace("</body>", more, 1), encoding="utf-8")
        (folder / f"comments/news/{n}.html").write_text(view if commented else html, encoding="utf-8")
        links.append(f'<li><a href="/news/{n}.html">Story {n}</a></li>')
        views.add(f"/news/{n}.html?view=comments")
        if len(links) == articles:
            break
    (folder / "index.html").write_text(f"<html><body><ul>{''.join(links)}</ul></body></html>")
    assert len(views) == articles
    return views


@pytest.mark.slow(30)
def test_a_parameter_rule_is_never_adopted_on_views_that_differ_by_their_comments(
    tmp_path, aeb_pages, aeb_truth
):
    """20 articles and their ``?view=comments``. Views of the article alone adopt the ``view``
    rule (14 copies at NEARDUP_URL_MAX_ERROR = 0.2). Views with 150 words of comments are
    pages of their own by default (counter-examples: the rule is refused); with comments off
    they are copies that differ by text the extractor left out, which teaches the rule nothing:
    every view is fetched either way."""
    sites = {}
    for commented, comments in ((False, True), (True, True), (True, False)):
        site = tmp_path / f"site-{commented}"
        if commented not in sites:
            sites[commented] = view_site(site, aeb_pages, aeb_truth, commented)
        views = sites[commented]
        with serve(site, handler=ViewHandler) as base:
            settings = {**ADDON, "NEARDUP_INDEX": str(tmp_path / f"{commented}-{comments}.sqlite"),
                        "NEARDUP_COMMENTS": comments, "NEARDUP_URL_MAX_ERROR": 0.2,
                        "NEARDUP_WORKERS": 0}  # fmt: skip
            result = crawl(tmp_path, [base + "/index.html"], settings, item_pattern=r"/news/")
        stats, stored = result["stats"], {path_of(item["url"]) for item in result["items"]}
        if not commented:
            assert stats.get("neardup/urls/adopted") == 1  # the view parameter: 14 copies, none other
            assert not stored & views  # each a copy of its article
            continue
        assert not stats.get("neardup/urls/adopted") and not stats.get("neardup/urls/skipped")
        assert {path_of(url) for url in result["parsed"]} >= views
        if comments:
            assert views <= stored  # kept: pages of their own
        else:
            assert not stored & views and stats.get("neardup/dropped", 0) >= len(views)
