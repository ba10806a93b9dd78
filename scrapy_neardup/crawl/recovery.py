"""What a dead run may not have delivered, fetched again; and which hosts the crawl asks for.

A run shows it is alive with a heartbeat in the index (``Recovery.beat``, every
``runs.BEAT_EVERY`` seconds). A run that died without closing (killed, its machine lost) had
admitted pages whose items may still have been in its feed's buffer, while the other crawlers
dropped their copies: one live crawler claims it in the index and schedules again, with
``dont_filter``, the request of every page it admitted (kept as data, ``kept_requests``). Each
is judged as a revisit of the dead run's record: its items go out, and the content is this
run's from then on. A request read from the index is fetched only on a host the crawl itself
asks for (``hosts.Hosts``): a planted row cannot point a crawler elsewhere.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from scrapy.http import Request

from ..exceptions import one_line
from ..index.lanes import Lanes
from . import kept_requests
from .background import spawn
from .hosts import Hosts
from .url_rules import FETCH

logger = logging.getLogger("scrapy_neardup")

AGAIN = "_neardup_again"  # a request's meta: the record of a dead run's page it fetches again


class Recovery:
    """The crawl's heartbeat, and the fetching again of what dead runs admitted. The index work
    runs on the index's lanes (``lanes``), never on the crawl's thread while it runs."""

    def __init__(self, lanes: Lanes | None, stats: Any, crawler: Any, hosts: Hosts) -> None:
        self.lanes = lanes
        self.stats = stats
        self.crawler = crawler
        self.hosts = hosts
        self._failed = False

    async def beat(self) -> int:
        """Show this run alive; claim the dead runs nobody fetches again, and schedule their pages.
        The number scheduled (or waiting for their host). A failure of the index is said once:
        the next beat tries again."""
        try:
            claimed = await self.lanes.run(lambda lane: self._claims(lane.index))
        except Exception as exc:
            return self._beat_failed(exc)
        return self._scheduled(claimed)

    def beat_now(self) -> int:
        """``beat``, waited for: when the crawl is idle (nothing else to do)."""
        try:
            claimed = self.lanes.call(lambda lane: self._claims(lane.index))
        except Exception as exc:
            return self._beat_failed(exc)
        return self._scheduled(claimed)

    def _beat_failed(self, exc: Exception) -> int:
        (logger.debug if self._failed else logger.warning)(
            "scrapy-neardup: could not show this crawl alive in its index (%s); tried again in a "
            "few seconds", one_line(f"{type(exc).__name__}: {exc}"),
        )  # fmt: skip
        self._failed = True
        return 0

    def _claims(self, index: Any) -> list[tuple[int, list[tuple[int, bytes]]]]:
        """On a lane: the beat, and the dead runs this crawler claims with their pages, unless none
        can be fetched from here yet (a crawler that asked for no page of their hosts): then
        another crawler, or this one later, takes them."""
        claimed = []
        for dead in index.beat():
            pages = index.pending(dead)
            if any(self.hosts.allows(_url(kept)) for _, kept in pages) and index.claim(dead):
                claimed.append((dead, pages))
        return claimed

    def _scheduled(self, claimed: list[tuple[int, list[tuple[int, bytes]]]]) -> int:
        self._failed = False
        return sum(self._recover(dead, pages) for dead, pages in claimed)

    def _recover(self, dead: int, pages: list[tuple[int, bytes]]) -> int:
        engine, spider = getattr(self.crawler, "engine", None), getattr(self.crawler, "spider", None)
        if engine is None or spider is None:
            return 0
        logger.info(
            "scrapy-neardup: crawl run %d died without closing: fetching again the %d pages it admitted, "
            "whose items it may not have delivered", dead, len(pages),
        )  # fmt: skip
        self.stats.inc_value("neardup/recovery/runs")
        scheduled = 0
        for doc, kept in pages:
            try:
                request = kept_requests.revive(kept, spider)
            except ValueError as exc:
                self._refused(doc, dead, str(exc))
                continue
            request.meta[AGAIN] = [dead, doc]
            request.meta[FETCH] = True
            self.hosts.fetch(request.replace(dont_filter=True), engine.crawl)
            scheduled += 1
        self.stats.inc_value("neardup/recovery/scheduled", scheduled)
        return scheduled

    def _refused(self, doc: int, dead: int, why: str) -> None:
        """A pending row that is no request this crawl would keep: said once, counted, let go."""
        self.stats.inc_value("neardup/recovery/refused")
        (logger.debug if self.stats.get_value("neardup/recovery/refused") > 1 else logger.warning)(
            "scrapy-neardup: page #%d of dead run %d in index %s cannot be fetched again: %s; left out "
            "(counted as neardup/recovery/refused)", doc, dead, self.lanes.index.path, one_line(why),
        )  # fmt: skip
        spawn(self._fetched(doc, dead))

    async def fetching(self, request: Request) -> None:
        """Before a page fetched again is judged: its dead run is dead for this crawler too (it
        may not have looked since), so the page is a revisit of that run's, not a copy."""
        again = _again(request)
        if again and again[0] not in self.lanes.index.runs.dead:
            await self.beat()

    async def fetched(self, request: Request) -> None:
        """A page fetched again has its response: no longer the dead run's to recover."""
        again = _again(request)
        if again:
            await self._fetched(again[1], again[0])

    async def _fetched(self, doc: int, dead: int) -> None:
        try:
            await self.lanes.run(lambda lane: lane.index.fetched_again(doc, dead))
        except Exception as exc:  # fetched again by the next crawl: a copy, never a loss
            logger.debug("scrapy-neardup: could not mark page #%d as fetched again (%r)", doc, exc)


def _again(request: Request) -> tuple[int, int] | None:
    """(dead run, document) of a request that fetches a dead run's page again."""
    again = request.meta.get(AGAIN)
    if isinstance(again, list) and len(again) == 2 and all(type(n) is int for n in again):
        return again[0], again[1]
    return None


def _url(kept: bytes) -> str:
    """The URL a kept request names, "" when it names none (it is refused when revived)."""
    try:
        url = json.loads(kept).get("url")
    except (ValueError, AttributeError, RecursionError):
        return ""
    return url if isinstance(url, str) else ""
