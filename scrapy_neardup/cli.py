"""The ``scrapy-neardup`` command line: ``compare`` two pages, ``scan`` saved pages, ``report`` an index.

Errors a user can fix (a missing file, a bad flag, a missing extra) print one line
naming the thing to fix and exit with status 2; there is no traceback for them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Any

from . import __version__
from .comments import holder_of_comments
from .config import DedupConfig
from .crawl.policy import Action, Policy
from .decision import SURE_SIMILARITY
from .exceptions import ConfigError, InputError, NearDupError, one_line
from .index import IndexSpec, open_existing, storage_failure
from .methods import BY_NAME, Fingerprint, decision_order
from .offline.scan import config_of, fingerprint_page, run_scan
from .offline.sources import read_page_file
from .report import FORMATS, format_for, render_report, write_report
from .report.clusters import CANONICAL_POLICIES
from .report.html_report import TEXT_BUDGET
from .verdict import Verdict
from .verify import Comparison, compare


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
    cmp.add_argument(
        "--drop-above",
        metavar="BAR",
        help="the sure bar of the crawl whose decision on B is shown, as NEARDUP_DROP_ABOVE "
        f"(default: {SURE_SIMILARITY:g})",
    )
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
    _add_index_options(scan, "the index file (created when missing)")
    scan.add_argument(
        "--field", help="the JSON-lines field holding the page (default: html, body, text, content)"
    )
    scan.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="fingerprinting processes (default: all cores; 0: none)",
    )
    scan.add_argument(
        "--page-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="with workers: seconds a page may take before it is recorded as not judged (timeout); its "
        "worker is stopped and a new one started (default: 60, as NEARDUP_PAGE_TIMEOUT)",
    )
    scan.add_argument(
        "--lock-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="seconds to wait for another process's lock on the index file before stopping "
        "(default: 60, as NEARDUP_LOCK_TIMEOUT)",
    )
    scan.add_argument("--batch", type=int, default=256, help="pages per committed transaction (default: 256)")
    scan.add_argument(
        "--follow-links",
        action="store_true",
        help="in folders, also read symbolic links that lead out of the folder (default: skip and name them)",
    )
    _add_config_flags(scan)
    scan.set_defaults(run=run_scan)

    report = commands.add_parser(
        "report",
        help="write the duplicate report of an index",
        description="Write the duplicate report of an index file: a self-contained HTML page with charts, "
        "JSON (clusters and members) or CSV (one row per page). It reads the index alone, so it works "
        "after any crawl or scan, also on an index from another machine.",
    )
    _add_index_options(report, "the index file")
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

    export = commands.add_parser(
        "export",
        help="copy a Redis or PostgreSQL index into an SQLite file",
        description="Copy an index on a server, Redis or PostgreSQL (every record, verdict, signature "
        "and kept text), into a new SQLite index file, to keep it, report on it or query it with "
        "SQLite tools.",
    )
    export.add_argument(
        "--index",
        required=True,
        metavar="LOCATION",
        help="the index: redis://host:6379/0?prefix=KEY or postgresql://user@host/db?prefix=SCHEMA",
    )
    export.add_argument("-o", "--output", required=True, help="the new SQLite index file")
    export.set_defaults(run=run_export)

    forget = commands.add_parser(
        "forget",
        help="forget the pages of an index not seen lately",
        description="Forget the pages of an index that no crawl has met (nor a copy of them) for a "
        "while, or all but the most recently seen, as NEARDUP_FORGET_AFTER and NEARDUP_MAX_PAGES do "
        "during a crawl. A copy of a forgotten page met later is a new page.",
    )
    _add_index_options(forget, "the index file")
    forget.add_argument(
        "--older-than", metavar="AGE", help="pages not seen for this long: 7d, 12h, 30m, seconds"
    )
    forget.add_argument(
        "--max-pages", type=int, metavar="N", help="keep at most N pages, the most recently seen"
    )
    forget.set_defaults(run=run_forget)
    return parser


def _add_index_options(parser: argparse.ArgumentParser, db_help: str) -> None:
    parser.add_argument(
        "--index",
        "--db",
        dest="index",
        required=True,
        metavar="LOCATION",
        help=f"{db_help}, redis://host:6379/0?prefix=<spider>:neardup for a Redis index, or "
        "postgresql://user@host/db?prefix=<spider>:neardup for a PostgreSQL one",
    )


def drop_policy(drop_above: str | None) -> Policy:
    """A drop-mode crawl's policy with ``--drop-above``, read by NEARDUP_DROP_ABOVE's own declaration."""
    from .crawl.settings import CrawlSettings  # Scrapy's import: only for compare
    from .knobs import declarations, flag_name, parsed

    value = parsed(CrawlSettings, {"drop_above": drop_above}.get, flag_name).get(
        "drop_above", SURE_SIMILARITY
    )
    check = next(f for f in declarations(CrawlSettings) if f.name == "drop_above").metadata["check"]
    problem = check(value, {})
    if problem:
        raise ConfigError("--drop-above", problem)
    return Policy(Action.DROP, value, drop_unchanged=False)


def _comments_said(fps: tuple[Fingerprint, Fingerprint], words: int) -> str:
    holder = holder_of_comments(*fps)
    return f"{holder} holds {words} words of readers' comments that {'AB'[holder == 'A']} does not"


def crawl_decision(
    fps: tuple[Fingerprint, Fingerprint], result: Comparison | None, policy: Policy
) -> dict[str, str]:
    """What a drop-mode crawl does with B met after A: ``drop`` (a sure duplicate: its items are
    dropped), ``uncertain`` (passed tagged) or ``keep``, by the crawl's own rule, ``Policy.sure``."""
    if result is None:
        label, fp = next((label, fp) for label, fp in zip("AB", fps, strict=True) if not fp.judged)
        return {"decision": "keep", "why": f"{label} is not judged ({fp.skip_reason}): B passes unjudged"}
    if not result.duplicate and result.comments_apart:
        own = _comments_said(fps, result.comments_apart)
        return {"decision": "keep", "why": f"readers' comments of its own: {own}, no copy"}
    if not result.duplicate:
        return {"decision": "keep", "why": "no method in use calls them near-duplicates"}
    verdict = Verdict("B", None, True, similarity=result.similarity, method=result.method, weak=result.weak)
    similarity = f"{result.method} similarity {result.similarity or 0.0:.3f}"
    bar = f"the sure bar {policy.drop_above:g}"
    if policy.sure(verdict):
        why = "an exact copy" if result.method == "exact" else f"{similarity} at or above {bar}"
        return {
            "decision": "drop",
            "why": why if policy.drop_above > 0 else f"{why} (a bar of 0 drops every match)",
        }
    if verdict.weak:
        reasons = "; ".join(result.results[result.method].weak_why) or "thin evidence"
        return {"decision": "uncertain", "why": f"a weak match, passed at any similarity: {reasons}"}
    return {"decision": "uncertain", "why": f"{similarity} under {bar}"}


def comparison_json(paths: tuple[str, str], fps: tuple[Fingerprint, Fingerprint], result: Comparison | None,
                    config: DedupConfig, crawl: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The ``--json`` object: both pages, each method's raw measure and result, and the verdict."""

    def page(path: str, fp: Fingerprint) -> dict[str, Any]:
        return {
            "path": path, "tokens": fp.token_count, "comment_words": fp.comment_words,
            "language": fp.language, "spots": fp.spots.size, "judged": fp.judged,
            "skip_reason": fp.skip_reason, "skip_detail": fp.skip_detail or None,
        }  # fmt: skip

    results = result.results if result else {}
    raw = {name: (results[name].raw if name in results else None) for name in decision_order()}
    return {
        "a": page(paths[0], fps[0]),
        "b": page(paths[1], fps[1]),
        "extractor": config.extractor,
        "methods_in_use": list(config.methods),
        **{BY_NAME[name].measure or name: value for name, value in raw.items()},
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
        "crawl": crawl,
    }


def comparison_table(paths: tuple[str, str], fps: tuple[Fingerprint, Fingerprint], result: Comparison | None,
                     config: DedupConfig, crawl: dict[str, str] | None = None) -> str:  # fmt: skip
    """The human-readable report of ``compare``."""
    rows = [("", "A", "B"), ("file", *paths)]
    rows += [("tokens", *(str(fp.token_count) for fp in fps)), ("language", *(fp.language for fp in fps))]
    rows += [("spots", *(str(fp.spots.size) for fp in fps))]
    rows += [("comments", *(f"{fp.comment_words} words" for fp in fps))]
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
        return "\n".join(lines + _crawl_lines(crawl))
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
    elif result.comments_apart:
        said = _comments_said(fps, result.comments_apart)
        lines.append(f"Verdict: distinct: {said} (with --comments false, a copy).")
    else:
        lines.append(f"Verdict: distinct (no method in use, marked *, calls them near-duplicates: {in_use}).")
    return "\n".join(lines + _crawl_lines(crawl))


CRAWL_DOES = {
    "drop": "drops its items, a sure duplicate",
    "uncertain": "passes it tagged as uncertain",
    "keep": "keeps it, not a duplicate",
}


def _crawl_lines(crawl: dict[str, str] | None) -> list[str]:
    if crawl is None:
        return []
    does = CRAWL_DOES[crawl["decision"]]
    return [f"Crawl: {crawl['decision']}: a crawl meeting B after A {does} ({crawl['why']})."]


def run_compare(args: argparse.Namespace) -> int:
    config = config_of(args)
    policy = drop_policy(args.drop_above)
    paths = (args.a, args.b)
    fps = (fingerprint_file(args.a, config), fingerprint_file(args.b, config))
    result = compare(fps[1], fps[0], config) if all(fp.judged for fp in fps) else None  # B met after A
    crawl = crawl_decision(fps, result, policy)
    if args.json:
        print(json.dumps(comparison_json(paths, fps, result, config, crawl), indent=2))
    else:
        print(comparison_table(paths, fps, result, config, crawl))
    return 0 if result is not None and result.duplicate else 1  # as diff: 0 when alike


def run_report(args: argparse.Namespace) -> int:
    if args.text_budget < 0:
        raise InputError(f"--text-budget: must be 0 or more, got {args.text_budget}")
    fmt = args.format or format_for(args.output)
    progress = sys.stderr.isatty()
    if args.output:  # written whole, never over the index
        out = write_report(
            args.index, args.output, fmt, args.canonical, progress, text_budget=args.text_budget
        )
        print(f"wrote the {fmt} report of {IndexSpec.parse(args.index)} to {out}", file=sys.stderr)
        return 0
    if sys.stdout is None:
        raise InputError("standard output is closed; write the report to a file with -o FILE")
    with open_existing(IndexSpec.parse(args.index)) as index:
        if fmt == "csv" and hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(newline="")  # the csv module writes its own line ends
        render_report(index, sys.stdout, fmt, args.canonical, progress, index.name, args.text_budget)
    return 0


def run_export(args: argparse.Namespace) -> int:
    from .index.export import export_to_sqlite

    spec = IndexSpec.parse(args.index)
    copied = export_to_sqlite(spec, args.output)
    print(f"exported {copied} records of {spec} to {args.output}", file=sys.stderr)
    return 0


def run_forget(args: argparse.Namespace) -> int:
    from .index import forgetting, open_index
    from .knobs import parse_age

    try:
        age = parse_age(args.older_than)
    except ValueError as exc:
        raise ConfigError("--older-than", str(exc)) from None
    if age is None and args.max_pages is None:
        raise ConfigError("forget", "say what to forget: --older-than AGE, --max-pages N, or both")
    if (age is not None and age <= 0) or (args.max_pages is not None and args.max_pages < 0):
        raise ConfigError(
            "--older-than" if age is not None and age <= 0 else "--max-pages", "must be above 0"
        )
    spec = IndexSpec.parse(args.index)
    with open_existing(spec) as reader:  # refuses a missing index; its settings are the ones to open it by
        config = reader.config
    with open_index(spec, config) as index:
        before = time.time() - age if age is not None else None
        forgotten = forgetting.forget(index, before, args.max_pages)
        left = index.stats()["documents"]
    print(f"forgot {forgotten:,} pages of {spec}; {left:,} left", file=sys.stderr)
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
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 1
    except OSError as exc:  # writing the output: a full disk, /dev/full
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        where = exc.filename or "standard output"
        print(one_line(f"scrapy-neardup: error: {where}: {exc.strerror or exc}"), file=sys.stderr)
        return 2
    except Exception as exc:  # the index failing under a command that opened it well
        error = storage_failure(getattr(args, "index", None), exc)
        if error is None:
            raise
        print(one_line(f"scrapy-neardup: error: {error}"), file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
