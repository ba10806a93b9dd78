"""A check's statements on the index's own libpq pipeline beside psycopg's pipeline mode.

    python benchmarks/bench_pg_pipeline.py [--checks 2000] [--rtt 0,1] [--lanes 1,4]

Starts a throwaway PostgreSQL server (tests/pg_server.py) and, for each way, runs transactions
shaped like a check of the index (BEGIN; advisory locks on a few keys with the page's new id;
a read of 40 rows by an array of keys; a second small read; an insert of the record; COMMIT),
each on ``--lanes`` connections at once (threads, as a crawl's lanes), directly and behind a
proxy adding ``--rtt`` ms a round trip (``latency_proxy``). Printed: checks a second, the
client's CPU a check (the process's, all threads), and the median wall time of a check.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import psycopg  # noqa: E402
from latency_proxy import LatencyProxy  # noqa: E402

from scrapy_neardup.index.engines.postgres.pipeline import Pipeline  # noqa: E402

SETUP = """
DROP TABLE IF EXISTS bench_docs; DROP TABLE IF EXISTS bench_keys; DROP SEQUENCE IF EXISTS bench_ids;
CREATE SEQUENCE bench_ids;
CREATE TABLE bench_keys (key bigint PRIMARY KEY, docs bytea NOT NULL);
CREATE TABLE bench_docs (id bigint PRIMARY KEY, url text, spots bytea);
INSERT INTO bench_keys SELECT k, decode(repeat('ab', 64), 'hex') FROM generate_series(1, 100000) AS k;
"""
LOCKS = (
    "SELECT nextval('bench_ids'), (SELECT count(*) FROM (SELECT pg_advisory_xact_lock(k) "
    "FROM unnest(%s::bigint[]) AS k) AS l)"
)
READ = "SELECT key, docs FROM bench_keys WHERE key = ANY(%s::bigint[])"
SMALL = "SELECT key FROM bench_keys WHERE key = %s"
WRITE = "INSERT INTO bench_docs VALUES (%s, %s, %s)"


def ours(db: psycopg.Connection, n: int) -> None:
    """A check on the index's own pipeline (engines/postgres/pipeline.py), one a connection."""
    pipeline = getattr(db, "_bench_pipeline", None) or Pipeline(db.pgconn, db.info.encoding, db)
    db._bench_pipeline = pipeline
    keys = "{" + ",".join(str(n * 7 % 99_000 + k) for k in range(40)) + "}"
    pipeline.command("BEGIN")
    doc = pipeline.send(LOCKS, ["{" + ",".join(str(n * 3 + k) for k in range(5)) + "}"])
    rows = pipeline.send(READ, [keys])
    small = pipeline.send(SMALL, [n % 1000])
    new_id = doc.fetchone()[0]
    rows.fetchall(), small.fetchall()
    pipeline.send(WRITE, [new_id, f"http://h/{n}", b"\x00" * 300])
    pipeline.command("COMMIT")
    pipeline.sync()


def theirs(db: psycopg.Connection, n: int) -> None:
    """The same check in psycopg's pipeline mode."""
    keys = [n * 7 % 99_000 + k for k in range(40)]
    with db.pipeline():
        cursor = db.cursor()
        db.execute("BEGIN")
        doc = db.cursor().execute(LOCKS, [[n * 3 + k for k in range(5)]])
        rows = db.cursor().execute(READ, [keys])
        small = db.cursor().execute(SMALL, [n % 1000])
        new_id = doc.fetchone()[0]
        rows.fetchall(), small.fetchall()
        cursor.execute(WRITE, [new_id, f"http://h/{n}", b"\x00" * 300])
        db.execute("COMMIT")


def run(url: str, way, checks: int, lanes: int) -> tuple[float, float, float]:
    """(checks a second, client CPU ms a check, median ms a check)."""
    connections = [psycopg.connect(url, autocommit=True) for _ in range(lanes)]
    for db in connections:
        db.execute("SET plan_cache_mode = force_generic_plan")
        db.execute("SET jit = off")
    walls: list[float] = []

    failed: list[BaseException] = []

    def lane(db: psycopg.Connection, first: int) -> None:
        try:
            for n in range(first, checks, lanes):
                began = time.perf_counter()
                way(db, n)
                walls.append(time.perf_counter() - began)
        except BaseException as exc:  # said in the main thread
            failed.append(exc)

    cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    began = time.perf_counter()
    threads = [threading.Thread(target=lane, args=(db, k)) for k, db in enumerate(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - cpu
    if failed:
        raise failed[0]
    for db in connections:
        db.close()
    return checks / wall, cpu / checks * 1000, statistics.median(walls) * 1000


def main() -> None:
    import pg_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=2000)
    parser.add_argument("--rtt", default="0,1")
    parser.add_argument("--lanes", default="1,4")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    url, data = pg_server.start()
    try:
        with psycopg.connect(url, autocommit=True) as db:
            for statement in SETUP.split(";"):
                if statement.strip():
                    db.execute(statement)
        parts = urlsplit(url)
        print(f"{'way':<18}{'rtt ms':>7}{'lanes':>6}{'checks/s':>10}{'CPU ms':>8}{'wall ms':>9}")
        for rtt in (float(r) for r in args.rtt.split(",")):
            with LatencyProxy(parts.hostname, parts.port, rtt) as proxy:
                where = url.replace(f":{parts.port}/", f":{proxy.port}/") if rtt else url
                for lanes in (int(n) for n in args.lanes.split(",")):
                    results: dict[str, list[tuple[float, float, float]]] = {"own pipeline": [], "psycopg": []}
                    for _ in range(args.repeat):  # interleaved
                        results["own pipeline"].append(run(where, ours, args.checks, lanes))
                        results["psycopg"].append(run(where, theirs, args.checks, lanes))
                    for name, rows in results.items():
                        rate, cpu, wall = (statistics.median(r[i] for r in rows) for i in range(3))
                        print(f"{name:<18}{rtt:>7g}{lanes:>6}{rate:>10.0f}{cpu:>8.3f}{wall:>9.3f}")
    finally:
        pg_server.stop(data)


if __name__ == "__main__":
    main()
