"""A one-line progress bar for long report runs on a terminal; silent when disabled.

Callers tick once per item without checking whether the bar is on, so the hot loops stay
plain; the bar redraws at most a few times a second, and only every ``STRIDE`` items it
even looks at the clock, which keeps a tick to an integer increment.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

STRIDE = 2048
WIDTH = 30


class Progress:
    """``start(label, total)``, ``tick()`` per item, ``finish()``; draws on ``stream`` when enabled."""

    def __init__(self, enabled: bool, stream: TextIO | None = None, interval: float = 0.2) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.label = ""
        self.total = 0
        self.count = 0
        self._next = 0.0
        self._started = 0.0

    def start(self, label: str, total: int | None = None) -> None:
        self.label, self.total, self.count = label, total or 0, 0
        self._started = time.monotonic()
        self._next = 0.0
        self._draw()

    def tick(self) -> None:
        before = self.count
        self.count += 1
        if self.enabled and (self.count // STRIDE != before // STRIDE) and time.monotonic() >= self._next:
            self._draw()

    def finish(self) -> None:
        if self.enabled:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        self._next = now + self.interval
        elapsed = now - self._started
        if self.total:
            share = min(1.0, self.count / self.total)
            filled = round(share * WIDTH)
            bar = "#" * filled + "-" * (WIDTH - filled)
            line = f"{self.label} [{bar}] {share:4.0%} {self.count:,}/{self.total:,} {elapsed:5.1f}s"
        else:
            line = f"{self.label} {self.count:,} {elapsed:5.1f}s"
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()
