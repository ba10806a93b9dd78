"""WorkerPool: pages fingerprinted in worker processes, each within a time budget.

Extraction is the slow part of a page (tens of milliseconds with trafilatura), so a pool of
processes keeps it off the crawl's event loop. A page over ``NEARDUP_PAGE_TIMEOUT`` is
passed on as ``timeout``; the only way to stop its worker is to stop the pool, whose other
jobs are then tried again on a new one. A worker that dies (killed, out of memory) breaks
its pool, which is replaced the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import sys
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from multiprocessing import get_context, resource_tracker
from pathlib import Path

from .config import DedupConfig, load_method_modules
from .fingerprint import Fingerprint, fingerprint
from .parent_watch import end_with_parent
from .signatures.exact import raw_hash

logger = logging.getLogger("scrapy_neardup")

# An article, and a page of links only: trafilatura loads its fallback extractors on the first
# page it finds little text in, which would otherwise spend that page's NEARDUP_PAGE_TIMEOUT.
WARM_UP = (
    "<html><body><article><p>" + "A page that makes a worker import its extractor. " * 20 + "</p></article>",
    "<html><body><ul>" + "".join(f"<li><a href='/{n}'>Page {n}</a></li>" for n in range(20)) + "</ul>",
)


def warm_up(config: DedupConfig) -> None:
    """A new worker's first job: import and load what fingerprinting a page needs."""
    for page in WARM_UP:
        fingerprint_job(page, config)


def start_worker(parent: int) -> None:
    """A worker's initializer: it ends with ``parent``, and keeps the extractors' warnings (a page
    trafilatura discards) off the crawl's terminal, where Python would print them (a worker has
    no logging set up)."""
    end_with_parent(parent)
    for name in ("trafilatura", "htmldate", "justext", "courlan", "charset_normalizer", "readability"):
        logging.getLogger(name).setLevel(logging.ERROR)


def fingerprint_job(body: bytes | str, config: DedupConfig, **options: object) -> Fingerprint:
    """``fingerprint`` where it runs: a worker is a new process, so the modules that register a
    project's own methods (NEARDUP_METHOD_MODULES) are imported there first."""
    load_method_modules(config)
    fp = fingerprint(body, config, **options)
    if len(fp.text) > config.keep_text:  # only so much is kept; the rest would cross the pipe for nothing
        fp = dataclasses.replace(fp, text=fp.text[: config.keep_text])
    return fp


# A crawl's default pool: a process for each core this process may use, up to 4 (each holds an
# extractor), none on one core; started after the first AUTO_WORKERS_AFTER pages, so a short
# crawl never pays for starting processes.
AUTO_WORKERS_MAX, AUTO_WORKERS_AFTER = 4, 20
# Pages a pool fingerprints between two looks at its workers' memory (neardup/workers/memory_mb).
MEMORY_EVERY = 50


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, which containers limit), else all."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_workers() -> int:
    """NEARDUP_WORKERS when it is not set: a pool the size of the usable cores, 0 on one core."""
    cores = usable_cores()
    return 0 if cores < 2 else min(AUTO_WORKERS_MAX, cores)


def memory_mb(pids: list[int]) -> float | None:
    """The processes' memory together, in MiB, by proportional set size (a page they share counts
    its share in each, so a sum never counts it twice); None where /proc cannot tell (not Linux)."""
    total = 0
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            return None
        total += next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)
    return total / 1024


_MAIN_GUARD = re.compile(r"""__name__\s*==\s*["']__main__["']""")


def main_script_guarded() -> bool:
    """Whether worker processes can start without running the crawl's script again: each one
    imports the main module (the spawn start method), so a script that starts a crawl must do
    it under ``if __name__ == "__main__":``. ``scrapy crawl`` and ``python -m`` packages are."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if main is None or (spec is not None and spec.name.endswith("__main__")):
        return True  # nothing to import again, or a package's __main__, which spawn skips
    path = getattr(main, "__file__", None)
    if path is None:
        return True  # an interactive session: nothing is run again
    try:
        source = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return _MAIN_GUARD.search(source) is not None


class WorkersStopped(Exception):
    """A worker's job ended because the pool was stopped (another page ran over its time)."""


class WorkerPool:
    """``size`` worker processes (0: fingerprint inline), started with the first page, or after the
    first ``start_after`` pages; then pages are fingerprinted inline until the workers are ready."""

    def __init__(
        self, config: DedupConfig, size: int, page_timeout: float | None, start_after: int = 0
    ) -> None:
        self.config = config
        self.size = size
        self.page_timeout = page_timeout
        self.start_after = start_after
        self._pages = 0
        self.pooled = 0  # pages fingerprinted by a worker
        self.peak_memory_mb: float | None = None  # the workers' memory together, at its highest seen
        self._pool: ProcessPoolExecutor | None = None
        self._warming: list[asyncio.Future] = []  # each worker's first page: imports the extractor
        self._inflight: set[asyncio.Future] = set()
        self._slots = asyncio.Semaphore(max(1, size))  # replaced with each new pool
        self.stopping: Callable[[], bool] = lambda: False  # the crawl is told to stop (SIGTERM)

    async def fingerprint(
        self, body: bytes | str, content_type: str | None, extractor: str | None, raw: int | None = None
    ) -> Fingerprint:
        """The page's fingerprint, from a worker when there is a pool; ``raw``: its body's hash."""
        raw = raw if raw is not None else raw_hash(body)
        if self.stopping():  # the pages still waiting would hold a graceful stop for their extraction
            detail = "the crawl was stopping (SIGTERM): passed on unjudged"
            return Fingerprint(skip_reason="shutdown", skip_detail=detail, raw_hash=raw)
        config = self.config
        work = partial(fingerprint_job, body, config, content_type=content_type, extractor=extractor, raw=raw)
        self._pages += 1
        for _ in range(2):  # a second try when another page's timeout stopped the pool under this one
            pool = self._workers() if self._pages > self.start_after else None
            if pool is None or (self.start_after and not all(w.done() for w in self._warming)):
                return work()
            if self._warming:  # a page's time budget starts once the workers have started, for every page
                warming = self._warming
                await asyncio.wait(warming)
                for started in warming:
                    started.exception()  # seen: a worker that failed to start fails the submit below
                if self._warming is warming:
                    self._warming = []
            async with self._slots:  # a job a worker: a page's time counts from its start, not its queue
                if pool is not self._pool:
                    continue  # stopped while this page waited for a worker: a new pool takes it
                try:
                    job = pool.submit(work)
                except BrokenProcessPool:
                    self._lost(pool)  # a worker died (killed, out of memory): a new pool takes the page
                    continue
                waiter = self._waiter(job)
                done, _ = await asyncio.wait({waiter}, timeout=self.page_timeout)
                self._inflight.discard(waiter)
            if not done:
                self.stop()  # the only way to stop the page's worker; a new pool starts on demand
                detail = f"fingerprinting took over NEARDUP_PAGE_TIMEOUT = {self.page_timeout} s"
                return Fingerprint(skip_reason="timeout", skip_detail=detail, raw_hash=raw)
            error = waiter.exception()
            if isinstance(error, BrokenProcessPool):
                self._lost(pool)
            if not isinstance(error, (WorkersStopped, BrokenProcessPool)):
                self.pooled += 1
                if self.pooled % MEMORY_EVERY == 1:
                    self.look_at_memory()
                return waiter.result()
        # Passed on unjudged, like a page over its time: the workers were stopped under it again.
        detail = "the worker processes were stopped twice under this page"
        return Fingerprint(skip_reason="workers_stopped", skip_detail=detail, raw_hash=raw)

    def _lost(self, pool: ProcessPoolExecutor) -> None:
        """A worker of ``pool`` ended abruptly: say so once a pool, and replace the pool."""
        if pool is self._pool:
            logger.warning(
                "scrapy-neardup: a worker process ended abruptly (killed, or out of memory?); "
                "new workers take its pages"
            )
            self.stop()

    def _waiter(self, job: Future) -> asyncio.Future:
        """An asyncio future for a worker's job, which ``stop`` can end (a terminated
        worker's job may never finish)."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()

        def settle(ended: Future) -> None:
            if waiter.done():
                return
            if ended.cancelled():
                waiter.set_exception(WorkersStopped("the job was cancelled"))
            elif ended.exception() is not None:
                waiter.set_exception(ended.exception())
            else:
                waiter.set_result(ended.result())

        def settle_soon(ended: Future) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(settle, ended)

        job.add_done_callback(settle_soon)
        self._inflight.add(waiter)
        return waiter

    def look_at_memory(self) -> None:
        """Note the workers' memory together, when it is the highest seen."""
        pids = [process.pid for process in getattr(self._pool, "_processes", {}).values()]
        now = memory_mb(pids) if pids else None
        if now is not None and (self.peak_memory_mb is None or now > self.peak_memory_mb):
            self.peak_memory_mb = now

    def stop(self) -> None:
        """End the pool's processes (the jobs in flight end with WorkersStopped)."""
        pool, self._pool = self._pool, None
        for waiter in self._inflight:  # the jobs of the terminated workers: tried again
            if not waiter.done():
                waiter.set_exception(WorkersStopped("the worker pool was stopped"))
                waiter.exception()  # seen: a warm-up nobody awaits any more is no error to report
        self._inflight.clear()
        self._warming = []
        if pool is None:
            return
        processes = list(getattr(pool, "_processes", {}).values())  # no public way to end a busy worker
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()

    def _workers(self) -> ProcessPoolExecutor | None:
        """The process pool, when NEARDUP_WORKERS > 0 and an asyncio loop runs the crawl."""
        if self.size <= 0:
            return None
        if self._pool is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                log = logger.info if self.start_after else logger.warning  # a default pool: not asked for
                log("NEARDUP_WORKERS needs the asyncio reactor; fingerprinting inline instead")
                self.size = 0
                return None
            # Its workers end with the crawl, even a killed one (``end_with_parent``).
            spawn, parent = get_context("spawn"), (os.getpid(),)
            _quiet_resource_tracker()
            self._pool = ProcessPoolExecutor(self.size, spawn, initializer=start_worker, initargs=parent)
            self._slots = asyncio.Semaphore(self.size)
            self._warming = [self._waiter(self._pool.submit(warm_up, self.config)) for _ in range(self.size)]
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self.look_at_memory()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _quiet_resource_tracker() -> None:
    """After a SIGKILL, multiprocessing's resource tracker removes the pool's semaphores and
    warns on stderr that they "leaked": expected after a kill, not a fault. The tracker takes
    its warning filters from ``sys.warnoptions`` when it starts, so it is started here with
    that warning ignored; the crawl's own filters are left as they were."""
    saved = list(sys.warnoptions)
    sys.warnoptions.append("ignore:resource_tracker:UserWarning")
    try:
        resource_tracker.ensure_running()
    finally:
        sys.warnoptions[:] = saved
