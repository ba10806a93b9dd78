"""Copy an index into a new SQLite file: a server's index (Redis, PostgreSQL) kept as one file.

Every record is copied in the order it was seen, with its verdict, signatures and kept text;
admitted pages are posted again, so the file is a working index of its own, not only a report.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

from ..exceptions import IndexFileError, InputError
from ..signatures.spotsigs import spots32
from . import SQLiteIndex, open_existing
from .codecs import damaged_record
from .ledger import Ledger
from .location import IndexSpec


def export_to_sqlite(spec: IndexSpec, out: str | Path) -> int:
    """Copy the server's index ``spec`` names into the new SQLite index file ``out``; the number
    of records copied."""
    out = Path(out)
    if out.exists():
        raise InputError(f"{out}: exists already; name a new file for the export")
    if spec.backend in ("sqlite", "memory"):
        raise IndexFileError(
            spec, "is no index on a server; export copies a Redis or PostgreSQL one into a file"
        )
    with open_existing(spec) as source:
        try:
            return _export(source, out)
        except sqlite3.Error as exc:
            raise IndexFileError(out, f"cannot be written ({exc})") from None


def _export(source: Ledger, out: Path) -> int:
    new_ids: dict[int, int] = {}
    with SQLiteIndex(out, source.config) as target, target.batch():
        action = source.last_action()
        if action:
            target.begin_run(action)
        for record in source.documents():
            try:
                copied = _copy(source, target, record, new_ids)
            except (
                ValueError,
                TypeError,
                OverflowError,
                RecursionError,
                sqlite3.IntegrityError,
            ) as exc:  # written by another program
                damaged_record(source.path, record["id"], exc)
                continue
            new_ids[record["id"]] = copied
        if action:
            target.end_run()
    return len(new_ids)


def _copy(source: Ledger, target: SQLiteIndex, record: dict, new_ids: dict[int, int]) -> int:
    """Copy one record; its id in ``target``."""
    doc = record["id"]
    fp, where, key = source.stored(doc)
    skipped = record["skip_reason"] if record["status"] == "skipped" else None
    fp = dataclasses.replace(
        fp, spots=spots32(fp.spots), skip_reason=skipped, token_count=record["tokens"],
        language=record["language"] or "und", title=record["title"] or "",
        text=source.text(doc) or "",
    )  # fmt: skip
    of = record["duplicate_of"]
    match = (new_ids[of], record["similarity"], record["method"]) if of in new_ids else None
    with target.transaction():
        admit = record["status"] == "unique"  # a page let through keeps its weak link
        return target.record(record["url"], fp, record["scope"], match, where, key, admit=admit).doc_id
