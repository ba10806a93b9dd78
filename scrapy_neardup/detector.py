"""Detector: fingerprint -> candidates -> verify -> Verdict, the one place that decides.

The Scrapy middleware and pipeline, the offline scan and the tests all hold a Detector;
none of them computes a signature or queries an index itself.
"""

from __future__ import annotations

from pathlib import Path

from .config import DedupConfig
from .fingerprint import Fingerprint, fingerprint
from .index import Index, SQLiteIndex, Verdict
from .scope import scope_key, url_key
from .signatures.exact import raw_hash


class Detector:
    """Judges pages against an index with one configuration."""

    def __init__(self, config: DedupConfig, index: Index) -> None:
        self.config = config
        self.index = index

    @classmethod
    def open(cls, path: str | Path, config: DedupConfig | None = None) -> Detector:
        """A Detector over the SQLite index file at ``path`` (created when missing)."""
        config = config or DedupConfig()
        return cls(config, SQLiteIndex(path, config))

    def fingerprint(self, body: bytes | str, content_type: str | None = None) -> Fingerprint:
        """The page's fingerprint with the signatures this configuration needs."""
        return fingerprint(body, self.config, content_type=content_type)

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
        if fp is None:
            if body is None:
                raise TypeError("check() needs the page body or its fingerprint")
            copy = self.check_raw(url, body, source=source, key=key)
            if copy is not None:
                return copy
            fp = self.fingerprint(body, content_type)
        return self.index.check_and_add(url, fp, scope_key(url, self.config.scope), source, key, item)

    def check_raw(
        self, url: str, body: bytes | str, *, source: str | None = None, key: str | None = None
    ) -> Verdict | None:
        """Record a byte-identical copy of an admitted page without extracting it; None otherwise.

        Identical bodies are the commonest duplicate (mirrors, tracking parameters), and
        recognizing them costs one hash and one lookup instead of an extraction.
        """
        scope = scope_key(url, self.config.scope)
        key = key or (url_key(url) if source is None else None)
        raw = raw_hash(body)
        original = self.index.find_raw(raw, scope, key)
        return None if original is None else self.index.record_copy(url, raw, original, scope, source, key)

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> Detector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
