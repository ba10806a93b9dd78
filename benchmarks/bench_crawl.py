"""Crawl throughput with and without scrapy-neardup, on a real static site served on 127.0.0.1.

    python benchmarks/bench_crawl.py [--site DIR] [--repeat 3] [--configs A,B] [--baseline CHECKOUT]

The site is the LLVM and Clang documentation built by ../shared/scripts/get-llvm-docs
(built into benchmarks/.data/llvm-docs-site when missing; 659 pages, two versions of
each manual). Each configuration crawls the whole site in a fresh process, configurations
interleaved: by default without the add-on, with its default settings inline
(NEARDUP_WORKERS = 0) and as they are (the default pool), and with the resiliparse
extractor inline in drop mode (the default) and in tag mode. ``--baseline`` runs every
configuration with the add-on of another checkout too, to compare two versions in one run.
It prints pages downloaded per second (median of the repeats), the ratio to the crawl
without the add-on, whether the configurations of one extractor found the same duplicate
clusters, and the CPU time a page took (the crawl, its workers and the server together): the
machine's cores divided by it bound the pages a second any scheduling could reach. For an
inline configuration in tag mode it also prints the CPU the add-on adds to the crawl's process
a page, and its steps timed alone on the site's pages (where that time goes).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "benchmarks" / ".data" / "llvm-docs-site"
NEWS_SITE = REPO / "benchmarks" / ".data" / "news-site"
SCRIPT = REPO.parent / "shared" / "scripts" / "get-llvm-docs"

# None: the crawl without the add-on; {}: the add-on with its default settings.
CONFIGS: dict[str, dict | None] = {
    "without": None,
    "default inline": {"NEARDUP_WORKERS": 0},
    "default": {},
    "default rules off": {"NEARDUP_LEARN_URLS": False},
    "trafilatura inline": {"NEARDUP_EXTRACTOR": "trafilatura", "NEARDUP_WORKERS": 0},
    "trafilatura workers=2": {"NEARDUP_EXTRACTOR": "trafilatura", "NEARDUP_WORKERS": 2},
    "trafilatura-fast inline": {"NEARDUP_EXTRACTOR": "trafilatura-fast", "NEARDUP_WORKERS": 0},
    "auto inline": {"NEARDUP_EXTRACTOR": "auto", "NEARDUP_WORKERS": 0},
    "auto workers=1": {"NEARDUP_EXTRACTOR": "auto", "NEARDUP_WORKERS": 1},
    "auto workers=2": {"NEARDUP_EXTRACTOR": "auto", "NEARDUP_WORKERS": 2},
    "resiliparse inline": {"NEARDUP_EXTRACTOR": "resiliparse", "NEARDUP_WORKERS": 0},
    "resiliparse workers=2": {"NEARDUP_EXTRACTOR": "resiliparse", "NEARDUP_WORKERS": 2},
    # Tag mode: every page still reaches the spider, so nothing is saved by not parsing the
    # duplicates; this is the middleware's own cost.
    "resiliparse inline tag": {
        "NEARDUP_EXTRACTOR": "resiliparse",
        "NEARDUP_ACTION": "tag",
        "NEARDUP_WORKERS": 0,
    },
}
DEFAULT_CONFIGS = "without,default inline,default,resiliparse inline,resiliparse inline tag"


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # a crawl's connections at once (socketserver's 5 drops SYNs: 1 s stalls)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def crawl_once(start_url: str, settings: dict, out: Path) -> None:
    """In a fresh process: crawl every page under start_url, then write the stats as JSON."""
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import HtmlResponse

    class SiteSpider(scrapy.Spider):
        name = "llvm"

        async def start(self):
            yield scrapy.Request(start_url)

        def parse(self, response):
            if isinstance(response, HtmlResponse):
                yield {"url": response.url, "title": response.css("title::text").get()}
                for href in response.css("a::attr(href)").getall():
                    url = response.urljoin(href).split("#")[0]
                    if url.startswith(start_url.rsplit("/", 1)[0]) and url.split("?")[0].endswith(".html"):
                        yield scrapy.Request(url)

    process = CrawlerProcess(
        {
            "LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, "REMOTE_CONTROL_ENABLED": False,
            "ROBOTSTXT_OBEY": False, "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
            **settings,
        }
    )  # fmt: skip
    crawler = process.create_crawler(SiteSpider)
    dropped: list[str] = []

    def item_dropped(item: dict, **kwargs: object) -> None:
        dropped.append(item["url"])

    crawler.signals.connect(item_dropped, signals.item_dropped)
    lags: list[float] = []

    def watch_lag(spider: object) -> None:  # a function held by this frame: signals keep weak references
        import asyncio

        async def watch() -> None:
            """How late the crawl's event loop runs a callback due every 5 ms: the time its thread
            was held (by the add-on's index work, say) and could download or parse nothing."""
            while True:
                due = time.perf_counter() + 0.005
                await asyncio.sleep(0.005)
                lags.append(max(0.0, time.perf_counter() - due))

        asyncio.get_running_loop().create_task(watch())

    crawler.signals.connect(watch_lag, signals.spider_opened)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats()
    lags.sort()
    out.write_text(
        json.dumps(
            {
                # Every response downloaded: a dropped page was fetched too, but never reaches
                # response_received (IgnoreRequest stops it in the middleware chain).
                "pages": stats.get("downloader/response_count", 0),
                "seconds": stats["elapsed_time_seconds"],
                "own_cpu": sum(resource.getrusage(resource.RUSAGE_SELF)[:2]),  # the crawl's process alone
                "neardup": {k: v for k, v in stats.items() if k.startswith("neardup/")},
                "dropped": dropped,
                "lag_ms": {  # the crawl loop's lateness, 5 ms ticks
                    "p50": 1000 * lags[len(lags) // 2] if lags else 0.0,
                    "p99": 1000 * lags[int(len(lags) * 0.99)] if lags else 0.0,
                    "max": 1000 * lags[-1] if lags else 0.0,
                },
            }
        )
    )


def addon_steps(site: Path, settings: dict, out: Path) -> None:
    """In a fresh process: the add-on's steps on every page of the site, in turn, as the crawl runs
    them inline (raw-copy lookup, extraction, signatures, index check), and each step's mean ms.
    The extraction is split into the extractor's own call and the add-on's text work around it
    (decoding, the pathological-page check, the repeated-lines pass, the title)."""
    from scrapy_neardup import text as text_module
    from scrapy_neardup.config import DedupConfig
    from scrapy_neardup.detector import Arrival, Detector
    from scrapy_neardup.exceptions import SkipPage
    from scrapy_neardup.fingerprint import fingerprint
    from scrapy_neardup.index import SQLiteIndex
    from scrapy_neardup.signatures.exact import raw_hash
    from scrapy_neardup.text import extract_page

    config = DedupConfig(extractor=settings.get("NEARDUP_EXTRACTOR", DedupConfig().extractor))
    spent = {"raw copy": 0.0, "extractor": 0.0, "text work": 0.0, "signatures": 0.0, "index check": 0.0}
    extractor = text_module.EXTRACTOR_FUNCS[config.extractor]

    def timed_extractor(html: str) -> str | None:
        start = time.perf_counter()
        try:
            return extractor(html)
        finally:
            spent["extractor"] += time.perf_counter() - start

    text_module.EXTRACTOR_FUNCS[config.extractor] = timed_extractor
    pages = sorted(site.rglob("*.html"))
    with Detector(config, SQLiteIndex(out.with_suffix(".sqlite"), config)) as detector:
        for path in pages:
            body, url = path.read_bytes(), f"http://127.0.0.1/{path.relative_to(site)}"
            start = time.perf_counter()
            page = Arrival(url, body, "text/html")
            raw = raw_hash(body)
            copy = detector.copy_of(page)
            extracted = time.perf_counter()
            spent["raw copy"] += extracted - start
            if copy is not None:
                continue
            try:
                text, title = extract_page(body, config.extractor, "text/html", config.max_body)
            except SkipPage:  # a page the crawl skips: its extraction is its whole cost
                spent["text work"] += time.perf_counter() - extracted
                continue
            signed = time.perf_counter()
            spent["text work"] += signed - extracted
            fp = fingerprint(text, config, extractor="text", raw=raw)
            checked = time.perf_counter()
            spent["signatures"] += checked - signed
            detector.decide(page, dataclasses.replace(fp, title=title), raw=raw)
            spent["index check"] += time.perf_counter() - checked
    spent["text work"] -= spent["extractor"]
    out.write_text(json.dumps({step: seconds * 1000 / len(pages) for step, seconds in spent.items()}))


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds of this process (the server's threads) and of its finished children (each crawl,
    with its worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def clusters(db: Path) -> set[frozenset[str]]:
    """The duplicate clusters an index found, as sets of URL paths (order of arrival aside)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT d.url, o.url FROM documents d JOIN documents o ON o.id = d.duplicate_of"
        ).fetchall()
    for a, b in rows:
        parent[find(a.split("/", 3)[3])] = find(b.split("/", 3)[3])
    groups: dict[str, set[str]] = {}
    for x in list(parent):
        groups.setdefault(find(x), set()).add(x)
    return {frozenset(g) for g in groups.values()}


def dropped_by_truth(site: Path, db: Path, dropped: list[str]) -> dict[str, int]:
    """The items a crawl of the news site dropped, by whether the page and the one it was dropped
    for are one page by ``truth.json`` (a URL's query aside: the site's server ignores it, so
    an article's own links with a query, such as ``?p=2``, serve its bytes again)."""
    copies = json.loads((site / "truth.json").read_text())

    def page(url: str) -> str:
        path = "/" + url.split("/", 3)[3]
        return copies.get(path) or copies.get(path.split("?")[0], path.split("?")[0])

    with sqlite3.connect(db) as con:
        of = dict(
            con.execute("SELECT d.url, o.url FROM documents d JOIN documents o ON o.id = d.duplicate_of")
        )
    counts = {"duplicate": 0, "ambiguous": 0, "distinct": 0}
    for url in dropped:
        counts["duplicate" if url in of and page(url) == page(of[url]) else "distinct"] += 1
    return counts


def tree_memory(root: int) -> float:
    """MiB of the process ``root`` and its descendants together, by their proportional set size
    (a page shared by several processes counts its share in each), from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def run_sampled(command: list[str], cwd: str, env: dict) -> float:
    """Run a crawl to its end, sampling its process tree's memory; the peak MiB."""
    proc = subprocess.Popen(command, cwd=cwd, env=env)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, tree_memory(proc.pid))
        time.sleep(0.2)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, command)
    return peak


def dropped_by_label(site: Path, db: Path, dropped: list[str]) -> dict[str, int]:
    """The items a crawl dropped, by the label of the pair (page, the page it duplicates) in the
    site's labels.jsonl: duplicate, ambiguous, or distinct (every pair not listed)."""
    labels = {}
    for line in (site / "labels.jsonl").read_text().splitlines():
        row = json.loads(line)
        labels[frozenset((row["a"], row["b"]))] = row["label"]
    with sqlite3.connect(db) as con:
        of = dict(
            con.execute("SELECT d.url, o.url FROM documents d JOIN documents o ON o.id = d.duplicate_of")
        )
    counts = {"duplicate": 0, "ambiguous": 0, "distinct": 0}
    for url in dropped:
        pair = frozenset(u.split("/", 3)[3] for u in (url, of.get(url, url)))
        counts[labels.get(pair, "distinct") if len(pair) == 2 else "distinct"] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--site", default="llvm",
        help="llvm (the LLVM and Clang docs, built when missing), news (aeb article pages with copies, "
        "built when missing) or a folder",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--configs", default=DEFAULT_CONFIGS, help=f"comma-separated, of: {', '.join(CONFIGS)}"
    )
    parser.add_argument(
        "--baseline", type=Path, metavar="CHECKOUT",
        help="also run each configuration with the add-on from this checkout (PYTHONPATH), interleaved",
    )  # fmt: skip
    parser.add_argument("--crawl", nargs=3, metavar=("URL", "SETTINGS", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--steps", nargs=2, metavar=("SETTINGS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.site = {"llvm": SITE, "news": NEWS_SITE}.get(args.site) or Path(args.site)
    if args.crawl:
        crawl_once(args.crawl[0], json.loads(args.crawl[1]), Path(args.crawl[2]))
        return
    if args.steps:
        addon_steps(args.site, json.loads(args.steps[0]), Path(args.steps[1]))
        return
    if not (args.site / "index.html").exists():
        builder = [str(Path(__file__).with_name("news_site.py"))] if args.site == NEWS_SITE else [str(SCRIPT)]
        print(f"building the site into {args.site} with {builder[0]} ...", file=sys.stderr)
        subprocess.run([sys.executable, *builder, "--out", str(args.site)], check=True)
    server = Server(("127.0.0.1", 0), partial(QuietHandler, directory=str(args.site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    start_url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
    names = args.configs.split(",")
    unknown = [name for name in names if name not in CONFIGS]
    if unknown:
        parser.error(f"unknown configurations: {', '.join(unknown)}")
    if args.baseline:
        names += [f"{name} @base" for name in names if CONFIGS[name] is not None]
    speeds: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}  # CPU ms a page: crawl, workers, server
    crawl_cpu: dict[str, list[float]] = {name: [] for name in names}  # CPU ms a page: the crawl's process
    found: dict[str, set[frozenset[str]]] = {}
    counts: dict[str, dict] = {}
    labelled: dict[str, dict[str, int]] = {}
    memory: dict[str, list[float]] = {name: [] for name in names}  # peak MiB of the crawl's process tree
    own_cpu: dict[str, list[float]] = {name: [] for name in names}  # CPU ms a page: the crawl's process alone
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.repeat):
            for name in names:  # interleaved, so a noisy minute hurts every configuration alike
                db, out = Path(tmp) / f"{run}-{name}.sqlite", Path(tmp) / f"{run}-{name}.json"
                config = CONFIGS[name.removesuffix(" @base")]
                settings = dict(config or {})
                if config is not None:
                    settings.update({"ADDONS": {"scrapy_neardup.NearDupAddon": 0}, "NEARDUP_INDEX": str(db)})
                env = dict(os.environ)
                if name.endswith(" @base"):
                    env["PYTHONPATH"] = str(args.baseline.resolve())
                command = [sys.executable, __file__, "--crawl", start_url, json.dumps(settings), str(out)]
                before = cpu_seconds()
                memory[name].append(run_sampled(command, tmp, env))
                result = json.loads(out.read_text())
                speeds[name].append(result["pages"] / result["seconds"])
                served, crawled = (now - then for now, then in zip(cpu_seconds(), before, strict=True))
                cpu[name].append((served + crawled) / result["pages"] * 1000)
                crawl_cpu[name].append(crawled / result["pages"] * 1000)
                own_cpu[name].append(result["own_cpu"] / result["pages"] * 1000)
                print(f"  run {run + 1} {name}: {speeds[name][-1]:.1f} pages/s", file=sys.stderr)
                if run == 0:
                    counts[name] = {"pages": result["pages"], **result["neardup"]}
                    if config is not None:
                        found[name] = clusters(db)
                        if (args.site / "labels.jsonl").exists():
                            labelled[name] = dropped_by_label(args.site, db, result["dropped"])
                        elif (args.site / "truth.json").exists():
                            labelled[name] = dropped_by_truth(args.site, db, result["dropped"])
        # The add-on's own steps, timed alone on the site's pages (the same hour as the crawls).
        steps: dict[str, dict[str, float]] = {}
        for name in names:
            config = CONFIGS[name.removesuffix(" @base")]
            if config is None or config.get("NEARDUP_ACTION") != "tag" or config.get("NEARDUP_WORKERS") != 0:
                continue
            env = dict(os.environ)
            if name.endswith(" @base"):
                env["PYTHONPATH"] = str(args.baseline.resolve())
            out = Path(tmp) / f"steps-{name}.json"
            command = [sys.executable, __file__, "--site", str(args.site), "--steps", json.dumps(config)]
            subprocess.run([*command, str(out)], check=True, cwd=tmp, env=env)
            steps[name] = json.loads(out.read_text())
    server.shutdown()
    base = statistics.median(speeds[names[0]])
    print(f"\nCrawl of {args.site.name} on 127.0.0.1, median of {args.repeat} runs")
    from scrapy_neardup.workers import usable_cores  # here: a --baseline crawl imports an older package

    cores = usable_cores()
    header = f"{'configuration':<28} | {'pages':>5} | {'pages/s':>8} | {'vs without':>10} | {'dropped':>7}"
    print(
        header
        + f" | clusters | CPU ms/page | CPU bound on {cores} cores | crawl's own ms | peak MiB | added MiB"
    )
    base_memory = statistics.median(memory[names[0]])
    for name in names:
        median = statistics.median(speeds[name])
        dropped = counts[name].get("neardup/dropped", "")
        n_clusters = len(found.get(name, ()))
        cpu_ms = statistics.median(cpu[name])
        bound = cores * 1000 / cpu_ms / base  # pages/s if every core were busy all the time, vs without
        peak = statistics.median(memory[name])
        print(
            f"{name:<28} | {counts[name]['pages']:>5} | {median:>8.1f} | {median / base:>9.2f}x"
            f" | {dropped!s:>7} | {n_clusters:>8} | {cpu_ms:>11.1f} | {bound:>19.2f}x"
            f" | {statistics.median(own_cpu[name]):>14.1f} | {peak:>8.0f} | {peak - base_memory:>9.0f}"
        )
    if steps and names[0] == "without":
        own_ms = statistics.median(crawl_cpu["without"])
        print(f"\nWithout the add-on the crawl's process takes {own_ms:.1f} ms of CPU a page.")
        for name, spent in steps.items():
            added = statistics.median(crawl_cpu[name]) - own_ms
            parts = ", ".join(f"{step} {ms:.2f}" for step, ms in spent.items())
            print(f"{name}: adds {added:.1f} ms of CPU a page to the crawl's process; its steps alone")
            print(f"  (mean ms a page, a fresh process): {parts}; total {sum(spent.values()):.2f}")
            # Inline, the add-on's time is serial with the crawl's: a page takes the crawl's wall
            # time plus the steps. The extractor's call is not the add-on's own work, so this is
            # the most the add-on could reach were everything else it does free.
            page_ms = 1000 / base
            print(
                f"  the crawl without the add-on takes {page_ms:.1f} ms a page: with the extractor's call"
                f" alone it could reach at most {page_ms / (page_ms + spent['extractor']):.2f}x"
            )
    for inline, pooled in [(f"{e} inline", f"{e} workers=2") for e in ("trafilatura", "resiliparse")] + [
        ("default inline", "default")
    ]:
        if inline in speeds and pooled in speeds:
            ratio = statistics.median(speeds[pooled]) / statistics.median(speeds[inline])
            print(f"{pooled} / {inline} = {ratio:.2f}x")
    for name, by_label in labelled.items():
        print(
            f"{name}: items dropped by the label of (page, its original): {by_label['duplicate']} duplicate,"
            f" {by_label['ambiguous']} ambiguous, {by_label['distinct']} distinct"
        )
    per_extractor: dict[str, list[set[frozenset[str]]]] = {}
    for name, value in found.items():
        extractor = (CONFIGS[name.removesuffix(" @base")] or {}).get("NEARDUP_EXTRACTOR", "default")
        per_extractor.setdefault(extractor, []).append(value)
    for extractor, values in per_extractor.items():
        same = all(v == values[0] for v in values)
        print(f"{extractor}: same clusters in all its configurations: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
