"""Crawl runs as one run sees the others: this crawl, earlier crawls, and runs that died.

Runs that run at the same time are one crawl, however many processes or machines: a page one
of them recorded is this crawl's (met again, it is a copy). Runs that ended before this one
began are earlier crawls (their pages met again are revisits). A run that never closed and
no longer shows it is alive died: what it admitted may never have reached its output, so it
is *unconfirmed* for every run that sees it dead.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BEAT_EVERY = 10.0  # seconds between two heartbeats of a live run
# A run whose last heartbeat is older is dead, on any host: longer than the longest the crawl's
# thread may be held (an SQLite lock is waited for up to a minute).
DEAD_AFTER = 120.0


def alive(run: dict[str, Any], now: float) -> bool:
    """Whether the process of a run that has not ended still runs: its heartbeat (or its start)
    is recent and, on this host, its pid is alive and started no later than the run (a pid
    reused after a kill is not it)."""
    started = _number(run.get("started_at"))
    if now - max(started, _number(run.get("beat_at"))) > DEAD_AFTER:
        return False
    return run.get("host") != socket.gethostname() or _pid_runs(run.get("pid"), started)


def _pid_runs(pid: Any, started_at: float) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    if pid == os.getpid():
        return True  # another crawl of this process (its runs stop beating if it fails)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        pass
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return True
    return boot + ticks / os.sysconf("SC_CLK_TCK") <= started_at + 1.0


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


@dataclass(frozen=True)
class Runs:
    """What one run (``current``; None outside a crawl: a scan, a report) knows of the others."""

    current: int | None = None
    beside: frozenset[int] = frozenset()  # runs that ran beside this one (and did not die)
    dead: frozenset[int] = frozenset()  # runs that never closed and stopped showing they live

    def this_crawl(self, run: Any) -> bool:
        """Whether a record of ``run`` was made by this crawl: this run, or one running beside it
        (begun before it and still open when it began, or begun after it), not dead."""
        if self.current is None or not isinstance(run, int) or run in self.dead:
            return False
        return run >= self.current or run in self.beside

    def earlier(self, run: Any) -> bool:
        """Whether a record of ``run`` was made by a crawl over when this one began (ended, or
        dead; a record of no run is older)."""
        return self.current is not None and not self.this_crawl(run)

    def seen(self, open_runs: dict[int, dict[str, Any]], now: float) -> Runs:
        """These runs after a look at the ones not ended: those alive beside this one, those dead.
        A dead run seen alive again (it was paused) is beside this one again."""
        dead = {run for run, found in open_runs.items() if run != self.current and not alive(found, now)}
        living = set(open_runs) - dead - {self.current}
        beside = (self.beside - dead) | living | (self.dead - dead)
        return Runs(self.current, frozenset(beside), frozenset(dead))
