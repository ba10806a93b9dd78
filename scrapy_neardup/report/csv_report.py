"""The CSV report: one row per document the index recorded, clustered or not, in the order seen.

Rows stream from the index; only the clustered pages are held (to name each row's cluster,
canonical page and matched page). A cell that a spreadsheet would run as a formula (it
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) gets a leading ``'``:
URLs and titles come from the web.
"""

from __future__ import annotations

import csv
import datetime as dt
from typing import TextIO

from ..index import Index
from .clusters import ClusterSet
from .progress import Progress

COLUMNS = (
    "url", "cluster_id", "canonical", "is_canonical", "duplicate_of", "similarity", "method", "seen_at",
    "status", "skip_reason", "title", "clean_url",
)  # fmt: skip
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(value: str | None) -> str:
    """A text cell that no spreadsheet runs as a formula."""
    if not value:
        return ""
    return "'" + value if value.startswith(_FORMULA_START) else value


def iso_time(seen_at: float) -> str:
    """Unix time as ISO 8601 in UTC, to the millisecond."""
    return dt.datetime.fromtimestamp(seen_at, dt.timezone.utc).isoformat(timespec="milliseconds")


def write_csv(clusters: ClusterSet, index: Index, handle: TextIO, progress: Progress | None = None) -> None:
    """Write a header and one row per document to ``handle`` (opened with ``newline=''``)."""
    progress = progress or Progress(enabled=False)
    by_id = clusters.members_by_id()
    resembles = {w.id: w.resembles for w in clusters.let_through}
    writer = csv.writer(handle, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    progress.start("writing CSV", clusters.documents)
    for r in index.documents():
        progress.tick()
        found = by_id.get(r["id"])
        if found is None:
            cluster_id = canonical = is_canonical = duplicate_of = ""
        else:
            cluster, _member = found
            cluster_id, canonical = str(cluster.number), cell(cluster.canonical.url)
            is_canonical = "1" if cluster.canonical.id == r["id"] else "0"
            target = by_id.get(r["duplicate_of"]) if r["duplicate_of"] else None
            duplicate_of = cell(target[1].url) if target else ""
        if r["id"] in resembles:  # a page let through: what it resembles
            duplicate_of = cell(resembles[r["id"]])
        similarity = "" if r["similarity"] is None else f"{r['similarity']:.4f}"
        writer.writerow((
            cell(r["url"]), cluster_id, canonical, is_canonical, duplicate_of, similarity, r["method"] or "",
            iso_time(r["seen_at"]), r["status"], r["skip_reason"] or "", cell(r["title"]),
            cell(clusters.clean_url(r["url"])),
        ))  # fmt: skip
    for s in clusters.url_skips:  # requests never downloaded: the page each was predicted to copy
        reason = "; ".join(s.rules) + ("; scheduled again" if s.revived else "")
        status = "not_fetched" if s.skipped else "would_skip"  # tag mode fetched it
        copy_of = cell(s.predicted_copy_of)
        writer.writerow((cell(s.url), "", "", "", copy_of, "", "url_rule", "", status, cell(reason), "", ""))
    progress.finish()
