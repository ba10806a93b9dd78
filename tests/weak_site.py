"""A news site whose home page quotes a short story in full among teasers of the others: the
story's own page resembles the home page, not surely (a weak match), so a crawl lets it through;
its copies (tracking-parameter URLs, a second host name) must then be dropped as its copies."""

from __future__ import annotations

from html import escape
from pathlib import Path

from news_site import page, read_stories, story_main, teaser

SHORT = "heron-count"  # the story the home page quotes in full, cut to its first paragraphs
COPIES = ("utm_source=newsletter", "utm_source=social&utm_medium=post", "ref=home", "fbclid=x1")


def build(folder: Path, paragraphs: int = 3, others: int = 1) -> str:
    """Write the site into ``folder``; the path of the short story's page. The home page quotes its
    first ``paragraphs`` and ``others`` paragraphs of another story: with 3 and 1, the story's page
    is a weak match of the home page (SpotSigs 0.76 over texts of unequal length)."""
    stories = read_stories()
    title, text = stories[SHORT]
    text = text[:paragraphs]
    path = f"news/{SHORT}.html"

    def write(name: str, html: str) -> None:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(html, encoding="utf-8")

    write(path, page(title, story_main(title, text)))
    slugs = [slug for slug in stories if slug != SHORT][:6]
    for slug in slugs:
        write(f"news/{slug}.html", page(stories[slug][0], story_main(*stories[slug])))
    quoted = f"<h3>{escape(title)}</h3>" + "".join(f"<p>{escape(p)}</p>" for p in text)
    links = "".join(f'<p><a href="/{path}?{query}">{escape(title)}</a></p>' for query in COPIES)
    teasers = "".join(teaser(slug, *stories[slug]) for slug in slugs)
    more_title, more = stories[slugs[0]]  # the opening of another story, beside the quoted one
    teasers += f"<h3>{escape(more_title)}</h3>" + "".join(f"<p>{escape(p)}</p>" for p in more[:others])
    latest = f"<section><h2>Latest</h2>{quoted}{links}{teasers}</section>"
    write("index.html", page("The Millbrook Courier", latest))
    return "/" + path
