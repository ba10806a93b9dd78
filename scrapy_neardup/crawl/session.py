"""CrawlSession: one crawl's state, shared by the middlewares and the pipeline.

All components ask ``CrawlSession.for_crawler(crawler)`` and get the same object, which hangs
on the crawler (no module state): the crawl's road (a Detector with its workers), its policy,
its stats, which page each item came from, and its report at close.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.http import Request, Response
from scrapy.statscollectors import StatsCollector
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import task

from ..config import DedupConfig
from ..decision import SAME_URL
from ..detector import Arrival, Detector
from ..exceptions import IndexFailure, NearDupError, one_line
from ..index.runs import BEAT_EVERY
from ..verdict import Verdict
from . import kept_requests
from .background import spawn
from .hosts import Hosts
from .policy import Outcome, Policy, met_again_as_its_own
from .recovery import Recovery
from .settings import CrawlSettings
from .start import open_session_parts, said_once, spider_waits
from .url_rules import UrlRules

logger = logging.getLogger("scrapy_neardup")

_ATTRIBUTE = "_neardup_session"
FORGET_EVERY = 1000  # pages checked between two passes of NEARDUP_FORGET_AFTER and NEARDUP_MAX_PAGES
_REMEMBERED = 50_000  # items waiting for the pipeline, and pages of this crawl; oldest out first
ORIGINAL_WAIT = 30.0  # seconds a copy's item waits for the spider to be done with its original


@dataclass
class _Parsed:
    """What the spider made of an admitted page: its items, once it is done with it."""

    items: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)


class CrawlSession:
    """One crawl's road, policy, stats, item hand-off and report."""

    def __init__(
        self,
        config: DedupConfig,
        settings: CrawlSettings,
        policy: Policy,
        detector: Detector,
        stats: StatsCollector,
        urls: UrlRules | None = None,
        recovery: Recovery | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.policy = policy
        self.detector = detector
        self.stats = stats
        self.urls = urls
        self._items: OrderedDict[int, tuple[Any, Verdict]] = OrderedDict()
        self._pages: OrderedDict[int, _Parsed] = OrderedDict()  # admitted pages of this crawl, by id
        self._logged_once = False
        self._failures: set[str] = set()
        self.recovery = recovery or Recovery(detector.lanes, stats, None, Hosts(None))
        self.hosts = self.recovery.hosts  # the hosts the crawl asks for
        self.crawler: Crawler | None = None
        self.spider_waits = False  # NearDupSpiderMiddleware awaits verdicts (``start.spider_waits``)
        self._heart: task.LoopingCall | None = None
        self._waited: tuple[int, float, float] = (0, 0.0, 0.0)  # pages, seconds in all, the longest
        self._room: asyncio.Semaphore | None = None  # places for pages waiting for a verdict
        self._finished = False

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> CrawlSession:
        """The crawl's session, created (and the index opened) by the first component that asks;
        NotConfigured, so that Scrapy leaves the component out, when NEARDUP_ENABLED is off."""
        if not crawler.settings.getbool("NEARDUP_ENABLED"):
            raise NotConfigured("NEARDUP_ENABLED is off")
        session = getattr(crawler, _ATTRIBUTE, None)
        if session is None:
            try:
                parts = open_session_parts(crawler)
            except NearDupError as exc:
                logger.critical("scrapy-neardup cannot start: %s", one_line(str(exc)))
                said_once(exc)
                raise
            session = cls(
                parts.config, parts.settings, parts.policy, parts.detector, crawler.stats, parts.urls,
                Recovery(parts.detector.lanes, crawler.stats, crawler, parts.hosts),
            )  # fmt: skip
            session.crawler = crawler
            session.spider_waits = spider_waits(crawler)
            crawler.signals.connect(session.spider_closed, signal=signals.spider_closed)
            crawler.signals.connect(session.spider_opened, signal=signals.spider_opened)
            crawler.signals.connect(session.spider_idle, signal=signals.spider_idle)
            crawler.signals.connect(session.feed_exporter_closed, signal=signals.feed_exporter_closed)
            crawler.signals.connect(session.engine_stopped, signal=signals.engine_stopped)
            setattr(crawler, _ATTRIBUTE, session)
            session.forget()
        return session

    # --- judging ------------------------------------------------------------------------

    async def room(self) -> None:
        """Wait while NEARDUP_MAX_WAITING pages wait for their verdicts: the response that waits
        keeps its download slot, so the crawl runs no further ahead of the index (its memory,
        and its URL rules, which learn from verdicts)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no asyncio loop: the check is awaited where it starts
        if self._room is None:
            self._room = asyncio.Semaphore(self.settings.max_waiting)
        if self._room.locked():
            self.stats.inc_value("neardup/waited/full")
        await self._room.acquire()

    def check(self, request: Request, response: Response, spider: Any) -> Awaitable[Verdict]:
        """Start the check of a response, beside the crawl: its verdict, when it comes (the spider
        middleware awaits it, or the downloader middleware in ignore mode). Without an asyncio
        loop, the check to await. Called after ``room``, whose place it gives back when done."""
        checking = self._check(request, response, spider)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return checking
        future = asyncio.ensure_future(checking)
        if self._room is not None:
            future.add_done_callback(lambda _: self._room.release())
        return future

    async def _check(self, request: Request, response: Response, spider: Any) -> Verdict:
        await self.recovery.fetching(request)
        kept = kept_requests.keep(request, spider)
        page = Arrival(response.url, response.body, _content_type(response), request=kept)
        verdict = await self.judge(page)
        spawn(self.recovery.fetched(request))  # after its record: until then the dead run's to recover
        self.page_judged(verdict)
        if self.urls is not None:  # before the verdict: the spider's next requests meet what it taught
            await self.urls.learn(request, response, verdict)
        return verdict

    def waited(self, seconds: float) -> None:
        """The spider waited ``seconds`` for a page's verdict (the index was slow, or locked)."""
        if seconds > 0.001:
            pages, total, longest = self._waited
            self._waited = (pages + 1, total + seconds, max(longest, seconds))

    def _wait_stats(self) -> None:
        pages, total, longest = self._waited
        if pages:
            self.stats.set_value("neardup/waited/pages", pages)
            self.stats.set_value("neardup/waited/seconds", round(total, 1))
            self.stats.set_value("neardup/waited/max_ms", round(longest * 1000))

    async def judge(self, page: Arrival) -> Verdict:
        """Judge one page on the road, and count it.

        A failure here (a full disk, a broken worker) must not cost the page: it is logged,
        counted as ``neardup/unjudged/error`` and passed on unjudged.
        """
        try:
            verdict = await self.detector.judge(page)
        except Exception as exc:
            self.unjudged("error")
            self._failed(page.url, exc)
            return Verdict(page.url, None, False, skip_reason="error")
        if self.urls is not None and not page.item:
            clean = self.urls.model.canonical(page.url)
            verdict = verdict if clean == page.url else dataclasses.replace(verdict, canonical=clean)
        self._count(verdict)
        return verdict

    def _failed(self, url: str, exc: Exception) -> None:
        """Log a failure to judge a page: the first of its kind with what to do, the rest at DEBUG.

        A full disk fails every page after it; one line says so, not one traceback a page.
        """
        cause = exc.cause if isinstance(exc, IndexFailure) and exc.cause is not None else exc
        storage = isinstance(exc, IndexFailure)
        text = f"{type(cause).__name__}: {cause}"
        kind = (
            type(cause).__name__ if storage else text
        )  # a storage failure is said once, whatever its detail
        if kind in self._failures:
            logger.debug("scrapy-neardup: could not judge %s (%s); passed on unjudged", url, one_line(text))
            return
        self._failures.add(kind)
        advice = (
            self.detector.index.failure_advice(cause) if storage else "a bug: please report it with this page"
        )
        logger.error(
            "scrapy-neardup: could not judge %s (%s): %s. Pages pass on unjudged meanwhile, counted as "
            "neardup/unjudged/error; the same failure is logged again only at DEBUG",
            url, one_line(text), advice, exc_info=not storage,
        )  # fmt: skip

    def forget(self) -> None:
        """Forget the pages NEARDUP_FORGET_AFTER and NEARDUP_MAX_PAGES leave out, waited for (at the
        start and at the end); a failure is logged, and the crawl goes on with them kept."""
        if self._forgetting():
            self._forgot(lambda: self.detector.lanes.call(self._forget_on))

    async def _forget_meanwhile(self) -> None:
        """``forget`` on a lane while the crawl goes on (every FORGET_EVERY pages)."""
        try:
            forgotten = await self.detector.lanes.run(self._forget_on)
        except Exception as exc:
            self._close_failed("could not forget old pages", exc)
            return
        self._forgot(lambda: forgotten)

    def _forgetting(self) -> bool:
        return self.settings.forget_after is not None or self.settings.max_pages is not None

    def _forget_on(self, lane: Any) -> int:
        after, most = self.settings.forget_after, self.settings.max_pages
        return self.detector.forget(time.time() - after if after else None, most, lane.index)

    def _forgot(self, forgetting: Any) -> None:
        try:
            forgotten = forgetting()
        except Exception as exc:
            self._close_failed("could not forget old pages", exc)
            return
        if forgotten:
            self.stats.inc_value("neardup/forgotten", forgotten)
            logger.info("scrapy-neardup: forgot %d pages not seen lately (%s)", forgotten, self._why_forget())

    def _why_forget(self) -> str:
        after, most = self.settings.forget_after, self.settings.max_pages
        parts = [f"NEARDUP_FORGET_AFTER = {after:g} s"] if after else []
        return ", ".join(parts + ([f"NEARDUP_MAX_PAGES = {most}"] if most else []))

    def _count(self, verdict: Verdict) -> None:
        self.stats.inc_value("neardup/checked")
        if self.stats.get_value("neardup/checked", 0) % FORGET_EVERY == 0 and self._forgetting():
            spawn(self._forget_meanwhile())
        if verdict.duplicate:
            kind = verdict.method if verdict.method in ("exact", SAME_URL) else "near"
            self.stats.inc_value(f"neardup/duplicates/{kind}")
        elif not verdict.judged:
            self.unjudged(verdict.skip_reason or "unknown")
        if verdict.revisit:
            self.stats.inc_value("neardup/revisits")
            if verdict.revisit == "changed":
                self.stats.inc_value("neardup/revisits/changed")
        if verdict.unconfirmed and verdict.revisit is None:
            self.stats.inc_value("neardup/unconfirmed")
            logger.info(
                "scrapy-neardup: let %s through: it matches %s, which a crawl that never closed admitted "
                "(its item may not have been stored)", verdict.url, verdict.duplicate_of_url,
            )  # fmt: skip

    def unjudged(self, reason: str) -> None:
        self.stats.inc_value(f"neardup/unjudged/{reason}")

    def acted(self, verdict: Verdict, outcome: Outcome) -> None:
        """Count what became of a page or an item, and log it at DEBUG, once unless NEARDUP_DEBUG."""
        self.stats.inc_value(f"neardup/{outcome.value}")
        if not (self.settings.debug or not self._logged_once):
            return
        more = "" if self.settings.debug else " - no more near-duplicates will be shown (see NEARDUP_DEBUG)"
        if outcome is Outcome.UNCHANGED:
            logger.debug("Filtered unchanged revisit %s (NEARDUP_DROP_UNCHANGED)%s", verdict.url, more)
        else:
            verb = {
                Outcome.DROPPED: "Dropped an item of near-duplicate",
                Outcome.IGNORED: "Ignored near-duplicate",
                Outcome.TAGGED: "Tagged near-duplicate",
                Outcome.FIRST: "Kept the first item (its original put none out) of near-duplicate",
            }.get(outcome, "Let through uncertain near-duplicate")
            own = met_again_as_its_own(verdict)
            of = "its own URL, met again (its content is out already)" if own else verdict.duplicate_of_url
            logger.debug(
                "%s %s of %s (%s, similarity %.3f)%s", verb, verdict.url, of, verdict.method,
                verdict.similarity or 0.0, more,
            )  # fmt: skip
        self._logged_once = True

    # --- the hand-off of a page's verdict to its items ----------------------------------

    def link_item(self, item: Any, verdict: Verdict) -> None:
        """Remember which page's verdict an item came from (held with the item, so ids stay unique)."""
        self._items[id(item)] = (item, verdict)
        if len(self._items) > _REMEMBERED:
            self._items.popitem(last=False)

    def verdict_for(self, item: Any) -> Verdict | None:
        """The verdict made on the page an item came from, if the middlewares judged one."""
        linked = self._items.pop(id(item), None)
        return linked[1] if linked is not None and linked[0] is item else None

    # --- what reached the output --------------------------------------------------------

    def page_judged(self, verdict: Verdict) -> None:
        """Note a page this crawl admitted, which may be another page's original: its items are
        yet to come from the spider."""
        if verdict.doc_id is not None and verdict.judged and not verdict.duplicate:
            self._pages[verdict.doc_id] = _Parsed()
            if len(self._pages) > _REMEMBERED:
                self._pages.popitem(last=False)

    def page_parsed(self, verdict: Verdict, items: int) -> None:
        """The spider is done with a page: it yielded ``items`` items."""
        parsed = self._pages.get(verdict.doc_id) if verdict.doc_id is not None else None
        if parsed is not None:
            parsed.items += items
            parsed.done.set()

    async def item_outcome(self, verdict: Verdict) -> Outcome | None:
        """What becomes of an item with this verdict: the policy's outcome, except that a sure
        duplicate's item is kept (``kept/first``) when its original, a page of this crawl,
        yielded no item: a home page that shows an article in full, admitted first, is then
        its original, and the article's own item is the first of that content. It waits (up to
        ORIGINAL_WAIT seconds) for the spider to be done with the original."""
        outcome = self.policy.outcome(verdict, item=True)
        original = self._pages.get(verdict.duplicate_of) if outcome is Outcome.DROPPED else None
        if original is None:
            return outcome
        try:
            await asyncio.wait_for(original.done.wait(), ORIGINAL_WAIT)
        except asyncio.TimeoutError:  # the spider never got the original: let the item through
            return Outcome.FIRST
        return Outcome.FIRST if original.items == 0 else outcome

    # --- the run: its heartbeat, and its close ------------------------------------------

    def spider_opened(self, spider: Any = None) -> None:
        crawler = self.crawler
        if crawler is not None and crawler.crawling:  # Crawler.stop (SIGTERM) turns it off
            self.detector.workers.stopping = lambda: not crawler.crawling
        self.recovery.beat_now()  # shows the run alive, claims what dead runs left; then every BEAT_EVERY s
        self._heart = task.LoopingCall(lambda: deferred_from_coro(self.recovery.beat()))
        self._heart.start(BEAT_EVERY, now=False)
        if self.urls is not None:
            self.urls.revive_later()  # what a crawl killed after revoking a rule had not yet

    def spider_idle(self, spider: Any = None) -> None:
        """Before the crawl closes, the URL rules check some of what they skipped, and the pages of
        runs found dead meanwhile are fetched again; a revival under way keeps it open."""
        checked = self.urls is not None and self.urls.check_before_close()
        recovered = self.recovery.beat_now()
        if checked or recovered or (self.urls is not None and self.urls.reviving):
            raise DontCloseSpider

    def spider_closed(self, spider: Any = None, reason: str = "finished") -> None:
        """The run is closed once the crawl's output is stored: after the feed exports when there
        are some (``feed_exporter_closed``), else now. Nothing of the add-on's own runs before
        that (a kill then costs the pages of a run that closes in milliseconds, not seconds)."""
        if not _exports_feeds(self.crawler):
            self._finish()

    def feed_exporter_closed(self) -> None:
        self._finish()

    def engine_stopped(self) -> None:
        self._finish()  # the feed exports failed before they said they closed: the run closes all the same

    def _finish(self) -> None:
        """Close the run (what it admitted reached the output), then the add-on's own close work:
        forgetting, the report. A kill before this leaves the run dead: its pages are fetched again."""
        if self._finished:
            return
        self._finished = True
        if self._heart is not None and self._heart.running:
            self._heart.stop()
        index, lanes = self.detector.index, self.detector.lanes
        try:
            lanes.call(lambda lane: lane.index.end_run())
        except Exception as exc:  # the run stays open: its pages count as unconfirmed next time, nothing lost
            self._close_failed(f"could not close the crawl run in {index.path}", exc)
        workers = self.detector.workers
        workers.close()
        if workers.peak_memory_mb is not None:
            self.stats.set_value("neardup/workers/memory_mb", round(workers.peak_memory_mb))
        self.forget()
        self._wait_stats()
        connections = lanes.indexes()
        lanes.close()  # the crawl's thread has the index to itself from here
        if self.settings.report is not None:
            self.write_report()
        self.detector.close()
        unrecorded = sum(getattr(ix, "unrecorded", 0) for ix in connections)  # their last answers read
        if unrecorded:
            self.stats.set_value("neardup/unrecorded", unrecorded)

    def _close_failed(self, what: str, exc: Exception) -> None:
        """One line for a storage failure at close (the index is unreachable or full); a traceback
        for anything else, which is a bug."""
        if isinstance(exc, NearDupError) or self.detector.index.is_storage_error(exc):
            logger.error("scrapy-neardup: %s: %s", what, one_line(f"{type(exc).__name__}: {exc}"))
        else:
            logger.exception("scrapy-neardup: %s", what)

    def write_report(self) -> Path | None:
        from ..report import format_for, write_index_report

        out = self.settings.report
        fmt = self.settings.report_format or format_for(out, "html")
        index = self.detector.index
        try:
            path = write_index_report(index, out, fmt, self.settings.canonical, source=index.name)
        except Exception as exc:  # a report must never turn a finished crawl into a failed one
            self._close_failed(f"could not write the report {out}", exc)
            return None
        self.stats.set_value("neardup/report", str(path))
        logger.info("scrapy-neardup: report written to %s", path)
        return path


def _exports_feeds(crawler: Crawler | None) -> bool:
    """Whether Scrapy's feed exports run in this crawl (they say so when they have stored the
    feeds: ``feed_exporter_closed``)."""
    from scrapy.extensions.feedexport import FeedExporter

    extensions = getattr(getattr(crawler, "extensions", None), "middlewares", ())
    return any(isinstance(extension, FeedExporter) for extension in extensions)


def _content_type(response: Response) -> str | None:
    value = response.headers.get(b"Content-Type")
    return value.decode("latin-1") if value else None
