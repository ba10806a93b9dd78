"""The crawl's middlewares: a check started for each HTML response, its verdict awaited before the spider."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Request, Response

from ..verdict import Verdict
from .background import spawn
from .policy import Action, Outcome, why_dropped
from .session import CrawlSession
from .url_rules import FETCH

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

HTML_TYPES = (b"text/html", b"application/xhtml+xml")
PAGE_VERDICT = "_neardup_verdict"  # the page's verdict, or its check under way (a future)
_PASSED_AT = "_neardup_passed_at"  # when the response left the downloader, its check under way


class NearDupDownloaderMiddleware:
    """Starts the check of each HTML response against the pages seen before.

    Sits at 570, after decompression, redirects and meta refresh. Each HTML response
    with a 2xx status is fingerprinted and checked against the index in one atomic step;
    the index records it either way. The check runs beside the crawl: the response leaves
    the downloader at once, and NearDupSpiderMiddleware waits for the verdict before the
    spider's callback runs (so downloads go on while the index is slow or locked; at most
    ``NEARDUP_MAX_WAITING`` pages wait, then a response keeps its download slot until there is
    room; counted as ``neardup/waited/*``). In ignore mode, or without that middleware or the
    asyncio reactor, this middleware waits for it. With ``NEARDUP_ACTION = "drop"`` (the default) a
    near-duplicate still reaches the spider, so its links are followed, and the items it
    yields are dropped by NearDupPipeline; ``request.meta["neardup"]`` holds its verdict as
    a plain dict. With ``"ignore"`` it raises ``IgnoreRequest("near-duplicate of <url>")``:
    the spider never parses it nor follows its links. With ``"tag"`` every judged page goes
    on with its verdict in ``request.meta["neardup"]``. A match under ``NEARDUP_DROP_ABOVE``
    or on thin evidence is only tagged, whatever the action.

    A page crawled before (the same canonical URL) is a revisit, never a duplicate of
    itself: unchanged, it passes, so its links are followed (``NEARDUP_DROP_UNCHANGED``
    drops its items in the pipeline).

    Meta keys read: ``neardup_skip`` (True: pass the response untouched, unjudged, and its
    items too). Log line (DEBUG, once unless ``NEARDUP_DEBUG``): ``Ignored near-duplicate
    <url> of <url> (<method>, similarity <s>)``, ``Tagged ...`` in tag mode. Non-HTML and error
    responses pass untouched and count as ``neardup/unjudged/<reason>``; their items are judged
    by the pipeline from their content field. An empty or too short page passes, recorded as
    not judged (``neardup/unjudged/empty``, ``too_short``).
    """

    def __init__(self, session: CrawlSession) -> None:
        self.session = session

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDupDownloaderMiddleware:
        return cls(CrawlSession.for_crawler(crawler))

    async def process_request(self, request: Request, spider: Any = None) -> None:
        if not request.meta.get(FETCH):  # a request of the crawl's own, not one read from the index
            self.session.hosts.asked(request.url)
        urls = self.session.urls
        if urls is not None:  # a predicted copy of a page this crawl fetched: IgnoreRequest
            await urls.before_download(request, spider)

    async def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        if request.meta.get("dont_obey_robotstxt") and request.url.endswith("/robots.txt"):
            return response  # Scrapy's own robots.txt fetch: not a page of the crawl
        session = self.session
        reason = self.skip_reason(request, response)
        if reason:
            session.unjudged(reason)
            spawn(session.recovery.fetched(request))
            if reason == "opted_out":  # nor are the page's items judged by the pipeline
                request.meta[PAGE_VERDICT] = Verdict(response.url, None, False, skip_reason=reason)
            return response  # any other page's items (JSON, a feed) are judged by the pipeline
        spider = session.crawler.spider if session.crawler else spider
        await session.room()
        check = session.check(request, response, spider)
        if session.policy.action is Action.IGNORE or not session.spider_waits:
            judged(session, request, await check)  # decided before the spider, as documented
        else:  # the spider middleware waits for it: this response leaves the downloader now
            request.meta[PAGE_VERDICT] = check
            request.meta[_PASSED_AT] = time.monotonic()
        return response

    @staticmethod
    def skip_reason(request: Request, response: Response) -> str | None:
        """Why a response is passed on unjudged, or None to judge it."""
        if request.meta.get("neardup_skip"):
            return "opted_out"
        if not 200 <= response.status < 300:
            return "http_status"
        content_type = (response.headers.get(b"Content-Type") or b"").split(b";")[0].strip().lower()
        if not (isinstance(response, HtmlResponse) or content_type in HTML_TYPES):
            return "not_html"
        return None  # an empty page too: recorded (not judged), so that it is met again by its URL


def judged(session: CrawlSession, request: Request, verdict: Verdict) -> None:
    """What the page's verdict does: counted, logged, in ``request.meta["neardup"]``, and in
    ignore mode the response ignored (``IgnoreRequest``)."""
    request.meta[PAGE_VERDICT] = verdict  # for NearDupSpiderMiddleware: the page's items
    policy = session.policy
    outcome = policy.outcome(verdict)
    if outcome is not None:
        session.acted(verdict, outcome)
    if outcome is Outcome.IGNORED:
        raise IgnoreRequest(why_dropped(verdict))
    if policy.action is Action.TAG or verdict.duplicate or verdict.canonical:
        request.meta["neardup"] = policy.as_dict(verdict)


class NearDupSpiderMiddleware:
    """Waits for a page's verdict before the spider's callback runs, and links each item to it,
    so the pipeline reuses it.

    A generator callback (one that yields) runs as its output is read: it finds the verdict in
    ``response.meta["neardup"]``; a callback that returns a list has run already.

    An item holding its page's text is then never judged again (nor found to duplicate its
    own page), and a duplicate page's items are dropped. It also tells the session how many
    items the spider took from each page: a copy's items are kept when its original gave
    none. Reads ``response.meta["_neardup_verdict"]``, set by the downloader middleware;
    writes nothing to items.
    """

    def __init__(self, session: CrawlSession) -> None:
        self.session = session

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDupSpiderMiddleware:
        return cls(CrawlSession.for_crawler(crawler))

    async def process_start(self, start: AsyncIterable[Any]) -> AsyncIterator[Any]:
        async for output in start:
            if isinstance(output, Request):
                self.session.hosts.asked(output.url)
            yield output

    async def process_spider_output(
        self, response: Response, result: AsyncIterable[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        verdict = await self._verdict(response)
        items = 0
        try:
            async for output in result:
                items += self._passed(output, verdict)
                yield output
        finally:
            if verdict is not None:
                self.session.page_parsed(verdict, items)

    async def _verdict(self, response: Response) -> Verdict | None:
        """The page's verdict, waited for when its check is still under way: before a spider's
        generator callback runs (its body runs as its output is read), so it finds the verdict in
        ``response.meta["neardup"]``."""
        meta = response.meta
        pending = meta.get(PAGE_VERDICT)
        if not isinstance(pending, asyncio.Future):
            return pending
        verdict = await pending
        self.session.waited(time.monotonic() - meta.pop(_PASSED_AT, time.monotonic()))
        judged(self.session, response.request or Request(response.url, meta=meta), verdict)
        return verdict

    def _passed(self, output: Any, verdict: Verdict | None) -> int:
        """Note what the spider yields: a request's host is one the crawl asks for; an item (1)
        takes its page's verdict."""
        if isinstance(output, Request):
            self.session.hosts.asked(output.url)
            return 0
        if verdict is None:
            return 0
        self.session.link_item(output, verdict)
        return 1
