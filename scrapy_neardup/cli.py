"""The ``scrapy-neardup`` command line: ``compare`` two saved pages method by method.

Errors a user can fix (a missing file, a bad flag, a missing extra) print one line
naming the thing to fix and exit with status 2; there is no traceback for them.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
import zlib
from pathlib import Path
from typing import Any

from . import __version__
from .config import METHODS, DedupConfig
from .exceptions import InputError, NearDupError
from .fingerprint import Fingerprint, fingerprint
from .verify import DECISION_ORDER, Comparison, compare

HTML_SUFFIXES = (".html", ".htm", ".xhtml")
TEXT_SUFFIXES = (".txt",)


def read_page(path: str | Path) -> tuple[bytes, bool]:
    """A saved page's bytes and whether it is plain text (.txt) rather than HTML; .gz is unpacked."""
    path = Path(path)
    name = path.name.lower()
    packed = name.endswith(".gz")
    inner = name[:-3] if packed else name
    if not inner.endswith(HTML_SUFFIXES + TEXT_SUFFIXES):
        raise InputError(
            f"{path}: unsupported file type; expected .html, .htm, .xhtml or .txt, optionally .gz"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if packed:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{path}: not a valid gzip file ({exc})") from None
    return data, inner.endswith(TEXT_SUFFIXES)


def fingerprint_file(path: str, config: DedupConfig) -> Fingerprint:
    """Fingerprint a saved page with every method, so ``compare`` can show them all."""
    data, is_text = read_page(path)
    page_config = dataclasses.replace(config, extractor="text") if is_text else config
    return fingerprint(data, page_config, methods=frozenset(METHODS))


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
    raw = {name: (results[name].raw if name in results else None) for name in DECISION_ORDER}
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
    missing = [m for m in DECISION_ORDER if m not in result.results]
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
    options = {name: getattr(args, name) for name, _, _ in DedupConfig.docs()}
    config = DedupConfig.from_options(options)
    paths = (args.a, args.b)
    fps = (fingerprint_file(args.a, config), fingerprint_file(args.b, config))
    result = compare(*fps, config) if all(fp.judged for fp in fps) else None
    if args.json:
        print(json.dumps(comparison_json(paths, fps, result, config), indent=2))
    else:
        print(comparison_table(paths, fps, result, config))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except NearDupError as exc:
        print(f"scrapy-neardup: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
