"""Forgetting benchmark: 30 daily crawls of a changing site, with and without NEARDUP_FORGET_AFTER.

    python benchmarks/bench_forget.py                        # SQLite and Redis, 30 days
    python benchmarks/bench_forget.py --backends sqlite --days 12

The site is a news site: every day ``--new`` articles are published, and an article stays
linked for ``--live`` days, so each daily crawl meets the live articles again (revisits) and the
new ones. Each day the crawl also meets copies (lightly edited, at URLs of their own): of
today's articles, of articles last met within the window (2 to 6 days before they left the
site's pages: they must be dropped) and of articles last met more than the window ago (they
must be admitted again, as new pages). Texts come from ``corpus.py``; the index is told the
day by its clock (the ledger's ``clock``), and each day's crawl forgets first, as a crawl
does at its start. In the same run, the same crawls without forgetting show the growth it
stops. Redis runs on a redis-server of its own (nothing saved); its bytes are the server's
used memory, SQLite's the file's pages in use (it reuses the pages it frees).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import random
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_redis import start_redis, used_memory
from corpus import documents, fingerprints

from scrapy_neardup import DedupConfig
from scrapy_neardup.detector import Arrival, Detector
from scrapy_neardup.index import MemoryIndex, SQLiteIndex
from scrapy_neardup.index.forgetting import forget

CONFIG = DedupConfig(extractor="text", keep_text=0)
DAY = 86400.0


@dataclasses.dataclass
class Clock:
    now: float = 1.7e9

    def __call__(self) -> float:
        return self.now


def edited(text: str, rng: random.Random) -> str:
    """A copy: 2 % of its words replaced, its last words cut half the time."""
    words = text.split()
    for at in rng.sample(range(len(words)), max(1, len(words) // 50)):
        words[at] = rng.choice(words)
    if rng.random() < 0.5 and len(words) > 100:
        words = words[: -rng.randint(5, 20)]
    return " ".join(words)


def plan(days: int, new: int, live: int, copies: int, window: int, seed: int = 1) -> list[list[tuple]]:
    """Each day's pages, in crawl order: (url, text, kind, article), kind one of ``page``,
    ``copy-new``, ``copy-recent`` (of an article whose text, page or copy, was last met within
    the window: a duplicate) and ``copy-old`` (last met longer ago: new again)."""
    rng = random.Random(seed)
    texts = [doc.text for doc in documents(new * days, seed=seed, dup_share=0.0)]
    crawls, last_met = [], {}  # the day each article's text (the page, or a copy) was last met
    for day in range(days):
        today = range(day * new, (day + 1) * new)
        linked = range(max(0, (day - live + 1) * new), (day + 1) * new)
        pages = [(f"https://news.example/a/{a}", texts[a], "page", a) for a in linked]
        made = [(rng.choice(today), "copy-new") for _ in range(copies)]
        recent = [a for a, last in last_met.items() if 2 <= day - last < window]
        old = [a for a, last in last_met.items() if day - last > window + 1]
        made += [(rng.choice(recent), "copy-recent") for _ in range(copies // 2) if recent]
        made += [(rng.choice(old), "copy-old") for _ in range(copies // 2) if old]
        last_met.update((a, day) for a in [*linked, *(a for a, _ in made)])
        for n, (a, kind) in enumerate(made):
            pages.append((f"https://mirror.example/{day}/{n}", edited(texts[a], rng), kind, a))
        rng.shuffle(pages)
        crawls.append(pages)
    return crawls


def open_index(backend: str, folder: Path, url: str | None):
    if backend == "sqlite":
        return SQLiteIndex(folder / f"{uuid.uuid4().hex}.sqlite", CONFIG)
    if backend == "redis":
        from scrapy_neardup.index.engines.redis import RedisIndex

        return RedisIndex(url, CONFIG, prefix=f"bench:{uuid.uuid4().hex}")
    return MemoryIndex(CONFIG)


def run(
    backend: str, crawls: list, fps: dict, after: float | None, folder: Path, url: str | None
) -> list[dict]:
    """The daily crawls on a new index; one row of figures a day."""
    index = open_index(backend, folder, url)
    index.clock = clock = Clock()
    detector, rows = Detector(CONFIG, index), []
    for day, pages in enumerate(crawls):
        clock.now = 1.7e9 + day * DAY
        index.begin_run("drop")
        forgotten = forget(index, before=clock.now - after) if after else 0
        stored = {"page": set(), "copy-new": set(), "copy-recent": set(), "copy-old": set()}
        met = {kind: set() for kind in stored}
        twice = collections.Counter()  # an article's text stored twice in a crawl
        for n, (url_, text, kind, article) in enumerate(pages):
            clock.now = 1.7e9 + day * DAY + n
            verdict = detector.decide(Arrival(url_, text), fps[text])
            met[kind].add(article)
            if not verdict.duplicate and verdict.revisit != "unchanged":
                stored[kind].add(article)
                twice[article] += 1
        index.end_run()
        stats = index.stats()
        size = used_memory(url) if backend == "redis" else stats["bytes"]
        if backend == "sqlite":  # the pages in use (a file reuses its free pages, and never shrinks)
            pragma = lambda name: index.db.execute(f"PRAGMA {name}").fetchone()[0]  # noqa: E731
            size = (pragma("page_count") - pragma("freelist_count")) * pragma("page_size")
        rows.append({
            "day": day + 1, "documents": stats["documents"], "bytes": size, "forgotten": forgotten,
            "stored": {k: len(v) for k, v in stored.items()}, "met": {k: len(v) for k, v in met.items()},
            "twice": sum(1 for n in twice.values() if n > 1),
        })  # fmt: skip
    if backend == "redis":
        index.remove()
    detector.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", nargs="+", default=["sqlite", "redis"])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--new", type=int, default=200, help="articles published a day")
    parser.add_argument("--live", type=int, default=5, help="days an article stays linked")
    parser.add_argument("--copies", type=int, default=40, help="copies met a day, of each kind")
    parser.add_argument("--forget-after", type=int, default=7, help="days")
    args = parser.parse_args()
    crawls = plan(args.days, args.new, args.live, args.copies, args.forget_after)
    texts = list({text: None for pages in crawls for _, text, _, _ in pages})
    print(f"fingerprinting {len(texts):,} texts ...", file=sys.stderr)
    fps = {
        text: fp
        for text, (_, fp) in zip(texts, fingerprints(iter(_Doc(t) for t in texts), CONFIG), strict=True)
    }
    with tempfile.TemporaryDirectory() as tmp:
        server, url = None, None
        if "redis" in args.backends:
            server, port = start_redis(tmp)
            url = f"redis://127.0.0.1:{port}/0"
        try:
            for backend in args.backends:
                for after in (args.forget_after * DAY, None):
                    report(backend, after, run(backend, crawls, fps, after, Path(tmp), url), args)
        finally:
            if server is not None:
                server.terminate()


@dataclasses.dataclass
class _Doc:
    text: str


def report(backend: str, after: float | None, rows: list[dict], args: argparse.Namespace) -> None:
    label = f"{backend}, forget after {args.forget_after} days" if after else f"{backend}, never forgets"
    print(f"\n{label}\n  day  documents        bytes  forgotten  stored: copies recent/old (met)")
    for row in rows:
        s, m = row["stored"], row["met"]
        figures = f"{row['day']:>3}  {row['documents']:>9,}  {row['bytes']:>11,}  {row['forgotten']:>9,}"
        print(
            f"  {figures}  {s['copy-recent']}/{m['copy-recent']} recent, {s['copy-old']}/{m['copy-old']} old"
        )
    late = rows[args.forget_after + args.live :]
    if late:
        docs = [r["documents"] for r in late]
        size = [r["bytes"] for r in late]
        print(f"  after day {args.forget_after + args.live}: documents {min(docs):,} to {max(docs):,} "
              f"(median {statistics.median(docs):,.0f}), bytes {min(size):,} to {max(size):,}")  # fmt: skip
    recent = sum(r["stored"]["copy-recent"] for r in rows), sum(r["met"]["copy-recent"] for r in rows)
    old = sum(r["stored"]["copy-old"] for r in rows), sum(r["met"]["copy-old"] for r in rows)
    twice = sum(r["twice"] for r in rows)
    print(f"  articles copied (each counted once a day): of articles met within the window, stored again "
          f"{recent[0]}/{recent[1]}; of articles last met over {args.forget_after + 1} days ago, stored "
          f"again {old[0]}/{old[1]}; a text stored twice in one crawl: {twice}")  # fmt: skip


if __name__ == "__main__":
    main()
