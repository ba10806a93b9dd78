"""Redis index benchmark: check-and-add throughput (1, 2, 4 processes) and memory per page, beside
datasketch's MinHashLSH with its Redis storage (query + insert) on the same pages, in the same run.

    python benchmarks/bench_redis.py --size 100000

Starts its own redis-server on 127.0.0.1 (a free port, nothing saved). The pages are the synthetic
corpus of ``corpus.py`` (10 % lightly edited variants), fingerprinted beforehand (not timed). Each
configuration fills a fresh index with all the pages: with P processes each takes every P-th page,
all at once, and the throughput is pages over wall time. Memory per page is the growth of Redis's
``used_memory`` over the fill, divided by the pages; by kind of key from ``MEMORY USAGE`` of a
sample of each kind. Round trips per check are counted in the one-process run (each pipeline or
single command sent is one).
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_index import CONFIG, prepare
from corpus import documents

from scrapy_neardup.detector import Arrival, Detector
from scrapy_neardup.index.engines.redis import RedisIndex


def start_redis(folder: str) -> tuple[subprocess.Popen, int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = shutil.which("redis-server") or sys.exit("bench_redis: redis-server is not installed")
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", folder, "--save", ""],
        stdout=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return process, port
        except OSError:
            time.sleep(0.05)
    sys.exit("bench_redis: redis-server did not start")


def used_memory(url: str) -> int:
    import redis

    return int(redis.Redis.from_url(url).info("memory")["used_memory"])


def redis_cpu(url: str) -> float:
    """CPU seconds redis-server has used (user and system)."""
    import redis

    info = redis.Redis.from_url(url).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


class RoundTrips:
    """Counts round trips: redis-py sends a command, or a whole pipeline, in one packed write."""

    def __init__(self) -> None:
        from redis.connection import Connection

        self.count = 0
        self._original = Connection.send_packed_command

        def counted(connection, *args, **kwargs):
            self.count += 1
            return self._original(connection, *args, **kwargs)

        Connection.send_packed_command = counted


def _check_share(url: str, prefix: str, pages: list, barrier, results, count_trips: bool) -> None:
    trips = RoundTrips() if count_trips else None
    found = 0
    with Detector(CONFIG, RedisIndex(url, CONFIG, prefix)) as detector:
        barrier.wait()
        started, cpu = time.perf_counter(), time.process_time()
        for page_url, fp, is_variant in pages:
            found += detector.decide(Arrival(page_url, "", revisit=False), fp).duplicate and is_variant
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    results.put((elapsed, found, trips.count if trips else 0, cpu))


def ours(url: str, pages: list, processes: int) -> dict:
    prefix = f"bench:{uuid.uuid4().hex}"
    before, server_cpu = used_memory(url), redis_cpu(url)
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    workers = [
        ctx.Process(
            target=_check_share, args=(url, prefix, pages[n::processes], barrier, results, processes == 1)
        )
        for n in range(processes)
    ]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    answers = [results.get() for _ in workers]
    wall = time.perf_counter() - started
    for worker in workers:
        worker.join()
    busiest = max(a[0] for a in answers)
    memory, server_cpu = used_memory(url) - before, redis_cpu(url) - server_cpu
    kinds = memory_by_kind(url, prefix) if processes == 1 else {}
    RedisIndex.open_existing(url, prefix).remove()
    return {
        "processes": processes, "pps": len(pages) / busiest, "wall": wall,
        "found": sum(a[1] for a in answers),
        "bytes": memory / len(pages), "trips": sum(a[2] for a in answers) / len(pages), "kinds": kinds,
        "cpu_ms": 1000 * (sum(a[3] for a in answers) + server_cpu) / len(pages),
    }  # fmt: skip


def memory_by_kind(url: str, prefix: str, sample: int = 2000) -> dict[str, tuple[int, float]]:
    """(keys, bytes) of each kind of key (doc, lk, sl, url, ...), from MEMORY USAGE of a sample."""
    import redis

    r = redis.Redis.from_url(url)
    keys: dict[str, list[bytes]] = collections.defaultdict(list)
    for key in r.scan_iter(match=f"{prefix}:*", count=5000):
        keys[key.decode().removeprefix(prefix + ":").split(":")[0]].append(key)
    rng = np.random.default_rng(1)
    out = {}
    for kind, names in keys.items():
        chosen = [names[i] for i in rng.choice(len(names), min(sample, len(names)), replace=False)]
        usage = [r.memory_usage(k) or 0 for k in chosen]
        out[kind] = (len(names), float(np.mean(usage)) * len(names))
    return out


def peer(port: int, pages: list, lean_values: list) -> dict:
    from datasketch import MinHashLSH
    from datasketch.lean_minhash import LeanMinHash

    url = f"redis://127.0.0.1:{port}/0"
    before = used_memory(url)
    storage = {
        "type": "redis",
        "basename": uuid.uuid4().hex.encode(),
        "redis": {"host": "127.0.0.1", "port": port},
    }
    lsh = MinHashLSH(threshold=0.8, num_perm=128, storage_config=storage)
    found = 0
    started = time.perf_counter()
    for number, ((_, _, is_variant), values) in enumerate(zip(pages, lean_values, strict=True)):
        lean = LeanMinHash(seed=1, hashvalues=values.astype(np.uint64), scheme="legacy")
        hits = lsh.query(lean)
        if not hits:
            lsh.insert(number, lean)
        found += bool(hits) and is_variant
    elapsed = time.perf_counter() - started
    return {"pps": len(pages) / elapsed, "found": found, "bytes": (used_memory(url) - before) / len(pages)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    docs = list(documents(args.size, args.seed))
    with multiprocessing.get_context("spawn").Pool(os.cpu_count() or 1) as pool:
        prepared = pool.map(partial(prepare, config=CONFIG), [d.text for d in docs], chunksize=250)
    pages = [(d.url, fp, d.copy_of >= 0) for d, (fp, _) in zip(docs, prepared, strict=True)]
    variants = sum(d.copy_of >= 0 for d in docs)
    with tempfile.TemporaryDirectory() as folder:
        process, port = start_redis(folder)
        url = f"redis://127.0.0.1:{port}/0"
        try:
            cores = os.cpu_count()
            print(f"{args.size:,} pages ({variants:,} variants); redis-server on 127.0.0.1, {cores} cores")
            head = f"{'index':<34} | {'checks/s':>9} | {'bytes/page':>10} | {'variants found':>14}"
            print(f"{head} | {'round trips':>11}")
            rows = [ours(url, pages, n) for n in args.processes]
            theirs = peer(port, pages, [values for _, values in prepared])
        finally:
            process.terminate()
    for r in rows:
        name = f"scrapy-neardup RedisIndex, {r['processes']} proc"
        trips = f"{r['trips']:.1f}" if r["trips"] else ""
        print(f"{name:<34} | {r['pps']:>9,.0f} | {r['bytes']:>10,.0f} | {r['found']:>14,} | {trips:>11}")
    name = "datasketch MinHashLSH (redis), 1"
    print(f"{name:<34} | {theirs['pps']:>9,.0f} | {theirs['bytes']:>10,.0f} | {theirs['found']:>14,} |")
    if len(rows) > 1:
        ratio = rows[-1]["pps"] / rows[0]["pps"]
        print(f"\n{rows[-1]['processes']} processes / 1: {ratio:.2f}x the checks a second")
    cores = os.cpu_count() or 1
    for r in rows:
        print(
            f"{r['processes']} proc: {r['cpu_ms']:.2f} ms of CPU a check (the checkers and redis-server): "
            f"{cores} cores bound it at {cores * 1000 / r['cpu_ms']:,.0f} checks/s"
        )
    print("\nbytes a page by kind of key (one-process run):")
    for kind, (count, total) in sorted(rows[0]["kinds"].items(), key=lambda item: -item[1][1]):
        print(f"  {kind:<12} {count:>10,} keys  {total / args.size:>8,.0f} bytes/page")


if __name__ == "__main__":
    main()
