"""A news site the way a crawl meets one, written into a folder for the drop-mode crawl tests.

The stories are the example project's articles (``example_project/site_src/articles``) and a
Japanese post. Copies a crawl meets: pairs of listing pages that share most of their teasers
(a section and a tag page; a section and its archive twin), each with a last story that only
it links to; a home page that quotes the Japanese post in full among English teasers, the
post's own page linked from there only; print versions and tracking-parameter copies of the
stories; a JSON API whose entries hold exact and re-templated copies beside stories of its
own. ``build`` returns what each URL path holds, so a test can tell every story from its copies.
"""

from __future__ import annotations

import json
import random
from html import escape
from pathlib import Path

ARTICLES = Path(__file__).resolve().parents[1] / "example_project" / "site_src" / "articles"
TRACKING = "utm_source=newsletter&utm_medium=email"
# A made-up post from a sister town's blog, written for these tests.
JAPANESE_TITLE = "姉妹都市から交流団が来訪"
JAPANESE = [
    "ミルブルックの姉妹都市である北海道の小さな港町から、今年も交流団が訪れました。一行は市長を含む十二人で、"
    "三日間の滞在中に学校や市場、そして川沿いの古い倉庫街を見学しました。",
    "初日の夜には、市民会館で歓迎会が開かれました。地元の合唱団が英語と日本語の歌を披露し、交流団からは港町に"
    "伝わる漁師の踊りが紹介されました。会場には二百人以上の市民が集まり、最後は全員で踊りの輪に加わりました。",
    "二日目は、町の小学校で子どもたちと一緒に給食を食べました。献立は地元の農家が育てた野菜のスープと、港町から"
    "届いた昆布を使ったおにぎりでした。子どもたちは初めて食べる味に驚きながらも、ほとんどの子がおかわりをしました。",
    "午後には、倉庫街で開かれている土曜市場を訪れました。港町で干物の店を営む佐藤さんは、市場の活気に感心したと"
    "話していました。「売る人と買う人が話をしているのがいい。うちの町の朝市と同じです」と笑顔で語りました。",
    "最終日には、両市の市長が来年の交流計画について話し合いました。来年の夏には、ミルブルックの高校生十人が港町を"
    "訪れ、漁業の仕事を体験する予定です。市長は「子どもたちが互いの町を知ることが大切だ」と述べました。",
    "交流団は月曜日の朝、駅で多くの市民に見送られて帰路につきました。ホームでは子どもたちが手作りの旗を振り、"
    "別れを惜しんでいました。",
]
# (listing, its twin): the shared stories, then the story only each of them links to.
PAIRS = [
    (("section/town-hall", "tag/bridges"), 5),
    (("section/community", "archive/community-2024"), 3),
]
# Stories only the JSON API has (the German article, and one the site never publishes).
API_ONLY = ("brunnenfest-lindenau", "valley-ferry-sunday")


def read_stories() -> dict[str, tuple[str, list[str]]]:
    """slug -> (title, paragraphs) of the example project's articles."""
    stories = {}
    for path in sorted(ARTICLES.glob("*.txt")):
        head, _, body = path.read_text(encoding="utf-8").partition("\n\n")
        title = dict(line.split(": ", 1) for line in head.splitlines())["title"]
        stories[path.stem] = (title, [" ".join(p.split()) for p in body.split("\n\n") if p.strip()])
    return stories


def page(title: str, main: str, lang: str = "en") -> str:
    """The Courier's template: a header, a menu and a footer around ``main``."""
    menu = " | ".join(f'<a href="/{p}.html">{p.split("/")[-1].title()}</a>' for p in ("index", "about"))
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title></head>"
        f"<body><header><h1>The Millbrook Courier</h1><nav>{menu}</nav></header><main>{main}</main>"
        "<footer><p>The Millbrook Courier, 4 Tanner Street. Letters to the editor are welcome.</p>"
        "</footer></body></html>"
    )


def story_main(title: str, paragraphs: list[str], extra: str = "") -> str:
    body = "".join(f"<p>{escape(p)}</p>" for p in paragraphs)
    return f"<article><h2>{escape(title)}</h2>{body}{extra}</article>"


def teaser(slug: str, title: str, paragraphs: list[str], query: str = "") -> str:
    href = f"/news/{slug}.html" + (f"?{query}" if query else "")
    heading = f'<h3><a href="{href}">{escape(title)}</a></h3>'
    return f'<div class="teaser">{heading}<p>{escape(paragraphs[0])}</p></div>'


def build(folder: Path, seed: int) -> dict[str, str]:
    """Write the site into ``folder``, listings in an order drawn from ``seed``; return for each
    URL path the story it holds (``story:<slug>``), or ``page:<name>`` for a page of no story."""
    rng = random.Random(seed)
    stories = read_stories()
    slugs = [slug for slug in stories if slug not in API_ONLY]
    holds: dict[str, str] = {}

    def write(path: str, html: str, what: str) -> None:
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(html, encoding="utf-8")
        holds["/" + path] = what

    for slug, (title, paragraphs) in stories.items():
        tools = f'<p><a href="/print/{slug}.html">Print this article</a></p>'
        write(f"news/{slug}.html", page(title, story_main(title, paragraphs, tools)), f"story:{slug}")
        printed = f"<h1>{escape(title)}</h1>" + "".join(f"<p>{escape(p)}</p>" for p in paragraphs)
        head = f"<head><title>{escape(title)}</title></head>"
        write(f"print/{slug}.html", f"<html>{head}<body>{printed}</body></html>", f"story:{slug}")
        holds[f"/news/{slug}.html?{TRACKING}"] = f"story:{slug}"
    listings: list[str] = []
    teased: list[str] = []  # stories more than one page links to
    used = 0
    for (one, twin), shared in PAIRS:
        common, own = slugs[used : used + shared], slugs[used + shared : used + shared + 2]
        used += shared + 2
        teased += common
        for name, last in ((one, own[0]), (twin, own[1])):
            entries = [*common, last]
            rng.shuffle(entries)
            query = TRACKING if name.startswith("tag/") else ""  # the tag page links with tracking
            teasers = "".join(teaser(s, stories[s][0], stories[s][1], query) for s in entries)
            write(f"{name}.html", page(name, f"<h2>{escape(name)}</h2>{teasers}"), f"page:{name}")
            listings.append(name)
    rng.shuffle(listings)
    entries = []
    for n, slug in enumerate(slugs[:4]):
        title, paragraphs = stories[slug]
        if n % 2:  # the story under a partner's template
            text = "".join(f"<p>{escape(p)}</p>" for p in paragraphs)
            html = f"<html><body><div><h1>Valley Echo</h1><h2>{escape(title)}</h2>{text}</div>"
        else:  # the page's own bytes
            html = (folder / f"news/{slug}.html").read_text(encoding="utf-8")
        entries.append({"url": f"/api/copies/{n}", "title": title, "html": html})
        holds[f"/api/copies/{n}"] = f"story:{slug}"
    for slug in API_ONLY:
        title, paragraphs = stories[slug]
        entries.append({"url": f"/api/{slug}", "title": title, "text": "\n\n".join(paragraphs)})
        holds[f"/api/{slug}"] = f"story:{slug}"
    write("api/stories.json", json.dumps(entries, ensure_ascii=False), "page:api")
    post = story_main(JAPANESE_TITLE, JAPANESE)
    write("blog/sister-town.html", page(JAPANESE_TITLE, post, lang="ja"), "story:sister-town")
    more = '<p><a href="/blog/sister-town.html">ブログで読む</a></p>'
    quoted = "".join(f"<p>{p}</p>" for p in JAPANESE) + more
    quoted = f"<section><h2>From our sister town: {JAPANESE_TITLE}</h2>{quoted}</section>"
    latest = "".join(teaser(s, *stories[s]) for s in rng.sample(teased, len(teased)))
    links = "".join(f'<li><a href="/{name}.html">{escape(name)}</a></li>' for name in listings)
    api = '<p><a href="/api/stories.json">Our stories as JSON</a></p>'
    home = f"<section><h2>Latest</h2>{latest}</section>{quoted}<ul>{links}</ul>{api}"
    write("index.html", page("The Millbrook Courier", home), "page:home")
    write("about.html", page("About", "<p>The Courier has served Millbrook since 1921.</p>"), "page:about")
    return holds
