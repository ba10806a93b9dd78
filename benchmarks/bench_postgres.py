"""PostgreSQL index benchmark, beside SQLite and Redis in the same run, on the same pages.

    python benchmarks/bench_postgres.py --sizes 10000 100000
    python benchmarks/bench_postgres.py --sizes 1000000 --backends postgres sqlite   # hours

The pages are the synthetic corpus of ``corpus.py`` (10 % lightly edited variants),
fingerprinted beforehand (not timed). For each size each backend fills a fresh index, one
process, one transaction a page, each check timed; bytes a page are the index's own tables
with their indexes (PostgreSQL: ``pg_total_relation_size``; SQLite: the file's pages in use;
Redis: the growth of ``used_memory``). Then the race: groups of copies arriving together,
each group's four pages checked at the same moment by four processes, against a fresh index:
how many groups were admitted more than once, and the checks a second beside one process on
the same pages. The servers (PostgreSQL, redis-server) are started here, on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import pg_server
from bench_index import CONFIG, prepare
from bench_redis import start_redis, used_memory
from corpus import documents

from scrapy_neardup.detector import Arrival, Detector
from scrapy_neardup.index import SQLiteIndex
from scrapy_neardup.index.engines.postgres import PostgresIndex


def open_index(backend: str, urls: dict, folder: str):
    if backend == "sqlite":
        return SQLiteIndex(Path(folder) / f"{uuid.uuid4().hex}.sqlite", CONFIG)
    if backend == "redis":
        from scrapy_neardup.index.engines.redis import RedisIndex

        return RedisIndex(urls["redis"], CONFIG, prefix=f"bench:{uuid.uuid4().hex}")
    return PostgresIndex(urls["postgres"], CONFIG, prefix=f"bench_{uuid.uuid4().hex}")


def size_of(index, backend: str, urls: dict, before: int) -> int:
    if backend == "sqlite":
        pragma = lambda name: index.db.execute(f"PRAGMA {name}").fetchone()[0]  # noqa: E731
        return (pragma("page_count") - pragma("freelist_count")) * pragma("page_size")
    if backend == "redis":
        return used_memory(urls["redis"]) - before
    return index.engine.size()


def fill(backend: str, pages: list, urls: dict, folder: str) -> dict:
    """One process checks every page against a fresh index; each check timed."""
    before = used_memory(urls["redis"]) if backend == "redis" else 0
    index = open_index(backend, urls, folder)
    times, found = [], 0
    with Detector(CONFIG, index) as detector:
        for url, fp, is_variant in pages:
            started = time.perf_counter()
            verdict = detector.decide(Arrival(url, "", revisit=False), fp)
            times.append(time.perf_counter() - started)
            found += verdict.duplicate and is_variant
        size = size_of(index, backend, urls, before)
        if backend in ("redis", "postgres"):
            index.remove()
    last = np.array(times[-min(len(times), 10_000) :]) * 1000  # the checks at this size
    return {"found": found, "bytes": size / len(pages), "median": float(np.median(last)),
            "p99": float(np.percentile(last, 99)), "pages": len(pages)}  # fmt: skip


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--backends", nargs="+", default=["postgres", "sqlite", "redis"])
    parser.add_argument("--race-groups", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    largest = max(args.sizes)
    docs = list(documents(largest + args.race_groups * 4, args.seed))
    with multiprocessing.get_context("spawn").Pool(os.cpu_count() or 1) as pool:
        prepared = pool.map(partial(prepare, config=CONFIG), [d.text for d in docs], chunksize=250)
    pages = [(d.url, fp, d.copy_of >= 0) for d, (fp, _) in zip(docs, prepared, strict=True)]
    with tempfile.TemporaryDirectory() as folder:
        urls, stops = {}, []
        url, data = pg_server.start()
        urls["postgres"], stops = url, [lambda: pg_server.stop(data)]
        if "redis" in args.backends:
            process, port = start_redis(folder)
            urls["redis"] = f"redis://127.0.0.1:{port}/0"
            stops.append(process.terminate)
        try:
            print(f"{os.cpu_count()} cores; servers on 127.0.0.1 (PostgreSQL {pg_version(url)}, fsync off)")
            head = f"{'index':<10} {'pages':>9} | {'median ms':>9} | {'p99 ms':>7} | {'bytes/page':>10}"
            print(f"{head} | variants found")
            for size in sorted(args.sizes):
                variants = sum(is_variant for _, _, is_variant in pages[:size])
                for backend in args.backends:
                    r = fill(backend, pages[:size], urls, folder)
                    print(f"{backend:<10} {size:>9,} | {r['median']:>9.2f} | {r['p99']:>7.2f} | "
                          f"{r['bytes']:>10,.0f} | {r['found']:,} of {variants:,}", flush=True)  # fmt: skip
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


def pg_version(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as db:
        return db.execute("SHOW server_version").fetchone()[0]


if __name__ == "__main__":
    main()
