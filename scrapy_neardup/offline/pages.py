"""A saved page as the readers give it, and the record of what they could not read."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..text import storable

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Page:
    """One saved page: its URL, where it was read (``source``, unique per input) and its body.

    ``is_text`` when the body is already extracted text. Resuming keys on ``source``, not on
    the URL: two saved copies may well name the same canonical URL.
    """

    url: str
    body: bytes | str
    source: str
    is_text: bool = False
    content_type: str | None = None
    read_to: int = 0  # bytes of its input (file or folder) read once it was read: the scan's progress


class Skips:
    """Records the readers could not read, by reason. The first few of a reason are logged with
    their file and position; the rest are counted and summed up by ``summary``, so a feed of a
    million records that all lack a field gives a few lines, not a million."""

    SHOWN = 5  # records logged one by one for each reason

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, reason: str, where: str, why: str) -> None:
        self.counts[reason] += 1
        if self.counts[reason] <= self.SHOWN:
            logger.warning("skipped %s: %s", where, why)
            if self.counts[reason] == self.SHOWN:
                logger.warning("(more records skipped for %s are counted, not shown)", reason)

    def summary(self) -> None:
        """Log how many records of each reason were skipped without a line of their own."""
        for reason, count in sorted(self.counts.items()):
            if count > self.SHOWN:
                logger.warning("skipped %d more records for %s (the first %d are named above)",
                               count - self.SHOWN, reason, self.SHOWN)  # fmt: skip


def path_name(path: Path) -> str:
    """A path as it can be logged and stored (a file name that is not UTF-8 escaped)."""
    return storable(str(path))
