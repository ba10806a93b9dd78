"""Learned URL rules in an SQLite index: each rule's evidence and status, and the requests it skipped
(kept, so that a revoked rule's requests are fetched after all, by this crawl or a resumed one)."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from ....url_rule import next_status
from ... import schema

URL_TABLES = """
CREATE TABLE IF NOT EXISTS url_rules (
    rule TEXT PRIMARY KEY, same INTEGER NOT NULL DEFAULT 0, differ INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'learning', changed_at REAL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS url_skips (
    id INTEGER PRIMARY KEY, url TEXT NOT NULL, target TEXT NOT NULL, request BLOB NOT NULL,
    revived INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS url_skip_rules (
    rule TEXT NOT NULL, skip INTEGER NOT NULL REFERENCES url_skips(id), PRIMARY KEY (rule, skip)
) WITHOUT ROWID
"""


def create_url_tables(db: sqlite3.Connection) -> None:
    """Make the tables (inside the caller's transaction), in a new file or one made without them."""
    schema.execute_statements(db, URL_TABLES)


class SQLiteUrls:
    """The URL rules' side of ``SQLiteIndex`` (``db``, ``_write``)."""

    db: sqlite3.Connection

    def _write(self, work: Any) -> Any:
        raise NotImplementedError

    def url_rules(self) -> list[tuple[str, int, int, str]]:
        """Every rule: (its key's text, same, differ, status)."""
        try:
            return [tuple(row) for row in self.db.execute("SELECT rule, same, differ, status FROM url_rules")]
        except sqlite3.OperationalError:  # a file made before rules were kept, opened to read
            return []

    def add_url_evidence(
        self, changes: dict[str, tuple[int, int]], adopt_at: int
    ) -> dict[str, tuple[int, int, str, str]]:
        """Add (same, differ) to rules' evidence and take their new status (``next_status``) in
        one transaction; for each: its totals, as all processes made them, and its status
        before and after."""

        def work() -> dict[str, tuple[int, int, str, str]]:
            self.db.executemany(
                "INSERT INTO url_rules (rule, same, differ) VALUES (?, ?, ?) ON CONFLICT (rule) DO UPDATE "
                "SET same = same + excluded.same, differ = differ + excluded.differ",
                [(rule, same, differ) for rule, (same, differ) in changes.items()],
            )
            totals, now = {}, time.time()
            for rule in changes:
                same, differ, status = self.db.execute(
                    "SELECT same, differ, status FROM url_rules WHERE rule = ?", (rule,)
                ).fetchone()
                new = next_status(status, same, differ, adopt_at)
                if new != status:
                    self.db.execute(
                        "UPDATE url_rules SET status = ?, changed_at = ? WHERE rule = ?", (new, now, rule)
                    )
                totals[rule] = (same, differ, status, new)
            return totals

        return self._write(work)

    def set_url_rule(self, rule: str, status: str, at: float) -> None:
        self._write(
            lambda: self.db.execute(
                "UPDATE url_rules SET status = ?, changed_at = ? WHERE rule = ?", (status, at, rule)
            )
        )

    def add_url_skip(self, rules: list[str], url: str, target: str, request: bytes) -> None:
        """Keep a skipped request with the rules that predicted it."""

        def work() -> None:
            skip = self.db.execute(
                "INSERT INTO url_skips (url, target, request) VALUES (?, ?, ?)", (url, target, request)
            ).lastrowid
            self.db.executemany(
                "INSERT OR IGNORE INTO url_skip_rules VALUES (?, ?)", [(r, skip) for r in rules]
            )

        self._write(work)

    def url_skips(self, rules: list[str]) -> list[tuple[int, bytes]]:
        """The requests these rules skipped that were not fetched since: (id, the request)."""
        marks = ", ".join("?" * len(rules))
        return [
            tuple(row)
            for row in self.db.execute(
                "SELECT DISTINCT s.id, s.request FROM url_skips s JOIN url_skip_rules r ON r.skip = s.id "
                f"WHERE r.rule IN ({marks}) AND s.revived = 0 AND length(s.request) > 0 ORDER BY s.id",
                rules,
            )
        ]

    def url_revived(self, ids: list[int]) -> None:
        """Note skipped requests scheduled again."""
        self._write(
            lambda: self.db.executemany("UPDATE url_skips SET revived = 1 WHERE id = ?", [(i,) for i in ids])
        )

    def url_skip_counts(self) -> dict[str, tuple[int, int]]:
        """For each rule, the requests it skipped and how many of them were scheduled again."""
        try:
            rows = self.db.execute(
                "SELECT r.rule, COUNT(*), SUM(s.revived) FROM url_skip_rules r "
                "JOIN url_skips s ON s.id = r.skip WHERE length(s.request) > 0 GROUP BY r.rule"
            )
            return {rule: (count, revived or 0) for rule, count, revived in rows}
        except sqlite3.OperationalError:
            return {}

    def url_skipped(self) -> list[tuple[str, str, bool | None, list[str]]]:
        try:
            rows = self.db.execute(
                "SELECT s.id, s.url, s.target, length(s.request) > 0 AND s.revived, "
                "length(s.request) > 0, r.rule FROM url_skips s "
                "LEFT JOIN url_skip_rules r ON r.skip = s.id ORDER BY s.id"
            ).fetchall()
        except sqlite3.OperationalError:  # a file made before rules were kept, opened to read
            return []
        found: dict[object, tuple[str, str, bool | None, list[str]]] = {}
        for skip, url, target, revived, skipped, rule in rows:
            entry = found.setdefault(skip, (str(url), str(target), revived == 1 if skipped else None, []))
            if isinstance(rule, str):
                entry[3].append(rule)
        return list(found.values())

    def forget_url_rules(self) -> None:
        """Forget every rule, and the requests they skipped (NEARDUP_URL_RULES_RESET)."""

        def work() -> None:
            for table in ("url_skip_rules", "url_skips", "url_rules"):
                self.db.execute(f"DELETE FROM {table}")

        self._write(work)
