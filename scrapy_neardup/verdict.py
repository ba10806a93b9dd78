"""Verdict: the decision on one page, as the road returns it and the crawl, scan and report use it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """The decision on one page: admitted, duplicate of an earlier page, or not judged."""

    url: str
    doc_id: int | None
    duplicate: bool
    skip_reason: str | None = None
    duplicate_of: int | None = None
    duplicate_of_url: str | None = None
    similarity: float | None = None
    method: str | None = None
    # A page crawled before (``doc_id`` is its record): "unchanged" when its content is the same
    # as, or near its own earlier version (then it is no duplicate unless it was one of another
    # page before), "changed" when it was judged again and its record updated.
    revisit: str | None = None
    # Let through although it matches ``duplicate_of`` (or, for a revisit, its own record): that
    # page was admitted by a crawl that never closed, so its item may never have been stored.
    unconfirmed: bool = False
    # The match stands on thin evidence (few spots, texts of unequal length): a crawl tags it
    # instead of dropping it (NEARDUP_DROP_ABOVE).
    weak: bool = False
    # The page's URL with what learned URL rules say does not matter taken out (None: its own).
    canonical: str | None = None
    # The exact hash of the page's main text (None: not computed). Pages of one text are one
    # content, though a near match may have put them in two clusters (``duplicate_of``).
    content: int | None = None
    # Words of readers' comments (left out of the main text) in which the page and its match
    # differ, when they are a copy all the same (NEARDUP_COMMENTS off): URL rules learn nothing
    # from the pair.
    left_out: int = 0

    @property
    def judged(self) -> bool:
        return self.skip_reason is None

    def as_dict(self) -> dict:
        """A plain dict, for ``request.meta``, item fields and JSON."""
        return {
            "url": self.url, "doc_id": self.doc_id, "duplicate": self.duplicate, "judged": self.judged,
            "skip_reason": self.skip_reason, "duplicate_of": self.duplicate_of_url,
            "duplicate_of_id": self.duplicate_of, "similarity": self.similarity, "method": self.method,
            "revisit": self.revisit, "unconfirmed": self.unconfirmed, "weak": self.weak,
            "canonical": self.canonical or self.url,
        }  # fmt: skip
