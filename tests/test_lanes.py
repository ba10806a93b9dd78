"""Lanes: an index that answers at once works on the crawl's thread while its lane is idle, and
on the lane when it would wait for another process's lock."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading

from scrapy_neardup import DedupConfig
from scrapy_neardup.index import SQLiteIndex
from scrapy_neardup.index.lanes import Lanes


def test_an_sqlite_file_works_at_once_unless_another_process_holds_its_lock(tmp_path):
    index = SQLiteIndex(tmp_path / "index.db", DedupConfig(), timeout=10)
    lanes = Lanes(index, index.lanes, lambda bound: bound)
    where: list[str] = []

    def write(lane: SQLiteIndex) -> None:
        where.append(threading.current_thread().name)
        with lane.transaction():
            lane.db.execute("PRAGMA user_version = 2")

    async def crawl() -> None:
        await lanes.run(write)  # idle, unlocked: on this thread
        holder = sqlite3.connect(index.path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process's write lock
        pending = asyncio.ensure_future(lanes.run(write))
        await asyncio.sleep(0.3)
        assert not pending.done() and lanes.busy == 1  # waiting on the lane, the loop free
        also = asyncio.ensure_future(lanes.run(write))  # the lane is busy: queued behind it
        holder.execute("ROLLBACK")
        holder.close()
        await asyncio.gather(pending, also)
        await lanes.run(write)  # idle again
        assert index.db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000  # patient again, for the lane

    try:
        asyncio.run(crawl())
    finally:
        lanes.close()
        index.close()
    here, lane = threading.main_thread().name, "neardup-index_0"
    # at once; the locked one tried at once, then on the lane with the one queued behind it; at once
    assert where == [here, here, lane, lane, here]


def test_an_index_without_at_once_always_works_on_its_lanes():
    class Server:
        lanes = 1

    lanes = Lanes(Server(), 1, lambda bound: bound)
    names: list[str] = []
    with contextlib.closing(lanes):
        asyncio.run(lanes.run(lambda lane: names.append(threading.current_thread().name)))
    assert names[0].startswith("neardup-index")
