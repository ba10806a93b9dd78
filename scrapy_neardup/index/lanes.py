"""Lanes: an index's connections on threads of their own, so that a crawl awaits the index.

A crawl's thread must never wait for the index (a round trip to a server, a lock another
process holds): the work runs on a *lane*, a thread with a connection of its own, and the
crawl awaits its result while it goes on downloading and parsing. Several lanes run the
checks of different pages at once, each one transaction, as exact as when as many processes
share the index; a round trip's wait then overlaps with the others' and with the crawl. An
index says how many lanes suit it (``Index.lanes``): an SQLite file writes one transaction at
a time, so it has one, and so has the in-memory index (one object, one thread).

An index that answers without a round trip (an SQLite file, memory: ``at_once``) does its work
on the crawl's own thread while its lane is idle, unless it would wait for another process's
lock (``WouldWait``): then the work, and the works after it while it waits, go to the lane. A
thread of its own would cost such an index more than it saves: its statements wait for the
interpreter's lock behind the crawl's parsing (a tag-mode crawl of the LLVM docs, SQLite, 15 %
fewer pages a second on the lane, ``benchmarks/bench_crawl.py``).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

Lane = TypeVar("Lane")
Result = TypeVar("Result")


class WouldWait(Exception):
    """Work done at once would wait for another process's lock; nothing was written."""


class Lanes(Generic[Lane]):
    """``count`` threads, each with its own ``bind(index)``: the first lane binds ``index``
    itself, the others ``index.another()`` (a connection of their own to the same index)."""

    def __init__(self, index: Any, count: int, bind: Callable[[Any], Lane]) -> None:
        self.index = index
        self.count = max(1, count)
        self._bind = bind
        self._unbound: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._unbound.put(index)
        for _ in range(self.count - 1):
            self._unbound.put(None)  # a lane that opens its own connection when it starts
        self._local = threading.local()
        self._opened: list[Any] = []
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(self.count, "neardup-index", self._start)
        self._at_once = getattr(index, "at_once", None) if self.count == 1 else None
        self._here: Lane | None = None  # the crawl thread's binding of ``index`` (``_at_once``)
        self.busy = 0  # works queued or running on the lane
        self.waited = 0.0  # seconds works spent queued and running, all together
        self.longest = 0.0  # the longest a work took from its call to its result

    def _start(self) -> None:
        index = self._unbound.get()
        if index is None:
            index = self.index.another()
            with self._lock:
                self._opened.append(index)
        self._local.lane = self._bind(index)

    def _on_lane(self, work: Callable[[Lane], Result]) -> Result:
        return work(self._local.lane)

    async def run(self, work: Callable[[Lane], Result]) -> Result:
        """``work(lane)`` on a lane, awaited; at once on this thread for an index that answers at
        once, while its lane is idle; inline on the first lane's thread when no asyncio loop runs
        (a crawl on another reactor, a scan)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self.call(work)
        if self._at_once is not None and not self.busy:  # the lane is idle: nothing else uses ``index``
            if self._here is None:
                self._here = self._bind(self.index)
            try:
                with self._at_once():
                    return work(self._here)
            except WouldWait:
                pass  # on the lane, which waits for the lock
        began = time.monotonic()
        self.busy += 1
        try:
            return await asyncio.wrap_future(self._executor.submit(self._on_lane, work))
        finally:
            self.busy -= 1
            took = time.monotonic() - began
            self.waited += took
            self.longest = max(self.longest, took)

    def call(self, work: Callable[[Lane], Result]) -> Result:
        """``work(lane)`` on a lane, waited for: for the crawl's start and close, never while it runs."""
        return self._executor.submit(self._on_lane, work).result()

    def indexes(self) -> list[Any]:
        """Every connection the lanes use (the given index first)."""
        with self._lock:
            return [self.index, *self._opened]

    def close(self) -> None:
        """Stop the threads, once their work is done, and close the connections the lanes opened
        (not the given index)."""
        self._executor.shutdown(wait=True)
        with self._lock:
            opened, self._opened = self._opened, []
        for index in opened:
            index.close()
