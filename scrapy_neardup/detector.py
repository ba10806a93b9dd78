"""Detector: the one road of a page, from its bytes to its verdict.

The crawl's session, the pipeline and the offline scan hand pages to a Detector and nothing
else takes these steps: the body's hash, the page's revisit key and scope, the byte-copy
shortcut, the fingerprint (inline or in the worker pool, within its time budget), the
decision in one index transaction (``decision``), tried again while another process changes
what it read, and the test of whether a failure is the index's.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .config import DedupConfig
from .decision import SURE_SIMILARITY, Decision
from .exceptions import IndexFailure
from .fingerprint import Fingerprint, fingerprint
from .index import Index, forgetting
from .index.base import Conflict
from .index.engine import TRIES
from .index.lanes import Lanes
from .scope import scope_key, url_key
from .signatures.exact import raw_hash
from .verdict import Verdict
from .workers import WorkerPool

if TYPE_CHECKING:
    from .urls import UrlModel

# Tries of one page's transaction while other processes keep changing what it read (Redis),
# as many as the ledger's own (``engine.TRIES``); with the back-off below, doubling to half a
# second, about 20 s of contention before the page passes unjudged.
MAX_CONFLICTS = TRIES


def backoff(attempt: int) -> float:
    """Seconds to wait before the next try of a transaction another process got in the way of."""
    return min(0.5, 0.001 * 2**attempt) * random.random()


@dataclass(frozen=True)
class Arrival:
    """A page as it reaches the road: where it comes from and what names it.

    ``source``: where an offline page was read (a scan resumes by it); without one, the page's
    canonical URL is its revisit key. ``item``: judged by the pipeline, where one URL may yield
    several items; ``named``: False for an item without a URL, found again by its body's hash;
    ``revisit``: False for a page known to be new (an import, a benchmark's pages), which has
    no revisit key to look up. ``extractor`` overrides the configured one (``text`` for a body
    that is main text already). ``request``: the crawl request that fetched it, kept as data
    (``crawl.kept_requests``), to fetch it again if this run dies before delivering it.
    """

    url: str
    body: bytes | str
    content_type: str | None = None
    extractor: str | None = None
    source: str | None = None
    item: bool = False
    named: bool = True
    revisit: bool = True
    request: bytes | None = None


class Detector:
    """Judges pages against an index with one configuration, fingerprinting in ``workers``.

    ``drop_above``: the sure bar (NEARDUP_DROP_ABOVE); a match under it is recorded admitted,
    with its weak link, whatever is done with the page.
    """

    def __init__(
        self,
        config: DedupConfig,
        index: Index,
        workers: WorkerPool | None = None,
        drop_above: float = SURE_SIMILARITY,
    ) -> None:
        self.config = config
        self.index = index
        self.workers = workers or WorkerPool(config, 0, None)
        self._drop_above = drop_above
        self._url_rules: UrlModel | None = None
        self._decide = self._decision(index)
        # The crawl's checks run on lanes, threads with a connection each (``judge``); a scan's
        # and an inline ``check`` on the calling thread.
        self.lanes: Lanes[Decision] = Lanes(index, getattr(index, "lanes", 1), self._decision)

    def _decision(self, index: Index) -> Decision:
        decision = Decision(self.config, index, self._drop_above)
        decision.url_rules = self._url_rules
        return decision

    def use_url_rules(self, rules: UrlModel) -> None:
        """Judge with the crawl's learned URL rules: a page they call the same as a record of an
        earlier crawl is a revisit of it (``Decision``). Before the first ``judge``."""
        self._url_rules = self._decide.url_rules = rules

    # --- the whole road -------------------------------------------------------------------

    async def judge(self, page: Arrival) -> Verdict:
        """Judge and record one page, fingerprinted in a worker when there is a pool, its index
        work on a lane (``lanes``): the caller's thread goes on meanwhile, and other pages'
        checks run beside it. A conflict with another process is tried again after a back-off,
        awaited.

        A failure of the index raises ``IndexFailure``; any other error is this page's.
        """
        raw = raw_hash(page.body)
        scope, key = self._place(page, raw)
        copy = await self.lanes.run(lambda lane: self._copy(page, raw, scope, key, lane.index))
        if copy is not None:
            return copy
        fp = await self.workers.fingerprint(page.body, page.content_type, page.extractor, raw)
        for attempt in range(MAX_CONFLICTS):
            try:
                return await self.lanes.run(lambda lane: self._decided(lane, page, fp, scope, key))
            except Conflict:
                await _pause(backoff(attempt))
        raise IndexFailure(self.index.path, "other processes changed the index under this page too often")

    def _decided(
        self, decision: Decision, page: Arrival, fp: Fingerprint, scope: str, key: str | None
    ) -> Verdict:
        with self._guarding(decision.index), decision.index.transaction():
            return decision(page.url, fp, scope, page.source, key, page.item, page.request)

    def check(
        self,
        url: str,
        body: bytes | str | None = None,
        *,
        content_type: str | None = None,
        fp: Fingerprint | None = None,
        source: str | None = None,
        item: bool = False,
    ) -> Verdict:
        """``judge`` inline, for a caller without an event loop; pass ``fp`` when the page was
        fingerprinted elsewhere."""
        page = Arrival(url, body if body is not None else "", content_type, source=source, item=item)
        if fp is not None:
            return self.decide(page, fp)
        if body is None:
            raise TypeError("check() needs the page body or its fingerprint")
        raw = raw_hash(body)
        scope, key = self._place(page, raw)
        copy = self._copy(page, raw, scope, key)
        if copy is not None:
            return copy
        return self.decide(page, fingerprint(body, self.config, content_type=content_type, raw=raw), raw=raw)

    async def judge_many(self, pages: Sequence[Arrival]) -> list[Verdict | Exception]:
        """Judge pages in their order, fingerprinted together, recorded in one index batch (a scan).

        Byte-identical copies of recorded pages skip their extraction. A page that cannot be
        fingerprinted is recorded as not judged (``error``), so a resumed scan does not try it
        again; another failure of one page is returned in its place. ``IndexFailure`` stops
        the batch, whose pages are then all unrecorded.
        """
        raws = [raw_hash(page.body) for page in pages]
        places = [self._place(page, raw) for page, raw in zip(pages, raws, strict=True)]
        originals = [
            self._guard(lambda p=page, r=raw, s=place[0], k=place[1]: self.index.find_raw(r, s, k))
            for page, raw, place in zip(pages, raws, places, strict=True)
        ]
        fresh = [n for n, original in enumerate(originals) if original is None]
        fps = dict(zip(fresh, await asyncio.gather(*(self._fingerprint(pages[n], raws[n]) for n in fresh)),
                       strict=True))  # fmt: skip
        verdicts: list[Verdict | Exception] = []
        with self._guarding(), self.index.batch():
            for n, page in enumerate(pages):
                try:
                    verdicts.append(self._one_of_many(page, raws[n], places[n], originals[n], fps.get(n)))
                except IndexFailure:
                    raise
                except Exception as exc:
                    verdicts.append(exc)
        return verdicts

    # --- the steps ------------------------------------------------------------------------

    def decide(self, page: Arrival, fp: Fingerprint, raw: int | None = None) -> Verdict:
        """The decision on a fingerprinted page in one transaction, tried again while another
        process changed what it read."""
        scope, key = self._place(page, raw if raw is not None else fp.raw_hash)
        return self._atomically(
            lambda: self._decide(page.url, fp, scope, page.source, key, page.item, page.request)
        )

    def _place(self, page: Arrival, raw: int | None) -> tuple[str, str | None]:
        """The page's scope and its revisit key: its canonical URL, its body's hash for an item
        without a URL, none for an offline page (its source finds it)."""
        if page.source is not None or not page.revisit:
            key = None
        elif page.named:
            key = url_key(page.url)
        else:
            key = f"item-body:{raw if raw is not None else raw_hash(page.body):032x}"
        return scope_key(page.url, self.config.scope), key

    def copy_of(self, page: Arrival) -> Verdict | None:
        """The byte-copy shortcut alone: the page recorded as a copy, or None (it needs the check)."""
        raw = raw_hash(page.body)
        return self._copy(page, raw, *self._place(page, raw))

    def _copy(
        self, page: Arrival, raw: int, scope: str, key: str | None, index: Index | None = None
    ) -> Verdict | None:
        """Record a byte-identical copy of an admitted page without extracting it; None otherwise.

        Identical bodies are the commonest duplicate (mirrors, tracking parameters), and this
        costs one hash and one lookup instead of an extraction.
        """
        index = index or self.index
        original = self._guard(lambda: index.find_raw(raw, scope, key), index)
        if original is None:
            return None
        return self._record_copy(page, raw, original, scope, key, index)

    def _record_copy(
        self, page: Arrival, raw: int, original: int, scope: str, key: str | None, index: Index | None = None
    ) -> Verdict | None:
        """None when the page needs the full check: another process recorded its key or source
        since ``find_raw`` said otherwise."""
        index = index or self.index
        try:
            with self._guarding(index):
                return index.record_copy(page.url, raw, original, scope, page.source, key)
        except Conflict:
            return None

    async def _fingerprint(self, page: Arrival, raw: int) -> Fingerprint:
        """A scan's page fingerprint: one that breaks the fingerprint path is a page not judged."""
        try:
            return await self.workers.fingerprint(page.body, page.content_type, page.extractor, raw)
        except Exception as exc:  # MemoryError, RecursionError, a library bug on one page
            detail = f"{type(exc).__name__}: {exc}"[:300]
            return Fingerprint(skip_reason="error", skip_detail=detail, raw_hash=raw)

    def _one_of_many(
        self,
        page: Arrival,
        raw: int,
        place: tuple[str, str | None],
        original: int | None,
        fp: Fingerprint | None,
    ) -> Verdict:
        if original is not None:
            copy = self._record_copy(page, raw, original, *place)
            if copy is not None:
                return copy
            fp = fingerprint(page.body, self.config, content_type=page.content_type, raw=raw)
        return self.decide(page, fp, raw)

    def _atomically(self, work: Callable[[], Verdict]) -> Verdict:
        """``work`` in one index transaction on the calling thread (a scan, ``check``), again (up to
        MAX_CONFLICTS) while another process changed what it read."""
        for attempt in range(MAX_CONFLICTS):
            try:
                with self._guarding(), self.index.transaction():
                    return work()
            except Conflict:
                time.sleep(backoff(attempt))
        raise IndexFailure(self.index.path, "other processes changed the index under this page too often")

    def _guard(self, work: Callable[[], Any], index: Index | None = None) -> Any:
        with self._guarding(index):
            return work()

    @contextlib.contextmanager
    def _guarding(self, index: Index | None = None) -> Iterator[None]:
        """Turn a failure of the index (the backend's own test) into ``IndexFailure``."""
        index = index or self.index
        try:
            yield
        except (IndexFailure, Conflict):
            raise
        except Exception as exc:
            if index.is_storage_error(exc):
                raise IndexFailure(index.path, f"{type(exc).__name__}: {exc}", cause=exc) from exc
            raise

    def forget(self, before: float | None, keep: int | None, index: Index | None = None) -> int:
        """Forget the pages last seen before ``before`` and past the ``keep`` most recent."""
        index = index or self.index
        return self._guard(lambda: forgetting.forget(index, before, keep), index)

    def close(self) -> None:
        self.workers.close()
        self.lanes.close()
        self.index.close()

    def __enter__(self) -> Detector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _pause(seconds: float) -> None:
    """Wait, on the event loop when one runs (the crawl goes on), else on this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        time.sleep(seconds)
        return
    await asyncio.sleep(seconds)
