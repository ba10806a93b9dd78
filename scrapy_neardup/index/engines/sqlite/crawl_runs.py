"""Crawl runs in an SQLite index: which pages a crawl that never closed admitted (unconfirmed),
and which records crawls over before this one made (a re-run's revisits)."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from typing import Any

from ...runs import of_earlier_crawl, running


class SQLiteRuns:
    """``begin_run``, ``end_run`` and what they tell of records, for ``SQLiteIndex`` (``db``, ``_write``)."""

    db: sqlite3.Connection
    _run: int | None
    _unclean: frozenset[int]
    _beside: frozenset[int]

    def _write(self, work: Any) -> Any:
        raise NotImplementedError

    def begin_run(self, action: str) -> None:
        """Start a crawl run: the pages it admits are stamped with it.

        What a run that never closed (its process is gone) admitted may never have reached the
        crawl's output (feed exports buffer, a kill loses the buffer), so it is *unconfirmed*.
        """

        def work() -> tuple[int, list[tuple]]:
            open_runs = self.db.execute(
                "SELECT id, started_at, host, pid FROM runs WHERE ended_at IS NULL"
            ).fetchall()
            run = self.db.execute(
                "INSERT INTO runs (started_at, action, host, pid) VALUES (?, ?, ?, ?)",
                (time.time(), action, socket.gethostname(), os.getpid()),
            ).lastrowid
            return run, open_runs

        self._run, open_runs = self._write(work)
        self._unclean = frozenset(run for run, *owner in open_runs if not running(*owner))
        self._beside = frozenset(run for run, *_ in open_runs) - self._unclean

    def end_run(self) -> None:
        """Close the run cleanly: what it admitted reached the output as far as this crawl knows."""
        if self._run is not None:
            run, self._run = self._run, None
            self._write(
                lambda: self.db.execute("UPDATE runs SET ended_at = ? WHERE id = ?", (time.time(), run))
            )

    def last_action(self) -> str | None:
        """What the latest crawl run did with duplicates (``drop`` or ``tag``); None for a scanned index."""
        row = self.db.execute("SELECT action FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return row[0] if row else None

    @property
    def interrupted_runs(self) -> bool:
        """Whether runs that never closed admitted pages this one may meet (unconfirmed pages)."""
        return bool(self._unclean)

    def unconfirmed(self, ids: list[int]) -> set[int]:
        """Those of ``ids`` admitted by a run that never closed."""
        if not self._unclean or not ids:
            return set()
        runs = sorted(self._unclean)
        rows = self.db.execute(
            f"SELECT id FROM documents WHERE id IN ({','.join('?' * len(ids))}) "
            f"AND run IN ({','.join('?' * len(runs))})",
            [*ids, *runs],
        )
        return {r[0] for r in rows}

    def from_earlier_crawls(self, ids: list[int]) -> set[int]:
        if self._run is None or not ids:
            return set()
        rows = self.db.execute(f"SELECT id, run FROM documents WHERE id IN ({','.join('?' * len(ids))})", ids)
        return {i for i, run in rows if of_earlier_crawl(run, self._run, self._beside)}
