"""The JSON report: counts, the canonical policy and settings, and the clusters with their members.

``write_json`` streams one cluster at a time (one per line inside the ``clusters`` array), so
a report of a million-page index is never held as one string; ``json_report`` returns the
same object as a dict for callers that want it in memory (the scan summary, tests).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO

from ..index import Index
from .clusters import ClusterSet, ReportCluster, load_clusters
from .progress import Progress
from .url_rules import url_rules_json, url_skips_json


def header(clusters: ClusterSet) -> dict[str, Any]:
    """The report's keys other than ``clusters``."""
    return {
        "documents": clusters.documents,
        "duplicates": clusters.duplicates,
        "skipped": clusters.skipped,
        "unique": clusters.unique,
        "forgotten": clusters.forgotten,
        "canonical_policy": clusters.policy,
        "settings": clusters.settings,
        "url_rules": url_rules_json(clusters.url_rules),
        "url_skips": url_skips_json(clusters.url_skips),
        "let_through": [
            {"url": w.url, "resembles": w.resembles, "similarity": w.similarity, "method": w.method}
            for w in clusters.let_through
        ],
    }


def cluster_json(cluster: ReportCluster, clean_url: Callable[[str], str] = str) -> dict[str, Any]:
    """One cluster: its number, canonical URL (and its clean URL by the learned URL rules), size
    and members (canonical first)."""
    urls = {m.id: m.url for m in cluster.members}
    return {
        "id": cluster.number,
        "canonical": cluster.canonical.url,
        "clean_url": clean_url(cluster.canonical.url),
        "size": cluster.size,
        "members": [
            {
                "url": m.url,
                "title": m.title,
                "duplicate_of": urls.get(m.duplicate_of) if m.duplicate_of else None,
                "similarity": m.similarity,
                "method": m.method,
                "seen_at": m.seen_at,
                "uncertain": m.uncertain,
            }
            for m in cluster.members
        ],
    }


def write_json(clusters: ClusterSet, handle: TextIO, progress: Progress | None = None) -> None:
    """Write the report to ``handle``, a cluster per line, largest first."""
    progress = progress or Progress(enabled=False)
    head = json.dumps(header(clusters), indent=2, ensure_ascii=False)
    handle.write(head[:-2] + ',\n  "clusters": [')
    progress.start("writing JSON", len(clusters.clusters))
    for i, cluster in enumerate(clusters.clusters):
        handle.write(
            ("\n    " if i == 0 else ",\n    ")
            + json.dumps(cluster_json(cluster, clusters.clean_url), ensure_ascii=False)
        )
        progress.tick()
    handle.write("\n  ]\n}\n" if clusters.clusters else "]\n}\n")
    progress.finish()


def json_report(index: Index, canonical: str = "first-seen") -> dict[str, Any]:
    """The whole report as a plain dict (the schema is documented in the README)."""
    clusters = load_clusters(index, canonical)
    return {**header(clusters), "clusters": [cluster_json(c, clusters.clean_url) for c in clusters.clusters]}
