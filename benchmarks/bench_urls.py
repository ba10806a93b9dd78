"""Copies skipped before their download: learned URL rules beside MaybeDont, on real pages.

    python benchmarks/bench_urls.py [--repeat 3] [--configs A,B] [--backend redis] [--scenarios]
                                    [--view-every 4 | --late 6 [--late-kind view|lang|host|page]]
                                    [--synthetic 1000]

Needs the ``bench`` extra (``pip install -e '.[bench]'``: MaybeDont, scrapy-redis).

The site is tests/url_site.py over the 181 real aeb pages (../shared/data/aeb), each in its
own page's template, served on 127.0.0.1: each article under nine URLs (tracking and session
parameters, a referrer tag, print and AMP views, the host name ``localhost``, ``view=full``,
``lang=de``), of which ``lang=de`` is always another text and ``view=full`` another on one
article in ``--view-every``, linked from listing pages in two sort orders. ``--late N
--late-kind K`` makes one variant (``view``, ``lang``, ``host``: ``localhost`` another edition,
``page``: links with ``page=2``, a second page) change only the last N articles and no other;
``--synthetic N`` serves N made-up articles instead of the real ones (1,000: 2,375 distinct
pages). Each configuration
crawls the whole site in a fresh process with the same spider, configurations interleaved:
without the add-on, the add-on without URL rules, the add-on as it is (URL rules on), and
MaybeDont (its PyPI package, its defaults). Printed per configuration (median of the
repeats): responses downloaded, duplicate requests (responses of pages fetched already under
another URL) and the share of the crawl-without's duplicates avoided, the distinct pages
never fetched (the most of any round), and the wall time and its ratio to the crawl without.
Each add-on crawl also prints its requests skipped and the responses downloaded when each rule
was adopted or revoked. ``--backend redis`` keeps the add-on's index in a private redis-server (a fresh
key a crawl) instead of an SQLite file.

``--scenarios`` then runs, with the add-on, the crawls whose pages must all be fetched: one
stopped twice (SIGINT, as Ctrl-C) and resumed from its JOBDIR, a re-run on the index it left,
and two crawlers sharing a scrapy-redis queue and one Redis index (a redis-server on PATH).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from crawling import Server  # noqa: E402
from url_site import ARTICLE, LATE_KINDS, Article, Changes, handler, page_of, pages, synthetic  # noqa: E402

ADDON = {"ADDONS": {"scrapy_neardup.NearDupAddon": 0}}
MAYBEDONT = {
    "DOWNLOADER_MIDDLEWARES": {"maybedont.scrapy_middleware.AvoidDupContentMiddleware": 200},
    "AVOID_DUP_CONTENT_ENABLED": True,
}
WIDTHS = (9, 10, 8, 13, 7, 6)
CONFIGS: dict[str, dict] = {
    "without": {},
    "add-on without rules": {**ADDON, "NEARDUP_LEARN_URLS": False},
    "add-on": ADDON,
    "MaybeDont": MAYBEDONT,
}


def real_articles(limit: int | None = None) -> list[Article]:
    """The aeb pages as the site's articles: each in its own page, whose article container
    (found by the quality benchmark's templates) the site fills with its variant's text."""
    import quality_data as qd

    sources = [s for s in qd.read_aeb() if s.paragraphs]
    templates = qd.build_templates(sources)
    articles = [
        Article(s.title, s.paragraphs, qd.render(templates[s.id], s.title, ["@@article@@"]).replace(
            "<p>@@article@@</p>\n", ARTICLE
        ))
        for s in sources if s.id in templates
    ]  # fmt: skip
    return articles[:limit] if limit else articles


class _SetSampling(random.Random):
    """MaybeDont 0.1.1 samples a set, which Python 3.11's random.sample refuses: list it first."""

    def sample(self, population, k, **kwargs):  # type: ignore[override]
        return super().sample(list(population), k, **kwargs)


def crawl_once(config: dict) -> None:
    """In a fresh process: crawl the site from its first listing (or, with an empty start, from a
    shared scrapy-redis queue), following the site's own links; each URL that reaches the spider
    is written at once to the ``parsed`` file, the stats at the end."""
    import scrapy
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import HtmlResponse

    base, hosts = config["base"], set(config["hosts"])
    parsed = Path(config["parsed"]).open("a", buffering=1)  # noqa: SIM115 (the crawl's whole life)
    if "AVOID_DUP_CONTENT_ENABLED" in config["settings"]:
        from maybedont import predict

        predict.random = _SetSampling()

    class UrlSpider(scrapy.Spider):
        name = "urls"

        async def start(self):
            if config["start"]:
                yield self.request(base + "/list?page=0")

        def request(self, url: str) -> scrapy.Request:
            return scrapy.Request(url, meta={"avoid_dup_content": True})  # MaybeDont's opt-in

        def parse(self, response):
            parsed.write(response.url + "\n")
            if not isinstance(response, HtmlResponse):
                return
            if "/list" not in response.url:
                yield {"url": response.url, "title": response.css("title::text").get()}
            for href in response.css("a::attr(href)").getall():
                url = response.urljoin(href)
                parts = urlsplit(url)
                if parts.netloc in hosts and page_of(parts.path, parse_qs(parts.query)) is not None:
                    yield self.request(url)

    process = CrawlerProcess(
        {
            "LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": False,
            "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16, **config["settings"],
        }
    )  # fmt: skip
    crawler = process.create_crawler(UrlSpider)
    decided: list[tuple[int, str]] = []

    class Decided(logging.Handler):
        """The rules adopted or revoked, with the responses downloaded by then."""

        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if "URL rule" in message and (" adopted (" in message or " revoked (" in message):
                decided.append((crawler.stats.get_value("downloader/response_count", 0), message[21:]))

    logging.getLogger("scrapy_neardup").addHandler(Decided(logging.INFO))
    process.crawl(crawler)
    logging.getLogger("scrapy_neardup").setLevel(logging.INFO)  # its handlers stay at WARNING
    process.start()
    stats = crawler.stats.get_stats()
    Path(config["out"]).write_text(
        json.dumps(
            {
                "responses": stats.get("downloader/response_count", 0),
                "seconds": stats.get("elapsed_time_seconds", 0.0),
                "reason": stats.get("finish_reason"),
                "urls": {k.split("/")[-1]: v for k, v in stats.items() if k.startswith("neardup/urls/")},
                "decided": decided,
            }
        )
    )


class Site:
    """The URL-variant site served on 127.0.0.1, counting the requests it answered."""

    def __init__(self, articles: list[Article], changes: Changes) -> None:
        port: list[int] = []
        served = [0]

        class Counting(handler(articles, port, changes)):  # type: ignore[misc]
            def do_GET(self) -> None:
                served[0] += 1
                super().do_GET()

        self.server = Server(("127.0.0.1", 0), Counting)
        port.append(self.server.server_address[1])
        self.served = served
        self.base = f"http://127.0.0.1:{port[0]}"
        self.hosts = [f"127.0.0.1:{port[0]}", f"localhost:{port[0]}"]
        self.truth = pages(len(articles), changes)
        self.changes = changes
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def distinct(self, urls: list[str]) -> set[tuple]:
        """The site's distinct pages among these URLs."""
        found = set()
        for url in urls:
            parts = urlsplit(url)
            found.add(page_of(parts.path, parse_qs(parts.query), self.changes, parts.netloc))
        return found & self.truth


def start_crawl(site: Site, settings: dict, work: Path, name: str, start: bool = True) -> subprocess.Popen:
    config = {
        "base": site.base, "hosts": site.hosts, "settings": settings, "start": start,
        "out": str(work / f"{name}.json"), "parsed": str(work / "parsed.txt"),
    }  # fmt: skip
    (work / f"{name}.config.json").write_text(json.dumps(config))
    return subprocess.Popen(
        [sys.executable, __file__, "--crawl", str(work / f"{name}.config.json")], cwd=work
    )


def finish(proc: subprocess.Popen, work: Path, name: str) -> dict:
    if proc.wait(timeout=1800) != 0:
        raise SystemExit(f"crawl {name} failed (exit status {proc.returncode})")
    return json.loads((work / f"{name}.json").read_text())


def run(site: Site, settings: dict, work: Path, redis_url: str | None = None) -> dict:
    """One whole crawl with its own index (an SQLite file, or a fresh key of ``redis_url``); its
    result with the URLs that reached the spider."""
    work.mkdir(parents=True)
    location = str(work / "index.sqlite") if redis_url is None else f"{redis_url}?prefix={uuid.uuid4().hex}"
    result = finish(start_crawl(site, {"NEARDUP_INDEX": location, **settings}, work, "crawl"), work, "crawl")
    result["parsed"] = (work / "parsed.txt").read_text().split()
    result["rules"] = rules_of(location)
    return result


def rules_of(location: str) -> dict[str, list[str]]:
    """The rules an index holds that were decided, by status, named without their host."""
    from scrapy_neardup.exceptions import IndexFileError
    from scrapy_neardup.index import IndexSpec, open_existing
    from scrapy_neardup.url_rule import read_rule

    try:
        with open_existing(IndexSpec.parse(location)) as index:
            rows = index.url_rules()
    except IndexFileError:  # a crawl with the add-on off made none
        rows = []
    decided: dict[str, set[str]] = {}
    for row in rows:
        rule, _, _, status = read_rule(row)
        if status != "learning":
            name = "hosts" if rule.kind == "host" else f"{rule.kind} {rule.name}"
            decided.setdefault(status, set()).add(name + (f" under /{rule.section}" if rule.section else ""))
    return {status: sorted(names) for status, names in decided.items()}


def table(site: Site, args: argparse.Namespace, names: list[str], tmp: Path, redis_url: str | None) -> None:
    results: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(args.repeat):
        for at, name in enumerate(names):
            result = run(site, CONFIGS[name], tmp / f"{round_}-{at}", redis_url)
            result["fetched"] = site.distinct(result["parsed"])
            results[name].append(result)
            print(
                f"  round {round_ + 1} {name}: {result['responses']} responses, {len(result['fetched'])}/"
                f"{len(site.truth)} pages, {result['seconds']:.1f} s {result['urls']}",
                flush=True,
            )
            if result["decided"]:
                print("    decided at response: " + ", ".join(str(at) for at, _ in result["decided"]))
            for at, message in result["decided"]:
                if " revoked (" in message:
                    print(f"    at response {at}: {message}")
            for status in ("adopted", "revoked"):
                if result["rules"].get(status):
                    print(f"    {status}: {', '.join(result['rules'][status])}")
            if len(result["fetched"]) < len(site.truth):
                print(f"    never fetched: {sorted(site.truth - result['fetched'])}")
    print(f"\n{len(site.truth)} distinct pages, {args.repeat} rounds (medians), index: {args.backend}")
    for name in names:
        skipped = [r["urls"].get("skipped", 0) for r in results[name]]
        if any(skipped):
            print(
                f"{name}: requests skipped {skipped}, median {statistics.median(skipped):.0f} "
                f"(min {min(skipped)}, max {max(skipped)})"
            )
    without = results.get("without")
    dup_without = statistics.median(r["responses"] - len(r["fetched"]) for r in without) if without else None
    secs_without = statistics.median(r["seconds"] for r in without) if without else None
    heads = ("responses", "duplicates", "avoided", "never fetched", "wall s", "ratio")
    print(f"{'config':24} " + " ".join(f"{h:>{w}}" for h, w in zip(heads, WIDTHS, strict=True)))
    for name in names:
        runs = results[name]
        responses = statistics.median(r["responses"] for r in runs)
        duplicates = statistics.median(r["responses"] - len(r["fetched"]) for r in runs)
        missing = max(len(site.truth) - len(r["fetched"]) for r in runs)
        seconds = statistics.median(r["seconds"] for r in runs)
        avoided = f"{1 - duplicates / dup_without:.0%}" if dup_without else "-"
        ratio = f"{seconds / secs_without:.2f}" if secs_without else "-"
        cells = (f"{responses:.0f}", f"{duplicates:.0f}", avoided, str(missing), f"{seconds:.1f}", ratio)
        print(f"{name:24} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, WIDTHS, strict=True)))


def scenarios(site: Site, tmp: Path) -> None:
    """Stopped and resumed, re-run, two crawlers on one Redis index: every page fetched?"""
    work = tmp / "resume"
    work.mkdir()
    settings = {**ADDON, "NEARDUP_INDEX": str(work / "index.sqlite"), "JOBDIR": str(work / "job")}
    for part in ("first", "second"):  # stopped as Ctrl-C stops it, after 400 more requests
        goal = site.served[0] + 400
        proc = start_crawl(site, settings, work, part)
        while proc.poll() is None and site.served[0] < goal:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        print(f"  stopped: {finish(proc, work, part)['urls']}")
    resumed = finish(start_crawl(site, settings, work, "resumed"), work, "resumed")
    parts = (work / "parsed.txt").read_text().split()
    report("stopped twice, resumed", site, parts, resumed)
    (work / "parsed.txt").unlink()
    again = finish(
        start_crawl(site, {k: v for k, v in settings.items() if k != "JOBDIR"}, work, "rerun"), work, "rerun"
    )
    report("re-run on its index", site, (work / "parsed.txt").read_text().split(), again)
    server = shutil.which("redis-server")
    if server is None:
        print("two crawlers on one index: skipped (no redis-server on PATH for their queue)")
        return
    for index in ("redis", "sqlite"):  # the same two crawlers, their index in Redis or in one file
        work = tmp / f"two-{index}"
        work.mkdir()
        with redis_server(server, work) as url:
            key = uuid.uuid4().hex
            shared = {
                **ADDON, "REDIS_URL": url, "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
                "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
                "SCHEDULER_QUEUE_KEY": f"{key}:requests", "SCHEDULER_DUPEFILTER_KEY": f"{key}:dupefilter",
                "SCHEDULER_PERSIST": True, "SCHEDULER_IDLE_BEFORE_CLOSE": 5,
            }  # fmt: skip
            if index == "redis":
                shared["NEARDUP_INDEX"] = f"{url}?prefix={key}:neardup"
            else:
                shared["NEARDUP_INDEX"] = str(work / "index.sqlite")
            began = time.perf_counter()
            first = start_crawl(site, shared, work, "first")
            time.sleep(3)
            second = start_crawl(site, shared, work, "second", start=False)
            results = [finish(first, work, "first"), finish(second, work, "second")]
            wall = time.perf_counter() - began - 5  # the idle wait before closing left out
        skipped = sum(r["urls"].get("skipped", 0) for r in results)
        parsed = (work / "parsed.txt").read_text().split()
        report(f"two crawlers, one {index} index ({skipped} skipped, {wall:.1f} s)", site, parsed, *results)


def report(what: str, site: Site, parsed: list[str], *results: dict) -> None:
    missing = len(site.truth - site.distinct(parsed))
    print(
        f"{what}: {len(parsed)} responses to the spider, {missing} distinct pages never fetched; "
        + "; ".join(str(r["urls"]) for r in results),
        flush=True,
    )


class redis_server:
    """A private redis-server on a free port in ``work``."""

    def __init__(self, server: str, work: Path) -> None:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.proc = subprocess.Popen(
            [server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--dir", str(work)],
            stdout=subprocess.DEVNULL,
        )

    def __enter__(self) -> str:
        import redis

        client = redis.Redis(port=self.port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        return f"redis://127.0.0.1:{self.port}/0"

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--articles", type=int, default=None, help="only the first aeb pages")
    parser.add_argument("--synthetic", type=int, default=0, help="so many made-up articles instead")
    parser.add_argument("--view-every", type=int, default=4, help="view=full changes one article in so many")
    parser.add_argument("--late", type=int, default=0, help="--late-kind changes only the last N articles")
    parser.add_argument("--late-kind", choices=LATE_KINDS, default="view", help="the variant --late is about")
    parser.add_argument("--scenarios", action="store_true", help="then stop and resume, re-run, two crawlers")
    parser.add_argument("--backend", choices=("sqlite", "redis"), default="sqlite", help="the add-on's index")
    parser.add_argument("--crawl", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.crawl:
        crawl_once(json.loads(args.crawl.read_text()))
        return
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown configs {unknown}; choose from {', '.join(CONFIGS)}")
    articles = synthetic(args.synthetic) if args.synthetic else real_articles(args.articles)
    late = Changes(args.view_every, args.late_kind, len(articles) - args.late) if args.late else None
    site = Site(articles, late or Changes(args.view_every))
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        redis_url = None
        if args.backend == "redis" and names:
            server = shutil.which("redis-server")
            if server is None:
                parser.error("--backend redis needs a redis-server on PATH")
            redis_url = stack.enter_context(redis_server(server, Path(tmp)))
        if names:
            table(site, args, names, Path(tmp), redis_url)
        if args.scenarios:
            scenarios(site, Path(tmp))
    site.server.shutdown()


if __name__ == "__main__":
    main()
