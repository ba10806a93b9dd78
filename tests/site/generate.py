"""Write the static site the crawl tests serve (``tests/site/``) and its ground truth.

Run ``python tests/site/generate.py`` after changing a page here and commit the result; the
tests only read the generated files. ``truth.json`` (for programs) and ``TRUTH.md`` (for
people) give each URL's expected outcome.

Every copy is linked only from its original's page, so whatever the crawl's concurrency or
order, the original is fetched and judged before any copy of it is even requested.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

SITE = Path(__file__).resolve().parent
TRACKING = "utm_source=newsletter&utm_medium=email&utm_campaign=spring"

# Six distinct articles (made-up local news, written for this project), trimmed from the example
# project's site. footbridge and harbour-bridge share a topic, people and places, but not text.
ARTICLES: dict[str, tuple[str, list[str]]] = {
    "footbridge": (
        "Council backs new footbridge at Willow Bend",
        [
            "Millbrook town council voted six to two on Tuesday night to pay for a footbridge across the "
            "Alder River at Willow Bend, ending almost ten years of argument over how walkers and cyclists "
            "should reach the east bank without using the busy Harbour Street crossing.",
            "The bridge will be a single steel span of about forty metres, wide enough for a bicycle and a "
            "pushchair to pass each other, and it will land on the east bank beside the allotments on Ferry "
            "Lane. The town engineer, Tomasz Wiśniewski, told councillors that the design avoids any pier in "
            "the water, because the river floods at Willow Bend most winters.",
            "The project is expected to cost 1.9 million pounds. Just over half comes from a regional active "
            "travel grant, which has to be spent by the end of next year. The rest will be borrowed and "
            "repaid over twenty-five years.",
            "Councillor Maureen Pike, who has campaigned for the crossing since 2015, said the vote was a "
            'relief. "Every parent on the east side has a story about walking their children over Harbour '
            'Street with lorries brushing past," she said.',
        ],
    ),
    "harbour-bridge": (
        "Harbour Street bridge to close for eight weeks of repairs",
        [
            "The Harbour Street bridge, the only road crossing of the Alder River in the centre of "
            "Millbrook, will close to all traffic for eight weeks from the first of July while engineers "
            "replace its worn expansion joints and patch corroded steel beneath the deck.",
            "Drivers heading east will be sent along the bypass and over the Kings Meadow crossing, a detour "
            "of about six kilometres that the council expects to add between ten and twenty minutes to "
            "journeys at peak times. Pedestrians and cyclists will still be able to cross on a temporary "
            "walkway along the northern edge of the bridge.",
            "Town engineer Tomasz Wiśniewski said an inspection last autumn found water leaking through the "
            'joints and reaching the steel girders. "The bridge is safe today, but if we leave it another '
            'winter the repair becomes much bigger and much more expensive," he told the committee.',
            "Councillor Maureen Pike said the closure showed why the town needs more than one way across the "
            "river, and that the planned footbridge at Willow Bend would make future repairs far less "
            "painful for residents on the east side.",
        ],
    ),
    "library": (
        "Record number of children finish library reading challenge",
        [
            "More children finished Millbrook library's summer reading challenge this year than at any time "
            "since it began, with 412 young readers collecting all six stickers on their reading maps by the "
            "end of August.",
            "The challenge asks children aged four to twelve to read six books of their choice over the "
            "holidays and talk to a library volunteer about each one. This year's theme was the sea, and the "
            "children's room was decorated with a paper lighthouse that grew a new window for every map.",
            "Librarian Grace Whitfield credits the volunteers, most of them teenagers from the high school, "
            "who gave up their mornings to listen to children describe pirates, whales and submarines. "
            '"Children want someone to tell about a book," she said. "The sticker is nice, but the '
            'conversation is what brings them back."',
            "A medal ceremony will be held at the library on Saturday the 21st at eleven o'clock, when the "
            "mayor will hand out certificates to every child who finished.",
        ],
    ),
    "heron": (
        "Volunteers count forty heron nests at Marsh Lane",
        [
            "Volunteers counting grey herons at the Marsh Lane wetland have recorded forty occupied nests "
            "this spring, the highest number since the survey began in 1987 and a sign, naturalists say, "
            "that the restored reed beds are doing their job.",
            "The heronry sits in a stand of old alders on an island in the middle of the largest pool. "
            "Counting is done from the bank with telescopes, and it takes patience: herons sit low in their "
            "nests, and volunteers wait for chicks to begin their begging calls before they can be sure.",
            "Survey organiser Dr Felix Amadi said numbers had fallen to eighteen nests in 2009, after dry "
            "summers shrank the pools. Since then the wildlife trust has blocked old drainage ditches and "
            "let the water rise, and the reed beds have spread back across the reserve.",
            "The count also found two pairs of little egrets nesting among the herons for the first time, "
            "and bitterns have been heard booming in the reed beds on several evenings.",
        ],
    ),
    "bakery": (
        "Corner bakery on Mill Road marks fifty years",
        [
            "When Stella and George Kostas opened a bakery on the corner of Mill Road and Tanner Street in "
            "July 1974, they sold four kinds of bread and a honey cake from George's home village. Fifty "
            "years later the shop sells forty different loaves, but the honey cake is still made to the same "
            "recipe, and on Saturday it will be given away free to anyone who comes in.",
            "The bakery is now run by the couple's daughter, Eleni, and her husband, Sam Reyes. Stella, now "
            "eighty-one, still comes in most mornings to shape the plaited loaves for the weekend.",
            "The business has changed with the town. In the 1980s its best customers were workers from the "
            "paper mill, who bought rolls on the way to the early shift. When the mill closed, the bakery "
            "started supplying cafés and the hospital canteen.",
            "Rising costs have been hard. Mr Reyes said the price of flour and the electricity bill both "
            "roughly doubled over two years, and the bakery had to raise prices for the first time in a long "
            "while. Customers had been understanding, he said.",
        ],
    ),
    "robotics": (
        "Millbrook High robotics team reaches regional final",
        [
            "A team of six students from Millbrook High School has qualified for the regional final of a "
            "schools robotics competition after their machine, a squat green robot nicknamed Turnip, won "
            "both of its matches in the county round at the weekend.",
            "Teams had eight weeks to build a robot that could pick up coloured rings from the floor and "
            "stack them on posts of different heights, while an opposing robot tried to do the same, with a "
            "bonus for robots that can climb a low platform in the final thirty seconds.",
            "The students designed a gripper from parts of an old office chair and a set of bicycle brake "
            "cables. Team captain Leila Haddad said their first version could barely lift a ring. "
            '"We rebuilt the arm four times," she said.',
            "Turnip's climbing routine was the difference in the second match. With the scores level, the "
            "robot drove onto the platform with four seconds to spare, and the gymnasium, according to one "
            'parent, "erupted like a cup final".',
        ],
    ),
}

# The page with a mis-declared encoding: windows-1252 bytes under <meta charset="utf-8">.
ENCODING_ARTICLE = (
    "Volunteers bring the Regent cinema organ back to life",
    [
        "For the first time in more than forty years, the great organ of the Regent Cinema on Bridge Street "
        "rose from its pit on Sunday afternoon, lit in changing colours, and played to a full house – "
        "with a queue for the café that reached the street.",
        "The organ was installed when the Regent opened in 1931, to accompany silent films. It has more than "
        "a thousand pipes, hidden in chambers on either side of the stage, and a console that rises on a "
        "lift in front of the screen. It fell silent in the late 1970s and gathered dust behind a false "
        "wall.",
        "A group of eleven volunteers has spent six years restoring it. They cleaned every pipe by hand, "
        "replaced perished leather in the bellows and rewired the console. “The motor was fine, but nobody "
        "had written down how the controls were wired,” said the group’s leader, Bernard Achterberg.",
        "The restoration cost about £70,000, raised through concerts, a lottery grant and a long list of "
        "small donations. The cinema plans to use the organ before selected films on the first Sunday of "
        "each month.",
    ],
)

# Light edits of the bakery article for its repost: (old, new) replacements and one added line.
REPOST_EDITS = [
    ("forty different loaves", "about forty kinds of loaf"),
    ("on Saturday it will be given away", "this Saturday it will be handed out"),
    ("Customers had been understanding, he said.", "Most customers had been understanding, he said."),
]
REPOST_ADDED = "Reposted by the Mill Road traders' association, who send their congratulations."


def page(title: str, body: str, charset: str = "utf-8") -> str:
    """The Courier's template: navigation and footer boilerplate around the main content."""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="{charset}">
<title>{escape(title)} | The Millbrook Courier</title>
</head>
<body>
<header><p class="site-name"><a href="/">The Millbrook Courier</a></p>
<nav><a href="/">Home</a> · <a href="/">News</a> · <a href="/">Sport</a>
· <a href="/">What's on</a></nav></header>
<main>
{body}
</main>
<footer><p>© 2024 Millbrook Courier Ltd, 12 Quay Road, Millbrook. All stories are the property of
their authors and may not be reproduced without permission.</p></footer>
</body>
</html>
"""


def paragraphs(texts: list[str]) -> str:
    return "\n".join(f"<p>{escape(text, quote=False)}</p>" for text in texts)


def article(title: str, texts: list[str], links: str = "", charset: str = "utf-8") -> str:
    body = (
        f'<article>\n<h1>{escape(title)}</h1>\n<p class="byline">By the news desk</p>\n{paragraphs(texts)}\n'
    )
    return page(title, body + links + "</article>", charset)


def print_version(title: str, texts: list[str]) -> str:
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)} (print)</title></head>
<body class="print">
<p>THE MILLBROOK COURIER · print edition</p>
<h1>{escape(title)}</h1>
{paragraphs(texts)}
<p>Printed from The Millbrook Courier online.</p>
</body></html>
"""


def partner_version(title: str, texts: list[str]) -> str:
    """The same article under another site's template, with a dateline and a credit line."""
    texts = ["MILLBROOK – " + texts[0], *texts[1:]]
    return f"""<!doctype html>
<html><head><meta http-equiv="Content-Type" content="text/html; charset=utf-8">
<title>{escape(title.title())} - Valley Evening Post</title></head>
<body>
<div id="cookie-bar">We use cookies to remember your preferences and to count visits. By continuing
to browse the Valley Evening Post you agree to our use of cookies.</div>
<div id="top">VALLEY EVENING POST · Serving the Alder valley and the estuary every weekday</div>
<table width="100%"><tr><td valign="top">
<h2 class="headline">{escape(title.title())}</h2>
<div class="story-body">
{paragraphs(texts)}
<p><i>This story first appeared in The Millbrook Courier and is republished with permission.</i></p>
</div>
</td><td valign="top" width="30%">
<h4>Trending now</h4><ul><li>Estuary ferry adds a Sunday evening sailing</li>
<li>Kingsholm market hall to reopen</li></ul>
<div>Get the Evening Post briefing in your inbox every weekday at six. Sign up free.</div>
</td></tr></table>
<div id="foot">© Valley Evening Post Media. All rights reserved. Reproduction without written
permission is prohibited. Advertising · Contact · Terms · Privacy</div>
</body></html>
"""


PDF = (
    b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
    b"2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n"
    b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"
)
# Without the site's template: trafilatura would pad a short page with the masthead text.
SHORT_PAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Notice</title></head>
<body>
<p>The office is closed on Monday for a holiday.</p>
</body>
</html>
"""
JSON_DATA = {"site": "The Millbrook Courier", "articles": sorted(ARTICLES)}


def build() -> dict[str, dict[str, str]]:
    files: dict[str, bytes] = {}
    truth: dict[str, dict[str, str]] = {}

    def add(path: str, content: str | bytes | None, **expected: str) -> None:
        if content is not None:
            name = "index.html" if path == "/" else path.lstrip("/").split("?")[0]
            files[name] = content.encode("utf-8") if isinstance(content, str) else content
        truth[path] = expected

    listing = "\n".join(
        f'<li><a href="/articles/{slug}.html">{escape(title)}</a></li>'
        for slug, (title, _) in ARTICLES.items()
    )
    index_body = f"""<h1>Latest news</h1>
<p>Welcome to the test edition of The Millbrook Courier, a made-up local paper from the Alder valley.
This page links to six stories from the town hall, the library, the wetland reserve, a family bakery
and the high school, together with a few pages that the duplicate filter must leave alone: two files
that are not web pages, an empty page, a page with hardly any text, and a story whose bytes do not
match the character set it declares.</p>
<ul>
{listing}
<li><a href="/encoding.html">{escape(ENCODING_ARTICLE[0])}</a></li>
</ul>
<p>Downloads: <a href="/files/report.pdf">annual report (PDF)</a>
· <a href="/files/data.json">data (JSON)</a></p>
<p>Elsewhere: <a href="/empty.html">an empty page</a> · <a href="/short.html">a notice</a></p>"""
    add("/", page("Latest news", index_body), expect="unique", kind="listing")

    copy_links = {
        "footbridge": '<p><a href="/mirror/footbridge.html">Mirror of this story</a></p>\n',
        "library": '<p><a href="/print/library.html">Print this story</a></p>\n',
        "heron": f'<p><a href="/articles/heron.html?{TRACKING}">Share this story</a></p>\n',
        "bakery": '<p><a href="/reposts/bakery.html">Reposted by the traders</a></p>\n',
        "robotics": '<p><a href="/partner/robotics.html">Also in the Valley Evening Post</a></p>\n',
    }
    for slug, (title, texts) in ARTICLES.items():
        add(
            f"/articles/{slug}.html",
            article(title, texts, copy_links.get(slug, "")),
            expect="unique",
            kind="article",
        )

    footbridge = article(*ARTICLES["footbridge"], copy_links["footbridge"])
    add(
        "/mirror/footbridge.html",
        footbridge,
        expect="duplicate",
        of="/articles/footbridge.html",
        match="exact",
        variant="exact copy (same bytes) at another URL",
    )
    add(
        "/print/library.html",
        print_version(*ARTICLES["library"]),
        expect="duplicate",
        of="/articles/library.html",
        match="near",
        variant="print version (another, bare template)",
    )
    add(
        f"/articles/heron.html?{TRACKING}",
        None,
        expect="duplicate",
        of="/articles/heron.html",
        match="exact",
        variant="tracking parameters (the server ignores the query: same bytes)",
    )
    title, texts = ARTICLES["bakery"]
    edited = "\n\n".join(texts)
    for old, new in REPOST_EDITS:
        assert edited.count(old) == 1, old
        edited = edited.replace(old, new)
    add(
        "/reposts/bakery.html",
        article("Fifty years of bread on Mill Road", [*edited.split("\n\n"), REPOST_ADDED]),
        expect="duplicate",
        of="/articles/bakery.html",
        match="near",
        variant="lightly edited repost (new headline, three phrases changed, a line added)",
    )
    add(
        "/partner/robotics.html",
        partner_version(*ARTICLES["robotics"]),
        expect="duplicate",
        of="/articles/robotics.html",
        match="near",
        variant="syndicated under another site's template (dateline and credit line added)",
    )

    title, texts = ENCODING_ARTICLE
    add(
        "/encoding.html",
        article(title, texts).encode("cp1252"),
        expect="unique",
        kind="article",
        note="windows-1252 bytes (curly quotes, en dash, pound sign, é) declared as utf-8; "
        "must be decoded without error and judged",
    )
    add("/files/report.pdf", PDF, expect="skipped", reason="not_html", note="a PDF (magic header %PDF-)")
    add(
        "/files/data.json",
        json.dumps(JSON_DATA, indent=2) + "\n",
        expect="skipped",
        reason="not_html",
        note="served as application/json",
    )
    add("/empty.html", b"", expect="skipped", reason="empty", note="0 bytes, served as text/html")
    add(
        "/short.html",
        SHORT_PAGE,
        expect="skipped",
        reason="too_short",
        note="a bare notice of nine words (fewer than NEARDUP_MIN_TOKENS, 10 or more)",
    )

    for name, data in files.items():
        target = SITE / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return truth


def write_truth(truth: dict[str, dict[str, str]]) -> None:
    doc = {
        "description": "Expected outcome of each URL of tests/site (paths relative to the server root; the "
        "crawl starts at /). expect: unique | duplicate (of: the original; match: exact or near) | skipped "
        "(reason: the neardup/unjudged/<reason> stat). Every copy is linked only from its original's page.",
        "pages": truth,
    }
    (SITE / "truth.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    count = {
        kind: sum(t["expect"] == kind for t in truth.values()) for kind in ("unique", "duplicate", "skipped")
    }
    lines = [
        "# tests/site: the crawl tests' site and its ground truth",
        "",
        "Generated by `generate.py` (rerun it after a change); `truth.json` has the same content "
        "for programs.",
        f"A crawl from `/` finds {len(truth)} URLs: {count['unique']} unique pages, {count['duplicate']} "
        f"duplicates and {count['skipped']} pages that are not judged. Every copy is linked only from its "
        "original's page, so the original is always judged first, whatever the concurrency.",
        "",
        "Expected stats of a crawl in drop mode: `neardup/duplicates/exact` "
        f"{sum(t.get('match') == 'exact' for t in truth.values())}, `neardup/duplicates/near` "
        f"{sum(t.get('match') == 'near' for t in truth.values())}; skipped: "
        + ", ".join(
            f"`{reason}` {sum(t.get('reason') == reason for t in truth.values())}"
            for reason in sorted({t["reason"] for t in truth.values() if "reason" in t})
        )
        + " (`not_html` stands for however the middleware counts a non-HTML response).",
        "",
        "| URL | expected | notes |",
        "|---|---|---|",
    ]
    for path, t in truth.items():
        if t["expect"] == "duplicate":
            outcome = f"duplicate ({t['match']}) of `{t['of']}`"
            note = t["variant"]
        elif t["expect"] == "skipped":
            outcome = f"skipped: `{t['reason']}`"
            note = t.get("note", "")
        else:
            outcome = f"unique ({t['kind']})"
            note = t.get("note", "")
        lines.append(f"| `{path}` | {outcome} | {note} |")
    (SITE / "TRUTH.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_truth(build())
    print(f"wrote {SITE}")
