"""The crawl's learned URL rules: requests for predicted copies skipped before their download.

Each judged page's URL and verdict feed ``urls.UrlModel``; the rules' evidence and status live
in the index, so a re-run and every crawler sharing the index use them. A skipped request is
kept in the index with the rules that predicted it: when one of them is revoked, it is
scheduled again with its callback and meta, by this crawl or, after a kill, the resumed one.
Before the crawl closes, each rule in force has enough of its skipped requests fetched, drawn
at random, to show a counter-example if it changes a few of the pages it skipped.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request, Response

from ..exceptions import one_line
from ..index.lanes import Lanes
from ..url_rule import MAX_ERROR, MISSED_SHARE, Rule, RuleKey, adopt_after, checks_needed, read_rule
from ..urls import EXPLORE, UrlModel, explored
from ..verdict import Verdict
from . import kept_requests
from .background import spawn
from .batches import Batch
from .hosts import Hosts

logger = logging.getLogger("scrapy_neardup")

REFRESH = 100  # judged pages between two readings of the rules other crawlers of the index changed
STATUS_STAT = {
    "adopted": "neardup/urls/adopted",
    "refused": "neardup/urls/refused",
    "revoked": "neardup/urls/revoked",
}
# A request's meta: True fetches it whatever the rules say; the rules a fetched predicted copy checks.
FETCH, CHECKS = "neardup_fetch", "_neardup_checks"


@dataclass(frozen=True)
class Skipped:
    """A request skipped as a predicted copy of ``target`` by ``rules`` (their keys' text): its
    row in the index, and the request as this crawl kept it (checked from here, not the index)."""

    url: str
    target: str
    rules: tuple[str, ...]
    skip: int
    kept: bytes


class UrlRules:
    """The learned rules of one crawl: ``before_download`` skips predicted copies, ``learn`` adds
    a judged page's evidence, and revoked rules' requests are scheduled again."""

    def __init__(
        self,
        lanes: Lanes | None,
        stats: Any,
        crawler: Any = None,
        hosts: Hosts | None = None,
        explore: float = EXPLORE,
        debug: bool = False,
        observe: bool = False,
        sure: Callable[[Verdict], bool] = lambda verdict: True,
        verify: float = MISSED_SHARE,
        max_error: float = MAX_ERROR,
    ) -> None:
        self.lanes = lanes  # the index's lanes: its work runs there, never on the crawl's thread
        self.explore = explore
        self.verify_share = verify  # a rule changing this share of its skips is caught before close
        self.adopt_at = adopt_after(max_error)  # pages of the same content, no counter-example
        self.observe = observe  # tag mode: learn, count what would be skipped, skip nothing
        self.sure = sure  # whether a duplicate is sure (the crawl's bar): else it is an original
        self.salt = random.getrandbits(32)  # the share explored is drawn afresh in every run
        self._draw = random.Random(self.salt)  # which skipped requests the crawl checks before closing
        self._checked: Counter[str] = Counter()  # a rule's predicted copies this crawl fetched
        self._predicted: Counter[str] = Counter()  # a rule's predicted copies this crawl met
        # A rule's skipped requests not yet drawn from: how many, and a uniform sample of them
        # (reservoir sampling) as large as any draw can be, so memory stays flat on a long crawl.
        self._unchecked: dict[str, tuple[int, list[Skipped]]] = {}
        self._sample_size = checks_needed(10**9, verify)
        self.debug = debug  # log every skipped request, not only the first
        self._logged = False
        self._failed = False  # an index failure was said
        self.stats = stats
        self.crawler = crawler
        self.hosts = hosts or Hosts()  # what a request read from the index may be fetched from
        self.model = UrlModel()
        self._judged = 0
        self._withdrawn: set[str] = set()  # the rules withdrawn when their skips were last revived
        self._reviving = 0  # revivals under way: each may schedule requests, so the crawl stays open
        self._unread_said = False  # unreadable rules were said
        # Skipped requests kept in the index, many a transaction: one round trip for a burst.
        self._skips: Batch = Batch(lambda rows: lanes.run(lambda lane: lane.index.add_url_skips(rows)))

    def start(self, forget: bool) -> None:
        """Read the rules the index holds (NEARDUP_URL_RULES_RESET forgets them first)."""
        if forget:
            self.lanes.call(lambda lane: lane.index.forget_url_rules())
        self._read_rules(self.lanes.call(lambda lane: lane.index.url_rules()))

    @property
    def _path(self) -> Any:
        return getattr(getattr(self.lanes, "index", None), "path", "")

    def _read_rules(self, rows: list[tuple[str, Any, Any, Any]]) -> bool:
        """Take the rules' status from the index's rows; whether any changed."""
        changed, unread = False, []
        for row in rows:
            try:
                key, same, differ, status = read_rule(row)
            except (ValueError, TypeError) as exc:
                unread.append(str(exc))
                continue
            changed |= self._take(key, same, differ, status)
        if unread and not self._unread_said:
            logger.warning(
                "scrapy-neardup: %d URL rules of index %s could not be read and are left out (%s)",
                len(unread), self._path, one_line(unread[0]),
            )  # fmt: skip
            self._unread_said = True
        if changed:
            self.model.rules_changed()
        return changed

    def _take(self, key: RuleKey, same: int, differ: int, status: str) -> bool:
        """Take a rule's totals and status from the index; whether its status changed."""
        rule = self.model.rules.setdefault(key, Rule(key))
        changed = rule.status != status
        rule.same, rule.differ, rule.status = same, differ, status
        return changed

    # --- before the download ---------------------------------------------------------------

    async def before_download(self, request: Request, spider: Any) -> None:
        """Raise IgnoreRequest for a predicted copy of a page this crawl fetched (but for the
        explored share); the request is kept for its revival (in the index, in batches: this
        request waits for its row, the crawl does not)."""
        if request.meta.get(FETCH) or request.meta.get("neardup_skip"):
            return
        spider = spider or getattr(self.crawler, "spider", None)  # Scrapy 2.13 passes none
        if spider is not None and getattr(spider, "neardup_learn_urls", True) is False:
            return
        predicted = self.model.predict(request.url)
        if predicted is None:
            return
        target, keys = predicted
        texts = [key.text() for key in keys]
        if self.observe:  # tag mode: fetched, and kept for the report as what the rules would skip
            self.stats.inc_value("neardup/urls/would_skip")
            spawn(self._note(texts, request.url, target))
            return
        self._predicted.update(texts)
        if explored(request.url, self.explore, self.salt):
            request.meta[CHECKS] = (target, texts)
            self._checked.update(texts)
            self.stats.inc_value("neardup/urls/explored")
            return
        kept = kept_requests.keep(request, spider)
        if kept is None:  # a callback no spider method, meta that is not plain data: fetched
            self.stats.inc_value("neardup/urls/not_kept")
            return
        try:
            skip = await self._skips.add((texts, request.url, target, kept))
        except Exception as exc:  # a full disk, Redis gone
            logger.debug(
                "scrapy-neardup: fetching %s, a predicted copy that cannot be kept (%r)", request.url, exc
            )
            return
        self.stats.inc_value("neardup/urls/skipped")
        if not all(map(self.model.enforces, keys)) and await self._fetch_now(skip, request):
            return
        self._sample(Skipped(request.url, target, tuple(texts), skip, kept))
        reason = f"predicted copy of {target} (learned URL rules: {_named(keys)})"
        if self.debug or not self._logged:
            more = "" if self.debug else " - no more will be shown (see NEARDUP_DEBUG)"
            logger.debug("scrapy-neardup: skipped %s, a %s%s", request.url, reason, more)
            self._logged = True
        raise IgnoreRequest(reason)

    async def _fetch_now(self, skip: int, request: Request) -> bool:
        """A rule withdrawn while its skip was being written: the revival may have read the
        index before the row was in it. Whether this crawler claimed the row, so fetches the
        request now (else another revival claimed it and schedules it)."""
        try:
            claimed = await self.lanes.run(lambda lane: lane.index.claim_url_skips([skip]))
        except Exception as exc:  # the index failed: fetched, the row left for a later revival
            logger.debug("scrapy-neardup: could not claim skipped request #%s (%r)", skip, exc)
            return True
        if claimed:
            request.meta[FETCH] = True
            self.stats.inc_value("neardup/urls/revived")
        return bool(claimed)

    async def _note(self, texts: list[str], url: str, target: str) -> None:
        """Keep a request tag mode fetched that the rules would have skipped (for the report)."""
        try:
            await self._skips.add((texts, url, target, b""))
        except Exception as exc:  # a full disk, Redis gone: the report lists one fewer
            logger.debug("scrapy-neardup: could not note %s as a would-be skip (%r)", url, exc)

    # --- after a page is judged ------------------------------------------------------------

    async def learn(self, request: Request, response: Response, verdict: Verdict) -> None:
        """Add a judged page's evidence: its URLs (as requested, and after redirects) and what
        its content is a copy of. A failure of the index (a full disk, Redis gone) costs the
        evidence, never the page: said once, the rules learn on when it is back."""
        if not verdict.judged or verdict.doc_id is None:
            return
        try:
            await self._learn(request, response, verdict)
        except Exception as exc:
            (logger.debug if self._failed else logger.warning)(
                "scrapy-neardup: URL rules could not record what %s teaches (%s); the page goes on",
                response.url, one_line(f"{type(exc).__name__}: {exc}"),
            )  # fmt: skip
            self._failed = True

    async def _learn(self, request: Request, response: Response, verdict: Verdict) -> None:
        # A page let through under the sure bar is an original of its own content, not a copy of
        # the page it resembles: evidence pairs it with its own copies only.
        same = verdict.duplicate_of is not None and not (verdict.duplicate and not self.sure(verdict))
        cluster: int | None = verdict.duplicate_of if same else verdict.doc_id
        if verdict.revisit == "unchanged" or verdict.left_out:
            # The same as its own earlier version says nothing of other pages; nor does a copy
            # that differs by text the extractor left out (its comments): unknown, not the same.
            cluster = None
        cluster = self.model.cluster_of_text(verdict.content, cluster)
        changes: dict[RuleKey, list[int]] = {}
        harmless: set[RuleKey] = set()
        for url in dict.fromkeys([*request.meta.get("redirect_urls", ()), request.url, response.url]):
            evidence = self.model.observe(url, cluster)
            harmless |= evidence.harmless
            for key in evidence.same:
                changes.setdefault(key, [0, 0])[0] += 1
            for key in evidence.differ:
                changes.setdefault(key, [0, 0])[1] += 1
        checks = request.meta.get(CHECKS)
        predicted = self.model.cluster_of(checks[0]) if checks and cluster is not None else None
        if predicted not in (None, cluster):  # a rule predicted a copy of other content
            used = [RuleKey.parse(text) for text in checks[1]]  # written by this crawl
            harmless |= self.model.harmless_for(checks[0])  # what the predicted page's copies clear
            if not {key for key, (_, differ) in changes.items() if differ} & set(used):
                for key in self.model.blamed(used, harmless):  # the page's pairs did not say which
                    changes.setdefault(key, [0, 0])[1] += 1
        if changes:
            texts = {key.text(): key for key in changes}
            evidence = {text: (changes[key][0], changes[key][1]) for text, key in texts.items()}
            totals = await self.lanes.run(lambda lane: lane.index.add_url_evidence(evidence, self.adopt_at))
            self._weigh({texts[text]: total for text, total in totals.items()}, response.url)
        self._judged += 1
        if self._judged % REFRESH == 0:
            rows = await self.lanes.run(lambda lane: lane.index.url_rules())
            if self._read_rules(rows):
                await self.revive_withdrawn()

    def _weigh(self, totals: dict[RuleKey, tuple[int, int, str, str]], url: str = "") -> None:
        """Take in the rules' totals and the status the index gave them: count and log the rules
        adopted, refused or revoked (by the page at ``url``), and schedule again what the rules
        withdrawn skipped."""
        changed = False
        for key, (same, differ, old, new) in totals.items():
            changed |= self._take(key, same, differ, new)
            if new == old:
                continue
            self.stats.inc_value(STATUS_STAT[new])
            by = f", the last by {url}" if new in ("refused", "revoked") and url else ""
            (logger.debug if new == "refused" else logger.info)(
                "scrapy-neardup: URL rule %s %s (%d pages of the same content, %d counter-examples%s)",
                _named([key]), new, same, differ, by,
            )  # fmt: skip
        if changed:
            self.model.rules_changed()
            self.revive_later()

    # --- checking before the crawl closes ----------------------------------------------------

    def _sample(self, skipped: Skipped) -> None:
        """Keep a skipped request in each of its rules' samples (reservoir sampling)."""
        for text in skipped.rules:
            met, sample = self._unchecked.get(text, (0, []))
            met += 1
            if len(sample) < self._sample_size:
                sample.append(skipped)
            elif (at := self._draw.randrange(met)) < self._sample_size:
                sample[at] = skipped
            self._unchecked[text] = (met, sample)

    def check_before_close(self) -> int:  # the crawl is idle: the index is waited for
        """Schedule, with their callbacks and meta, enough of this crawl's skipped requests, drawn
        at random, that each rule in force has had ``url_rule.checks_needed`` of its predicted
        copies downloaded (the explored ones count): a rule that changes a few of the pages it
        skipped, wherever they came in the crawl, then meets a counter-example and everything
        it skipped is fetched. The number scheduled (the crawl stays open for them)."""
        drawn: dict[str, Skipped] = {}
        for text, (_, sample) in self._unchecked.items():
            if not sample or not self.model.enforces(RuleKey.parse(text)):
                continue
            needed = checks_needed(self._predicted[text], self.verify_share) - self._checked[text]
            fresh = [skipped for skipped in sample if skipped.url not in drawn]
            for skipped in self._draw.sample(fresh, max(0, min(needed, len(fresh)))):
                drawn[skipped.url] = skipped
                self._checked.update(skipped.rules)
        self._unchecked.clear()
        if not drawn:
            return 0
        try:
            scheduled = self._schedule(drawn)
        except Exception as exc:  # the index failed: the skipped requests wait there
            logger.warning(
                "scrapy-neardup: could not check URL rules before closing (%s)",
                one_line(f"{type(exc).__name__}: {exc}"),
            )
            return 0
        self.stats.inc_value("neardup/urls/checked", scheduled)
        return scheduled

    def _schedule(self, drawn: dict[str, Skipped]) -> int:
        """Schedule again the skipped requests drawn, each checking its prediction: those this
        crawler claims in the index (another crawler sharing it may have scheduled one already),
        as this crawl kept them."""
        engine, spider = getattr(self.crawler, "engine", None), getattr(self.crawler, "spider", None)
        if engine is None or spider is None:
            return 0
        by_row = {skipped.skip: skipped for skipped in drawn.values()}
        scheduled = 0
        for skip in self.lanes.call(lambda lane: lane.index.claim_url_skips(sorted(by_row))):
            skipped = by_row[skip]
            request = kept_requests.revive(skipped.kept, spider)
            request.meta[FETCH] = True
            request.meta[CHECKS] = (skipped.target, list(skipped.rules))
            engine.crawl(request.replace(dont_filter=True))
            scheduled += 1
        return scheduled

    # --- revival ----------------------------------------------------------------------------

    @property
    def reviving(self) -> bool:
        """Whether requests may still be scheduled again: the crawl must not close yet."""
        return self._reviving > 0

    def revive_later(self) -> None:
        """Schedule again what withdrawn rules skipped, beside the crawl."""
        self._keep_open(self.revive_withdrawn())

    def _keep_open(self, work: Coroutine[Any, Any, None]) -> None:
        """Spawn ``work``, which may schedule requests; the crawl stays open until it ends (a
        request claimed in the index as revived, then dropped by a closing engine, is lost)."""
        self._reviving += 1

        async def tracked() -> None:
            try:
                await work
            finally:
                self._reviving -= 1

        spawn(tracked())

    async def revive_withdrawn(self) -> None:
        """Schedule again what withdrawn rules skipped (this crawl withdrew them, another crawler
        did, or this crawl was killed before it could)."""
        withdrawn = {key.text() for key in self.model.withdrawn()}
        try:
            if withdrawn != self._withdrawn and await self.revive(sorted(withdrawn)):
                self._withdrawn = withdrawn
        except Exception as exc:  # the index failed: the requests wait there for the next try
            logger.warning(
                "scrapy-neardup: could not schedule again what withdrawn URL rules skipped (%s); "
                "tried again when the rules next change", one_line(f"{type(exc).__name__}: {exc}"),
            )  # fmt: skip

    async def revive(self, rules: list[str]) -> bool:
        """Schedule again, with their callbacks and meta, the requests these rules skipped (each
        once, by the crawler that claims it); whether it could (not before the crawl's start).
        A row on a host this crawl does not ask for (yet) waits; one that is no request this
        crawl would keep is said, counted and let go."""
        engine = getattr(self.crawler, "engine", None)
        spider = getattr(self.crawler, "spider", None)
        if engine is None or spider is None:
            return False
        unread = []
        for skip, url, kept in await self.lanes.run(lambda lane: lane.index.url_skips(rules)):
            try:
                request = kept_requests.revive(kept, spider, url)
            except ValueError as exc:  # the spider changed its callbacks, or the row is not ours
                unread.append(skip)
                (logger.debug if self.stats.get_value("neardup/urls/unreadable") else logger.warning)(
                    "scrapy-neardup: skipped request #%s of index %s cannot be scheduled again: %s",
                    skip, self._path, one_line(str(exc)),
                )  # fmt: skip
                self.stats.inc_value("neardup/urls/unreadable")
                continue
            request.meta[FETCH] = True
            self.hosts.fetch(request.replace(dont_filter=True), partial(self._claim, skip, engine))
        if unread:  # an unreadable row is said once, not at every try
            await self.lanes.run(lambda lane: lane.index.claim_url_skips(unread))
        return True

    def _claim(self, skip: int, engine: Any, request: Request) -> None:
        self._keep_open(self._claimed(skip, engine, request))

    async def _claimed(self, skip: int, engine: Any, request: Request) -> None:
        """Schedule a revived request if this crawler is the one that claims its row."""
        try:
            claimed = await self.lanes.run(lambda lane: lane.index.claim_url_skips([skip]))
        except Exception as exc:  # the index failed: the row waits there for the next try
            logger.debug("scrapy-neardup: could not claim skipped request #%s (%r)", skip, exc)
            return
        if claimed:
            engine.crawl(request)
            self.stats.inc_value("neardup/urls/revived")


def _named(keys: list[RuleKey]) -> str:
    """Rules in words, for log lines and reasons."""
    return "; ".join(key.words() for key in keys)
