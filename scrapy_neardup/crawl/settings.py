"""CrawlSettings: the crawl's side of the settings (the detection knobs are DedupConfig's), declared
once with ``knobs`` and checked at start, each error naming its setting."""

from __future__ import annotations

import dataclasses
import difflib
import logging
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrapy.settings import BaseSettings
from scrapy.utils.project import data_path

from ..config import MAX_WORKERS, DedupConfig
from ..decision import SURE_SIMILARITY
from ..exceptions import ConfigError, NearDupError
from ..index import IndexSpec
from ..index.location import with_prefix
from ..knobs import (
    Check,
    between,
    checked,
    choice,
    declarations,
    knob,
    parse_age,
    parse_bool,
    parse_field,
    parse_float,
    parse_int,
    parse_optional_int,
    parse_path,
    parse_str,
    parse_text,
    parsed,
    renamed,
    setting_name,
)
from ..report import FORMATS, SUFFIXES
from ..report.clusters import CANONICAL_POLICIES
from ..url_rule import MAX_ERROR, MISSED_SHARE
from ..urls import EXPLORE
from ..workers import AUTO_WORKERS_AFTER, default_workers, main_script_guarded
from .policy import Action

logger = logging.getLogger("scrapy_neardup")

# Settings of the add-on that no settings class holds: the switch the add-on sets.
SWITCHES = ("NEARDUP_ENABLED",)


def _in(options: Any, what: str) -> Check:
    """A check that the value is one of ``options`` (a registry read when the check runs)."""

    def check(value: Any, values: dict[str, Any]) -> str | None:
        if value is None or value in options:
            return None
        return f"unknown {what} {value!r}; choose from {', '.join(options)}"

    return check


def _location(value: Any, values: dict[str, Any]) -> str | None:
    if value is None:
        return None
    try:
        IndexSpec.parse(value.replace("%(spider)s", "spider"), default_prefix="spider")
    except NearDupError as exc:
        return str(exc).removeprefix("index ")
    return None


@dataclass(frozen=True)
class CrawlSettings:
    """The crawl-side settings, ``NEARDUP_<FIELD>``; ``from_settings`` reads and completes them."""

    action: Action = knob(
        Action.DROP,
        choice(Action),
        "drop: a duplicate page reaches the spider and its items are dropped; ignore: its response is "
        "ignored before the spider; tag: everything goes on with the verdict",
    )
    drop_above: float = knob(
        SURE_SIMILARITY,
        parse_float,
        "the sure bar: in drop and ignore mode, only matches at least this similar, on strong evidence, "
        "are dropped; the others pass tagged (0: every match)",
        between(0.0, 1.0),
    )
    drop_unchanged: bool = knob(
        False, parse_bool, "drop the items of pages crawled before whose content has not changed"
    )
    index: str | None = knob(
        None,
        parse_text,
        "where the index is: a file (default: <JOBDIR>/neardup.sqlite, else "
        ".scrapy/neardup/<spider>.sqlite), redis://host:6379/0?prefix=<key prefix> (default prefix "
        "<spider>:neardup), or memory:; %(spider)s is the spider's name",
        _location,
    )
    reset: bool = knob(False, parse_bool, "delete the index before the crawl starts")
    forget_after: float | None = knob(
        None,
        parse_age,
        "forget pages neither met nor copied for this long (7d, 12h, 30m, or seconds), at the crawl's "
        "start and as it goes: a copy of a forgotten page is a new page",
        between(1.0, 1e10, " seconds"),
    )
    max_pages: int | None = knob(
        None,
        parse_optional_int,
        "keep at most this many pages in the index, forgetting the least recently seen first",
        between(1, 10**12),
    )
    lock_timeout: float = knob(
        60.0,
        parse_float,
        "seconds to wait for another process's lock on the index file: at start, the crawl is "
        "refused after it; later, the page passes unjudged",
        between(0.1, 86400.0),
    )
    learn_urls: bool = knob(
        True,
        parse_bool,
        "learn which URL differences do not change a site's pages, and skip requests for copies of "
        "pages already fetched before downloading them",
    )
    url_rules_reset: bool = knob(False, parse_bool, "forget the learned URL rules before the crawl starts")
    url_explore: float = knob(
        EXPLORE,
        parse_float,
        "the share of predicted copies still downloaded, to keep checking the rules that predicted them",
        between(0.0, 1.0),
    )
    url_max_error: float = knob(
        MAX_ERROR,
        parse_float,
        "a rule is adopted once its pages of the same content, with no counter-example, bound the "
        "share of pages it changes under this (95 % confidence): 29 pairs at 0.1, 14 at 0.2",
        between(0.01, 0.5),
    )
    url_verify: float = knob(
        MISSED_SHARE,
        parse_float,
        "before the crawl closes, each rule in force has enough of the requests it skipped downloaded, "
        "drawn at random, to show a counter-example with 99 % confidence if it changes this share of "
        "them (0: no check)",
        between(0.0, 0.5),
    )
    workers: int | None = knob(
        None,
        parse_optional_int,
        "processes that extract and fingerprint pages (default: one a core, at most 4; 0: inline)",
        between(0, MAX_WORKERS),
    )
    workers_after: int | None = knob(
        None,
        parse_optional_int,
        f"pages fingerprinted inline before the pool starts ({AUTO_WORKERS_AFTER} for the default pool)",
        between(0, 10**9),
    )
    max_waiting: int = knob(
        32,
        parse_int,
        "pages that may wait for their verdict at once, each holding its response in memory: while "
        "a slow or locked index keeps this many waiting, further downloads wait too",
        between(1, 100_000),
    )
    page_timeout: float = knob(
        60.0,
        parse_float,
        "seconds a page may take in a worker before it passes unjudged",
        between(0.1, 86400.0),
    )
    item_field: str | None = knob(
        None, parse_field, "the item field holding its HTML or text (default: html, body, text, content)"
    )
    tag_field: str = knob("neardup", parse_field, "the item field tag mode writes the verdict to")
    url_field: str = knob("url", parse_field, "the item field holding its URL")
    report: Path | None = knob(None, parse_path, "write the duplicate report here when the spider closes")
    report_format: str | None = knob(
        None, parse_str, f"the report's format: {', '.join(FORMATS)} (default: from its suffix)",
        _in(FORMATS, "report format"),
    )  # fmt: skip
    canonical: str = knob(
        "first-seen",
        parse_str,
        f"which page of a cluster the report keeps: {', '.join(CANONICAL_POLICIES)}",
        _in(tuple(CANONICAL_POLICIES), "canonical policy"),
    )
    debug: bool = knob(
        False, parse_bool, "log every dropped or tagged page and skipped request, not only the first"
    )
    log_extractors: bool = knob(False, parse_bool, "let the extractors' own log lines through")

    def __post_init__(self) -> None:
        checked(self)

    @classmethod
    def from_settings(cls, settings: BaseSettings, spider_name: str) -> CrawlSettings:
        """Read the ``NEARDUP_*`` settings, then fill what depends on the project: the index's
        location, the worker pool, the Redis key's spider name; errors name the setting."""

        def given(name: str) -> Any:
            value = settings.get(setting_name(name))
            strict = declared[name].metadata["parse"] is parse_field  # an empty field name is refused
            return None if value == "" and not strict else value

        declared = {f.name: f for f in declarations(cls)}
        values = parsed(cls, given, setting_name)  # its errors name the setting already
        try:
            read = cls(**values)
        except ConfigError as exc:
            raise renamed(exc, setting_name) from None
        return read._completed(settings, spider_name)

    def _completed(self, settings: BaseSettings, spider_name: str) -> CrawlSettings:
        workers = self.workers
        if workers is None:
            workers = default_workers()
        if workers and not main_script_guarded():  # each worker would start the crawl again
            log = logger.warning if self.workers is not None else logger.info
            log(
                "scrapy-neardup: no worker processes: %s starts its crawl outside "
                "'if __name__ == \"__main__\":', which each worker would run again",
                getattr(sys.modules.get("__main__"), "__file__", "the main script"),
            )
            workers = 0
        after = self.workers_after
        if after is None:
            after = 0 if self.workers is not None else AUTO_WORKERS_AFTER
        completed = dataclasses.replace(
            self,
            workers=workers,
            workers_after=after,
            index=_location_of(self.index, settings, spider_name),
        )
        if completed.report is not None:
            _check_report(completed.report, completed.index_spec)
            suffix = completed.report.suffix
            if completed.report_format is None and suffix and suffix.lower() not in SUFFIXES:
                logger.warning(
                    "scrapy-neardup: NEARDUP_REPORT %s: %s is no report format, so it is written as HTML; "
                    "name a .html, .json or .csv file, or set NEARDUP_REPORT_FORMAT",
                    completed.report, suffix,
                )  # fmt: skip
        return completed

    @property
    def index_spec(self) -> IndexSpec:
        """The index the crawl uses (``index`` completed by ``from_settings``)."""
        return IndexSpec.parse(self.index or "", self.lock_timeout)


def known_settings() -> frozenset[str]:
    """Every ``NEARDUP_*`` setting: the detection knobs, the crawl's own and the add-on's switch."""
    names = [f.name for f in declarations(DedupConfig)] + [f.name for f in declarations(CrawlSettings)]
    return frozenset({*SWITCHES, *map(setting_name, names)})


def warn_unknown_settings(settings: BaseSettings) -> None:
    """A ``NEARDUP_*`` name no component reads is most likely misspelled, and its value would be
    ignored without a word: say so, with the setting it is closest to."""
    known = known_settings()
    for name in sorted(n for n in settings if str(n).startswith("NEARDUP_") and n not in known):
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else " (docs/settings.md lists them)"
        logger.warning("scrapy-neardup: %s is not one of its settings and is ignored%s", name, hint)


def _location_of(given: str | None, settings: BaseSettings, spider_name: str) -> str:
    """The crawl's index: NEARDUP_INDEX with the spider's name in it, a server's key prefix
    completed (``<spider>:neardup``, as scrapy-redis names ``<spider>:dupefilter``), else the
    default file."""
    if not given:
        return str(_default_db(settings, spider_name))
    location = with_prefix(given.replace("%(spider)s", spider_name), f"{spider_name}:neardup")
    try:
        IndexSpec.parse(location)
    except NearDupError as exc:
        raise ConfigError("NEARDUP_INDEX", str(exc).removeprefix("index ")) from None
    return location


def _check_report(report: Path, index: IndexSpec) -> None:
    """Fail at start, not at close, when the report cannot be written where NEARDUP_REPORT says:
    its folder is made (the writer would make it anyway) and a file tried in it."""
    from ..report import check_report_path

    try:
        check_report_path(report, index, "NEARDUP_REPORT")
    except NearDupError as exc:
        raise ConfigError("NEARDUP_REPORT", str(exc).split(": ", 1)[-1]) from None
    if report.is_dir():
        raise ConfigError("NEARDUP_REPORT", f"{report} is a folder; name a file")
    try:
        report.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=report.parent):
            pass
    except OSError as exc:
        raise ConfigError("NEARDUP_REPORT", f"cannot write {report} ({exc.strerror or exc})") from None


def _default_db(settings: BaseSettings, spider_name: str) -> Path:
    """``<JOBDIR>/neardup.sqlite``, else ``.scrapy/neardup/<spider>.sqlite``: inside ``JOBDIR`` the
    index lives and resumes with the crawl's other state; without one, each spider gets its own
    file in the project's data folder."""
    if settings.get("JOBDIR"):
        return Path(settings.get("JOBDIR")) / "neardup.sqlite"
    try:
        folder = Path(data_path("neardup"))
    except FileExistsError:  # Scrapy makes .scrapy without exist_ok: another crawl made it just now
        folder = Path(data_path("neardup"))
    folder.mkdir(parents=True, exist_ok=True)  # not data_path's createdir, which races the same way
    return folder / f"{spider_name}.sqlite"


def index_location(settings: BaseSettings, spider_name: str) -> str:
    """The index a crawl of ``spider_name`` uses (``scrapy neardup-report`` finds it so)."""
    return CrawlSettings.from_settings(settings, spider_name).index or ""
