"""Stored records as the report reads them, whatever a damaged or hand-edited file holds."""

from __future__ import annotations

_TEXT_FIELDS = ("url", "title", "scope", "status", "skip_reason", "language", "method")


def clean_record(record: dict) -> dict:
    """A documents row as the report expects its types: a file edited or damaged by hand may hold
    bytes, text or out-of-range numbers anywhere, and one row must not stop a report."""
    for name in _TEXT_FIELDS:
        value = record[name]
        if isinstance(value, bytes):
            record[name] = value.decode("utf-8", errors="replace")
        elif value is not None and not isinstance(value, str):
            record[name] = str(value)
    record["url"] = record["url"] or ""
    seen = record["seen_at"]
    record["seen_at"] = float(seen) if isinstance(seen, (int, float)) and 0 <= seen < 1e11 else 0.0
    similarity = record["similarity"]
    ok = isinstance(similarity, (int, float)) and 0.0 <= similarity <= 1.0
    record["similarity"] = float(similarity) if ok else None
    tokens = record["tokens"]
    record["tokens"] = tokens if isinstance(tokens, int) and tokens >= 0 else 0
    if not isinstance(record["duplicate_of"], int):
        record["duplicate_of"] = None
    return record
