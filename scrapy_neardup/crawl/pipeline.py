"""NearDupPipeline: judge items, or reuse the middleware's verdict on the page they came from."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

from ..detector import Arrival
from ..text import item_extractor
from ..verdict import Verdict
from .policy import Action, Outcome, why_dropped
from .session import CrawlSession

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

# Fields tried, in order, when NEARDUP_ITEM_FIELD is not set (those of `scrapy-neardup scan`).
ITEM_FIELDS = ("html", "body", "text", "content")


class NearDuplicateItem(DropItem):
    """An item dropped as a near-duplicate; logged at DEBUG, not as a warning."""

    def __init__(self, verdict: Verdict) -> None:
        why = why_dropped(verdict)
        if verdict.duplicate:
            why += f" ({verdict.method}, similarity {verdict.similarity or 0.0:.3f})"
        super().__init__(why, log_level="DEBUG")
        self.verdict = verdict


class NearDupPipeline:
    """Drops or tags items whose content near-duplicates an item or page seen before.

    An item yielded from a page the middleware judged takes that page's verdict (handed over
    by NearDupSpiderMiddleware), so no page is fingerprinted twice and a duplicate page's
    items are dropped. Any other item (of a JSON or XML response, a feed) is judged by its
    ``NEARDUP_ITEM_FIELD`` (by default the first of ``html``, ``body``, ``text``,
    ``content`` it has), under the URL in ``NEARDUP_URL_FIELD``: a value that starts with a
    tag or holds a common one (``<p>``, ``<div>``, ...) is HTML: a whole page goes through the
    configured extractor, a fragment (no ``<html>`` or ``<body>``) through ``plain``; any
    other value is main text as it is. Drop mode raises ``NearDuplicateItem`` (a
    ``DropItem``, logged at DEBUG) for a sure duplicate; tag mode, and a match under
    ``NEARDUP_DROP_ABOVE``, store the verdict dict in ``NEARDUP_TAG_FIELD`` (default
    ``neardup``). Items with neither a known page nor a content field pass unchanged and
    count as ``neardup/unjudged/no_content`` (the first one logs a warning naming
    ``NEARDUP_ITEM_FIELD``).
    """

    def __init__(self, session: CrawlSession) -> None:
        self.session = session
        self._items = 0
        self._warned_field = False
        self._warned_content = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDupPipeline:
        return cls(CrawlSession.for_crawler(crawler))

    async def process_item(self, item: Any, spider: Any = None) -> Any:
        adapter = ItemAdapter(item)
        session = self.session
        verdict = session.verdict_for(item)
        own = verdict is None  # not a judged page's item: judged here, by its content
        if own:
            content = self._content(adapter)
            if content is None:
                session.unjudged("no_content")
                self._warn_no_content(adapter)
                return item
            self._items += 1
            url = adapter.get(session.settings.url_field)
            url = url if isinstance(url, str) else None
            name = url or f"item:{self._items}"
            page = Arrival(name, content, extractor=item_extractor(content), item=True, named=bool(url))
            verdict = await session.judge(page)
        outcome = await session.item_outcome(verdict)
        if outcome is not None and (own or outcome not in (Outcome.TAGGED, Outcome.UNCERTAIN)):
            session.acted(verdict, outcome)  # a page's tag is counted once, by the page
        if outcome in (Outcome.DROPPED, Outcome.UNCHANGED):
            raise NearDuplicateItem(verdict)
        if session.policy.action is Action.TAG or outcome in (Outcome.UNCERTAIN, Outcome.FIRST):
            self._tag(adapter, verdict)
        return item

    def _content(self, adapter: ItemAdapter) -> bytes | str | None:
        names = (self.session.settings.item_field,) if self.session.settings.item_field else ITEM_FIELDS
        for name in names:
            value = adapter.get(name)
            if isinstance(value, (bytes, str)) and value:
                return value
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                return "\n".join(value)
        return None

    def _warn_no_content(self, adapter: ItemAdapter) -> None:
        """Say once, while no item has had content yet, that items pass unjudged and which setting
        names their content: a spider whose field has another name is otherwise never checked."""
        names = (self.session.settings.item_field,) if self.session.settings.item_field else ITEM_FIELDS
        if self._items or self._warned_content or any(name in adapter for name in names):
            return  # the field is there, only empty (an empty page's item): no setting to fix
        self._warned_content = True
        setting = self.session.settings.item_field
        tried = repr(setting) if setting else ", ".join(ITEM_FIELDS)
        fields = ", ".join(map(str, adapter.keys())) or "none"
        logger.warning(
            "scrapy-neardup: an item of %s has no content field (tried %s; it has %s): such items pass "
            "unjudged (neardup/unjudged/no_content). Set NEARDUP_ITEM_FIELD to the field that holds "
            "their HTML or text", type(adapter.item).__name__, tried, fields,
        )  # fmt: skip

    def _tag(self, adapter: ItemAdapter, verdict: Verdict) -> None:
        field = self.session.settings.tag_field
        try:
            adapter[field] = self.session.policy.as_dict(verdict)
        except KeyError:  # a declared Item without that field: keep the item, say why once
            if not self._warned_field:
                logger.error(
                    "NEARDUP_TAG_FIELD: item class %s has no field %r; declare it or set NEARDUP_TAG_FIELD "
                    "(items pass untagged)", type(adapter.item).__name__, field,
                )  # fmt: skip
                self._warned_field = True
