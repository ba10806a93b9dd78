"""What a crawl does with a verdict: the action (drop, ignore, tag) and the sure bar."""

from __future__ import annotations

from enum import Enum
from typing import Any

from ..decision import sure
from ..verdict import Verdict


class Action(str, Enum):
    """NEARDUP_ACTION: what becomes of a sure near-duplicate."""

    DROP = "drop"  # the page reaches the spider (its links followed); its items are dropped
    IGNORE = "ignore"  # the response is ignored before the spider (cheapest; may hide links)
    TAG = "tag"  # everything goes on, with the verdict


class Outcome(str, Enum):
    """What became of a page or an item; each value names its stat under ``neardup/``."""

    DROPPED = "dropped"  # an item of a sure duplicate
    IGNORED = "ignored"  # a response, in ignore mode
    TAGGED = "tagged"  # in tag mode, once a page
    UNCERTAIN = "uncertain"  # a match under the sure bar: let through tagged
    UNCHANGED = "dropped/unchanged"  # an item of an unchanged revisit (NEARDUP_DROP_UNCHANGED)
    FIRST = "kept/first"  # an item of a sure duplicate whose original put no item out: kept, tagged


class Policy:
    """The action, the sure bar (NEARDUP_DROP_ABOVE) and NEARDUP_DROP_UNCHANGED, applied to verdicts."""

    def __init__(self, action: Action, drop_above: float, drop_unchanged: bool) -> None:
        self.action = action
        self.drop_above = drop_above
        self.drop_unchanged = drop_unchanged

    def outcome(self, verdict: Verdict, item: bool = False) -> Outcome | None:
        """What becomes of a page, or of one of its items, with this verdict (None: it passes as
        it is). In drop mode a duplicate page goes on, so its links are followed: only its items
        are dropped. An unchanged revisit's page always passes; its items are not dropped when a
        crawl that never closed admitted it (they may have been lost)."""
        unchanged = verdict.revisit == "unchanged" and not (verdict.duplicate or verdict.unconfirmed)
        if item and unchanged and self.drop_unchanged:
            return Outcome.UNCHANGED
        if not verdict.duplicate:
            return None
        if self.action is Action.TAG:
            return Outcome.TAGGED
        if not self.sure(verdict):
            return Outcome.UNCERTAIN
        if item:
            return Outcome.DROPPED
        return Outcome.IGNORED if self.action is Action.IGNORE else None

    def sure(self, verdict: Verdict) -> bool:
        """Whether a duplicate is sure enough to drop: an exact copy always; a near one at
        NEARDUP_DROP_ABOVE or more, on strong evidence (a bar of 0 drops every match)."""
        return sure(verdict.method, verdict.similarity, verdict.weak, self.drop_above)

    def as_dict(self, verdict: Verdict) -> dict[str, Any]:
        """The verdict as the spider and items see it (``neardup`` meta and field), with ``sure``:
        whether a duplicate is sure enough to drop (None for a page that is none)."""
        return {**verdict.as_dict(), "sure": self.sure(verdict) if verdict.duplicate else None}

    def describe(self) -> str:
        """The action in words, for the crawl's first log line."""
        sure = f" at similarity >= {self.drop_above:g}" if self.drop_above else ""
        return {
            Action.DROP: f"drop the items of near-duplicates{sure}",
            Action.IGNORE: f"ignore near-duplicate responses{sure}",
            Action.TAG: "tag near-duplicates",
        }[self.action]


def met_again_as_its_own(verdict: Verdict) -> bool:
    """A page met again under its own URL, whose content this crawl put out under another (a
    re-run met its copy first): its original is no other page to name."""
    return verdict.duplicate and verdict.duplicate_of_url == verdict.url


def why_dropped(verdict: Verdict) -> str:
    """The reason a dropped item or an ignored response gives."""
    if met_again_as_its_own(verdict):
        return "met again under its URL, whose content this crawl has put out already"
    if verdict.duplicate:
        return f"near-duplicate of {verdict.duplicate_of_url}"
    return "unchanged since an earlier crawl (NEARDUP_DROP_UNCHANGED)"
