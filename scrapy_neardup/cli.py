"""The ``scrapy-neardup`` command line: ``compare`` two pages, ``scan`` saved pages, ``report`` an index.

Errors a user can fix (a missing file, a bad flag, a missing extra) print one line
naming the thing to fix and exit with status 2; there is no traceback for them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import multiprocessing
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

from . import __version__
from .config import MAX_WORKERS, DedupConfig
from .detector import Detector
from .exceptions import IndexFileError, InputError, NearDupError, one_line
from .fingerprint import Fingerprint, fingerprint
from .index import SQLiteIndex, Verdict
from .index.sqlite import damage_advice
from .methods import decision_order
from .report import FORMATS, format_for, render_report, write_report
from .report.clusters import CANONICAL_POLICIES, load_clusters
from .report.html_report import TEXT_BUDGET
from .scope import scope_key
from .signatures.exact import raw_hash
from .sources import Page, Skips, check_input, read_page_file, read_pages
from .text import storable
from .verify import Comparison, compare


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


def fingerprint_file(path: str, config: DedupConfig) -> Fingerprint:
    """Fingerprint a saved page with every method, so ``compare`` can show them all."""
    return fingerprint_page(config, read_page_file(path, path), frozenset(decision_order()))


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("detection settings (the same knobs as NEARDUP_* settings)")
    for name, default, doc in DedupConfig.docs():
        shown = (
            ",".join(default)
            if isinstance(default, tuple) and all(isinstance(x, str) for x in default)
            else default
        )
        if name == "spotsigs_specs":
            shown = ",".join(f"{d}:{c}" for d, c in default)
        group.add_argument(
            "--" + name.replace("_", "-"), dest=name, default=None, help=f"{doc} (default: {shown})"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scrapy-neardup", description="Near-duplicate detection for Scrapy crawls and saved pages."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cmp = commands.add_parser(
        "compare",
        help="compare two saved pages with every method",
        description="Compare two saved pages (.html, .htm, .html.gz, .txt) with every method and say which "
        "methods call them near-duplicates at the given thresholds. Use it to tune thresholds.",
    )
    cmp.add_argument("a", help="first page")
    cmp.add_argument("b", help="second page")
    cmp.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    _add_config_flags(cmp)
    cmp.set_defaults(run=run_compare)

    scan = commands.add_parser(
        "scan",
        help="judge saved pages against an index",
        description="Judge saved pages with the same detection a crawl uses, recording every verdict in "
        "the index. PATH is an .html/.htm/.xhtml/.txt file (optionally .gz), a folder of them, a JSON-lines "
        "feed (.jl, .jsonl) or a WARC file (.warc, .warc.gz). Pages already read from the same file, line "
        "or record are skipped, so an interrupted scan resumes where it stopped.",
    )
    scan.add_argument("paths", nargs="+", metavar="PATH", help="files or folders to scan")
    scan.add_argument("--db", required=True, help="the index file (created when missing)")
    scan.add_argument(
        "--field", help="the JSON-lines field holding the page (default: html, body, text, content)"
    )
    scan.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="fingerprinting processes (default: all cores; 0: none)",
    )
    scan.add_argument("--batch", type=int, default=256, help="pages per committed transaction (default: 256)")
    _add_config_flags(scan)
    scan.set_defaults(run=run_scan)

    report = commands.add_parser(
        "report",
        help="write the duplicate report of an index",
        description="Write the duplicate report of an index file: a self-contained HTML page with charts, "
        "JSON (clusters and members) or CSV (one row per page). It reads the index alone, so it works "
        "after any crawl or scan, also on an index from another machine.",
    )
    report.add_argument("--db", required=True, help="the index file")
    report.add_argument(
        "--format",
        choices=FORMATS,
        help="report format (default: from the -o suffix, .html/.json/.csv, else json)",
    )
    report.add_argument(
        "--canonical",
        choices=list(CANONICAL_POLICIES),
        default="first-seen",
        help="which page of a cluster is canonical: "
        + "; ".join(f"{k}: {v}" for k, v in CANONICAL_POLICIES.items())
        + " (default: first-seen)",
    )
    report.add_argument("-o", "--output", help="write here instead of standard output")
    report.add_argument(
        "--text-budget",
        type=int,
        default=TEXT_BUDGET,
        metavar="CHARS",
        help="HTML only: characters of page text embedded for the side-by-side view, largest clusters "
        f"first (default: {TEXT_BUDGET:,})",
    )
    report.set_defaults(run=run_report)
    return parser


def comparison_json(paths: tuple[str, str], fps: tuple[Fingerprint, Fingerprint], result: Comparison | None,
                    config: DedupConfig) -> dict[str, Any]:  # fmt: skip
    """The ``--json`` object: both pages, each method's raw measure and result, and the verdict."""

    def page(path: str, fp: Fingerprint) -> dict[str, Any]:
        return {
            "path": path, "tokens": fp.token_count, "language": fp.language, "spots": fp.spots.size,
            "judged": fp.judged, "skip_reason": fp.skip_reason, "skip_detail": fp.skip_detail or None,
        }  # fmt: skip

    results = result.results if result else {}
    raw = {name: (results[name].raw if name in results else None) for name in decision_order()}
    return {
        "a": page(paths[0], fps[0]),
        "b": page(paths[1], fps[1]),
        "extractor": config.extractor,
        "methods_in_use": list(config.methods),
        "exact": raw["exact"],
        "spotsigs": raw["spotsigs"],
        "simhash_distance": raw["simhash"],
        "minhash": raw["minhash"],
        "super_shingles": raw["shingles"],
        "imatch": raw["imatch"],
        "ksentence": raw["ksentence"],
        "results": {
            name: {
                "similarity": r.similarity,
                "shown": r.shown,
                "threshold": r.threshold,
                "duplicate": r.duplicate,
            }
            for name, r in results.items()
        },
        "duplicate": result.duplicate if result else None,
        "decided_by": result.method if result else None,
    }


def comparison_table(paths: tuple[str, str], fps: tuple[Fingerprint, Fingerprint], result: Comparison | None,
                     config: DedupConfig) -> str:  # fmt: skip
    """The human-readable report of ``compare``."""
    rows = [("", "A", "B"), ("file", *paths)]
    rows += [("tokens", *(str(fp.token_count) for fp in fps)), ("language", *(fp.language for fp in fps))]
    rows += [("spots", *(str(fp.spots.size) for fp in fps))]
    width = max(len(r[1]) for r in rows) + 2
    lines = [f"{r[0]:<10}{r[1]:<{width}}{r[2]}" for r in rows]
    lines.append(f"extractor {config.extractor}")
    lines.append("")
    skipped = [(label, fp) for label, fp in zip("AB", fps, strict=True) if not fp.judged]
    if result is None:
        for label, fp in skipped:
            lines.append(f"{label} is not judged: {fp.skip_reason} ({fp.skip_detail}).")
        if any(fp.skip_reason == "too_short" for _, fp in skipped):
            lines.append("Lower --min-tokens to compare short pages anyway.")
        return "\n".join(lines)
    header = ("method", "similarity", "near-duplicate when", "verdict")
    table = [header] + [
        (
            name + (" *" if name in config.methods else ""),
            r.shown,
            r.threshold,
            "near-duplicate" if r.duplicate else "distinct",
        )
        for name, r in result.results.items()
    ]
    widths = [max(len(row[i]) for row in table) + 2 for i in range(3)]
    lines += [f"{r[0]:<{widths[0]}}{r[1]:<{widths[1]}}{r[2]:<{widths[2]}}{r[3]}" for r in table]
    missing = [m for m in decision_order() if m not in result.results]
    if missing:
        lines.append(f"(no signature for: {', '.join(missing)}; e.g. no spot on a page)")
    lines.append("")
    in_use = ", ".join(config.methods)
    if result.duplicate:
        lines.append(f"Verdict: NEAR-DUPLICATES, by {result.method} (methods in use, marked *: {in_use}).")
    else:
        lines.append(f"Verdict: distinct (no method in use, marked *, calls them near-duplicates: {in_use}).")
    return "\n".join(lines)


def run_compare(args: argparse.Namespace) -> int:
    config = _options(args)
    paths = (args.a, args.b)
    fps = (fingerprint_file(args.a, config), fingerprint_file(args.b, config))
    result = compare(*fps, config) if all(fp.judged for fp in fps) else None
    if args.json:
        print(json.dumps(comparison_json(paths, fps, result, config), indent=2))
    else:
        print(comparison_table(paths, fps, result, config))
    return 0


def _options(args: argparse.Namespace) -> DedupConfig:
    return DedupConfig.from_options({name: getattr(args, name) for name, _, _ in DedupConfig.docs()})


def run_scan(args: argparse.Namespace) -> int:
    if not 1 <= args.batch <= 1_000_000:
        raise InputError(f"--batch: must be between 1 and 1,000,000, got {args.batch}")
    if not 0 <= args.workers <= MAX_WORKERS:
        raise InputError(f"--workers: must be between 0 and {MAX_WORKERS}, got {args.workers}")
    if any(not str(path).strip() for path in args.paths):
        raise InputError("an empty path was given (an unset variable?); name a file or folder")
    config = _options(args)
    for path in args.paths:  # before the index file is made
        check_input(path)
    counts = {"scanned": 0, "duplicates": 0, "skipped": 0, "already": 0}
    skips = Skips()
    progress = sys.stderr.isatty()
    pool = multiprocessing.get_context("spawn").Pool(args.workers) if args.workers > 0 else None
    sign = functools.partial(fingerprint_page, config)  # picklable: config is a frozen dataclass
    try:
        with Detector.open(args.db, config) as detector:
            pages = (
                page for path in args.paths for page in read_pages(path, args.field, skips, config.max_body)
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
                if progress:
                    print(f"\rscanned {counts['scanned']} pages, {counts['duplicates']} duplicates",
                          end="", file=sys.stderr, flush=True)  # fmt: skip
            summary = load_clusters(detector.index)  # counts and clusters, no member dicts
    finally:
        if pool:
            pool.terminate()
    if progress:
        print(file=sys.stderr)
    unread = sum(skips.counts.values())
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(skips.counts.items()))
    print(
        f"scanned {counts['scanned']} pages ({counts['already']} already in the index): "
        f"{counts['duplicates']} duplicates, {counts['skipped']} not judged"
        + (f"; {unread} records skipped ({reasons})" if unread else "")
        + f".\nindex {args.db}: {summary.documents} documents, {summary.duplicates} duplicates, "
        f"{len(summary.clusters)} clusters."
    )
    return 1 if unread and not counts["scanned"] and not counts["already"] else 0


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
    return _recording(
        detector, page, skips, lambda: detector.index.record_copy(page.url, raw, original, scope, page.source)
    )


def _recording(detector: Detector, page: Page, skips: Skips, record) -> Verdict | None:
    try:
        return record()
    except sqlite3.Error as exc:
        raise IndexFileError(detector.index.path, f"failed while recording pages ({exc})") from None
    except Exception as exc:
        skips("error", page.source, f"could not be recorded ({type(exc).__name__}: {exc})"[:300])
        return None


def run_report(args: argparse.Namespace) -> int:
    if not Path(args.db).exists():
        raise InputError(f"{args.db}: no such index file")
    if args.text_budget < 0:
        raise InputError(f"--text-budget: must be 0 or more, got {args.text_budget}")
    fmt = args.format or format_for(args.output)
    progress = sys.stderr.isatty()
    if args.output:
        out = write_report(args.db, args.output, fmt, args.canonical, progress, text_budget=args.text_budget)
        print(f"wrote the {fmt} report of {args.db} to {out}", file=sys.stderr)
        return 0
    if sys.stdout is None:
        raise InputError("standard output is closed; write the report to a file with -o FILE")
    with SQLiteIndex.open_existing(args.db) as index:
        if fmt == "csv" and hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(newline="")  # the csv module writes its own line ends
        render_report(
            index, sys.stdout, fmt, args.canonical, progress, storable(Path(args.db).name), args.text_budget
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.run(args)
        sys.stdout.flush()  # here, so a closed pipe is met inside the try
        return code
    except NearDupError as exc:
        print(one_line(f"scrapy-neardup: error: {exc}"), file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as exc:  # met while reading or writing a file that opened well
        db = getattr(args, "db", None) or "the index"
        print(one_line(f"scrapy-neardup: error: {db}: {exc}{damage_advice(exc)}"), file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 1
    except OSError as exc:  # writing the output: a full disk, /dev/full
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        where = exc.filename or "the output"
        print(one_line(f"scrapy-neardup: error: {where}: {exc.strerror or exc}"), file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
