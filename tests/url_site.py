"""A site whose pages have many URLs, served on 127.0.0.1 for the tests and benchmark of learned URL rules.

Article ``n`` is ``/a?id=n``. Its other URLs, as a crawl meets them on real sites: tracking
parameters (``utm_source``, ``utm_medium``), a session id (``sid``), a referrer tag (``ref``),
the print view (``/print/a?id=n``), the AMP view (``/a/amp?id=n``) and the other host name
(``localhost``). Parameters that matter: ``id``, the listing's ``page``, ``lang=de`` (another
text), and ``view=full``, which adds a long appendix on every fourth article and changes
nothing on the others. ``Changes`` makes one variant change only the last articles instead
(``lang=de`` another text, ``localhost`` another edition, ``page=2`` a second page, ``view=full``
its appendix), as a rule adopted on the first ones meets them. Listings (``/list?page=k``, in
``sort=asc`` and ``sort=desc``) link to articles under all these URLs; articles link to a few
others. ``pages(n)`` says which
distinct pages there are, so a test can tell a page never fetched. An article is made up
(``synthetic``) or a real page's (the benchmark's), served in that page with the site's links
added.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

VARIANTS = (
    "{u}", "{u}&utm_source=newsletter&utm_medium=email", "{u}&sid={s}", "{u}&ref=home", "/print{u}",
    "{amp}", "{u}&view=full", "{u}&lang=de", "{other}{u}",
)  # fmt: skip
PER_LIST = 8
LATE_KINDS = ("view", "lang", "host", "page")
# Where a real page's template holds its article's paragraphs.
ARTICLE = "<p>@@article@@</p>"


@dataclass(frozen=True)
class Article:
    """An article's title and paragraphs, and the real page they come from, with ``ARTICLE``
    where they go (None: made up)."""

    title: str
    paragraphs: tuple[str, ...]
    page: str | None = None


def synthetic(count: int, seed: int = 7) -> list[Article]:
    """``count`` distinct made-up articles: sentences of function words and random words."""
    rng = random.Random(seed)
    words = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "pu", "ri", "sa", "to") for b in range(60)]
    shapes = ("The {} is {} and the {} was {}.", "A {} has {} the {} of {}.", "It will {} the {} to {}.")
    articles = []
    for n in range(count):
        paragraphs = [
            " ".join(rng.choice(shapes).format(*rng.sample(words, 4)) for _ in range(8)) for _ in range(5)
        ]
        articles.append(Article(f"Article {n} " + rng.choice(words), tuple(paragraphs)))
    return articles


@dataclass(frozen=True)
class Changes:
    """Which variants change which articles: ``view=full`` every ``view_every``-th one and
    ``lang=de`` every one; with ``late`` (one of LATE_KINDS), that variant changes the articles
    from ``late_from`` on and none before (``host``: ``localhost`` serves another edition;
    ``page``: links carry ``page=2``, a second page)."""

    view_every: int = 4
    late: str = ""
    late_from: int = 0

    def changes(self, kind: str, number: int) -> bool:
        if kind == self.late:
            return number >= self.late_from
        return {"view": number % self.view_every == 0, "lang": True}.get(kind, False)


PLAIN = Changes()


def pages(count: int, changes: Changes = PLAIN) -> set[tuple[str, int, str]]:
    """The distinct pages of a site of ``count`` articles, as (path, id or page, variant) keys."""
    variants = {"lang": "de", "view": "full", "host": "edition", "page": "p2"}
    found = {("a", n, "") for n in range(count)} | {("list", k, "") for k in range(_lists(count))}
    found |= {("a", n, v) for n in range(count) for kind, v in variants.items() if changes.changes(kind, n)}
    return found


def page_of(
    path: str, query: dict[str, list[str]], changes: Changes = PLAIN, host: str = ""
) -> tuple[str, int, str] | None:
    """Which distinct page a URL is (None: no such page); ``host`` as the request named it."""
    try:
        number = int(query.get("id", query.get("page", ["0"]))[0])
    except ValueError:
        return None
    if path.strip("/") == "list":
        return "list", number, ""
    if path.strip("/") not in ("a", "print/a", "a/amp"):
        return None
    if query.get("lang") == ["de"] and changes.changes("lang", number):
        return "a", number, "de"
    if query.get("view") == ["full"] and changes.changes("view", number):
        return "a", number, "full"
    if query.get("page") == ["2"] and changes.changes("page", number):
        return "a", number, "p2"
    if host.startswith("localhost") and changes.changes("host", number):
        return "a", number, "edition"
    return "a", number, ""


def _lists(count: int) -> int:
    return (count + PER_LIST - 1) // PER_LIST


def handler(articles: Sequence[Article], port: list[int], changes: Changes = PLAIN):
    """A request handler class serving the site of ``articles`` (``port[0]``: where it listens;
    ``changes``: which variants change which articles)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            key = page_of(parts.path, query, changes, self.headers.get("Host", ""))
            if key is None or not 0 <= key[1] < (len(articles) if key[0] == "a" else _lists(len(articles))):
                self.send_error(404)
                return
            html = _listing(key[1], query, articles, port[0], changes) if key[0] == "list" else _article(
                key, parts.path.startswith("/print"), articles, port[0], changes
            )  # fmt: skip
            body = html.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _links(n: int, rng: random.Random, port: int, changes: Changes) -> list[str]:
    """URLs of article ``n`` as links on other pages carry them."""
    other = f"http://localhost:{port}"
    variants = VARIANTS + (("{u}&page=2",) if changes.late == "page" else ())
    return [
        v.format(u=f"/a?id={n}", s=rng.randrange(10**6), amp=f"/a/amp?id={n}", other=other) for v in variants
    ]


def _listing(k: int, query: dict[str, list[str]], articles: Sequence, port: int, changes: Changes) -> str:
    rng = random.Random(k)
    numbers = list(range(k * PER_LIST, min(len(articles), (k + 1) * PER_LIST)))
    if query.get("sort") == ["desc"]:
        numbers.reverse()
    teasers = []
    for n in numbers:
        title, lead = articles[n].title, (articles[n].paragraphs or ("",))[0]
        urls = _links(n, rng, port, changes)
        links = "".join(f'<a href="{escape(url)}">{escape(title)}</a> ' for url in urls)
        teasers.append(f"<div><h3>{escape(title)}</h3><p>{escape(lead)}</p>{links}</div>")
    orders = [(j, s) for j in range(_lists(len(articles))) for s in ("asc", "desc")]
    others = "".join(f'<a href="/list?page={j}&sort={s}">list {j}</a> ' for j, s in orders)
    body = f"<main>{''.join(teasers)}</main><nav>{others}</nav>"
    return f"<html><head><title>List {k}</title></head><body>{body}</body></html>"


def _article(
    key: tuple[str, int, str], printed: bool, articles: Sequence[Article], port: int, changes: Changes
) -> str:
    _, n, variant = key
    article = articles[n]
    paragraphs = article.paragraphs
    if variant == "de":  # another text: each paragraph's words in reverse order
        paragraphs = tuple(_reversed(p) for p in paragraphs)
    elif variant == "edition":  # another edition: each paragraph's words in another order
        paragraphs = tuple(" ".join(sorted(p.split(), key=str.lower)) for p in paragraphs)
    elif variant == "p2":  # a second page: each paragraph's words in a rotated order
        paragraphs = tuple(_rotated(p) for p in paragraphs)
    appendix: tuple[str, ...] = ()
    if variant == "full":  # a long appendix: the text of two articles further on
        appendix = articles[(n + 1) % len(articles)].paragraphs + articles[(n + 2) % len(articles)].paragraphs
    title = escape(article.title)
    if printed:
        text = "".join(f"<p>{escape(p)}</p>" for p in paragraphs + appendix)
        return f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{text}</body></html>"
    rng = random.Random(n)
    related = "".join(
        f'<a href="{escape(url)}">related</a> '
        for m in rng.sample(range(len(articles)), min(3, len(articles)))
        for url in rng.sample(_links(m, rng, port, changes), 3)
    )  # fmt: skip
    links = f"<aside>{related}<a href='/list?page={n // PER_LIST}&sort=asc'>more</a></aside>"
    text = "".join(f"<p>{escape(p)}</p>" for p in paragraphs + appendix)
    if article.page is not None:
        page = article.page.replace(ARTICLE, text)
        end = page.lower().rfind("</body>")
        return page[:end] + links + page[end:] if end >= 0 else page + links
    return (
        f"<html><head><title>{title}</title></head><body><header><a href='/list?page=0'>home</a></header>"
        f"<article><h1>{title}</h1>{text}</article>{links}</body></html>"
    )


def _reversed(text: str) -> str:
    return " ".join(reversed(text.split()))


def _rotated(text: str) -> str:
    words = text.split()
    return " ".join([*words[1::2], "continued", *words[0::2]])
