"""The Index protocol every backend implements (SQLite now, Redis for many machines), and Verdict."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ..fingerprint import Fingerprint


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

    @property
    def judged(self) -> bool:
        return self.skip_reason is None

    def as_dict(self) -> dict:
        """A plain dict, for ``request.meta``, item fields and JSON."""
        return {
            "url": self.url, "doc_id": self.doc_id, "duplicate": self.duplicate, "judged": self.judged,
            "skip_reason": self.skip_reason, "duplicate_of": self.duplicate_of_url,
            "duplicate_of_id": self.duplicate_of, "similarity": self.similarity, "method": self.method,
            "revisit": self.revisit, "unconfirmed": self.unconfirmed,
        }  # fmt: skip


class Index(Protocol):
    """Stores fingerprints, finds candidates, records every verdict. ``check_and_add`` is atomic."""

    def check_and_add(
        self,
        url: str,
        fp: Fingerprint,
        scope: str = "",
        source: str | None = None,
        key: str | None = None,
        many: bool = False,
    ) -> Verdict: ...

    def add(self, url: str, fp: Fingerprint, scope: str = "", source: str | None = None) -> Verdict: ...

    def find_raw(self, raw: int, scope: str = "", key: str | None = None) -> int | None: ...

    def record_copy(
        self,
        url: str,
        raw: int,
        original: int,
        scope: str = "",
        source: str | None = None,
        key: str | None = None,
    ) -> Verdict: ...

    def begin_run(self, action: str) -> None: ...

    def end_run(self) -> None: ...

    def get(self, doc_id: int) -> dict[str, Any] | None: ...

    def documents(self) -> Iterator[dict[str, Any]]: ...

    def text(self, doc_id: int) -> str | None: ...

    def duplicate_edges(self) -> Iterator[tuple[int, int, float | None, str | None]]: ...

    def contains_url(self, url: str) -> bool: ...

    def contains_source(self, source: str) -> bool: ...

    def stats(self) -> dict[str, int]: ...

    def close(self) -> None: ...
