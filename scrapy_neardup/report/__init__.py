"""Duplicate reports: clusters read from an index alone, so any crawl or scan can be reported.

``write_report`` is the one entry point for the command line, the crawl's report at close
and the ``scrapy neardup-report`` command: HTML (self-contained, with charts), JSON or CSV.
"""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
from pathlib import Path
from typing import TextIO

from ..exceptions import ConfigError, InputError
from ..index import Index, IndexSpec, open_existing
from .clusters import CANONICAL_POLICIES, ClusterSet, check_policy, load_clusters
from .csv_report import write_csv
from .html_report import TEXT_BUDGET, write_html
from .json_report import json_report, write_json
from .progress import Progress

FORMATS = ("html", "json", "csv")
SUFFIXES = {".html": "html", ".htm": "html", ".json": "json", ".csv": "csv"}

__all__ = [
    "CANONICAL_POLICIES",
    "FORMATS",
    "ClusterSet",
    "Progress",
    "check_format",
    "check_policy",
    "format_for",
    "json_report",
    "load_clusters",
    "render_report",
    "write_report",
]


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ConfigError(
            "NEARDUP_REPORT_FORMAT (--format)", f"unknown report format {fmt!r}; use {', '.join(FORMATS)}"
        )
    return fmt


def format_for(path: str | Path | None, default: str = "json") -> str:
    """The format a report file's suffix asks for (``report.html`` -> html), else ``default``."""
    return SUFFIXES.get(Path(path).suffix.lower(), default) if path else default


def render_report(
    index: Index,
    handle: TextIO,
    fmt: str = "html",
    canonical: str = "first-seen",
    progress: bool | Progress = False,
    source: str = "",
    text_budget: int = TEXT_BUDGET,
) -> ClusterSet:
    """Write the report of an open index to a text handle (CSV wants one opened with ``newline=''``)."""
    check_format(fmt)
    check_policy(canonical)
    bar = progress if isinstance(progress, Progress) else Progress(enabled=progress)
    clusters = load_clusters(index, canonical, bar)
    if fmt == "json":
        write_json(clusters, handle, bar)
    elif fmt == "csv":
        write_csv(clusters, index, handle, bar)
    else:
        write_html(clusters, index, handle, bar, source=source, text_budget=text_budget)
    return clusters


def check_report_path(out: Path, index: IndexSpec, setting: str = "-o") -> None:
    """Refuse a report path that would replace an index file (or its WAL) or something not a file."""
    if index.is_file:
        db = Path(index.where).resolve()
        index_files = {db, *(db.with_name(db.name + end) for end in ("-wal", "-shm", "-journal"))}
        if out.resolve() in index_files:
            raise InputError(f"{setting} {out}: is the index file itself; name another file for the report")
    if out.exists() and not out.is_file():
        raise InputError(f"{setting} {out}: is not a regular file (a device or a socket); name a file")


def write_report(
    location: str | os.PathLike[str] | IndexSpec,
    out_path: str | os.PathLike[str],
    fmt: str = "html",
    canonical: str = "first-seen",
    progress: bool = False,
    *,
    text_budget: int = TEXT_BUDGET,
) -> Path:
    """Write the report of the index at ``location`` (a file, ``redis://...?prefix=...``) to
    ``out_path`` and return that path.

    The file appears whole or not at all (written beside it, then renamed), so a report
    being rewritten at the end of each crawl is never seen half-written. ``progress`` draws
    a bar on standard error.
    """
    spec = location if isinstance(location, IndexSpec) else IndexSpec.parse(os.fspath(location))
    _check_output(Path(out_path), fmt, canonical)
    check_report_path(Path(out_path), spec)
    with open_existing(spec) as index:
        return write_index_report(
            index, out_path, fmt, canonical, progress, source=index.name, text_budget=text_budget
        )


def write_index_report(
    index: Index,
    out_path: str | Path,
    fmt: str = "html",
    canonical: str = "first-seen",
    progress: bool = False,
    *,
    source: str = "",
    text_budget: int = TEXT_BUDGET,
) -> Path:
    """Write the report of an open index (any backend) to ``out_path``, whole or not at all."""
    out = Path(out_path)
    _check_output(out, fmt, canonical)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for stale in out.parent.glob(f".{glob.escape(out.name)}.*.tmp"):  # left by a killed writer
            stale.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise InputError(f"{out}: cannot write the report there ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="" if fmt == "csv" else None) as handle:
            render_report(index, handle, fmt, canonical, progress, source=source, text_budget=text_budget)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):  # a full disk
            raise InputError(f"{out}: cannot write the report there ({exc.strerror or exc})") from None
        raise
    return out


def _check_output(out: Path, fmt: str, canonical: str) -> None:
    check_format(fmt)
    check_policy(canonical)
    if out.is_dir():
        raise InputError(f"{out}: is a folder; name the report file (say {out / ('report.' + fmt)})")
