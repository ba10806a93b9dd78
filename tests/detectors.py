"""Detectors for the index tests: over an SQLite file, and pages admitted without a check."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from scrapy_neardup import DedupConfig, Fingerprint
from scrapy_neardup.detector import Detector
from scrapy_neardup.index import SQLiteIndex
from scrapy_neardup.signatures.spotsigs import spots32
from scrapy_neardup.verdict import Verdict


def sqlite_detector(path: str | Path, config: DedupConfig | None = None) -> Detector:
    """A Detector over the SQLite index file at ``path`` (made when missing)."""
    config = config or DedupConfig()
    return Detector(config, SQLiteIndex(path, config))


def admit(detector: Detector, url: str, fp: Fingerprint, scope: str = "") -> Verdict:
    """Record a page as admitted without checking it, as an import of pages known to be distinct."""
    stored = dataclasses.replace(fp, spots=spots32(fp.spots))
    with detector.index.transaction():
        return detector.index.record(url, stored, scope)
