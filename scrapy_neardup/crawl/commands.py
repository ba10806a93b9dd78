"""``scrapy neardup-report SPIDER``: the duplicate report of a spider's index, from the project settings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from ..exceptions import NearDupError
from ..index import IndexSpec
from ..report import FORMATS, format_for, write_report
from ..report.clusters import CANONICAL_POLICIES
from .settings import index_location


class NeardupReportCommand(ScrapyCommand):
    """Writes the HTML, JSON or CSV report of the index a crawl of SPIDER used.

    The index is found as the crawl finds it: ``NEARDUP_INDEX`` (a file or a Redis index), else
    ``JOBDIR``, else the project's ``.scrapy/neardup/<spider>.sqlite``; ``-s JOBDIR=...``
    selects a job's.
    """

    requires_project = True
    default_settings: ClassVar[dict[str, object]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[options] <spider>"

    def short_desc(self) -> str:
        return "Write the near-duplicate report of a spider's index (HTML, JSON or CSV)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("-o", "--output", help="report file (default: neardup-report-<spider>.<format>)")
        parser.add_argument("--format", choices=FORMATS, help="default: from the output's suffix, else html")
        parser.add_argument(
            "--canonical", choices=CANONICAL_POLICIES, help="default: NEARDUP_CANONICAL or first-seen"
        )
        parser.add_argument(
            "--index",
            "--db",
            dest="index",
            help="the index, a file or redis://... (default: as the crawl finds it)",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name the spider whose index to report")
        spider = args[0]
        assert self.settings is not None
        try:
            index = opts.index or index_location(self.settings, spider)
        except NearDupError as exc:
            print(f"scrapy neardup-report: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        fmt = opts.format or format_for(opts.output, "html")
        out = Path(opts.output or f"neardup-report-{spider}.{fmt}")
        canonical = opts.canonical or self.settings.get("NEARDUP_CANONICAL") or "first-seen"
        try:
            path = write_report(index, out, fmt, canonical, progress=sys.stderr.isatty())
        except NearDupError as exc:
            print(f"scrapy neardup-report: {exc}{self._unknown(spider)}", file=sys.stderr)
            self.exitcode = 2
            return
        print(f"wrote the {fmt} report of {IndexSpec.parse(index)} to {path}")

    def _unknown(self, spider: str) -> str:
        """What to add when the report failed for a spider the project does not have (a typo)."""
        loader = getattr(self.crawler_process, "spider_loader", None)
        if loader is None or spider in loader.list():
            return ""
        return f" ({spider!r} is no spider of this project: `scrapy list` names them)"
