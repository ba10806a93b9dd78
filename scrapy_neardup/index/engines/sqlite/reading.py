"""The read side of an SQLite index: records, texts, duplicate pairs and counts, for reports.

Every query streams, so a report of a million pages holds one row at a time; a damaged row or
text is read as far as it can be, never stopping the report (``records.clean_record``).
"""

from __future__ import annotations

import logging
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path

from ...records import clean_record
from .opening import file_bytes

logger = logging.getLogger(__name__)


class SQLiteReading:
    """Read queries over an open index file (``db``, ``path``): the protocol's read side."""

    db: sqlite3.Connection
    path: Path

    def get(self, doc_id: int) -> dict | None:
        """One document's record (url, scope, status, verdict, sizes), or None."""
        return next(self._records("WHERE d.id = ?", (doc_id,)), None)

    def text(self, doc_id: int) -> str | None:
        """The main text kept for a document (its first ``keep_text`` characters), or None."""
        try:
            row = self.db.execute("SELECT text FROM texts WHERE doc = ?", (doc_id,)).fetchone()
            return zlib.decompress(row[0]).decode("utf-8", errors="replace") if row else None
        except (zlib.error, TypeError, sqlite3.DatabaseError) as exc:  # one damaged text, not the report
            logger.warning(
                "%s: the stored text of document %d is damaged (%s); left out", self.path, doc_id, exc
            )
            return None

    def documents(self) -> Iterator[dict]:
        """Every recorded page in the order seen, streamed."""
        return self._records("ORDER BY d.id")

    def _records(self, where: str, args: tuple = ()) -> Iterator[dict]:
        cur = self.db.execute(
            "SELECT d.id, d.url, d.title, s.name AS scope, d.seen_at, d.status, d.skip_reason, d.tokens, "
            "d.language, d.duplicate_of, d.similarity, d.method "
            f"FROM documents d JOIN scopes s ON s.id = d.scope {where}",
            args,
        )
        names = [c[0] for c in cur.description]
        for row in cur:
            yield clean_record(dict(zip(names, row, strict=True)))

    def duplicate_edges(self) -> Iterator[tuple[int, int, float | None, str | None]]:
        """(document, duplicate_of, similarity, method) for every duplicate, streamed."""
        yield from self.db.execute(
            "SELECT id, duplicate_of, similarity, method FROM documents "
            "WHERE status = 'duplicate' ORDER BY id"
        )

    def contains_source(self, source: str) -> bool:
        """Whether the page read from this source was already recorded (a resumed scan skips it)."""
        row = self.db.execute("SELECT 1 FROM documents WHERE source = ? LIMIT 1", (source,)).fetchone()
        return row is not None

    def stats(self) -> dict[str, int]:
        """Counts of documents by status, and the file size in bytes."""
        counts = dict(self.db.execute("SELECT status, COUNT(*) FROM documents GROUP BY status"))
        size = file_bytes(self.path)
        return {
            "documents": sum(counts.values()), "unique": counts.get("unique", 0),
            "duplicates": counts.get("duplicate", 0), "skipped": counts.get("skipped", 0), "bytes": size,
        }  # fmt: skip
