"""The decision on one page, inside one index transaction: candidates, comparison, rank, record.

No index decides: an index finds candidates and stores what is decided here. The road
(``detector.Detector``) opens the transaction, and tries again when another process changed
what it read.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .comments import content_of
from .config import DedupConfig
from .fingerprint import Fingerprint, needed_methods
from .index.base import Earlier
from .methods import counts_terms, decision_order, rank, with_stats
from .signatures.spotsigs import spots32
from .verdict import Verdict
from .verify import compare

if TYPE_CHECKING:
    from .index.ledger import Ledger
    from .urls import UrlModel

# The similarity a near-duplicate needs, on strong evidence, to be dropped (exact copies always are):
# over every labelled set, the bar that drops no distinct page of the LLVM docs site (benchmarks,
# docs/quality.md "The sure bar").
SURE_SIMILARITY = 0.65


# The method of a page met again within one crawl under a URL this crawl recorded (by this run or
# one beside it): a copy of what it held then, while its content still matches it.
SAME_URL = "url"


def sure(method: str | None, similarity: float | None, weak: bool, drop_above: float) -> bool:
    """Whether a match is sure enough to drop: an exact copy and a URL met again within one
    crawl always; a near one at ``drop_above`` or more, on strong evidence (a bar of 0: every
    match). The crawl drops by it, and the index records by it: a page not sure enough to drop
    goes on, so it is recorded as an original."""
    if method in ("exact", SAME_URL) or drop_above <= 0:
        return True
    return not weak and (similarity or 0.0) >= drop_above


class Decision:
    """Judges one fingerprinted page against an index with one configuration and sure bar."""

    def __init__(self, config: DedupConfig, index: Ledger, drop_above: float = SURE_SIMILARITY) -> None:
        self.config = config
        self.index = index
        self.drop_above = drop_above
        needed = needed_methods(config)
        self._verify_methods = tuple(m for m in decision_order() if m in needed)
        self.url_rules: UrlModel | None = None  # the crawl's learned URL rules (None: none)

    def __call__(
        self,
        url: str,
        fp: Fingerprint,
        scope: str,
        source: str | None,
        key: str | None,
        many: bool,
        request: bytes | None = None,
    ) -> Verdict:
        """Find the best earlier match of ``fp`` in its scope and record the page.

        A page not judged is recorded as skipped; a sure duplicate is recorded with what it
        duplicates; any other page is admitted and becomes findable, a page let through with
        the match it resembles. A page whose revisit ``key`` (its canonical URL) this crawl
        recorded already (this run, or one running beside it) is a copy of what it held, while
        its content matches it; one an earlier crawl recorded is a revisit: never a duplicate of
        itself, and its record is updated, not repeated. So is a sure copy of an earlier crawl's
        page that this crawl meets first: its content goes out once a crawl. With ``many`` (items:
        a page may yield several under one URL), a changed one is recorded beside the others, not
        over them.
        ``request``: the page's, kept while this run may not have delivered what it admits.
        """
        index = self.index
        if source is not None:  # the same source twice (two scans at once): a revisit, recorded once
            row = index.source_record(source)
            if row is not None:
                return Verdict(url, row[0], row[1] == "duplicate", skip_reason=row[2], revisit="unchanged")
        earlier = index.earlier(key, scope, many)
        if earlier is not None and earlier.ours and earlier.original is not None:
            again = self._met_again(url, fp, scope, earlier)
            if again is not None:
                return again
            earlier = None  # other content under the URL (an API item's summary): a page of its own
        if not fp.judged:
            if earlier is not None and earlier.status != "skipped":  # a failed fetch keeps the record
                return Verdict(url, earlier.id, False, skip_reason=fp.skip_reason)
            return index.record(url, fp, scope, None, source, key, replace=earlier)
        probe = dataclasses.replace(fp, spots=spots32(fp.spots))
        if counts_terms(self.config) and probe.terms:
            probe = with_stats(probe, self.config, index.term_stats(probe.terms))
        unchanged = self._unchanged(url, probe, scope, earlier, request)
        if unchanged is not None:
            return unchanged
        replace = None if many else earlier
        own_ids = earlier.ids if earlier is not None else frozenset()
        matches = []
        for cand_id, cand in index.candidates(probe, scope):
            if cand_id in own_ids:
                continue
            result = compare(probe, cand, self.config, self._verify_methods)
            if result.duplicate:
                matches.append((rank(result.method), -(result.similarity or 0.0), cand_id, result))
                if matches[-1][0] == 0 and not index.interrupted_runs:
                    break  # an exact copy: nothing ranks higher but an older one
        unconfirmed = index.unconfirmed([m[2] for m in matches])
        best = min(((m[2] in unconfirmed, *m[:3]), m[3]) for m in matches) if matches else None
        match = best and (best[0][3], best[1].similarity, best[1].method)
        weak = best is not None and best[1].weak
        on_unconfirmed = best is not None and best[0][0]  # only pages a dead run admitted
        # A page the crawl lets through (unconfirmed, or not sure) is an original: admitted, so its
        # later copies are sure duplicates of it; its match is kept as a weak link for the report.
        let_through = on_unconfirmed or (bool(match) and not sure(match[2], match[1], weak, self.drop_above))
        if match and not many and not on_unconfirmed:
            first = self._first_this_crawl(url, probe, scope, source, key, match, let_through, replace)
            if first is not None:
                return first
        verdict = index.record(
            url, probe, scope, match, source, key, replace=replace, admit=let_through, request=request
        )
        if on_unconfirmed:
            return dataclasses.replace(verdict, duplicate=False, unconfirmed=True, weak=weak)
        if best is not None and (weak or best[1].comments_apart):
            verdict = dataclasses.replace(verdict, weak=weak, left_out=best[1].comments_apart)
        if replace is None:  # a new page, or another item of a page's URL
            return verdict
        # "unchanged" only while it stays what it was: a duplicate now admitted is new to the output.
        kept = verdict.duplicate and not let_through
        same = kept and earlier.exact is not None and earlier.exact == probe.exact
        return dataclasses.replace(verdict, revisit="unchanged" if same else "changed")

    def _met_again(self, url: str, fp: Fingerprint, scope: str, earlier: Earlier) -> Verdict | None:
        """A page whose URL this crawl recorded already: a copy of what that record holds
        (``SAME_URL``; its similarity to it, where both were judged). Nothing new is recorded: it
        is the same page, met again. None when the page holds other content than the record
        (no match, or a record with none to compare: an item's summary too short to judge)."""
        index, original, similarity = self.index, earlier.original, None
        if fp.judged:
            probe = dataclasses.replace(fp, spots=spots32(fp.spots))
            own = index.signatures([original], scope)
            if not own:
                return None
            same = compare(probe, own[0][1], self.config, self._verify_methods)
            if not same.duplicate:
                return None
            similarity = same.similarity
        index.seen(original, index.clock())
        return Verdict(
            url, earlier.id, True, duplicate_of=original, duplicate_of_url=index.url_of(original),
            similarity=similarity, method=SAME_URL, content=content_of(fp),
        )  # fmt: skip

    def _first_this_crawl(
        self, url: str, probe: Fingerprint, scope: str, source: str | None, key: str | None,
        match: tuple, let_through: bool, replace: Earlier | None,
    ) -> Verdict | None:  # fmt: skip
        """A copy of a page an earlier crawl recorded, met first by this crawl (the re-run meets
        a copy before the page, or never meets the page), is a revisit of that page: its items go
        out, and its content is this crawl's from now on (the page's own copies are copies). So
        is a match the URL rules call the same page, sure or not. None for any other match."""
        doc_id = match[0]
        if not (self.same_by_rules(url, doc_id) or not let_through):
            return None
        if not self.index.from_earlier_crawls([doc_id]):
            return None  # this crawl's own, or one's beside it: a copy
        recorded = self.index.record(url, probe, scope, match, source, key, replace=replace)
        self.index.restamp(doc_id)
        return dataclasses.replace(
            recorded, duplicate=False, doc_id=doc_id, duplicate_of=None, duplicate_of_url=None,
            revisit="unchanged", weak=False,
        )  # fmt: skip

    def same_by_rules(self, url: str, doc_id: int) -> bool:
        rules = self.url_rules
        return rules is not None and rules.in_force and rules.same_page(url, self.index.url_of(doc_id))

    def _unchanged(
        self, url: str, probe: Fingerprint, scope: str, earlier: Earlier | None, request: bytes | None
    ) -> Verdict | None:
        """A revisit whose content is the same as, or near, one of its own admitted versions."""
        if earlier is None or not earlier.admitted:
            return None
        for own_id, own in self.index.signatures(earlier.admitted, scope):
            same = compare(probe, own, self.config, self._verify_methods)
            if same.duplicate:
                unconfirmed = bool(self.index.unconfirmed([own_id]))  # its item may be lost: not to drop
                if unconfirmed and self.index.stood_for(own_id):
                    return None  # a page let through stands for it: judged against that page
                self.index.restamp(own_id, request if unconfirmed else None)  # delivered by this run
                return Verdict(
                    url, own_id, False, similarity=same.similarity, method=same.method, revisit="unchanged",
                    unconfirmed=unconfirmed,
                )  # fmt: skip
        return None
