"""Detector: fingerprint -> candidates -> verify -> rank -> record, the one place that decides.

The Scrapy middleware and pipeline, the offline scan and the tests all hold a Detector;
none of them computes a signature or ranks matches itself, and no index decides: an index
finds candidates and stores what the Detector decided, inside one transaction a page.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from collections.abc import Callable
from pathlib import Path

from .config import DedupConfig
from .fingerprint import Fingerprint, fingerprint, imatch_with_stats, needed_methods
from .index import Index, SQLiteIndex, Verdict
from .index.base import Conflict, Earlier
from .index.codecs import spots32
from .methods import decision_order, rank
from .scope import scope_key, url_key
from .signatures.exact import raw_hash
from .verify import compare


class Detector:
    """Judges pages against an index with one configuration."""

    def __init__(self, config: DedupConfig, index: Index) -> None:
        self.config = config
        self.index = index
        needed = needed_methods(config)
        self._verify_methods = tuple(m for m in decision_order() if m in needed)

    @classmethod
    def open(cls, path: str | Path, config: DedupConfig | None = None) -> Detector:
        """A Detector over the SQLite index file at ``path`` (created when missing)."""
        config = config or DedupConfig()
        return cls(config, SQLiteIndex(path, config))

    def fingerprint(
        self, body: bytes | str, content_type: str | None = None, raw: int | None = None
    ) -> Fingerprint:
        """The page's fingerprint with the signatures this configuration needs."""
        return fingerprint(body, self.config, content_type=content_type, raw=raw)

    def check(
        self,
        url: str,
        body: bytes | str | None = None,
        *,
        content_type: str | None = None,
        fp: Fingerprint | None = None,
        source: str | None = None,
        item: bool = False,
        key: str | None = None,
    ) -> Verdict:
        """Judge and record one page; pass ``fp`` when it was fingerprinted elsewhere (a worker).

        ``source`` says where an offline page was read, so a resumed scan can skip it; without
        one (a crawled page) the page's canonical URL finds its own earlier record, so a page
        seen again is a revisit, never a duplicate of itself. An ``item`` (judged by the pipeline)
        may share its URL with other items of one page: each keeps a record of its own; ``key``
        names an item that has no URL (its body's hash).
        """
        key = key or (url_key(url) if source is None else None)
        scope = scope_key(url, self.config.scope)
        if fp is None:
            if body is None:
                raise TypeError("check() needs the page body or its fingerprint")
            raw = raw_hash(body)
            copy = self._raw_copy(url, raw, scope, source, key)
            if copy is not None:
                return copy
            fp = self.fingerprint(body, content_type, raw)
        return self.judge(url, fp, scope, source, key, item)

    def check_raw(
        self,
        url: str,
        body: bytes | str,
        *,
        source: str | None = None,
        key: str | None = None,
        raw: int | None = None,
    ) -> Verdict | None:
        """Record a byte-identical copy of an admitted page without extracting it; None otherwise.

        Identical bodies are the commonest duplicate (mirrors, tracking parameters), and
        recognizing them costs one hash and one lookup instead of an extraction. ``raw`` is the
        body's hash where the caller made it already (it then fingerprints with the same).
        """
        key = key or (url_key(url) if source is None else None)
        raw = raw if raw is not None else raw_hash(body)
        return self._raw_copy(url, raw, scope_key(url, self.config.scope), source, key)

    def _raw_copy(
        self, url: str, raw: int, scope: str, source: str | None, key: str | None
    ) -> Verdict | None:
        original = self.index.find_raw(raw, scope, key)
        return None if original is None else self.record_copy(url, raw, original, scope, source, key)

    def record_copy(
        self, url: str, raw: int, original: int, scope: str, source: str | None = None, key: str | None = None
    ) -> Verdict | None:
        """Record a byte-identical copy of ``original``; None when the page must have the full check
        (its key or source was recorded by another process since ``find_raw`` said otherwise)."""
        try:
            return self.index.record_copy(url, raw, original, scope, source, key)
        except Conflict:
            return None

    def judge(
        self,
        url: str,
        fp: Fingerprint,
        scope: str = "",
        source: str | None = None,
        key: str | None = None,
        many: bool = False,
    ) -> Verdict:
        """Find the best earlier match of ``fp`` in its scope and record the page, atomically.

        A page not judged is recorded as skipped; a duplicate is recorded with what it
        duplicates; any other page is admitted and becomes findable. A page whose revisit
        ``key`` (its canonical URL) has a record already is a revisit: never a duplicate of
        itself, and its record is updated, not repeated. With ``many`` (items: a page may yield
        several under one URL), a changed one is recorded beside the others, not over them.
        """
        return self._atomically(lambda: self._judge(url, fp, scope, source, key, many))

    def add(self, url: str, fp: Fingerprint, scope: str = "", source: str | None = None) -> Verdict:
        """Admit a page without checking it (an import of pages known to be distinct)."""
        stored = dataclasses.replace(fp, spots=spots32(fp.spots))
        return self._atomically(lambda: self.index.record(url, stored, scope, None, source))

    def _atomically(self, work: Callable[[], Verdict]) -> Verdict:
        """``work`` in one index transaction, again while another process changed what it read."""
        for attempt in itertools.count():
            try:
                with self.index.transaction():
                    return work()
            except Conflict:
                time.sleep(min(0.05, 0.001 * attempt) * random.random())
        raise AssertionError("unreachable")

    def _judge(
        self, url: str, fp: Fingerprint, scope: str, source: str | None, key: str | None, many: bool
    ) -> Verdict:
        index = self.index
        if source is not None:  # the same source twice (two scans at once): a revisit, recorded once
            row = index.source_record(source)
            if row is not None:
                return Verdict(url, row[0], row[1] == "duplicate", skip_reason=row[2], revisit="unchanged")
        earlier = index.earlier(key, scope, many)
        if not fp.judged:
            if earlier is not None and earlier.status != "skipped":  # a failed fetch keeps the record
                return Verdict(url, earlier.id, False, skip_reason=fp.skip_reason)
            return index.record(url, fp, scope, None, source, key, replace=earlier)
        probe = dataclasses.replace(fp, spots=spots32(fp.spots))
        if "imatch" in self.config.methods and probe.terms:
            probe = imatch_with_stats(probe, self.config, index.term_stats(probe.terms))
        unchanged = self._unchanged(url, probe, scope, earlier)
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
        if best is not None and best[0][0]:  # only pages an interrupted run admitted: let it through
            verdict = index.record(url, probe, scope, None, source, key, replace=replace)
            return dataclasses.replace(
                verdict, duplicate_of=match[0], duplicate_of_url=index.url_of(match[0]), similarity=match[1],
                method=match[2], unconfirmed=True, weak=weak,
            )  # fmt: skip
        verdict = index.record(url, probe, scope, match, source, key, replace=replace)
        if weak:
            verdict = dataclasses.replace(verdict, weak=True)
        if replace is None:  # a new page, or another item of a page's URL
            return verdict
        # "unchanged" only while it stays what it was: a duplicate now admitted is new to the output.
        same = verdict.duplicate and earlier.exact is not None and earlier.exact == probe.exact
        return dataclasses.replace(verdict, revisit="unchanged" if same else "changed")

    def _unchanged(self, url: str, probe: Fingerprint, scope: str, earlier: Earlier | None) -> Verdict | None:
        """A revisit whose content is the same as, or near, one of its own admitted versions."""
        if earlier is None or not earlier.admitted:
            return None
        for own_id, own in self.index.signatures(earlier.admitted, scope):
            same = compare(probe, own, self.config, self._verify_methods)
            if same.duplicate:
                unconfirmed = bool(self.index.unconfirmed([own_id]))  # its item may be lost: not to drop
                self.index.restamp(own_id)
                return Verdict(
                    url, own_id, False, similarity=same.similarity, method=same.method, revisit="unchanged",
                    unconfirmed=unconfirmed,
                )  # fmt: skip
        return None

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> Detector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
