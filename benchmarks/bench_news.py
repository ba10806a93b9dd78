"""What a crawl keeps: a news site of the 181 real aeb articles with the copies a real site has.

    python benchmarks/bench_news.py [--repeat 1] [--backends sqlite,redis,redis2] [--comments-off]

Every article is ``/news/<n>.html`` in its own real page's template; one in six is a brief
(its first 67 to 175 words only). Its copies, as links of the site's section pages carry
them: tracking parameters (one in five), a session id (one in five), the host ``localhost``
(one in seven), all three byte-identical; a print view in a bare template (one in three), an
AMP view in another (one in four), a partner's repost in another article's template with
light edits (one in three); and ``?view=comments`` on every article, which shows about 560
words of readers' comments below the article under one article in ten and the article alone under the others.

Each backend crawls the site with only the ADDONS line (``redis2``: two crawlers sharing a
scrapy-redis queue and one Redis index; needs redis-server on PATH). Printed per crawl, from
its feeds: items byte-identical to an earlier item of the same feed (and of all feeds
together), copies stored (items whose content an earlier item already holds) against the
copies the site serves, and distinct pages stored of all (a comment page counts as distinct
unless ``--comments-off`` sets NEARDUP_COMMENTS = False), and the duplicates the crawl judged on
which ``scrapy-neardup compare`` states the crawl's own decision (drop when it was sure,
uncertain when it let the page through).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_urls import ADDON, ARTICLE, real_articles, redis_server

PER_SECTION = 20
ARTICLE_PATHS = ("/news/", "/print/", "/amp/", "/partner/")


def comments(n: int, rng: random.Random) -> str:
    """About 560 words of made-up readers' comments, different for each article."""
    words = [f"{a}{b}" for a in ("ve", "do", "ma", "ti", "ru", "so", "ke", "la") for b in range(70)]
    shapes = ("I think the {} was {} and {}.", "Why would the {} {} the {}?", "My {} says {} is {}.")
    posts = []
    for k in range(14):
        text = " ".join(rng.choice(shapes).format(*rng.sample(words, 3)) for _ in range(6))
        posts.append(f"<div class='comment'><b>reader{n}-{k}</b><p>{text}</p></div>")
    return f"<section id='comments'><h2>Comments</h2>{''.join(posts)}</section>"


class NewsSite:
    """The pages by path and query, what each holds, and the links its sections carry."""

    def __init__(self, port: int, limit: int | None = None) -> None:
        articles = real_articles(limit)  # the first ``limit`` articles (default: all)
        rng = random.Random(7)
        self.pages: dict[str, bytes] = {}
        self.holds: dict[str, str] = {}  # path?query -> "a<n>" (an article) or "c<n>" (its comments)
        links: list[str] = []
        other = f"http://localhost:{port}"
        for n, article in enumerate(articles):
            paragraphs = list(article.paragraphs)
            if n % 6 == 5:  # a brief: the first 67 to 175 words
                budget, kept = rng.randint(67, 175), []
                for p in paragraphs:
                    words = p.split()[: budget - sum(len(k.split()) for k in kept)]
                    if words:
                        kept.append(" ".join(words))
                paragraphs = kept
            body = "".join(f"<p>{escape(p)}</p>" for p in paragraphs)
            title = escape(article.title)
            own = article.page.replace(ARTICLE, body)
            path = f"/news/{n}.html"
            self._add(path, own, f"a{n}", links)
            if n % 5 == 0:
                self._add(path + "?utm_source=newsletter&utm_medium=email", own, f"a{n}", links)
            if n % 5 == 1:
                self._add(path + f"?sid={rng.randrange(10**8)}", own, f"a{n}", links)
            if n % 7 == 0:
                links.append(other + path)
            if n % 3 == 0:
                bare = f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>"
                self._add(f"/print/{n}.html", bare, f"a{n}", links)
            if n % 4 == 1:
                amp = (
                    f"<html amp><head><title>{title}</title><style amp-custom>h1{{font:bold}}</style></head>"
                    f"<body><header>The Daily Site</header><article><h1>{title}</h1>{body}</article>"
                    "<footer>AMP edition</footer></body></html>"
                )
                self._add(f"/amp/{n}.html", amp, f"a{n}", links)
            if n % 3 == 1:  # another article's template, one word in 40 changed
                words = body.split(" ")
                for at in range(7, len(words), 40):
                    words[at] = rng.choice(("also", "then", "still", "now"))
                host = articles[(n + 7) % len(articles)].page.replace(ARTICLE, " ".join(words))
                self._add(f"/partner/{n}.html", host, f"a{n}", links)
            commented = n % 10 == 3
            view = article.page.replace(ARTICLE, body + comments(n, rng)) if commented else own
            self._add(path + "?view=comments", view, f"c{n}" if commented else f"a{n}", links)
        rng.shuffle(links)
        sections = [links[k : k + PER_SECTION] for k in range(0, len(links), PER_SECTION)]
        for k, section in enumerate(sections):
            items = "".join(f'<li><a href="{escape(u)}">story</a></li>' for u in section)
            self.pages[f"/section/{k}.html"] = f"<html><body><ul>{items}</ul></body></html>".encode()
        index = "".join(f'<a href="/section/{k}.html">section {k}</a> ' for k in range(len(sections)))
        self.pages["/index.html"] = f"<html><body>{index}</body></html>".encode()
        self.articles = len(articles)

    def _add(self, url: str, html: str, holds: str, links: list[str]) -> None:
        self.pages[url] = html.encode("utf-8")
        self.holds[url] = holds
        links.append(url)

    def page(self, path: str, query: str) -> bytes | None:
        """What the server answers: a page by path and query, tracking and session ids ignored."""
        return self.pages.get(f"{path}?{query}" if query else path) or self.pages.get(path)

    def content(self, url: str) -> str | None:
        """What a crawled URL holds ("a<n>", "c<n>"), by its path and query."""
        parts = urlsplit(url)
        query = {k: v for k, v in parse_qs(parts.query).items() if k == "view"}
        key = parts.path + ("?view=comments" if query else "")
        return self.holds.get(key) or self.holds.get(parts.path)


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # a crawl's connections at once (socketserver's 5 drops SYNs: 1 s stalls)


def serve(site_of: list) -> tuple[ThreadingHTTPServer, int]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            body = site_of[0].page(parts.path, parts.query)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def crawl_once(config: dict) -> None:
    """In a fresh process: follow the site's links from its home page (or, with no start, from a
    shared scrapy-redis queue); an item of each article-like page, its URL and HTML."""
    import scrapy
    from scrapy.crawler import CrawlerProcess

    hosts = set(config["hosts"])
    verdicts = Path(config["verdicts"]).open("a", buffering=1)  # noqa: SIM115 (the crawl's whole life)

    class NewsSpider(scrapy.Spider):
        name = "news"

        async def start(self):
            if config["start"]:
                yield scrapy.Request(config["base"] + "/index.html")

        def parse(self, response):
            verdict = response.meta.get("neardup") or {}
            if verdict.get("duplicate"):  # what compare must say too
                seen = {k: verdict.get(k) for k in ("url", "duplicate_of", "sure")}
                verdicts.write(json.dumps(seen) + "\n")
            if urlsplit(response.url).path.startswith(ARTICLE_PATHS):
                yield {"url": response.url, "html": response.text}
            for href in response.css("a::attr(href)").getall():
                url = response.urljoin(href)
                if urlsplit(url).netloc in hosts:
                    yield scrapy.Request(url)

    process = CrawlerProcess(
        {
            "LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": False,
            "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
            "FEEDS": {config["feed"]: {"format": "jsonlines"}}, **config["settings"],
        }
    )  # fmt: skip
    crawler = process.create_crawler(NewsSpider)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats()
    Path(config["out"]).write_text(json.dumps({k: v for k, v in stats.items() if k.startswith("neardup/")}))


def start(
    base: str, hosts: list[str], settings: dict, work: Path, name: str, first: bool
) -> subprocess.Popen:
    config = {
        "base": base, "hosts": hosts, "settings": settings, "start": first,
        "out": str(work / f"{name}.json"), "feed": str(work / f"{name}.jsonl"),
        "verdicts": str(work / "verdicts.jsonl"),
    }  # fmt: skip
    (work / f"{name}.config.json").write_text(json.dumps(config))
    return subprocess.Popen(
        [sys.executable, __file__, "--crawl", str(work / f"{name}.config.json")], cwd=work
    )


def measure(site: NewsSite, feeds: list[list[dict]], comments_on: bool) -> dict:
    """The issue's figures from the crawl's feeds."""
    same_feed = sum(len(feed) - len({item["html"] for item in feed}) for feed in feeds)
    seen_bytes: set[str] = set()
    all_feeds = 0
    stored: dict[str, int] = {}
    kinds: dict[str, int] = {}  # the copies stored, by the kind of URL
    for item in (i for feed in feeds for i in feed):
        all_feeds += item["html"] in seen_bytes
        seen_bytes.add(item["html"])
        what = site.content(item["url"])
        if what is not None:
            key = what if comments_on or what.startswith("a") else "a" + what[1:]
            stored[key] = stored.get(key, 0) + 1
            if stored[key] > 1:
                parts = urlsplit(item["url"])
                kind = parts.path.split("/")[1] + ("?" + parts.query.split("=")[0] if parts.query else "")
                kind += " (brief)" if int(key[1:]) % 6 == 5 else ""
                kinds[kind] = kinds.get(kind, 0) + 1
    distinct = {h if comments_on or h.startswith("a") else "a" + h[1:] for h in site.holds.values()}
    served = len(site.holds) + sum(1 for n in range(site.articles) if n % 7 == 0) - len(distinct)
    copies = sum(count - 1 for count in stored.values())
    return {
        "items": sum(map(len, feeds)), "byte_identical_same_feed": same_feed, "byte_identical_all": all_feeds,
        "copies_stored": copies, "copies_served": served, "share": copies / served,
        "distinct_stored": len(stored), "distinct": len(distinct), "copies_by_kind": kinds,
        "distinct_lost": sorted(distinct - set(stored), key=lambda h: (h[0], int(h[1:]))),
    }  # fmt: skip


def agreement(site: NewsSite, work: Path, comments_on: bool) -> tuple[int, int]:
    """``scrapy-neardup compare`` on each duplicate the crawl judged: (the pairs on which its
    decision is the crawl's, all pairs)."""
    import contextlib
    import io

    from scrapy_neardup.cli import main as cli

    same = total = 0
    for line in (work / "verdicts.jsonl").read_text().splitlines():
        seen = json.loads(line)
        files = []
        for k, url in enumerate((seen["duplicate_of"], seen["url"])):
            parts = urlsplit(url)
            files.append(work / f"pair-{k}.html")
            files[-1].write_bytes(site.page(parts.path, parts.query) or b"")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            cli(["compare", *map(str, files), "--json", "--comments", "true" if comments_on else "false"])
        stated = json.loads(out.getvalue())["crawl"]["decision"]
        total += 1
        same += stated == ("drop" if seen["sure"] else "uncertain")
    return same, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--backends", default="sqlite,redis,redis2")
    parser.add_argument("--comments-off", action="store_true", help="NEARDUP_COMMENTS = False")
    parser.add_argument("--crawl", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.crawl:
        crawl_once(json.loads(args.crawl.read_text()))
        return
    holder: list = []
    server, port = serve(holder)
    holder.append(NewsSite(port))
    site = holder[0]
    base, hosts = f"http://127.0.0.1:{port}", [f"127.0.0.1:{port}", f"localhost:{port}"]
    extra = {"NEARDUP_COMMENTS": False} if args.comments_off else {}
    on = "off" if args.comments_off else "on"
    print(f"{len(site.holds)} article URLs of {site.articles} articles, comments {on}")
    with tempfile.TemporaryDirectory() as tmp, redis_server_or_none(Path(tmp)) as redis_url:
        for round_ in range(args.repeat):
            for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
                work = Path(tmp) / f"{round_}-{backend}"
                work.mkdir()
                settings = {**ADDON, **extra}
                if backend == "sqlite":
                    settings["NEARDUP_INDEX"] = str(work / "index.sqlite")
                elif redis_url is None:
                    print(f"{backend}: skipped (no redis-server on PATH)")
                    continue
                else:
                    settings.update(
                        {
                            "NEARDUP_INDEX": f"{redis_url}?prefix={uuid.uuid4().hex}",
                        }
                    )
                began = time.perf_counter()
                if backend == "redis2":
                    key = uuid.uuid4().hex
                    settings.update({
                        "REDIS_URL": redis_url, "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
                        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
                        "SCHEDULER_QUEUE_KEY": f"{key}:requests",
                        "SCHEDULER_DUPEFILTER_KEY": f"{key}:dupefilter",
                        "SCHEDULER_PERSIST": True, "SCHEDULER_IDLE_BEFORE_CLOSE": 5,
                    })  # fmt: skip
                    procs = [start(base, hosts, settings, work, "first", True)]
                    time.sleep(2)
                    procs.append(start(base, hosts, settings, work, "second", False))
                    names = ["first", "second"]
                else:
                    procs, names = [start(base, hosts, settings, work, "crawl", True)], ["crawl"]
                for proc in procs:
                    if proc.wait(timeout=1800) != 0:
                        raise SystemExit(f"{backend}: a crawl failed (exit status {proc.returncode})")
                wall = time.perf_counter() - began
                feeds = [
                    [json.loads(line) for line in (work / f"{n}.jsonl").read_text().splitlines()]
                    for n in names
                ]
                figures = measure(site, feeds, not args.comments_off)
                figures["compare_agrees"] = "{} of {}".format(*agreement(site, work, not args.comments_off))
                print(f"round {round_ + 1} {backend}: {json.dumps(figures)} ({wall:.1f} s)", flush=True)
    server.shutdown()


class redis_server_or_none:
    """A private redis-server when one is on PATH, else None."""

    def __init__(self, work: Path) -> None:
        import shutil

        binary = shutil.which("redis-server")
        self.server = redis_server(binary, work) if binary else None

    def __enter__(self) -> str | None:
        return self.server.__enter__() if self.server else None

    def __exit__(self, *exc: object) -> None:
        if self.server:
            self.server.__exit__(*exc)


if __name__ == "__main__":
    main()
