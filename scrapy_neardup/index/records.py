"""A page's record, built once for every backend, and read back as the report expects it."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from ..comments import content_of
from ..methods import STORED_FIELDS, Fingerprint
from ..text import storable
from ..verdict import Verdict
from .base import Earlier, Match
from .codecs import SIGNATURE_FIELDS, extra_json, row_fingerprint, signed, spots_blob, unsigned
from .runs import Runs


def stored_row(
    url: str,
    fp: Fingerprint,
    scope: Any,
    match: Match | None,
    source: str | None,
    key: str | None,
    run: Any,
    admit: bool = False,
) -> dict[str, Any]:
    """The fields a backend keeps for a page: its verdict and its signatures, encoded as stored
    (``fp.spots`` in the stored 32-bit form). ``scope`` is the backend's own id of the scope.
    With ``admit``, a page with a match is admitted all the same (let through: its match is a
    weak link, not a duplicate edge)."""
    status = "skipped" if not fp.judged else ("duplicate" if match and not admit else "unique")
    spots = fp.spots
    return {
        "url": storable(url), "title": storable(fp.title) or None,
        "source": storable(source) if source else None, "scope": scope, "seen_at": time.time(),
        "status": status, "skip_reason": fp.skip_reason, "tokens": fp.token_count, "language": fp.language,
        "duplicate_of": match[0] if match else None, "similarity": match[1] if match else None,
        "method": match[2] if match else None,
        "raw_hash": signed(fp.raw_hash >> 64) if fp.raw_hash is not None else None,
        "exact": fp.exact.to_bytes(16, "big") if fp.exact is not None else None,
        "simhash": signed(fp.simhash) if fp.simhash is not None else None,
        "spot_size": spots.size if fp.judged else None,
        # A duplicate's spots are never loaded again: its Jaccard is recorded already.
        "spots": spots_blob(spots) if status == "unique" and len(spots) else None,
        **{stored.field: stored.encode(getattr(fp, stored.field)) for stored in STORED_FIELDS},
        "extra": extra_json(fp), "run": run, "url_key": key,
    }  # fmt: skip


def verdict_of(url: str, doc_id: int, fp: Fingerprint, match: Match | None, of_url: str | None) -> Verdict:
    """The verdict on a page just recorded (``of_url``: the URL of what it duplicates)."""
    return Verdict(
        url=url, doc_id=doc_id, duplicate=bool(match), skip_reason=fp.skip_reason,
        duplicate_of=match[0] if match else None, duplicate_of_url=of_url,
        similarity=match[1] if match else None, method=match[2] if match else None, content=content_of(fp),
    )  # fmt: skip


def earlier_of(rows: list[tuple[int, str, Any, Any, Any]], many: bool, runs: Runs) -> Earlier | None:
    """A page's own records, (id, status, exact as stored, run, duplicate_of) newest first, as the
    one it is met again as: its admitted one, else its latest. A record this crawl made (this run,
    or one beside it) comes first (``ours``: the page is a copy within one crawl); else the page is
    a revisit. With ``many`` (items), only records of earlier crawls count: two items of one key
    in one crawl are two items, judged against each other."""
    ours = [r for r in rows if runs.this_crawl(r[3])]
    if many:
        rows = [r for r in rows if not runs.this_crawl(r[3])]
    elif ours:
        rows = ours
    if not rows:
        return None
    doc, status, exact, _, of = next((r for r in rows if r[1] == "unique"), rows[0])
    if isinstance(exact, bytes):
        exact = int.from_bytes(exact, "big") if exact else None
    admitted = tuple(r[0] for r in rows if r[1] == "unique")
    original = of if status == "duplicate" and isinstance(of, int) else doc
    return Earlier(doc, status, exact, frozenset(r[0] for r in rows), admitted, original, rows is ours)


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
    record["scope"] = record["scope"] or ""
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


def stored_fingerprint(doc_id: int, doc: dict[str, Any]) -> Fingerprint:
    """A stored record's signatures, from its fields (``ValueError``, ``TypeError`` or, for JSON
    nested past the interpreter's depth, ``RecursionError`` for a damaged one)."""
    row = (doc_id, *(doc.get(name) for name in SIGNATURE_FIELDS[1:]))
    fp = row_fingerprint((*row[:-3], doc.get("tokens") or 0, *row[-2:]))
    raw = doc.get("raw_hash")
    return dataclasses.replace(fp, raw_hash=unsigned(raw) << 64) if isinstance(raw, int) else fp
