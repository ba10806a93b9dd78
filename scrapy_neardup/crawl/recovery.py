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
from ..index import Store
from . import kept_requests
from .hosts import Hosts
from .url_rules import FETCH

logger = logging.getLogger("scrapy_neardup")

AGAIN = "_neardup_again"  # a request's meta: the record of a dead run's page it fetches again


class Recovery:
    """The crawl's heartbeat, and the fetching again of what dead runs admitted."""

    def __init__(self, index: Store, stats: Any, crawler: Any, hosts: Hosts) -> None:
        self.index = index
        self.stats = stats
        self.crawler = crawler
        self.hosts = hosts
        self._failed = False

    def beat(self) -> int:
        """Show this run alive; claim the dead runs nobody fetches again, and schedule their pages.
        The number scheduled (or waiting for their host). A failure of the index is said once:
        the next beat tries again."""
        try:
            scheduled = sum(self._recover(dead) for dead in self.index.beat())
        except Exception as exc:
            (logger.debug if self._failed else logger.warning)(
                "scrapy-neardup: could not show this crawl alive in its index (%s); tried again in a "
                "few seconds", one_line(f"{type(exc).__name__}: {exc}"),
            )  # fmt: skip
            self._failed = True
            return 0
        self._failed = False
        return scheduled

    def _recover(self, dead: int) -> int:
        """Claim a dead run and schedule its pages, unless none can be fetched from here yet (a
        crawler that has asked for no page of their hosts): then another crawler, or this one
        later, takes them."""
        engine, spider = getattr(self.crawler, "engine", None), getattr(self.crawler, "spider", None)
        if engine is None or spider is None:
            return 0
        pages = self.index.pending(dead)
        if not any(self.hosts.allows(_url(kept)) for _, kept in pages) or not self.index.claim(dead):
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
            "(counted as neardup/recovery/refused)", doc, dead, self.index.path, one_line(why),
        )  # fmt: skip
        self.index.fetched_again(doc, dead)

    def fetching(self, request: Request) -> None:
        """Before a page fetched again is judged: its dead run is dead for this crawler too (it
        may not have looked since), so the page is a revisit of that run's, not a copy."""
        again = _again(request)
        if again and again[0] not in self.index.runs.dead:
            self.beat()

    def fetched(self, request: Request) -> None:
        """A page fetched again has its response: no longer the dead run's to recover."""
        again = _again(request)
        if again:
            try:
                self.index.fetched_again(again[1], again[0])
            except Exception as exc:  # fetched again by the next crawl: a copy, never a loss
                logger.debug("scrapy-neardup: could not mark page #%d as fetched again (%r)", again[1], exc)


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
