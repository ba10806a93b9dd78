"""NEARDUP_INDEX and ``--index``: one string names any index, read in ``index/`` alone."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from scrapy_neardup.crawl.settings import CrawlSettings
from scrapy_neardup.exceptions import IndexFileError
from scrapy_neardup.index import IndexSpec
from scrapy_neardup.index.location import with_prefix


@pytest.mark.parametrize(
    ("location", "backend", "where", "key"),
    [
        ("pages.sqlite", "sqlite", "pages.sqlite", None),
        ("/abs/dir with space/i.db", "sqlite", "/abs/dir with space/i.db", None),
        ("sqlite:rel/i.db", "sqlite", "rel/i.db", None),
        ("C:\\crawls\\i.db", "sqlite", "C:\\crawls\\i.db", None),
        ("memory:", "memory", "", None),
        ("redis://h:6379/0?prefix=news:neardup", "redis", "redis://h:6379/0", "news:neardup"),
        ("rediss://u:pw@h/2?db=2&prefix=p", "redis", "rediss://u:pw@h/2?db=2", "p"),
        ("unix:///run/redis.sock?db=1&prefix=k", "redis", "unix:///run/redis.sock?db=1", "k"),
    ],
)
def test_a_location_names_its_backend_by_its_form(location, backend, where, key):
    spec = IndexSpec.parse(location)
    assert (spec.backend, spec.where, spec.key) == (backend, where, key)


@pytest.mark.parametrize(
    ("location", "said"),
    [
        ("redis://h/0", "names no key prefix"),
        ("redis://h/0?prefix=a*", "cannot prefix"),
        ("redis://h/0?prefix=", "cannot prefix"),
        ("postgresql://u@h/db", "names no key prefix"),
        ("", "names no index"),
    ],
)
def test_a_location_that_names_no_usable_index_is_refused_saying_why(location, said):
    with pytest.raises(IndexFileError, match=said):
        IndexSpec.parse(location)


def test_a_password_never_reaches_a_message():
    spec = IndexSpec.parse("redis://user:secret@h/0?prefix=p")
    assert "secret" not in str(spec)
    with pytest.raises(IndexFileError) as refused:
        IndexSpec.parse("redis://user:secret@h/0")
    assert "secret" not in str(refused.value)


def test_a_crawl_completes_the_spider_s_prefix_and_name():
    def located(value: str) -> str:
        return CrawlSettings.from_settings(Settings({"NEARDUP_INDEX": value}), "news").index_spec

    assert located("redis://h/0").key == "news:neardup"
    assert located("redis://h/0?db=1").where == "redis://h/0?db=1"
    assert located("redis://h/0?prefix=%(spider)s:eu").key == "news:eu"
    assert located("indexes/%(spider)s.sqlite").where == "indexes/news.sqlite"
    assert located("memory:").backend == "memory"
    assert with_prefix("redis://h/0?prefix=mine", "news:neardup") == "redis://h/0?prefix=mine"
    assert with_prefix("pages.db", "news:neardup") == "pages.db"


@pytest.mark.parametrize(
    ("location", "module", "extra"),
    [
        ("redis://127.0.0.1:1/0?prefix=a", "redis.index:redis", "redis"),
        ("postgresql://x@127.0.0.1:1/db?prefix=a", "postgres.index:psycopg", "postgres"),
    ],
)
def test_a_server_index_without_its_extra_names_what_to_install(
    monkeypatch, capsys, tmp_path, location, module, extra
):
    """Opening, reporting on or resetting a Redis or PostgreSQL index without its package: one
    line naming the extra, from the crawl's opening and from every command."""
    import importlib

    from scrapy_neardup import MissingExtraError
    from scrapy_neardup.cli import main
    from scrapy_neardup.config import DedupConfig
    from scrapy_neardup.index import open_existing, open_index

    name, attribute = module.split(":")
    monkeypatch.setattr(importlib.import_module("scrapy_neardup.index.engines." + name), attribute, None)
    spec = IndexSpec.parse(location)
    for opening in (lambda: open_index(spec, DedupConfig()), lambda: open_existing(spec)):
        with pytest.raises(MissingExtraError, match=rf"pip install 'scrapy-neardup\[{extra}\]'"):
            opening()
    page = tmp_path / "page.html"
    page.write_text("<html><body><p>a page</p></body></html>")
    for command in (["report", "--index", location], ["scan", str(page), "--index", location]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"scrapy-neardup[{extra}]" in err, err


def test_a_report_of_a_suffix_no_format_has_is_warned_about_at_start(tmp_path, caplog):
    """NEARDUP_REPORT = "r.pdf" is written as HTML: said at start, not found at the end."""
    said = {}
    for name in ("r.pdf", "r.json", "report"):
        caplog.clear()
        settings = Settings({"NEARDUP_INDEX": str(tmp_path / "i.db"), "NEARDUP_REPORT": str(tmp_path / name)})
        CrawlSettings.from_settings(settings, "news")
        said[name] = [r.getMessage() for r in caplog.records if "no report format" in r.getMessage()]
    assert not said["r.json"] and not said["report"]
    (pdf,) = said["r.pdf"]
    assert ".pdf is no report format, so it is written as HTML" in pdf
