"""Worker processes that end with the process that started them, however it ends.

A crawl or scan killed with SIGKILL stops nobody: a ``ProcessPoolExecutor`` worker waits on
its job queue, whose write end it holds itself, so it never reads an end of file, and the
multiprocessing resource tracker lives as long as any worker holds its pipe. Each worker
therefore asks Linux for a signal when its parent dies, and checks its parent between and
during jobs from a thread of its own (the check alone covers other systems).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # linux/prctl.h
CHECK_EVERY = 0.5  # seconds between two looks at the parent


def end_with_parent(parent: int, death_signal: bool = True) -> None:
    """A worker's initializer: end this process once ``parent`` has ended.

    ``death_signal``: also ask Linux to kill it at once (it fires when the *thread* that
    started the worker ends, and workers are started from the thread that submits jobs).
    """
    if death_signal and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), name="neardup-parent-watch", daemon=True).start()


def _watch(parent: int) -> None:
    """Exit when the parent is gone: this process is then a child of init or a subreaper."""
    while os.getppid() == parent:
        time.sleep(CHECK_EVERY)
    os._exit(1)
