"""CrawlSession: one crawl's state the middlewares and the pipeline share.

Its Detector, its workers, its stats, the verdicts the pipeline reuses, and its report. All
components ask ``CrawlSession.for_crawler(crawler)`` and get the same object, so a page judged
by the middleware is not fingerprinted again by the pipeline, and the index is opened and
closed once per crawl. The session hangs on the crawler (no module state).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sqlite3
from collections import OrderedDict
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from ..config import DedupConfig
from ..detector import Detector
from ..exceptions import NearDupError, one_line
from ..index import Index, SQLiteIndex, Verdict
from ..scope import url_key
from ..signatures.exact import raw_hash
from ..workers import WorkerPool
from .settings import CrawlSettings, remove_index, warn_unknown_settings

logger = logging.getLogger("scrapy_neardup")

# Libraries the extractors use, which log every page at DEBUG and INFO (NEARDUP_LOG_EXTRACTORS).
EXTRACTOR_LOGGERS = ("trafilatura", "htmldate", "justext", "courlan", "charset_normalizer", "readability")
_ATTRIBUTE = "_neardup_session"
_REMEMBERED = 50_000  # verdicts kept for the pipeline, newest first out of memory last


def _said_once(error: NearDupError) -> None:
    """Keep the traceback of an error logged in one line already from following it.

    Scrapy starts a crawl in an asyncio task, marks the crawl failed (exit status 1) when a
    component's start raises, and leaves the error to asyncio, which prints it with its
    traceback. This marks the task's error as seen when it is ``error``; any other is passed to
    the loop's handler as asyncio would have. Outside a task (a Twisted-only start) nothing
    changes.
    """
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop
        return
    if task is None:
        return

    def seen(task: asyncio.Task) -> None:
        failure = None if task.cancelled() else task.exception()  # marks it retrieved
        if failure is not None and failure is not error and failure.__context__ is not error:
            task.get_loop().call_exception_handler(
                {"message": "Task exception was never retrieved", "exception": failure, "future": task}
            )

    task.add_done_callback(seen)


class CrawlSession:
    """One crawl's detector, its workers, its stats and its report."""

    def __init__(
        self, config: DedupConfig, settings: CrawlSettings, detector: Detector, stats: StatsCollector
    ) -> None:
        self.config = config
        self.settings = settings
        self.detector = detector
        self.stats = stats
        self.workers = WorkerPool(config, settings.workers, settings.page_timeout, settings.workers_after)
        self.verdicts: OrderedDict[str, Verdict] = OrderedDict()
        self._item_verdicts: OrderedDict[int, tuple[Any, Verdict]] = OrderedDict()
        self._logged_once = False
        self._failures: set[str] = set()

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> CrawlSession:
        """The crawl's session, created (and the index opened) by the first component that asks."""
        session = getattr(crawler, _ATTRIBUTE, None)
        if session is None:
            try:
                session = cls._start(crawler)
            except NearDupError as exc:
                logger.critical("scrapy-neardup cannot start: %s", one_line(str(exc)))
                _said_once(exc)
                raise
            crawler.signals.connect(session.spider_closed, signal=signals.spider_closed)
            setattr(crawler, _ATTRIBUTE, session)
        return session

    @classmethod
    def _start(cls, crawler: Crawler) -> CrawlSession:
        """Read the settings, open the index, begin the crawl's run."""
        spider = crawler.spider
        warn_unknown_settings(crawler.settings)
        config = DedupConfig.from_settings(crawler.settings)
        settings = CrawlSettings.from_settings(crawler.settings, spider.name if spider else "default")
        if not settings.reset and spider is not None:  # ``-a neardup_reset=1``, as deltafetch's
            reset = getattr(spider, "neardup_reset", False)
            settings = dataclasses.replace(settings, reset=str(reset).lower() in ("1", "true", "yes"))
        if not settings.log_extractors:
            for name in EXTRACTOR_LOGGERS:
                logging.getLogger(name).setLevel(logging.WARNING)
        index = open_index(settings, config)
        held = index.stats()
        index.begin_run(settings.action)
        session = cls(config, settings, Detector(config, index), crawler.stats)
        earlier = (
            f"holds {held['documents']:,} pages from earlier crawls ({held['unique']:,} admitted, "
            f"{held['duplicates']:,} duplicates; NEARDUP_RESET starts afresh)"
            if held["documents"] else "is new"
        )  # fmt: skip
        workers = (
            f"{settings.workers} worker processes"
            + (f" after {settings.workers_after} pages" if settings.workers_after else "")
            if settings.workers else "inline"
        )  # fmt: skip
        sure = f" at similarity >= {settings.drop_above:g}" if settings.drop_above else ""
        action = {
            "drop": f"drop the items of near-duplicates{sure}",
            "ignore": f"ignore near-duplicate responses{sure}",
            "tag": "tag near-duplicates",
        }[settings.action]  # fmt: skip
        logger.info(
            "scrapy-neardup: %s, found by %s (extractor %s, %s); index %s %s%s",
            action, ", ".join(config.methods), config.extractor, workers, index.path, earlier,
            " (reset)" if settings.reset else "",
        )  # fmt: skip
        if settings.action == "drop" and not _pipeline_on(crawler.settings):
            logger.warning(
                "scrapy-neardup: NEARDUP_ACTION = 'drop' drops a duplicate page's items in NearDupPipeline, "
                "which is not in ITEM_PIPELINES: they are stored. Add it (the add-on does), or set "
                "NEARDUP_ACTION = 'ignore' to ignore duplicate responses instead"
            )
        return session

    # --- judging ------------------------------------------------------------------------

    async def judge(
        self,
        url: str,
        body: bytes | str,
        content_type: str | None = None,
        extractor: str | None = None,
        item: bool = False,
        named: bool = True,
    ) -> Verdict:
        """Check one page: raw copies first, then a fingerprint (in a worker when configured).

        A failure here (a full disk, a broken worker) must not cost the page: it is logged,
        counted as ``neardup/skipped/error`` and passed on unjudged.
        """
        # An item without a URL is found again by its body: seen in a later crawl, it is a revisit.
        raw = raw_hash(body)  # made once a page: the raw-copy lookup, the key, the fingerprint
        key = url_key(url) if named else f"item-body:{raw:032x}"
        try:
            copy = self.detector.check_raw(url, body, key=key, raw=raw)
            if copy is not None:
                return self.remember(copy)
            fp = await self.workers.fingerprint(body, content_type, extractor, raw)
            return self.remember(self.detector.check(url, fp=fp, item=item, key=key))
        except Exception as exc:
            self.skipped("error")
            self._failed(url, exc)
            return Verdict(url, None, False, skip_reason="error")

    def _failed(self, url: str, exc: Exception) -> None:
        """Log a failure to judge a page: the first of its kind with what to do, the rest at DEBUG.

        A full disk fails every page after it; one line says so, not one traceback a page.
        """
        storage = isinstance(exc, (sqlite3.Error, OSError)) or type(exc).__module__.startswith("redis")
        text = f"{type(exc).__name__}: {exc}"
        kind = type(exc).__name__ if storage else text  # a storage failure is said once, whatever its detail
        if kind in self._failures:
            logger.debug("scrapy-neardup: could not judge %s (%s); passed on unjudged", url, one_line(text))
            return
        self._failures.add(kind)
        where = self.detector.index.path
        if not storage:
            advice = "a bug: please report it with this page"
        elif self.settings.backend == "redis":
            advice = f"the Redis index {where} failed; pages are judged again once it answers"
        else:
            advice = f"the index {where} failed; free disk space or end what holds its lock"
        logger.error(
            "scrapy-neardup: could not judge %s (%s): %s. Pages pass on unjudged meanwhile, counted as "
            "neardup/skipped/error; the same failure is logged again only at DEBUG",
            url, one_line(text), advice, exc_info=not storage,
        )  # fmt: skip

    def remember(self, verdict: Verdict) -> Verdict:
        """Keep a verdict for the pipeline (items of the same page) and count it."""
        self.verdicts[verdict.url] = verdict
        if len(self.verdicts) > _REMEMBERED:
            self.verdicts.popitem(last=False)
        self.stats.inc_value("neardup/checked")
        if verdict.duplicate:
            kind = "exact" if verdict.method == "exact" else "near"
            self.stats.inc_value(f"neardup/duplicates/{kind}")
        elif not verdict.judged:
            self.skipped(verdict.skip_reason or "unknown")
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
        return verdict

    def action_on(self, verdict: Verdict, item: bool = False) -> str | None:
        """What becomes of a page, or of one of its items, with this verdict.

        ``dropped`` (an item; in drop mode a duplicate page only tells its items so),
        ``ignored`` (a page, with NEARDUP_ACTION = "ignore"), ``tagged``, ``uncertain`` (a match
        under NEARDUP_DROP_ABOVE or on thin evidence: let through tagged), ``dropped/unchanged``
        (an item of an unchanged revisit, dropped with NEARDUP_DROP_UNCHANGED), or None (passed
        as it is); each names its stat under ``neardup/``. An unchanged revisit's page always
        passes, so its links are followed; its items are not dropped when a crawl that never
        closed admitted it (they may have been lost).
        """
        unchanged = verdict.revisit == "unchanged" and not (verdict.duplicate or verdict.unconfirmed)
        if item and unchanged and self.settings.drop_unchanged:
            return "dropped/unchanged"
        if not verdict.duplicate:
            return None
        if self.settings.action == "tag":
            return "tagged"
        if not self.sure(verdict):
            return "uncertain"
        if self.settings.action == "ignore" and not item:
            return "ignored"
        return "dropped" if item else None

    def sure(self, verdict: Verdict) -> bool:
        """Whether a duplicate is sure enough to drop: an exact copy always; a near one at
        NEARDUP_DROP_ABOVE or more, on strong evidence (0 drops every match)."""
        bar = self.settings.drop_above
        if verdict.method == "exact" or bar <= 0:
            return True
        return not verdict.weak and (verdict.similarity or 0.0) >= bar

    def verdict_dict(self, verdict: Verdict) -> dict[str, Any]:
        """The verdict as the spider and items see it (``neardup`` meta and field), with ``sure``:
        whether a duplicate is sure enough to drop (None for a page that is none)."""
        return {**verdict.as_dict(), "sure": self.sure(verdict) if verdict.duplicate else None}

    def link_item(self, item: Any, verdict: Verdict) -> None:
        """Remember which page's verdict an item came from (held with the item, so ids stay unique)."""
        self._item_verdicts[id(item)] = (item, verdict)
        if len(self._item_verdicts) > _REMEMBERED:
            self._item_verdicts.popitem(last=False)

    def verdict_for(self, item: Any, url: str | None) -> Verdict | None:
        """The verdict already made on the page an item came from (by origin, else by URL)."""
        linked = self._item_verdicts.pop(id(item), None)
        if linked is not None and linked[0] is item:
            return linked[1]
        return self.verdicts.get(url) if url else None

    def skipped(self, reason: str) -> None:
        self.stats.inc_value(f"neardup/skipped/{reason}")

    def acted(self, verdict: Verdict, what: str) -> None:
        """Count what became of a page or an item (``action_on``), and log it at DEBUG, once
        unless NEARDUP_DEBUG."""
        self.stats.inc_value(f"neardup/{what}")
        if self.settings.debug or not self._logged_once:
            more = (
                "" if self.settings.debug else " - no more near-duplicates will be shown (see NEARDUP_DEBUG)"
            )
            if what == "dropped/unchanged":
                logger.debug("Filtered unchanged revisit %s (NEARDUP_DROP_UNCHANGED)%s", verdict.url, more)
            else:
                verb = {
                    "dropped": "Dropped an item of near-duplicate", "ignored": "Ignored near-duplicate",
                    "tagged": "Tagged near-duplicate",
                }.get(what, "Let through uncertain near-duplicate")  # fmt: skip
                logger.debug(
                    "%s %s of %s (%s, similarity %.3f)%s", verb, verdict.url,
                    verdict.duplicate_of_url, verdict.method, verdict.similarity or 0.0, more,
                )  # fmt: skip
            self._logged_once = True

    # --- closing ------------------------------------------------------------------------

    def spider_closed(self, spider: Any = None, reason: str = "finished") -> None:
        self.workers.close()
        try:
            self.detector.index.end_run()
        except Exception as exc:  # the run stays open: its pages count as unconfirmed next time, nothing lost
            self._close_failed(f"could not close the crawl run in {self.detector.index.path}", exc)
        if self.settings.report is not None and self.settings.backend == "redis":
            self.write_report()  # from the open index: a Redis index has no file to read later
        self.detector.close()
        if self.settings.report is not None and self.settings.backend != "redis":
            self.write_report()

    def _close_failed(self, what: str, exc: Exception) -> None:
        """One line for a storage failure at close (the index is unreachable or full); a traceback
        for anything else, which is a bug."""
        if isinstance(exc, (sqlite3.Error, OSError, NearDupError)) or type(exc).__module__.startswith(
            "redis"
        ):
            logger.error("scrapy-neardup: %s: %s", what, one_line(f"{type(exc).__name__}: {exc}"))
        else:
            logger.exception("scrapy-neardup: %s", what)

    def write_report(self) -> Path | None:
        from ..report import format_for, write_index_report, write_report

        out = self.settings.report
        fmt = self.settings.report_format or format_for(out, "html")
        try:
            if self.settings.backend == "redis":
                path = write_index_report(self.detector.index, out, fmt, self.settings.canonical)
            else:
                path = write_report(self.settings.db, out, fmt, self.settings.canonical)
        except Exception as exc:  # a report must never turn a finished crawl into a failed one
            self._close_failed(f"could not write the report {out}", exc)
            return None
        self.stats.set_value("neardup/report", str(path))
        logger.info("scrapy-neardup: report written to %s", path)
        return path


def _pipeline_on(settings: Any) -> bool:
    """Whether NearDupPipeline is among the crawl's item pipelines."""
    from scrapy.utils.conf import build_component_list
    from scrapy.utils.misc import load_object

    from .pipeline import NearDupPipeline

    for component in build_component_list(settings.getwithbase("ITEM_PIPELINES")):
        try:
            if load_object(component) is NearDupPipeline:
                return True
        except (ImportError, ValueError, NameError, AttributeError):
            continue
    return False


def open_index(settings: CrawlSettings, config: DedupConfig) -> Index:
    """The crawl's index, of the backend NEARDUP_BACKEND names."""
    if settings.backend == "redis":
        from ..index.redis import RedisIndex

        if settings.reset:  # the index alone: keys not its own are refused below, as without a reset
            RedisIndex.reset(settings.redis_url, settings.redis_key)
        return RedisIndex(settings.redis_url, config, settings.redis_key)
    if settings.reset:  # an index alone: any other file is refused
        remove_index(settings.db)
    return SQLiteIndex(settings.db, config)
