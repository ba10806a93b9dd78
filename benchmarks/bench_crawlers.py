"""Many crawlers, one crawl: crawler processes sharing one index, killed and resumed.

    python benchmarks/bench_crawlers.py [--scenarios shared,whole,kill,close] [--backends redis,postgres]
                                        [--articles 60] [--repeat 1] [--kill-after 500]
                                        [--close-at "Closing spider"] [--close-delay 0.05] [--details]
                                        [--feed jsonlines|gzip] [--keep FOLDER] [--timeout 900]

Needs redis-server on PATH, the ``bench`` extra (scrapy-redis, redis, psycopg) and, for
``postgres``, PostgreSQL's binaries (tests/pg_server.py finds them).

The site is bench_news's (``--articles N``: only its first N real aeb articles; the issue's
figures: 60 for shared and whole, 80 for kill and close), each article with its print, AMP,
partner, tracking-parameter, session-id and other-host copies and its ``?view=comments``
view, served on 127.0.0.1; every crawl is bench_news's (a fresh process following the site's
links, an item of each article-like page in its own JSON-lines feed), with the add-on on its
ADDONS line. A private redis-server (the scrapy-redis queues, and the Redis index) and, for
``postgres``, a throwaway PostgreSQL server are started here and stopped at the end. Each
run's index is fresh: a Redis key prefix or a PostgreSQL schema of its own (``sqlite``: a
file in the run's folder; for ``close`` the JOBDIR's default, ``<JOBDIR>/neardup.sqlite``).

Printed: a line per round, backend, scenario and configuration, its figures as JSON
(``requests``: the requests the server answered in the run, 404s of the real templates'
links included; ``neardup``: the add-on's dropped, revisits, uncertain and unconfirmed
stats summed over the crawls that ended), then the run's wall time (with scrapy-redis's 5 s idle wait before a
crawler closes), and each scenario's total time.

``shared``: two crawlers sharing a scrapy-redis queue and one index, the first from the
home page, the second 2 s later from the queue. ``whole``: two crawlers each crawling the
whole site from its home page at the same time, one index, no shared queue. Figures over
both feeds (bench_news.measure): ``items`` per feed, ``byte_identical_all`` (items
byte-identical to an earlier item of either feed), ``copies_stored`` (items whose article
an earlier item already holds) of ``copies_served`` (the copies the site serves: what one
crawl without the add-on stores), their ``share``, ``distinct_stored`` of ``distinct`` (the
articles stored), ``url_twice`` (URLs more than one item holds, in one feed or two),
``in_no_feed`` (articles no item holds) and ``copies_by_kind`` (the copies stored, by the
kind of URL). One crawl, however many processes, stores each article once: no copies, every
article. ``--details`` lists, for each run with the add-on, each article stored more than
once (feed and URL of each item) and each URL held twice.

``kill``: crawlers A and B share a scrapy-redis queue and one index (B 2 s after A, from
the queue); A is killed with SIGKILL once the server has answered ``--kill-after`` requests
(of both crawlers; about 6 s into the crawl of 80 articles), B goes on, A starts again from
the queue ``--restart-after`` s later, and all run to the end. ``close``: one crawler with a
JOBDIR killed with SIGKILL while it closes, ``--close-delay`` s after its log (LOG_LEVEL
INFO) shows ``--close-at``, then resumed from its JOBDIR to the end (at 0 s the kill lands
in Scrapy's own scheduler close and can leave an empty requests.queue/active.json, which
Scrapy cannot resume from, add-on or not; the add-on's close, before the feed is stored,
takes some 150 ms). Each is run with the add-on and, as its peer, with the same settings
but no ADDONS, on the same kill point. Figures: ``in_no_feed`` (articles that no feed holds,
under any URL: what the kill lost), ``missing`` (which), ``items`` per feed,
``copies_stored``, ``killed`` (the requests answered when the kill landed, or the log line;
false when the crawl ended first). Lines of a feed cut by a kill are skipped.

A crawl that fails (an exit status, CRITICAL in its log) or outlives ``--timeout`` prints
its status and the tail of its stderr (each crawl's is kept in ``<name>.err`` of its run's
folder; ``--keep`` keeps the folders) and its run prints no figures, except a resume in
``close`` (``resume_failed``: the figures are what the killed run left).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import bench_news  # noqa: E402
from bench_news import NewsSite, measure, serve  # noqa: E402
from bench_urls import ADDON, redis_server  # noqa: E402

SCENARIOS = ("shared", "whole", "kill", "close")
STATS = ("dropped", "revisits", "uncertain", "unconfirmed")  # the add-on's stats printed (neardup/...)
SECOND_AFTER = 2.0  # seconds between the first crawler's start and the second's
GZIP = "scrapy.extensions.postprocessing.GzipPlugin"
STARTED: list[Crawl] = []  # every crawl, ended when the script ends (an error, Ctrl-C)


class Counting:
    """The site as bench_news.serve answers it, counting the requests answered (the kill's clock)."""

    def __init__(self, site: NewsSite) -> None:
        self.site, self.served, self.lock = site, 0, threading.Lock()

    def page(self, path: str, query: str) -> bytes | None:
        with self.lock:
            self.served += 1
        return self.site.page(path, query)


@dataclass
class Context:
    args: argparse.Namespace
    site: NewsSite
    counting: Counting
    base: str
    hosts: list[str]
    redis_url: str
    pg_url: str | None
    failures: list[str] = field(default_factory=list)


class Crawl:
    """bench_news.start: bench_news.crawl_once in a fresh process writing ``<name>.jsonl``, with
    its stderr kept in ``<name>.err`` and watched for a line (``watch``)."""

    def __init__(
        self, ctx: Context, settings: dict, work: Path, name: str, first: bool, watch: str | None = None
    ) -> None:
        self.name, self.work, self.watch, self.killed, self.ended = name, work, watch, False, False
        self.gzip = ctx.args.feed == "gzip"
        if self.gzip:  # written when the crawl closes, as a remote feed is: a kill loses all of it
            gzipped = {"format": "jsonlines", "postprocessing": [GZIP]}
            settings = {**settings, "FEEDS": {str(work / f"{name}.jsonl.gz"): gzipped}}
        config = {
            "base": ctx.base, "hosts": ctx.hosts, "settings": settings, "start": first,
            "out": str(work / f"{name}.json"), "feed": str(work / f"{name}.jsonl"),
            "verdicts": str(work / "verdicts.jsonl"),
        }  # fmt: skip
        (work / f"{name}.config.json").write_text(json.dumps(config))
        self.err = work / f"{name}.err"
        self.seen = threading.Event()  # the watched line is in the log
        self.proc = subprocess.Popen(
            [sys.executable, bench_news.__file__, "--crawl", str(work / f"{name}.config.json")],
            cwd=work, stderr=subprocess.PIPE, start_new_session=True,  # its workers: one group to end
        )  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        STARTED.append(self)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        with self.err.open("wb") as out:
            for line in self.proc.stderr:
                out.write(line)
                out.flush()
                if self.watch and self.watch.encode() in line:
                    self.seen.set()

    def kill(self) -> bool:
        """SIGKILL to the crawl's process (its workers end with it), if it still runs."""
        if self.proc.poll() is not None:
            return False
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.killed = True
        return True

    def finish(self, deadline: float) -> str | None:
        """Wait for the end; what went wrong (exit status, timeout, stderr's tail), else None."""
        try:
            self.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            self.end()
            problem = "timed out"
        else:
            problem = None if self.killed or self.proc.returncode == 0 else f"exit {self.proc.returncode}"
        self.reader.join(timeout=5)
        logged = self.err.read_bytes() if self.err.exists() else b""
        if problem is None and not self.killed and b"] CRITICAL: " in logged:
            problem = f"exit {self.proc.returncode}, CRITICAL in its log"  # CrawlerProcess exits 0 on those
        if problem is None:
            return None
        tail = self.err.read_text(errors="replace").splitlines()[-15:] if self.err.exists() else []
        return f"{self.name}: {problem}; stderr:\n    " + "\n    ".join(tail)

    def end(self) -> None:
        """Whatever of the crawl's process group still runs, gone (once: its group id is not reused)."""
        if self.ended:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.ended = True

    def stats(self) -> dict:
        """The crawl's neardup/ stats (none when it was killed)."""
        path = self.work / f"{self.name}.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def feed(self) -> list[dict]:
        """The feed's items; a line cut by a kill (or not an item) is skipped."""
        path = self.work / f"{self.name}.jsonl{'.gz' if self.gzip else ''}"
        items = []
        for line in _read(path).splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(item, dict)
                and isinstance(item.get("url"), str)
                and isinstance(item.get("html"), str)
            ):
                items.append(item)
        return items


def _read(path: Path) -> bytes:
    """A feed's bytes; of a gzipped one, what a kill left readable."""
    if not path.exists():
        return b""
    if path.suffix != ".gz":
        return path.read_bytes()
    out = b""
    with contextlib.suppress(OSError, EOFError), gzip.open(path) as feed:
        while chunk := feed.read(65536):
            out += chunk
    return out


def finish_all(ctx: Context, crawls: list[Crawl], what: str) -> bool:
    """Every crawl ended (within ``--timeout`` of now); False, with what went wrong printed, if one failed."""
    deadline = time.monotonic() + ctx.args.timeout
    problems = [p for p in (c.finish(deadline) for c in crawls) if p]
    for crawl in crawls:
        crawl.end()  # leftover workers of a killed crawl
    if problems:
        message = f"{what}: FAILED\n  " + "\n  ".join(problems)
        print(message, flush=True)
        ctx.failures.append(message)
    return not problems


# --- settings ---------------------------------------------------------------------------------------


def index_settings(ctx: Context, backend: str, work: Path) -> dict:
    """A fresh index of ``backend`` (``sqlite`` in ``work``; none given when the run has a JOBDIR)."""
    if backend == "redis":
        return {"NEARDUP_INDEX": f"{ctx.redis_url}?prefix={uuid.uuid4().hex}"}
    if backend == "postgres":
        return {"NEARDUP_INDEX": f"{ctx.pg_url}?prefix=nd_{uuid.uuid4().hex[:20]}"}
    return {"NEARDUP_INDEX": str(work / "index.sqlite")}


def queue_settings(ctx: Context) -> dict:
    """A scrapy-redis queue and request filter of their own, shared by the crawlers given them
    (as bench_news's ``redis2``)."""
    key = uuid.uuid4().hex
    return {
        "REDIS_URL": ctx.redis_url, "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_QUEUE_KEY": f"{key}:requests", "SCHEDULER_DUPEFILTER_KEY": f"{key}:dupefilter",
        "SCHEDULER_PERSIST": True, "SCHEDULER_IDLE_BEFORE_CLOSE": 5,
    }  # fmt: skip


# --- figures ----------------------------------------------------------------------------------------


def article(site: NewsSite, url: str) -> int | None:
    """The article an item's URL holds (its comments view counts as the article)."""
    what = site.content(url)
    return int(what[1:]) if what else None


def lost(site: NewsSite, feeds: list[list[dict]]) -> list[int]:
    present = {article(site, item["url"]) for feed in feeds for item in feed}
    return [n for n in range(site.articles) if n not in present]


def held(site: NewsSite, feeds: dict[str, list[dict]]) -> tuple[list[str], dict[str, list[str]]]:
    """The lines of ``--details``: each article stored more than once (the feed and URL of each
    of its items, in the feeds' order), and each URL more than one item holds (its feeds)."""
    urls: dict[str, list[str]] = {}
    stored: dict[int, list[str]] = {}
    for name, feed in feeds.items():
        for item in feed:
            urls.setdefault(item["url"], []).append(name)
            n = article(site, item["url"])
            if n is not None:
                parts = urlsplit(item["url"])
                where = parts.netloc.split(":")[0] + parts.path + (f"?{parts.query}" if parts.query else "")
                stored.setdefault(n, []).append(f"{name} {where}")
    twice = {url: names for url, names in urls.items() if len(names) > 1}
    details = [f"a{n}: " + "; ".join(items) for n, items in sorted(stored.items()) if len(items) > 1]
    details += [f"url twice: {url} in {', '.join(names)}" for url, names in twice.items()]
    return details, twice


def overlap(site: NewsSite, crawls: list[Crawl]) -> tuple[dict, list[str]]:
    """The figures of two crawlers meant to be one crawl."""
    feeds = {c.name: c.feed() for c in crawls}
    got = measure(site, list(feeds.values()), False)
    details, twice = held(site, feeds)
    figures = {
        "items": {name: len(feed) for name, feed in feeds.items()},
        "byte_identical_all": got["byte_identical_all"], "copies_stored": got["copies_stored"],
        "copies_served": got["copies_served"], "share": round(got["share"], 3),
        "distinct_stored": f"{got['distinct_stored']}/{got['distinct']}", "url_twice": len(twice),
        "in_no_feed": len(lost(site, list(feeds.values()))), "copies_by_kind": got["copies_by_kind"],
    }  # fmt: skip
    return figures, details


def losses(site: NewsSite, crawls: list[Crawl], killed: object) -> tuple[dict, list[str]]:
    """The figures of a killed and resumed crawl."""
    feeds = {c.name: c.feed() for c in crawls}
    missing = lost(site, list(feeds.values()))
    got = measure(site, list(feeds.values()), False)
    figures = {
        "in_no_feed": len(missing), "missing": [f"a{n}" for n in missing],
        "items": {name: len(feed) for name, feed in feeds.items()},
        "copies_stored": got["copies_stored"], "killed": killed,
    }  # fmt: skip
    return figures, held(site, feeds)[0]


def neardup(crawls: list[Crawl]) -> dict:
    """Some of the add-on's stats, summed over the crawls that ended."""
    found: Counter[str] = Counter()
    for crawl in crawls:
        for key, value in crawl.stats().items():
            if key.removeprefix("neardup/") in STATS and isinstance(value, int):
                found[key.removeprefix("neardup/")] += value
    return dict(found)


def report(
    ctx: Context, what: str, figures: dict, details: list[str], wall: float, served: int, crawls: list[Crawl]
) -> None:
    figures["requests"] = ctx.counting.served - served
    if any(c.stats() for c in crawls):
        figures["neardup"] = neardup(crawls)
    print(f"{what}: {json.dumps(figures)} ({wall:.1f} s)", flush=True)
    if ctx.args.details and "without add-on" not in what:  # the peer's copies are all copies
        for line in details:
            print(f"    {line}", flush=True)


# --- scenarios --------------------------------------------------------------------------------------


def two_crawlers(ctx: Context, backend: str, work: Path, what: str, shared_queue: bool) -> None:
    """``shared``: the second crawler 2 s after the first, from their queue; ``whole``: both at
    once from the home page, each with its own scheduler."""
    settings = {**ADDON, **index_settings(ctx, backend, work)}
    began, served = time.monotonic(), ctx.counting.served
    if shared_queue:
        settings.update(queue_settings(ctx))
        crawls = [Crawl(ctx, settings, work, "first", True)]
        time.sleep(SECOND_AFTER)
        crawls.append(Crawl(ctx, settings, work, "second", False))
    else:
        crawls = [Crawl(ctx, settings, work, name, True) for name in ("one", "two")]
    if finish_all(ctx, crawls, what):
        report(ctx, what, *overlap(ctx.site, crawls), time.monotonic() - began, served, crawls)


def kill_one(ctx: Context, backend: str, work: Path, what: str, addon: bool) -> None:
    """A and B on one queue (and one index); A killed after ``--kill-after`` requests answered,
    started again ``--restart-after`` s later; all to the end."""
    args = ctx.args
    settings = {**queue_settings(ctx), **({**ADDON, **index_settings(ctx, backend, work)} if addon else {})}
    began, served = time.monotonic(), ctx.counting.served
    until = served + args.kill_after
    a = Crawl(ctx, settings, work, "A", True)
    crawls = [a]
    while ctx.counting.served < until and a.proc.poll() is None and time.monotonic() - began < args.timeout:
        if len(crawls) == 1 and time.monotonic() - began >= SECOND_AFTER:
            crawls.append(Crawl(ctx, settings, work, "B", False))
        time.sleep(0.005)
    killed: object = ctx.counting.served - served if a.kill() else False
    if len(crawls) == 1:  # A reached the count before B's start
        time.sleep(max(SECOND_AFTER - (time.monotonic() - began), 0))
        crawls.append(Crawl(ctx, settings, work, "B", False))
    time.sleep(args.restart_after)
    crawls.append(Crawl(ctx, settings, work, "A-again", False))
    if finish_all(ctx, crawls, what):
        report(ctx, what, *losses(ctx.site, crawls, killed), time.monotonic() - began, served, crawls)


def close_one(ctx: Context, backend: str, work: Path, what: str, addon: bool) -> None:
    """One crawler with a JOBDIR killed while it closes, then resumed from the JOBDIR."""
    args = ctx.args
    settings: dict = {"JOBDIR": str(work / "job"), "LOG_LEVEL": "INFO"}
    if addon:
        settings.update(ADDON)
        if backend != "sqlite":  # else the JOBDIR's own index, <JOBDIR>/neardup.sqlite
            settings.update(index_settings(ctx, backend, work))
    began, served = time.monotonic(), ctx.counting.served
    first = Crawl(ctx, settings, work, "run", True, watch=args.close_at)
    while not first.seen.wait(0.01):
        if first.proc.poll() is not None or time.monotonic() - began > args.timeout:
            break
    if first.seen.is_set():
        time.sleep(args.close_delay)
    killed: object = f"{args.close_at!r} + {args.close_delay:g} s" if first.kill() else False
    if not finish_all(ctx, [first], what):
        return
    resumed = Crawl(ctx, settings, work, "resumed", True)
    failed = not finish_all(ctx, [resumed], what)
    figures, details = losses(ctx.site, [first, resumed], killed)
    if failed:  # still what the kill left: the articles the first run stored
        figures["resume_failed"] = True
    report(ctx, what, figures, details, time.monotonic() - began, served, [first, resumed])


RUNS: dict[str, Callable[[Context, str, Path, str], None]] = {
    "shared": lambda ctx, b, work, what: two_crawlers(ctx, b, work, what, shared_queue=True),
    "whole": lambda ctx, b, work, what: two_crawlers(ctx, b, work, what, shared_queue=False),
}
PAIRED: dict[str, Callable[[Context, str, Path, str, bool], None]] = {"kill": kill_one, "close": close_one}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="of " + ",".join(SCENARIOS))
    parser.add_argument("--backends", default="redis,postgres", help="of redis,postgres,sqlite")
    parser.add_argument("--articles", type=int, default=None, help="the site's first N articles (all: 181)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--kill-after", type=int, default=500, help="kill: requests answered before A's kill")
    parser.add_argument(
        "--restart-after", type=float, default=2.0, help="kill: seconds before A starts again"
    )
    parser.add_argument(
        "--close-at", default="Closing spider", help="close: the log line that starts the kill"
    )
    parser.add_argument(
        "--close-delay", type=float, default=0.05, help="close: seconds from that line to the kill"
    )
    parser.add_argument(
        "--feed", choices=("jsonlines", "gzip"), default="jsonlines",
        help="gzip: feeds written when a crawl closes (as to S3): a kill loses the killed crawl's items",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a run may take")
    parser.add_argument("--details", action="store_true", help="the copies stored and the URLs held twice")
    parser.add_argument("--keep", type=Path, help="a new folder for the runs' feeds and logs, kept")
    args = parser.parse_args()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(scenarios) - set(SCENARIOS) or set(backends) - {"redis", "postgres", "sqlite"}
    if unknown:
        parser.error(f"unknown: {', '.join(sorted(unknown))}")
    if args.keep:
        args.keep.mkdir(parents=True)
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("bench_crawlers: needs redis-server on PATH (the scrapy-redis queues)")
    holder: list = []
    server, port = serve(holder)
    site = NewsSite(port, args.articles)
    counting = Counting(site)
    holder.append(counting)
    served = measure(site, [[]], False)["copies_served"]
    print(
        f"{site.articles} articles, {len(site.holds)} article URLs, {served} copies served;"
        f" scenarios {','.join(scenarios)}; backends {','.join(backends)}",
        flush=True,
    )
    kept = contextlib.nullcontext(str(args.keep)) if args.keep else None
    with (
        kept or tempfile.TemporaryDirectory(prefix="bench-crawlers-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        redis_url = stack.enter_context(redis_server(binary, Path(tmp)))
        stack.callback(lambda: [crawl.end() for crawl in STARTED])  # before the servers stop
        pg_url = None
        if "postgres" in backends:
            import pg_server

            pg_url, data = pg_server.start()
            stack.callback(pg_server.stop, data)
        hosts = [f"127.0.0.1:{port}", f"localhost:{port}"]
        ctx = Context(args, site, counting, f"http://127.0.0.1:{port}", hosts, redis_url, pg_url)
        for scenario in scenarios:
            began = time.monotonic()
            for round_ in range(args.repeat):
                for backend in backends:
                    configs = (
                        [("add-on", True), ("without add-on", False)] if scenario in PAIRED else [("", None)]
                    )
                    for config, addon in configs:  # interleaved: both meet the same machine state
                        work = Path(tmp) / f"{scenario}-{round_}-{backend}-{config.replace(' ', '-')}"
                        work.mkdir()
                        what = f"round {round_ + 1} {backend} {scenario}" + (f" {config}" if config else "")
                        if addon is None:
                            RUNS[scenario](ctx, backend, work, what)
                        else:
                            PAIRED[scenario](ctx, backend, work, what, addon)
            print(f"{scenario}: {time.monotonic() - began:.1f} s in all", flush=True)
    server.shutdown()
    if ctx.failures:
        sys.exit(f"bench_crawlers: {len(ctx.failures)} run(s) failed")


if __name__ == "__main__":
    main()
