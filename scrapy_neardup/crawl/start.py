"""Starting a crawl's session: its settings read, its index and workers opened, one log line."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from scrapy.crawler import Crawler

from ..config import DedupConfig
from ..detector import Detector
from ..exceptions import IndexFileError, NearDupError
from ..index import open_index
from ..workers import WorkerPool
from .hosts import Hosts
from .policy import Action, Policy
from .settings import CrawlSettings, warn_unknown_settings
from .url_rules import UrlRules

logger = logging.getLogger("scrapy_neardup")

# Libraries the extractors use, which log every page at DEBUG and INFO (NEARDUP_LOG_EXTRACTORS).
EXTRACTOR_LOGGERS = ("trafilatura", "htmldate", "justext", "courlan", "charset_normalizer", "readability")


@dataclasses.dataclass(frozen=True)
class Opened:
    """What a crawl's session is made of."""

    config: DedupConfig
    settings: CrawlSettings
    policy: Policy
    detector: Detector
    urls: UrlRules | None  # learned URL rules (NEARDUP_LEARN_URLS)
    hosts: Hosts  # the hosts the crawl asks for: a request read from the index is fetched only there


def open_session_parts(crawler: Crawler) -> Opened:
    """Read the settings, open the index, begin the crawl's run, say so in one line."""
    spider = crawler.spider
    warn_unknown_settings(crawler.settings)
    config = DedupConfig.from_settings(crawler.settings)
    settings = CrawlSettings.from_settings(crawler.settings, spider.name if spider else "default")
    if not settings.reset and spider is not None:  # ``-a neardup_reset=1``, as deltafetch's
        reset = getattr(spider, "neardup_reset", False)
        settings = dataclasses.replace(settings, reset=str(reset).lower() in ("1", "true", "yes"))
    if not settings.log_extractors:
        for name in EXTRACTOR_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)  # trafilatura warns of pages it discards
    index = open_index(settings.index_spec, config, reset=settings.reset)
    try:
        held = index.stats()
        index.begin_run(settings.action.value)
    except Exception as exc:  # a lock taken, a server lost, since the index was opened
        if not index.is_storage_error(exc):
            raise
        index.close()
        raise IndexFileError(index.path, f"failed at the crawl's start ({exc})") from None
    workers = WorkerPool(config, settings.workers, settings.page_timeout, settings.workers_after)
    policy = Policy(settings.action, settings.drop_above, settings.drop_unchanged)
    earlier = (
        f"holds {held['documents']:,} pages from earlier crawls ({held['unique']:,} admitted, "
        f"{held['duplicates']:,} duplicates; NEARDUP_RESET starts afresh)"
        if held["documents"] else "is new"
    )  # fmt: skip
    pool = (
        f"{settings.workers} worker processes"
        + (f" after {settings.workers_after} pages" if settings.workers_after else "")
        if settings.workers else "inline"
    )  # fmt: skip
    logger.info(
        "scrapy-neardup: %s, found by %s (extractor %s, %s); index %s %s%s",
        policy.describe(), ", ".join(config.methods), config.extractor, pool, index.path, earlier,
        " (reset)" if settings.reset else "",
    )  # fmt: skip
    if settings.action is Action.DROP and not _pipeline_on(crawler.settings):
        logger.warning(
            "scrapy-neardup: NEARDUP_ACTION = 'drop' drops a duplicate page's items in NearDupPipeline, "
            "which is not in ITEM_PIPELINES: they are stored. Add it (the add-on does), or set "
            "NEARDUP_ACTION = 'ignore' to ignore duplicate responses instead"
        )
    detector, urls, hosts = Detector(config, index, workers, settings.drop_above), None, Hosts(crawler)
    if settings.learn_urls:
        observe = settings.action is Action.TAG  # every page goes on: the rules only learn
        urls = UrlRules(
            detector.lanes, crawler.stats, crawler, hosts, explore=settings.url_explore, debug=settings.debug,
            observe=observe, sure=policy.sure, verify=settings.url_verify,
            max_error=settings.url_max_error,
        )  # fmt: skip
        urls.start(forget=settings.url_rules_reset)
        detector.use_url_rules(urls.model)
    return Opened(config, settings, policy, detector, urls, hosts)


def spider_waits(crawler: Crawler) -> bool:
    """Whether the spider middleware waits for a page's verdict (the downloader middleware then
    passes the response on at once): NearDupSpiderMiddleware is on, and the asyncio reactor runs
    the checks beside the crawl."""
    from scrapy.utils.reactor import is_asyncio_reactor_installed, is_reactor_installed

    return (
        is_reactor_installed()
        and is_asyncio_reactor_installed()
        and _component_on(crawler.settings, "SPIDER_MIDDLEWARES", "NearDupSpiderMiddleware")
    )


def _pipeline_on(settings: Any) -> bool:
    """Whether NearDupPipeline is an item pipeline."""
    return _component_on(settings, "ITEM_PIPELINES", "NearDupPipeline")


def _component_on(settings: Any, setting: str, name: str) -> bool:
    """Whether the component ``name`` of this package (known by its name: it imports this module)
    is in the component list ``setting``."""
    from scrapy.utils.conf import build_component_list
    from scrapy.utils.misc import load_object

    for component in build_component_list(settings.getwithbase(setting)):
        try:
            loaded = load_object(component)
        except (ImportError, ValueError, NameError, AttributeError):
            continue
        if getattr(loaded, "__qualname__", "") == name and loaded.__module__.startswith(__package__):
            return True
    return False


def said_once(error: NearDupError) -> None:
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
