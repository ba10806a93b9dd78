"""Build the bundled demo site in ``site/`` from the article sources in ``site_src/articles/``.

The site is a small local news paper, The Millbrook Courier, whose articles also appear
as print versions, under URLs with tracking parameters (from a newsletter), syndicated by
a partner site under its own template, lightly edited on a community board, and quoted
in listing pages. Besides the pages it writes ``site/truth.json`` and ``site/README.md``:
which page is a duplicate of which. The generated files are committed; rerun this script
after editing an article (``python build_site.py``) and commit the result.

Every copy is linked only from a page one level deeper than its original, so a
breadth-first crawl (the example project's settings) always meets the original first.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from datetime import date
from html import escape
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "site_src" / "articles"
SITE = HERE / "site"

SECTIONS = {
    "town-hall": "Town Hall",
    "schools": "Schools",
    "business": "Business",
    "environment": "Environment",
    "culture-sport": "Culture & Sport",
}
MOST_READ = ["footbridge-approved", "regatta-results", "bakery-fifty-years", "heron-count", "cinema-organ"]
NEWSLETTER = "/newsletter/2024-05-10.html"
TRACKING = "utm_source=newsletter&utm_medium=email&utm_campaign=weekly-2024-05-10"
NEWSLETTER_ITEMS = {
    "heron-count": "Forty nests and the first nesting egrets: the Marsh Lane count in full.",
    "orchard-frost": "Two nights below freezing, and what they mean for this year's apples.",
    "footbridge-approved": "Six votes to two: Willow Bend gets its bridge and Ferry Lane a parking trial.",
    "robotics-team-regional": "Meet Turnip, the robot built from an office chair and bicycle brakes.",
}
SYNDICATED = {
    "harbour-street-bridge-closure": "Harbour Street Bridge Shuts for Eight Weeks",
    "farmers-market-rail-yard": "Millbrook Market Heads for the Old Goods Shed",
    "regatta-results": "Home Water Brings Four Wins for Millbrook Rowers",
}
PDF_LINK_FROM = "footbridge-approved"
PDF_PATH = "/files/council-budget-2024.pdf"


@dataclass(frozen=True)
class Article:
    slug: str
    title: str
    section: str
    date: date
    author: str
    paragraphs: tuple[str, ...]
    lang: str = "en"

    @property
    def teaser(self) -> str:
        return self.paragraphs[0]


@dataclass(frozen=True)
class Edit:
    """A light edit of a repost: a new headline, phrase replacements, paragraph moves, additions."""

    title: str
    replacements: tuple[tuple[str, str], ...] = ()
    swap: tuple[int, int] | None = None
    append: str = ""

    def apply(self, article: Article) -> Article:
        text = "\n\n".join(article.paragraphs)
        for old, new in self.replacements:
            if text.count(old) != 1:
                raise SystemExit(f"edit of {article.slug}: {old!r} occurs {text.count(old)} times, not once")
            text = text.replace(old, new)
        paragraphs = [p for p in text.split("\n\n") if p.strip()]
        if self.swap:
            i, j = self.swap
            paragraphs[i], paragraphs[j] = paragraphs[j], paragraphs[i]
        if self.append:
            paragraphs.append(self.append)
        return replace(article, title=self.title, paragraphs=tuple(paragraphs))


REPOSTS = {
    "library-reading-challenge": Edit(
        title="Library celebrates its busiest reading summer",
        replacements=(
            ("with 412 young readers", "with more than four hundred young readers"),
            ("a very detailed account", "a detailed account"),
            ("Not every part of the summer went smoothly. ", ""),
            ("on Saturday the 21st at eleven o'clock", "on Saturday 21 September at 11am"),
        ),
        append="Posted to the community board by the Friends of Millbrook Library, "
        "who thank every volunteer who took part.",
    ),
    "bakery-fifty-years": Edit(
        title="Fifty years of bread on Mill Road",
        replacements=(
            ("forty different loaves", "about forty kinds of loaf"),
            ("on Saturday it will be given away", "this Saturday it will be handed out"),
            (
                "A stone oven installed in 2015 allows the team of seven to bake through the night.",
                "Since 2015 a stone oven has let the team of seven bake through the night.",
            ),
        ),
        swap=(3, 4),
    ),
}
GERMAN = "brunnenfest-lindenau"
GERMAN_UPDATE = Edit(
    title="Brunnenfest in Lindenau: Besuch aus Millbrook",
    replacements=(
        ("am vergangenen Wochenende", "Mitte Juni"),
        ("Rund zwanzig Gäste", "Zweiundzwanzig Gäste"),
        ("können sich schon jetzt bei", "können sich bis Ende Oktober bei"),
    ),
    append="Fotos vom Fest zeigt die Stadtbibliothek im Juli in einer kleinen Ausstellung.",
)

GERMAN_MONTHS = [
    *("Januar", "Februar", "März", "April", "Mai", "Juni"),
    *("Juli", "August", "September", "Oktober", "November", "Dezember"),
]


def read_article(path: Path) -> Article:
    head, _, body = path.read_text(encoding="utf-8").partition("\n\n")
    fields = dict(line.split(": ", 1) for line in head.splitlines())
    paragraphs = tuple(" ".join(p.split()) for p in body.split("\n\n") if p.strip())
    return Article(
        slug=path.stem,
        title=fields["title"],
        section=fields["section"],
        date=date.fromisoformat(fields["date"]),
        author=fields["author"],
        paragraphs=paragraphs,
        lang=fields.get("lang", "en"),
    )


def human_date(d: date, lang: str = "en") -> str:
    if lang == "de":
        return f"{d.day}. {GERMAN_MONTHS[d.month - 1]} {d.year}"
    return f"{d.day} {d.strftime('%B %Y')}"


def paras(paragraphs: tuple[str, ...] | list[str]) -> str:
    return "\n".join(f"<p>{escape(p, quote=False)}</p>" for p in paragraphs)


# --- The Millbrook Courier template --------------------------------------------------------------


def courier_page(title: str, main: str, articles: dict[str, Article], lang: str = "en") -> str:
    nav = "\n".join(
        f'      <li><a href="/section/{key}.html">{escape(name)}</a></li>' for key, name in SECTIONS.items()
    )
    most_read = "\n".join(
        f'      <li><a href="/news/{slug}.html">{escape(articles[slug].title)}</a></li>' for slug in MOST_READ
    )
    return f"""<!DOCTYPE html>
<html lang="{lang}">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>{escape(title)} | The Millbrook Courier</title>
  <link rel="stylesheet" href="/static/courier.css">
</head>
<body>
  <header class="masthead">
    <p class="site-name"><a href="/">The Millbrook Courier</a></p>
    <p class="tagline">News from Millbrook and the Alder valley since 1889</p>
    <nav class="sections"><ul>
      <li><a href="/">Home</a></li>
{nav}
      <li><a href="/community/">Community board</a></li>
      <li><a href="{NEWSLETTER}">Newsletter</a></li>
    </ul></nav>
  </header>
  <div class="layout">
  <main>
{main}
  </main>
  <aside class="most-read">
    <h2>Most read this week</h2>
    <ol>
{most_read}
    </ol>
    <p class="subscribe">Get the Courier delivered every Thursday for less than the price of a coffee.
    Ask at the front desk on Quay Road or call the circulation team.</p>
  </aside>
  </div>
  <footer class="site-footer">
    <p><a href="/about.html">About the Courier</a> · <a href="/archive.html">Archive</a>
    · <a href="/partner/">Our partner: the Valley Evening Post</a>
    · <a href="/de/{GERMAN}.html">Aus der Partnerstadt</a></p>
    <p>© 2024 Millbrook Courier Ltd, 12 Quay Road, Millbrook. The Courier is an independent
    newspaper. All stories and photographs are the property of their authors and may not be
    reproduced without permission. Letters to the editor are welcome and may be edited for length.</p>
  </footer>
</body>
</html>
"""


def article_main(a: Article, *, note: str = "", tools: str = "") -> str:
    section = SECTIONS.get(a.section)
    section_link = f' · <a href="/section/{a.section}.html">{escape(section)}</a>' if section else ""
    return f"""    <article class="story">
      <h1>{escape(a.title)}</h1>
      <p class="byline">By {escape(a.author)} · <time datetime="{a.date.isoformat()}">{
        human_date(a.date, a.lang)
    }</time>{section_link}</p>
{note}{paras(a.paragraphs)}
{tools}    </article>"""


def listing_main(heading: str, intro: str, entries: list[tuple[str, Article, str]]) -> str:
    """A listing page: headline links with the quoted teaser (or a blurb) of each article."""
    items = []
    for href, a, blurb in entries:
        section = SECTIONS.get(a.section, "")
        items.append(
            f"""      <li class="teaser">
        <h2><a href="{escape(href)}">{escape(a.title)}</a></h2>
        <p class="meta">{escape(section)} · {human_date(a.date, a.lang)}</p>
        <p>{escape(blurb, quote=False)}</p>
      </li>"""
        )
    body = "\n".join(items)
    intro_html = f'    <p class="intro">{escape(intro, quote=False)}</p>\n' if intro else ""
    return f"""    <h1>{escape(heading)}</h1>
{intro_html}    <ul class="listing">
{body}
    </ul>"""


# --- the print template ---------------------------------------------------------------------------


def print_page(a: Article) -> str:
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{escape(a.title)} (print version)</title>
<meta name="robots" content="noindex">
<style>body {{ font-family: Georgia, serif; max-width: 38em; margin: 2em auto; }}</style>
</head>
<body class="print">
<p class="print-head">THE MILLBROOK COURIER · print edition</p>
<h1>{escape(a.title)}</h1>
<p><b>{escape(a.author)}</b>, {human_date(a.date)}</p>
{paras(a.paragraphs)}
<hr>
<p class="print-foot">Printed from The Millbrook Courier online.
<a href="/news/{a.slug}.html">Back to the story</a>.</p>
</body>
</html>
"""


# --- the Valley Evening Post (partner) template ----------------------------------------------------


def partner_page(title: str, content: str, trending: list[tuple[str, str]]) -> str:
    trend = "\n".join(f'<li><a href="{href}">{escape(t)}</a></li>' for href, t in trending)
    return f"""<!doctype html>
<html>
<head>
<meta http-equiv="Content-Type" content="text/html; charset=utf-8">
<title>{escape(title)} - Valley Evening Post</title>
<link rel="stylesheet" href="/static/valley.css">
</head>
<body class="vep">
<div id="cookie-bar">We use cookies to remember your preferences, to count visits and to show you
offers from carefully chosen partners. By continuing to browse the Valley Evening Post you agree
to our use of cookies. You can change your choices at any time in the privacy centre.
<a href="/partner/">OK, got it</a></div>
<div id="top"><span class="logo">VALLEY EVENING POST</span>
<span class="strap">Serving the Alder valley and the estuary every weekday</span>
<div class="menu"><a href="/partner/">Latest</a> | <a href="/partner/">Valley news</a> |
<a href="/partner/">Sport</a> | <a href="/partner/">What's on</a> | <a href="/partner/">Jobs</a></div></div>
<table id="content" width="100%"><tr>
<td class="col-main" valign="top">
{content}
</td>
<td class="col-side" valign="top" width="30%">
<div class="box"><h4>Trending now</h4><ul>
{trend}
</ul></div>
<div class="box signup">Get the Evening Post briefing in your inbox every weekday at six.
Sign up free, unsubscribe at any time. We never share your address.</div>
<div class="box ad">ADVERTISEMENT<br>Kingsholm Motors: nearly new cars with a two-year warranty.</div>
</td></tr></table>
<div id="foot">© Valley Evening Post Media. All rights reserved. Registered office: 4 Wharf Buildings,
Kingsholm. Reproduction of any material from this site without written permission is prohibited.
Advertising · Contact us · Terms of use · Privacy centre · Complaints</div>
</body>
</html>
"""


def partner_story(a: Article, headline: str, *, syndicated: bool) -> str:
    paragraphs = list(a.paragraphs)
    credit = ""
    if syndicated:
        paragraphs[0] = "MILLBROOK – " + paragraphs[0]
        credit = (
            '\n<p class="credit"><i>This story first appeared in The Millbrook Courier and is '
            "republished here under our content-sharing agreement.</i></p>"
        )
    source = "The Millbrook Courier" if syndicated else "Valley Evening Post"
    return f"""<div class="kicker">AROUND THE VALLEY</div>
<h2 class="headline">{escape(headline)}</h2>
<div class="meta">{escape(a.author)} · {source} · {a.date.strftime("%d/%m/%Y")}</div>
<div class="story-body">
{paras(paragraphs)}{credit}
</div>
<div class="comments">14 comments · Sign in to join the conversation.
Please keep comments civil and on topic.</div>"""


# --- building ----------------------------------------------------------------------------------------

COURIER_CSS = """body { font-family: Georgia, serif; margin: 0; color: #222; }
.masthead { background: #123; color: #fff; padding: 1em 2em; }
.masthead a { color: #fff; }
.site-name { font-size: 2em; margin: 0; }
.sections ul { list-style: none; padding: 0; display: flex; gap: 1em; flex-wrap: wrap; }
.layout { display: flex; gap: 2em; padding: 1em 2em; }
main { flex: 3; max-width: 42em; }
.most-read { flex: 1; font-family: sans-serif; font-size: 0.9em; }
.byline, .meta { color: #666; font-family: sans-serif; font-size: 0.9em; }
.listing { list-style: none; padding: 0; }
.site-footer { border-top: 1px solid #ccc; padding: 1em 2em; font-size: 0.8em; color: #555; }
"""
VALLEY_CSS = """body.vep { font-family: Arial, sans-serif; background: #f4f0e8; margin: 0; }
#cookie-bar { background: #333; color: #eee; padding: 0.5em; font-size: 0.8em; }
#top { background: #a31; color: #fff; padding: 0.5em 1em; }
#top a { color: #fff; }
.logo { font-weight: bold; font-size: 1.6em; letter-spacing: 0.1em; }
.kicker { color: #a31; font-weight: bold; font-size: 0.8em; }
.box { background: #fff; margin: 0.5em; padding: 0.5em; }
#foot { font-size: 0.7em; color: #666; padding: 1em; }
"""
ROBOTS = "User-agent: *\nDisallow:\n"
ARCHIVE_NOTICE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Archive</title></head>
<body>
<p>The printed archive has moved to the library.</p>
</body>
</html>
"""


def minimal_pdf(text: str) -> bytes:
    """A tiny valid one-page PDF: a binary page the crawl must pass through untouched."""
    stream = f"BT /F1 14 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


class SiteWriter:
    """Writes pages under ``site/`` and records each page's expected outcome."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.truth: dict[str, dict[str, str]] = {}

    def write(self, path: str, content: str | bytes, **truth: str) -> None:
        target = self.root / path.lstrip("/")
        if path.endswith("/"):
            target = target / "index.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8") if isinstance(content, str) else content
        target.write_bytes(data)
        self.truth[path] = truth

    def alias(self, path: str, **truth: str) -> None:
        """A URL served by an existing file (the server ignores query strings)."""
        self.truth[path] = truth


def build() -> dict[str, dict[str, str]]:
    articles = {a.slug: a for a in map(read_article, sorted(SOURCES.glob("*.txt")))}
    courier = sorted(
        (a for a in articles.values() if a.section in SECTIONS), key=lambda a: a.date, reverse=True
    )
    german = articles[GERMAN]
    ferry = articles["valley-ferry-sunday"]

    if SITE.exists():
        shutil.rmtree(SITE)
    site = SiteWriter(SITE)
    site.write("/robots.txt", ROBOTS, expect="not_crawled", kind="robots.txt")
    site.write("/static/courier.css", COURIER_CSS, expect="not_crawled", kind="stylesheet")
    site.write("/static/valley.css", VALLEY_CSS, expect="not_crawled", kind="stylesheet")

    # Listing pages: the front page, one page per section, the community board, the newsletter.
    front = listing_main(
        "Latest news",
        "",
        [(f"/news/{a.slug}.html", a, a.teaser) for a in courier]
        + [(f"/de/{german.slug}.html", german, german.teaser)],
    )
    site.write("/", courier_page("Latest news", front, articles), expect="unique", kind="listing")
    for key, name in SECTIONS.items():
        entries = [(f"/news/{a.slug}.html", a, a.teaser) for a in courier if a.section == key]
        site.write(
            f"/section/{key}.html",
            courier_page(name, listing_main(name, "", entries), articles),
            expect="unique",
            kind="listing",
        )
    letter = listing_main(
        "The Courier weekly, 10 May 2024",
        "Good morning, and welcome to the weekly round-up from the Courier news desk. Here are the "
        "stories readers shared most this week, and a reminder that letters for next week's paper "
        "must reach us by noon on Wednesday.",
        [
            (f"/news/{slug}.html?{TRACKING}", articles[slug], blurb)
            for slug, blurb in NEWSLETTER_ITEMS.items()
        ],
    )
    site.write(NEWSLETTER, courier_page("Newsletter", letter, articles), expect="unique", kind="listing")
    about = (
        "    <h1>About the Courier</h1>\n    <p>The Millbrook Courier has reported on Millbrook and the "
        "Alder valley since 1889. It is published every Thursday by Millbrook Courier Ltd, an independent "
        "company owned by its staff. The news desk is at 12 Quay Road and welcomes story ideas, letters "
        "and corrections from readers.</p>"
    )
    site.write("/about.html", courier_page("About", about, articles), expect="unique", kind="page")
    # A bare notice without the site's template: too little text to judge under any sane minimum.
    site.write("/archive.html", ARCHIVE_NOTICE, expect="skipped", reason="too_short", kind="page")

    # The articles, each with its print version; the tracked newsletter URLs serve the same files.
    for a in courier:
        tools = f'      <p class="tools"><a href="/print/{a.slug}.html">Print this story</a></p>\n'
        if a.slug == PDF_LINK_FROM:
            tools += f'      <p class="documents"><a href="{PDF_PATH}">Council budget 2024 (PDF)</a></p>\n'
        site.write(
            f"/news/{a.slug}.html",
            courier_page(a.title, article_main(a, tools=tools), articles),
            expect="unique",
            kind="article",
        )
        site.write(
            f"/print/{a.slug}.html",
            print_page(a),
            expect="duplicate",
            of=f"/news/{a.slug}.html",
            variant="print version",
            kind="article",
        )
    for slug in NEWSLETTER_ITEMS:
        site.alias(
            f"/news/{slug}.html?{TRACKING}",
            expect="duplicate",
            of=f"/news/{slug}.html",
            variant="tracking parameters (same bytes)",
            kind="article",
        )
    site.write(
        PDF_PATH, minimal_pdf("Millbrook town council: budget 2024"), expect="skipped", reason="not_html"
    )

    # The community board: lightly edited reposts.
    reposts = {slug: edit.apply(articles[slug]) for slug, edit in REPOSTS.items()}
    board = listing_main(
        "Community board",
        "Notices and stories from clubs, schools and neighbours, reposted by their members.",
        [(f"/community/{slug}.html", a, a.teaser) for slug, a in reposts.items()],
    )
    site.write(
        "/community/", courier_page("Community board", board, articles), expect="unique", kind="listing"
    )
    for slug, a in reposts.items():
        note = '      <p class="note">Reposted to the community board from the Courier news desk.</p>\n'
        site.write(
            f"/community/{slug}.html",
            courier_page(a.title, article_main(replace(a, section="community"), note=note), articles),
            expect="duplicate",
            of=f"/news/{slug}.html",
            variant="lightly edited repost",
            kind="article",
        )

    # The German article from the twin town and its updated version.
    update = GERMAN_UPDATE.apply(german)
    link = f'      <p class="tools"><a href="/de/{GERMAN}-aktualisiert.html">Aktualisierte Fassung</a></p>\n'
    site.write(
        f"/de/{GERMAN}.html",
        courier_page(german.title, article_main(german, tools=link), articles, lang="de"),
        expect="unique",
        kind="article",
    )
    site.write(
        f"/de/{GERMAN}-aktualisiert.html",
        courier_page(update.title, article_main(update), articles, lang="de"),
        expect="duplicate",
        of=f"/de/{GERMAN}.html",
        variant="lightly edited update (German)",
        kind="article",
    )

    # The partner site: syndicated copies under another template, plus one story of its own.
    partner_items = [(f"/partner/{slug}.html", headline) for slug, headline in SYNDICATED.items()]
    partner_items.append((f"/partner/{ferry.slug}.html", ferry.title))
    trending = partner_items[::-1]
    for slug, headline in SYNDICATED.items():
        site.write(
            f"/partner/{slug}.html",
            partner_page(headline, partner_story(articles[slug], headline, syndicated=True), trending),
            expect="duplicate",
            of=f"/news/{slug}.html",
            variant="syndicated under the partner's template",
            kind="article",
        )
    site.write(
        f"/partner/{ferry.slug}.html",
        partner_page(ferry.title, partner_story(ferry, ferry.title, syndicated=False), trending),
        expect="unique",
        kind="article",
    )
    partner_index = "\n".join(
        f'<div class="item"><h3><a href="{href}">{escape(headline)}</a></h3>'
        f"<p>{escape(articles[href.rsplit('/', 1)[1][:-5]].teaser.split('. ')[0], quote=False)}.</p></div>"
        for href, headline in partner_items
    )
    site.write(
        "/partner/",
        partner_page(
            "Latest", '<h2 class="headline">Latest from the valley</h2>\n' + partner_index, trending
        ),
        expect="unique",
        kind="listing",
    )
    return site.truth


def write_truth(truth: dict[str, dict[str, str]]) -> None:
    crawled = {path: t for path, t in truth.items() if t["expect"] != "not_crawled"}
    clusters: dict[str, list[str]] = {}
    for path, t in crawled.items():
        if t["expect"] == "duplicate":
            clusters.setdefault(t["of"], [t["of"]]).append(path)
    doc = {
        "description": "Expected outcome of each URL of the Millbrook Courier demo site (paths relative to "
        "the server root). expect: unique | duplicate (of: the original) | skipped (reason). The original "
        "of each cluster is linked one level higher than its copies, so a breadth-first crawl sees it first.",
        "pages": crawled,
        "clusters": [clusters[key] for key in sorted(clusters)],
    }
    (SITE / "truth.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    counts = {
        kind: sum(t["expect"] == kind for t in crawled.values())
        for kind in ("unique", "duplicate", "skipped")
    }
    lines = [
        "# The Millbrook Courier: a demo site full of near-duplicates",
        "",
        "Generated by `../build_site.py` from `../site_src/articles/`: do not edit by hand, "
        "rerun the script.",
        "All text is made up for this project. The crawl starts at `/` and finds "
        f"{len(crawled)} URLs: {counts['unique']} unique pages, {counts['duplicate']} duplicates in "
        f"{len(clusters)} clusters, and {counts['skipped']} pages that cannot be judged. "
        "`truth.json` holds the same list for programs.",
        "",
        "What the site contains:",
        "",
        "- `/news/*.html`: twelve distinct English articles of 300 to 450 words. Two of them are on "
        "similar topics and must stay distinct: `footbridge-approved` and `harbour-street-bridge-closure` "
        "(both about bridges over the Alder River, quoting the same engineer and councillor).",
        "- `/print/*.html`: a print version of every article (another, bare template).",
        f"- `{NEWSLETTER}`: a newsletter linking four articles with `utm_*` tracking parameters; the "
        "server ignores the query, so those URLs return the article's exact bytes.",
        "- `/partner/`: the Valley Evening Post, a partner site with its own layout and boilerplate "
        "(cookie bar, trending box, adverts, comments), syndicating three Courier articles with a new "
        "headline, a dateline and a credit line, plus one story of its own.",
        "- `/community/`: two articles reposted with light edits (new headline, a few phrases "
        "changed, a sentence removed or two paragraphs swapped, a line added).",
        f"- `/de/{GERMAN}.html`: a German article from the twin town, and an updated version of it "
        "with a few changes.",
        "- Listing pages (`/`, `/section/*.html`, `/community/`, the newsletter, `/partner/`) quote "
        "the articles' teasers; they are pages of their own, not duplicates of the articles they quote.",
        "- `/about.html`, a short page of its own; `/archive.html`, a bare notice of seven words "
        "(too little text to judge); and a one-page PDF (not HTML).",
        "",
        "## Duplicate clusters (original first)",
        "",
    ]
    for key in sorted(clusters):
        lines.append(f"- `{key}`")
        lines.extend(f"  - `{p}`: {crawled[p]['variant']}" for p in clusters[key][1:])
    lines += ["", "## Every page", "", "| URL | expected |", "|---|---|"]
    for path, t in sorted(crawled.items()):
        if t["expect"] == "duplicate":
            outcome = f"duplicate of `{t['of']}` ({t['variant']})"
        elif t["expect"] == "skipped":
            outcome = f"not judged: {t['reason']}"
        else:
            outcome = f"unique ({t.get('kind', 'page')})"
        lines.append(f"| `{path}` | {outcome} |")
    (SITE / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    truth = build()
    write_truth(truth)
    pages = sum(t["expect"] != "not_crawled" for t in truth.values())
    print(f"wrote {SITE} ({pages} URLs to crawl)")


if __name__ == "__main__":
    main()
