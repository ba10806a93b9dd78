"""PostgreSQL index benchmark, beside SQLite and Redis in the same run, on the same pages.

    python benchmarks/bench_postgres.py --sizes 10000 100000
    python benchmarks/bench_postgres.py --sizes 1000000 --backends postgres sqlite --fill-processes 4

The pages are the synthetic corpus of ``corpus.py`` (10 % lightly edited variants),
fingerprinted beforehand (not timed; kept in ``benchmarks/.data/cache`` for the next run).
For each size each backend fills a fresh index, one transaction a page: the last 10,000
pages checked by one process, each check timed, the pages before by ``--fill-processes``
processes at once on a server (default one; SQLite's file by one, its writes being one at a
time). The server gets ``SERVER``'s settings (``--set NAME=VALUE`` for others). Bytes a
page are the index's own tables with their indexes (PostgreSQL: ``pg_total_relation_size``;
SQLite: the file's pages in use; Redis: the growth of ``used_memory``). PostgreSQL's lines
also give the timed checks' median by the server's own work meanwhile (an autovacuum, a
checkpoint): on two cores it takes one. Then the race: groups
of copies arriving together, each group's four pages checked at the same moment by four
processes, against a fresh index: how many groups were admitted more than once, and the
checks a second beside one process on the same pages. With several processes filling, a
variant may be checked before its original (one process runs ahead of another), and the
original is then the duplicate: "variants found" counts on the order, "duplicates" (pages
judged duplicates) does not. The servers
(PostgreSQL, redis-server) are started here, on 127.0.0.1. ``--statements`` prints the
server's time a timed check, statement by statement (``pg_stat_statements``).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import gc
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import uuid
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fingerprint_cache
import pg_server
from bench_index import CONFIG
from bench_redis import start_redis, used_memory
from corpus import documents, fingerprints

from scrapy_neardup.detector import Arrival, Detector
from scrapy_neardup.index import SQLiteIndex
from scrapy_neardup.index.engines.postgres import PostgresIndex

# The server's settings for a write-heavy index, as PostgreSQL's manual advises (Server
# Configuration; WAL Configuration): up to a quarter of the memory for its buffers (here a
# sixth of 24 GB; the default 128MB is for a small machine), and checkpoints far enough apart
# that a list page is not written whole to the WAL again every minute of a crawl, compressed.
SERVER = {
    "shared_buffers": "4GB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "15min",
    "wal_compression": "lz4",
}


def open_index(backend: str, urls: dict, folder: str, name: str):
    """The index ``name`` of ``backend`` (made when new)."""
    if backend == "sqlite":
        return SQLiteIndex(Path(folder) / f"{name}.sqlite", CONFIG)
    if backend == "redis":
        from scrapy_neardup.index.engines.redis import RedisIndex

        return RedisIndex(urls["redis"], CONFIG, prefix=f"bench:{name}")
    return PostgresIndex(urls["postgres"], CONFIG, prefix=f"bench_{name}")


def size_of(index, backend: str, urls: dict, before: int) -> int:
    if backend == "sqlite":
        pragma = lambda name: index.db.execute(f"PRAGMA {name}").fetchone()[0]  # noqa: E731
        return (pragma("page_count") - pragma("freelist_count")) * pragma("page_size")
    if backend == "redis":
        return used_memory(urls["redis"]) - before
    return index.engine.size()


class BackgroundWork:
    """What the server is doing of its own accord (an autovacuum worker, a checkpoint), asked
    four times a second on a connection of its own: a timed check that meets it shares this
    machine's two cores with it."""

    QUERY = (
        "SELECT count(*) FILTER (WHERE backend_type = 'autovacuum worker' AND state = 'active'), "
        "count(*) FILTER (WHERE backend_type = 'checkpointer' AND wait_event <> 'CheckpointerMain') "
        "FROM pg_stat_activity"
    )

    def __init__(self, url: str) -> None:
        import psycopg

        self.doing, self._stop = "", threading.Event()
        self._db = psycopg.connect(url, autocommit=True)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            vacuums, checkpoints = self._db.execute(self.QUERY).fetchone()
            self.doing = " and ".join(
                name for name, n in (("autovacuum", vacuums), ("a checkpoint", checkpoints)) if n
            )

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._db.close()

    @staticmethod
    def summary(last_ms: np.ndarray, doing: list[str]) -> str:
        """The timed checks' median by what the server was doing meanwhile."""
        kinds = collections.Counter(doing)
        return "timed checks by the server's own work meanwhile: " + "; ".join(
            f"{kind or 'none'}: {n:,}, median {np.median(last_ms[[d == kind for d in doing]]):.2f} ms"
            for kind, n in sorted(kinds.items())
        )


def _fill_share(backend: str, urls: dict, folder: str, name: str, chunks, results) -> None:
    found = duplicates = 0
    with Detector(CONFIG, open_index(backend, urls, folder, name)) as detector:
        for chunk in iter(chunks.get, None):
            for url, fp, is_variant in chunk:
                duplicate = detector.decide(Arrival(url, "", revisit=False), fp).duplicate
                found, duplicates = found + (duplicate and is_variant), duplicates + duplicate
    results.put((found, duplicates))


def fill(
    backend: str,
    pages: list,
    urls: dict,
    folder: str,
    processes: int,
    timed: int = 10_000,
    statements: bool = False,
) -> dict:
    """A fresh index holds every page; the last ``timed`` checked by one process, each timed.
    The pages before are checked by ``processes`` processes at once (pages dealt in turn, a
    thousand at a time, so they go through the pages together), as crawlers sharing the index
    would: a 10**6-page fill in under an hour. The workers are spawned, not forked: a forked
    one would copy the parent's million fingerprints page by page as it touched them."""
    before = used_memory(urls["redis"]) if backend == "redis" else 0
    name, found, duplicates = uuid.uuid4().hex, 0, 0
    bulk, last = pages[: max(len(pages) - timed, 0)], pages[-timed:]
    index = open_index(backend, urls, folder, name)
    if processes > 1 and bulk:
        ctx = multiprocessing.get_context("spawn")
        results, queues = ctx.Queue(), [ctx.Queue(maxsize=2) for _ in range(processes)]
        workers = [
            ctx.Process(target=_fill_share, args=(backend, urls, folder, name, queue, results))
            for queue in queues
        ]
        for worker in workers:
            worker.start()
        for start in range(0, len(bulk), 1000 * processes):
            for n, queue in enumerate(queues):
                queue.put(bulk[start + n : start + 1000 * processes : processes])
        for queue in queues:
            queue.put(None)
        for share_found, share_duplicates in [results.get() for _ in workers]:
            found, duplicates = found + share_found, duplicates + share_duplicates
        for worker in workers:
            worker.join()
        bulk = []
    times, doing, statements = [], [], statements and backend == "postgres"
    watch = BackgroundWork(urls["postgres"]) if backend == "postgres" else None
    with Detector(CONFIG, index) as detector:
        for number, (url, fp, is_variant) in enumerate([*bulk, *last]):
            if number == len(bulk) and statements:
                index.engine.execute("SELECT pg_stat_statements_reset()")
            started = time.perf_counter()
            verdict = detector.decide(Arrival(url, "", revisit=False), fp)
            if number >= len(bulk):
                times.append(time.perf_counter() - started)
                doing.append(watch.doing if watch is not None else "")
            found, duplicates = found + (verdict.duplicate and is_variant), duplicates + verdict.duplicate
        size = size_of(index, backend, urls, before)
        parts = relations(index, len(pages)) if backend == "postgres" else ""
        if statements:
            parts += "\n" + server_time(index, len(last))
        if backend in ("redis", "postgres"):
            index.remove()
    last_ms = np.array(times) * 1000
    if watch is not None:
        watch.close()
        parts += ("\n  " if parts else "") + BackgroundWork.summary(last_ms, doing)
    return {"found": found, "duplicates": duplicates, "bytes": size / len(pages), "parts": parts,
            "median": float(np.median(last_ms)), "p99": float(np.percentile(last_ms, 99))}  # fmt: skip


def relations(index, pages: int) -> str:
    """Bytes a page of each of the index's tables (with their TOAST) and of each of its indexes."""
    rows = index.engine.execute(
        "SELECT c.relname, CASE c.relkind WHEN 'r' THEN pg_table_size(c.oid) "
        "ELSE pg_relation_size(c.oid) END AS size "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'i') ORDER BY size DESC",
        [index.engine.schema.strip('"')],
    ).fetchall()
    return ", ".join(f"{name} {size / pages:,.0f}" for name, size in rows if size)


def server_time(index, checks: int) -> str:
    """The server's time a check, statement by statement, over the timed checks
    (``pg_stat_statements``, whose own overhead is counted in)."""
    rows = index.engine.execute(
        "SELECT total_exec_time, calls, regexp_replace(query, '\\s+|\"[^\"]+\"[.]', ' ', 'g') "
        "FROM pg_stat_statements WHERE calls >= %s ORDER BY total_exec_time DESC LIMIT 8",
        [checks // 10],
    ).fetchall()
    total = index.engine.execute("SELECT sum(total_exec_time) FROM pg_stat_statements").fetchone()[0]
    lines = [f"  server {total / checks:.2f} ms a check:"]
    lines += [f"    {ms / checks:.3f} ms ({n / checks:.1f} calls)  {query[:70]}" for ms, n, query in rows]
    return "\n".join(lines)


def _race_share(url: str, prefix: str, pages: list, barrier, results) -> None:
    verdicts = []
    with Detector(CONFIG, PostgresIndex(url, CONFIG, prefix)) as detector:
        barrier.wait()
        started = time.perf_counter()
        for group, page_url, fp in pages:
            verdicts.append((group, detector.decide(Arrival(page_url, "", revisit=False), fp).duplicate))
        results.put((time.perf_counter() - started, verdicts))


def race(url: str, groups: list[list], processes: int) -> dict:
    """Every group's pages checked by ``processes`` processes (with 4, page i of every group by
    process i, at about the same moment); groups admitted more than once, and checks a second."""
    prefix = f"race_{uuid.uuid4().hex}"
    PostgresIndex(url, CONFIG, prefix).close()
    every = [
        (g, f"https://p{n}.example/{g}", fp) for g, group in enumerate(groups) for n, fp in enumerate(group)
    ]
    shares = [every[n::processes] for n in range(processes)]  # with 4: copy n of every group by process n
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    workers = [
        ctx.Process(target=_race_share, args=(url, prefix, share, barrier, results)) for share in shares
    ]
    for worker in workers:
        worker.start()
    answers = [results.get() for _ in workers]
    for worker in workers:
        worker.join()
    admitted = collections.Counter(g for _, verdicts in answers for g, duplicate in verdicts if not duplicate)
    PostgresIndex(url, CONFIG, prefix).remove()
    checks = len(every)
    return {"twice": sum(n > 1 for n in admitted.values()), "pps": checks / max(a[0] for a in answers)}


def make_pages(count: int, seed: int) -> list[tuple]:
    """The corpus's first ``count`` pages as (url, fingerprint without its text, is a
    variant), fingerprinted on every core."""
    made = fingerprints(documents(count, seed), CONFIG, workers=os.cpu_count() or 1)
    return [(d.url, dataclasses.replace(fp, text=""), d.copy_of >= 0) for d, fp in made]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--backends", nargs="+", default=["postgres", "sqlite", "redis"])
    parser.add_argument("--race-groups", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a server setting (over SERVER's)"
    )
    parser.add_argument(
        "--statements", action="store_true", help="the server's time a timed check, statement by statement"
    )
    parser.add_argument(
        "--fill-processes", type=int, default=1, help="processes filling all but the timed last 10,000 pages"
    )
    args = parser.parse_args()
    largest = max(args.sizes)
    count = largest + args.race_groups * 4
    pages = fingerprint_cache.load_or_make(count, args.seed, CONFIG, partial(make_pages, count, args.seed))
    gc.freeze()  # the race's forked workers: the collector would touch (copy) every page
    with tempfile.TemporaryDirectory() as folder:
        urls, stops = {}, []
        preload = "shared_preload_libraries = 'pg_stat_statements'\n" if args.statements else ""
        settings = SERVER | dict(setting.split("=", 1) for setting in args.set)
        url, data = pg_server.start(extra="".join(f"{k} = '{v}'\n" for k, v in settings.items()) + preload)
        if args.statements:
            sql(url, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        urls["postgres"], stops = url, [lambda: pg_server.stop(data)]
        if "redis" in args.backends:
            process, port = start_redis(folder)
            urls["redis"] = f"redis://127.0.0.1:{port}/0"
            stops.append(process.terminate)
        try:
            shown = ", ".join(f"{k} {v}" for k, v in settings.items())
            print(f"{os.cpu_count()} cores; servers on 127.0.0.1 (PostgreSQL {pg_version(url)}, fsync off, "
                  f"{shown}); {args.fill_processes} filling")  # fmt: skip
            head = f"{'index':<10} {'pages':>9} | {'median ms':>9} | {'p99 ms':>7} | {'bytes/page':>10}"
            print(f"{head} | variants found | duplicates")
            for size in sorted(args.sizes):
                variants = sum(is_variant for _, _, is_variant in pages[:size])
                for backend in args.backends:
                    shared = args.fill_processes if backend != "sqlite" else 1  # a file: one writer
                    r = fill(backend, pages[:size], urls, folder, shared, statements=args.statements)
                    print(f"{backend:<10} {size:>9,} | {r['median']:>9.2f} | {r['p99']:>7.2f} | "
                          f"{r['bytes']:>10,.0f} | {r['found']:,} of {variants:,} | {r['duplicates']:,}",
                          flush=True)  # fmt: skip
                    if r["parts"]:
                        print(f"  {r['parts']}", flush=True)
            groups = [
                [fp] * 4 for _, fp, _ in pages[largest : largest + args.race_groups]
            ]  # the hardest race
            one, four = race(url, groups, 1), race(url, groups, 4)
            print(f"\nrace, {len(groups):,} groups of 4 copies arriving together: 4 processes admitted "
                  f"{four['twice']} groups twice; {four['pps']:,.0f} checks/s against {one['pps']:,.0f} "
                  f"with one process ({four['pps'] / one['pps']:.2f}x)")  # fmt: skip
        finally:
            for stop in stops:
                stop()


def sql(url: str, query: str) -> object:
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        cursor = db.execute(query)
        return cursor.fetchone()[0] if cursor.description else None


def pg_version(url: str) -> str:
    return str(sql(url, "SHOW server_version"))


if __name__ == "__main__":
    main()
