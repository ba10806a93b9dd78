"""The offline scan: saved pages judged and recorded record by record, on the crawl's road.

Pages are read by ``sources`` (a bad record is a logged skip), fingerprinted in a process pool
in chunks, and judged by the Detector; a byte-identical copy of a recorded page is recorded
without its extraction, and a page read before (its source) is skipped, so a scan resumes.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import multiprocessing
import os
import sqlite3
import sys
import time

from ..config import MAX_WORKERS, DedupConfig
from ..detector import Detector
from ..exceptions import IndexFileError, InputError
from ..fingerprint import Fingerprint, fingerprint
from ..index import SQLiteIndex, Verdict
from ..parent_watch import end_with_parent
from ..report.clusters import load_clusters
from ..scope import scope_key
from ..signatures.exact import raw_hash
from .sources import Page, Skips, check_input, input_size, read_pages


def fingerprint_page(config: DedupConfig, page: Page, methods: frozenset[str] | None = None) -> Fingerprint:
    """A saved page's fingerprint; pages that are already text skip the HTML extractor. A page
    that breaks the fingerprint path is a page not judged (``error``), not a stopped scan."""
    extractor = "text" if page.is_text else None
    try:
        return _fingerprint_page(config, page, methods, extractor)
    except Exception as exc:  # MemoryError, RecursionError, a library bug on one page
        return Fingerprint(skip_reason="error", skip_detail=f"{type(exc).__name__}: {exc}"[:300])


def _fingerprint_page(
    config: DedupConfig, page: Page, methods: frozenset[str] | None, extractor: str | None
) -> Fingerprint:
    return fingerprint(
        page.body, config, content_type=page.content_type, methods=methods, extractor=extractor
    )


def config_of(args: argparse.Namespace) -> DedupConfig:
    return DedupConfig.from_options({name: getattr(args, name) for name, _, _ in DedupConfig.docs()})


def open_named_index(args: argparse.Namespace, config: DedupConfig | None = None):
    """The index the arguments name: an SQLite file, or a Redis index with --redis and --redis-key."""
    from ..index.redis import RedisIndex

    if not args.redis_key:
        raise InputError("--redis needs --redis-key: the index's key prefix (a crawl's is <spider>:neardup)")
    if config is None:
        return RedisIndex.open_existing(args.redis, args.redis_key)
    return RedisIndex(args.redis, config, args.redis_key)


def run_scan(args: argparse.Namespace) -> int:
    if not 1 <= args.batch <= 1_000_000:
        raise InputError(f"--batch: must be between 1 and 1,000,000, got {args.batch}")
    if not 0 <= args.workers <= MAX_WORKERS:
        raise InputError(f"--workers: must be between 0 and {MAX_WORKERS}, got {args.workers}")
    if args.field is not None and not args.field.strip():
        raise InputError(
            "--field: got an empty field name; name one, or leave it out for html, body, text, content"
        )
    if any(not str(path).strip() for path in args.paths):
        raise InputError("an empty path was given (an unset variable?); name a file or folder")
    config = config_of(args)
    for path in args.paths:  # before the index file is made
        check_input(path)
    counts = {"scanned": 0, "duplicates": 0, "skipped": 0, "already": 0}
    skips = Skips()
    progress = sys.stderr.isatty()
    pool = None
    if args.workers > 0:  # its workers end with this process, even killed (``end_with_parent``)
        pool = multiprocessing.get_context("spawn").Pool(args.workers, end_with_parent, (os.getpid(),))
    sign = functools.partial(fingerprint_page, config)  # picklable: config is a frozen dataclass
    try:
        index = SQLiteIndex(args.db, config) if args.db else open_named_index(args, config)
        with Detector(config, index) as detector:
            meter = Progress(args.paths, args.follow_links) if progress else None
            pages = (
                meter.track(n, page) if meter else page
                for n, path in enumerate(args.paths)
                for page in read_pages(path, args.field, skips, config.max_body, args.follow_links)
            )
            while chunk := list(itertools.islice(pages, args.batch)):
                fresh = _unrecorded(chunk, detector)
                counts["already"] += len(chunk) - len(fresh)
                # Byte-identical copies of recorded pages are recorded without their extraction.
                originals = {p.source: _raw_original(detector, p) for p in fresh}
                rest = [page for page in fresh if originals[page.source] is None]
                fps = iter(pool.map(sign, rest, chunksize=8) if pool else map(sign, rest))
                with detector.index.batch():
                    for page in fresh:
                        original = originals[page.source]
                        verdict = (
                            _record_page(detector, page, next(fps), skips)
                            if original is None
                            else _record_copy(detector, page, *original, skips)
                        )
                        if verdict is None:
                            continue
                        already = verdict.revisit is not None  # another scan recorded it meanwhile
                        counts["already" if already else "scanned"] += 1
                        counts["duplicates"] += verdict.duplicate and not already
                        counts["skipped"] += not verdict.judged
                if meter:
                    meter.show(counts["scanned"], counts["duplicates"])
            summary = load_clusters(detector.index)  # counts and clusters, no member dicts
    finally:
        if pool:
            pool.terminate()
    if progress:
        print(file=sys.stderr)
    skips.summary()
    unread = sum(skips.counts.values())
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(skips.counts.items()))
    print(
        f"scanned {counts['scanned']} pages ({counts['already']} already in the index): "
        f"{counts['duplicates']} duplicates, {counts['skipped']} not judged"
        + (f"; {unread} records skipped ({reasons})" if unread else "")
        + f".\nindex {args.db or index.path}: {summary.documents} documents, "
        f"{summary.duplicates} duplicates, "
        f"{len(summary.clusters)} clusters."
    )
    return 1 if unread and not counts["scanned"] and not counts["already"] else 0


class Progress:
    """The scan's progress line: pages, duplicates and pages a second, and the share of the input
    read when its size is known (files and folders: their bytes)."""

    def __init__(self, paths: list[str], follow_links: bool) -> None:
        self.sizes = [input_size(path, follow_links) for path in paths]
        self.total = sum(self.sizes)
        self.read = 0
        self.start = time.monotonic()

    def track(self, n: int, page: Page) -> Page:
        """Note how far input ``n`` was read when ``page`` came out of it."""
        self.read = sum(self.sizes[:n]) + min(page.read_to, self.sizes[n])
        return page

    def show(self, scanned: int, duplicates: int) -> None:
        rate = scanned / max(time.monotonic() - self.start, 1e-6)
        line = f"scanned {scanned:,} pages, {duplicates:,} duplicates, {rate:,.0f} pages/s"
        if self.total:
            line += f"; {self.read / self.total:.0%} of {self.total / 1e6:,.1f} MB read"
        print(f"\r{line}", end="", file=sys.stderr, flush=True)


def _unrecorded(chunk: list[Page], detector: Detector) -> list[Page]:
    """The pages of a chunk not yet in the index, each source once (the first of its names)."""
    fresh: dict[str, Page] = {}
    for page in chunk:
        if page.source not in fresh and not detector.index.contains_source(page.source):
            fresh[page.source] = page
    return list(fresh.values())


def _raw_original(detector: Detector, page: Page) -> tuple[int, int] | None:
    """(raw hash, original) when the page's body is byte-identical to an admitted page's."""
    raw = raw_hash(page.body)
    original = detector.index.find_raw(raw, scope_key(page.url, detector.config.scope))
    return None if original is None else (raw, original)


def _record_page(detector: Detector, page: Page, fp: Fingerprint, skips: Skips) -> Verdict | None:
    """Check and record one page; a failure of this page alone is skipped and counted, a failure
    of the index (a full disk, a corrupt file) stops the scan with a one-line error."""
    return _recording(detector, page, skips, lambda: detector.check(page.url, fp=fp, source=page.source))


def _record_copy(detector: Detector, page: Page, raw: int, original: int, skips: Skips) -> Verdict | None:
    scope = scope_key(page.url, detector.config.scope)

    def record() -> Verdict:
        copy = detector.record_copy(page.url, raw, original, scope, page.source)
        if copy is not None:
            return copy
        # Another scan recorded the page meanwhile: the full check tells it a revisit.
        fp = fingerprint_page(detector.config, page)
        return detector.check(page.url, fp=fp, source=page.source)

    return _recording(detector, page, skips, record)


def _recording(detector: Detector, page: Page, skips: Skips, record) -> Verdict | None:
    try:
        return record()
    except sqlite3.Error as exc:
        raise IndexFileError(detector.index.path, f"failed while recording pages ({exc})") from None
    except Exception as exc:
        if type(exc).__module__.startswith("redis"):  # the Redis index failed, not this page
            raise IndexFileError(detector.index.path, f"failed while recording pages ({exc})") from None
        skips("error", page.source, f"could not be recorded ({type(exc).__name__}: {exc})"[:300])
        return None
