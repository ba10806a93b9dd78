"""The offline scan: saved pages judged and recorded batch by batch, on the crawl's road.

Pages are read by ``sources`` (a bad record is a logged skip) and handed to the Detector a
batch at a time: fingerprinted in the crawl's worker pool, each within its time budget, and
recorded in input order; a page read before (its source) is skipped, so a scan resumes.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time

from ..config import MAX_WORKERS, DedupConfig
from ..decision import SURE_SIMILARITY, sure
from ..detector import Arrival, Detector
from ..exceptions import IndexFailure, IndexFileError, InputError
from ..fingerprint import Fingerprint, fingerprint
from ..index import IndexSpec, open_index
from ..report.clusters import load_clusters
from ..workers import WorkerPool
from .pages import Page, Skips
from .sources import check_input, input_size, read_pages


def fingerprint_page(config: DedupConfig, page: Page, methods: frozenset[str] | None = None) -> Fingerprint:
    """A saved page's fingerprint with ``methods`` (``compare`` asks for all); a page that is
    already text skips the HTML extractor, and one that breaks the fingerprint path is a page
    not judged (``error``), not a stopped command."""
    extractor = "text" if page.is_text else None
    try:
        return fingerprint(
            page.body, config, content_type=page.content_type, methods=methods, extractor=extractor
        )
    except Exception as exc:  # MemoryError, RecursionError, a library bug on one page
        return Fingerprint(skip_reason="error", skip_detail=f"{type(exc).__name__}: {exc}"[:300])


def config_of(args: argparse.Namespace) -> DedupConfig:
    return DedupConfig.from_options({name: getattr(args, name) for name, _, _ in DedupConfig.docs()})


def run_scan(args: argparse.Namespace) -> int:
    if not 1 <= args.batch <= 1_000_000:
        raise InputError(f"--batch: must be between 1 and 1,000,000, got {args.batch}")
    if not 0 <= args.workers <= MAX_WORKERS:
        raise InputError(f"--workers: must be between 0 and {MAX_WORKERS}, got {args.workers}")
    if not 0.1 <= args.lock_timeout <= 86400:
        raise InputError(f"--lock-timeout: must be between 0.1 and 86400 seconds, got {args.lock_timeout}")
    if not 0.1 <= args.page_timeout <= 86400:
        raise InputError(f"--page-timeout: must be between 0.1 and 86400 seconds, got {args.page_timeout}")
    if args.field is not None and not args.field.strip():
        raise InputError(
            "--field: got an empty field name; name one, or leave it out for html, body, text, content"
        )
    if any(not str(path).strip() for path in args.paths):
        raise InputError("an empty path was given (an unset variable?); name a file or folder")
    config = config_of(args)
    for path in args.paths:  # before the index file is made
        check_input(path)
    return asyncio.run(_scan(args, config))


async def _scan(args: argparse.Namespace, config: DedupConfig) -> int:
    counts = {"scanned": 0, "duplicates": 0, "uncertain": 0, "skipped": 0, "already": 0}
    skips = Skips()
    progress = sys.stderr.isatty()
    workers = WorkerPool(config, args.workers, args.page_timeout)  # its workers end with this process
    with Detector(
        config, open_index(IndexSpec.parse(args.index, args.lock_timeout), config), workers
    ) as detector:
        meter = Progress(args.paths, args.follow_links) if progress else None
        pages = (
            meter.track(n, page) if meter else page
            for n, path in enumerate(args.paths)
            for page in read_pages(path, args.field, skips, config.max_body, args.follow_links)
        )
        while chunk := list(itertools.islice(pages, args.batch)):
            fresh = _unrecorded(chunk, detector)
            counts["already"] += len(chunk) - len(fresh)
            arrivals = [
                Arrival(p.url, p.body, p.content_type, "text" if p.is_text else None, p.source) for p in fresh
            ]
            try:
                verdicts = await detector.judge_many(arrivals)
            except IndexFailure as exc:
                raise IndexFileError(exc.path, f"failed while recording pages ({exc.cause or exc})") from None
            for page, verdict in zip(fresh, verdicts, strict=True):
                if isinstance(verdict, Exception):  # this page alone could not be recorded
                    why = f"could not be recorded ({type(verdict).__name__}: {verdict})"[:300]
                    skips("error", page.source, why)
                    continue
                already = verdict.revisit is not None  # another scan recorded it meanwhile
                counts["already" if already else "scanned"] += 1
                # A match not sure enough to drop is recorded as an original, as the index counts it.
                matched = verdict.duplicate and not already
                certain = sure(verdict.method, verdict.similarity, verdict.weak, SURE_SIMILARITY)
                counts["duplicates"] += matched and certain
                counts["uncertain"] += matched and not certain
                counts["skipped"] += not verdict.judged
            if meter:
                meter.show(counts["scanned"], counts["duplicates"])
        summary = load_clusters(detector.index)  # counts and clusters, no member dicts
        where = detector.index.path
    if progress:
        print(file=sys.stderr)
    skips.summary()
    unread = sum(skips.counts.values())
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(skips.counts.items()))
    print(
        f"scanned {counts['scanned']} pages ({counts['already']} already in the index): "
        f"{counts['duplicates']} duplicates, "
        + (f"{counts['uncertain']} let through as uncertain matches, " if counts["uncertain"] else "")
        + f"{counts['skipped']} not judged"
        + (f"; {unread} records skipped ({reasons})" if unread else "")
        + f".\nindex {where}: {summary.documents} documents, "
        f"{summary.duplicates} duplicates, "
        f"{len(summary.clusters)} clusters."
    )
    return 1 if not counts["scanned"] and not counts["already"] else 0  # read nothing


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
