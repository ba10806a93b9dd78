"""The JSON report: documents, duplicates and clusters with their canonical page and members."""

from __future__ import annotations

from typing import Any

from ..index import Index
from .clusters import build_clusters


def json_report(index: Index) -> dict[str, Any]:
    """The report as a plain dict (the schema is documented in the README)."""
    edges = list(index.duplicate_edges())
    clusters = build_clusters((doc, other) for doc, other, _, _ in edges)
    in_cluster = {doc for cluster in clusters for doc in cluster.members}
    records = {r["id"]: r for r in index.documents() if r["id"] in in_cluster}
    stats = index.stats()

    def member(doc_id: int) -> dict[str, Any]:
        record = records[doc_id]
        original = records.get(record["duplicate_of"]) if record["duplicate_of"] else None
        return {
            "url": record["url"], "duplicate_of": original["url"] if original else None,
            "similarity": record["similarity"], "method": record["method"], "seen_at": record["seen_at"],
        }  # fmt: skip

    return {
        "documents": stats["documents"],
        "duplicates": stats["duplicates"],
        "skipped": stats["skipped"],
        "clusters": [
            {
                "id": number,
                "canonical": records[c.canonical]["url"],
                "size": len(c.members),
                "members": [member(doc) for doc in c.members],
            }
            for number, c in enumerate(clusters, start=1)
        ],
    }
