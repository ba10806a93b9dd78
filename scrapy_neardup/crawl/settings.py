"""The Scrapy-side settings of a crawl (the detection knobs are DedupConfig's): parsed and checked
at start, each error naming its setting."""

from __future__ import annotations

import difflib
import logging
import os
import sys
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from scrapy.settings import BaseSettings
from scrapy.utils.project import data_path

from ..config import MAX_WORKERS, DedupConfig
from ..exceptions import ConfigError, NearDupError
from ..index.base import fit_key_prefix
from ..workers import AUTO_WORKERS_AFTER, default_workers, main_script_guarded

logger = logging.getLogger("scrapy_neardup")

ACTIONS = ("drop", "ignore", "tag")
# The similarity a near-duplicate needs, on strong evidence, to be dropped (exact copies always are):
# over every labelled set, the bar that drops no distinct page of the LLVM docs site (benchmarks,
# docs/quality.md "The sure bar").
SURE_SIMILARITY = 0.65
BACKENDS = ("sqlite", "redis")
# The Redis index's key prefix: a crawl's own, as scrapy-redis names its keys (``%(spider)s:dupefilter``).
REDIS_KEY = "%(spider)s:neardup"


def known_settings() -> frozenset[str]:
    """Every ``NEARDUP_*`` setting a crawl reads: the detection knobs, the crawl-side ones, and the
    switch the add-on sets."""
    names = [f.name for f in fields(DedupConfig)] + [f.name for f in fields(CrawlSettings)]
    return frozenset({"NEARDUP_ENABLED", *(f"NEARDUP_{name.upper()}" for name in names)})


def warn_unknown_settings(settings: BaseSettings) -> None:
    """A ``NEARDUP_*`` name no component reads is most likely misspelled, and its value would be
    ignored without a word: say so, with the setting it is closest to."""
    known = known_settings()
    for name in sorted(n for n in settings if str(n).startswith("NEARDUP_") and n not in known):
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else " (docs/settings.md lists them)"
        logger.warning("scrapy-neardup: %s is not one of its settings and is ignored%s", name, hint)


@dataclass(frozen=True)
class CrawlSettings:
    """The Scrapy-side knobs (detection knobs live in DedupConfig); errors name the setting."""

    action: str = "drop"
    db: Path | None = None
    backend: str = "sqlite"
    workers: int = 0
    workers_after: int = 0  # pages fingerprinted inline before the pool starts
    item_field: str | None = None
    tag_field: str = "neardup"
    url_field: str = "url"
    report: Path | None = None
    report_format: str | None = None
    canonical: str = "first-seen"
    debug: bool = False
    reset: bool = False
    drop_unchanged: bool = False
    log_extractors: bool = False
    page_timeout: float = 60.0
    drop_above: float = SURE_SIMILARITY
    redis_url: str = "redis://127.0.0.1:6379"
    redis_key: str = "default:neardup"

    @classmethod
    def from_settings(cls, settings: BaseSettings, spider_name: str) -> CrawlSettings:
        action = _choice(settings, "NEARDUP_ACTION", ACTIONS, "drop")
        backend = _choice(settings, "NEARDUP_BACKEND", BACKENDS, "sqlite")
        workers_set = settings.get("NEARDUP_WORKERS") not in (None, "")
        if workers_set:
            workers = _number(settings, "NEARDUP_WORKERS", 0, int, 0, MAX_WORKERS)
        else:
            workers = default_workers()
        if workers and not main_script_guarded():  # each worker would start the crawl again
            log = logger.warning if workers_set else logger.info
            log(
                "scrapy-neardup: no worker processes: %s starts its crawl outside "
                "'if __name__ == \"__main__\":', which each worker would run again",
                getattr(sys.modules.get("__main__"), "__file__", "the main script"),
            )
            workers = 0
        page_timeout = _number(settings, "NEARDUP_PAGE_TIMEOUT", 60.0, float, 0.1, 86400.0)
        drop_above = SURE_SIMILARITY
        if settings.get("NEARDUP_DROP_ABOVE") not in (None, ""):
            drop_above = _number(settings, "NEARDUP_DROP_ABOVE", None, float, 0.0, 1.0)
        report = _path(settings, "NEARDUP_REPORT")
        db = default_db_path(settings, spider_name)
        redis_url, redis_key = _redis(settings, spider_name)
        if report is not None:
            from ..report import check_report_path

            try:
                check_report_path(report, db, "NEARDUP_REPORT")
            except NearDupError as exc:
                raise ConfigError("NEARDUP_REPORT", str(exc).split(": ", 1)[-1]) from None
            _check_writable(report, "NEARDUP_REPORT")
        report_format = settings.get("NEARDUP_REPORT_FORMAT")
        if report_format is not None:
            from ..report import check_format

            check_format(report_format)
        from ..report.clusters import check_policy

        canonical = check_policy(_text(settings, "NEARDUP_CANONICAL", "first-seen"), "NEARDUP_CANONICAL")
        flags = {
            name: _flag(settings, f"NEARDUP_{name.upper()}")
            for name in ("debug", "reset", "drop_unchanged", "log_extractors")
        }
        return cls(
            action=action,
            db=db,
            backend=backend,
            redis_url=redis_url,
            redis_key=redis_key,
            workers=workers,
            workers_after=_number(
                settings, "NEARDUP_WORKERS_AFTER", 0 if workers_set else AUTO_WORKERS_AFTER, int, 0, 10**9
            ),
            page_timeout=page_timeout,
            drop_above=drop_above,
            item_field=_field(settings, "NEARDUP_ITEM_FIELD", None),
            tag_field=_field(settings, "NEARDUP_TAG_FIELD", "neardup"),
            url_field=_field(settings, "NEARDUP_URL_FIELD", "url"),
            report=report,
            report_format=report_format,
            canonical=canonical,
            **flags,
        )


def _redis(settings: BaseSettings, spider_name: str) -> tuple[str, str]:
    """NEARDUP_REDIS_URL (else scrapy-redis's REDIS_URL) and the key prefix for this spider."""
    url = _text(settings, "NEARDUP_REDIS_URL", settings.get("REDIS_URL") or "redis://127.0.0.1:6379")
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError("NEARDUP_REDIS_URL", f"expected redis://host:port/db or unix://, got {url!r}")
    pattern = _text(settings, "NEARDUP_REDIS_KEY", REDIS_KEY)
    try:
        key = pattern % {"spider": spider_name}
    except (KeyError, ValueError, TypeError) as exc:
        raise ConfigError("NEARDUP_REDIS_KEY", f"may use %(spider)s only, got {pattern!r} ({exc})") from None
    if not fit_key_prefix(key):
        raise ConfigError(
            "NEARDUP_REDIS_KEY", f"{key!r} cannot prefix an index's keys (empty, spaces or *?[]\\)"
        )
    return url, key


def _number(settings: BaseSettings, name: str, default: Any, kind: type, low: Any, high: Any) -> Any:
    value = settings.get(name, default)
    try:
        if isinstance(value, bool) or (kind is int and isinstance(value, float) and not value.is_integer()):
            raise ValueError
        number = kind(value)
    except (TypeError, ValueError):
        what = "a whole number" if kind is int else "a number"
        raise ConfigError(name, f"expected {what}, got {value!r}") from None
    if not low <= number <= high:
        raise ConfigError(name, f"must be between {low} and {high}, got {number}")
    return number


def _text(settings: BaseSettings, name: str, default: str) -> str:
    value = settings.get(name) or default
    if not isinstance(value, str):
        raise ConfigError(name, f"expected a string, got {value!r}")
    return value


def _field(settings: BaseSettings, name: str, default: str | None) -> str | None:
    """An item field name: one string (a list would fail on every item, losing them all); an
    empty one is refused (``-s NAME=`` from an unset variable), not read as the default."""
    value = settings.get(name)
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            name, f"expected one field name (a string), got {value!r}; leave it unset for the default"
        )
    return value.strip()


def _path(settings: BaseSettings, name: str) -> Path | None:
    value = settings.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigError(name, f"expected a file path (a string), got {value!r}")
    return Path(value)


def _check_writable(path: Path, name: str) -> None:
    """Fail at start, not at close, when a file cannot be written where a setting says: its folder is
    made (the writer would make it anyway) and a file tried in it."""
    if path.is_dir():
        raise ConfigError(name, f"{path} is a folder; name a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        raise ConfigError(name, f"cannot write {path} ({exc.strerror or exc})") from None


def _flag(settings: BaseSettings, name: str) -> bool:
    try:
        return settings.getbool(name)
    except (ValueError, TypeError):
        raise ConfigError(name, f"expected true or false, got {settings.get(name)!r}") from None


def _choice(settings: BaseSettings, name: str, choices: tuple[str, ...], default: str) -> str:
    value = settings.get(name) or default
    if not isinstance(value, str) or value.strip().lower() not in choices:
        raise ConfigError(name, f"unknown value {value!r}; choose from {', '.join(choices)}")
    return value.strip().lower()


def remove_index(path: Path) -> None:
    """Delete an index file with its WAL and shared-memory files (NEARDUP_RESET); any other file
    at ``path`` is refused (``IndexFileError``), as the Redis reset refuses keys not its own."""
    from ..index.sqlite_open import holds_index

    if not holds_index(path):
        return  # no file, or an empty one, which becomes the index
    for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + "-journal"):
        (path.parent / name).unlink(missing_ok=True)


def default_db_path(settings: BaseSettings, spider_name: str) -> Path:
    """``NEARDUP_DB``, else ``<JOBDIR>/neardup.sqlite``, else ``.scrapy/neardup/<spider>.sqlite``.

    Inside ``JOBDIR`` the index lives and resumes with the crawl's other state; without
    one, each spider gets its own file in the project's data folder.
    """
    db = _path(settings, "NEARDUP_DB")
    if db is not None:
        return db
    if settings.get("JOBDIR"):
        return Path(settings.get("JOBDIR")) / "neardup.sqlite"
    return Path(data_path("neardup", createdir=True)) / f"{spider_name}.sqlite"
