"""Whether a crawl run that never ended is still running (its pages are then confirmed)."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def running(started_at: float, host: str | None, pid: int | None) -> bool:
    """Whether the process of a run that has not ended still runs (another crawl on this file).

    A run of another host is taken as running; on this host its pid must be alive and, where
    /proc tells, have started no later than the run (a pid reused after a kill is not it).
    """
    if host != socket.gethostname():
        return True
    if pid is None or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
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


def of_earlier_crawl(run: int | None, current: int | None, beside: frozenset[int]) -> bool:
    """Whether a record of ``run`` was made by a crawl over when the ``current`` one began: not
    this crawl, none begun after it, none running ``beside`` it (a record of no run is older)."""
    return current is not None and (run is None or (run < current and run not in beside))
