"""Bad input to a crawl, each against a real local HTTP server: wrong settings fail at start naming
the setting; a full disk, a locked index and pathological pages never stop the crawl nor lose a page."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import forked
import pytest
from crawling import ADDON, crawl, expected, long_page, path_of, serve


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("NEARDUP_URL_FIELD", ["url"]),
        ("NEARDUP_TAG_FIELD", ["x"]),
        ("NEARDUP_ITEM_FIELD", ["html"]),
        ("NEARDUP_ITEM_FIELD", ""),
        ("NEARDUP_TAG_FIELD", ""),
        ("NEARDUP_URL_FIELD", "  "),
        ("NEARDUP_INDEX", 5),
        ("NEARDUP_REPORT", "{tmp}/a-file/report.html"),
        ("NEARDUP_IMATCH_LEXICONS", 1_000_000),
        ("NEARDUP_WORKERS", 10_000),
        ("NEARDUP_PAGE_TIMEOUT", "soon"),
        ("NEARDUP_RESET", "maybe"),
        ("NEARDUP_DROP_UNCHANGED", "perhaps"),
        ("NEARDUP_SCOPE", "planet"),
    ],
)
def test_a_bad_setting_stops_the_crawl_at_start_naming_it(tmp_path, site, setting, value):
    (tmp_path / "a-file").write_text("a file, where the report's folder should be")
    value = value.format(tmp=tmp_path) if isinstance(value, str) else value
    result = crawl(
        tmp_path,
        [site + "/"],
        {**ADDON, "NEARDUP_INDEX": str(tmp_path / "i.db"), setting: value},
        check=False,
    )
    assert result["returncode"] != 0
    failed = [line for line in result["stderr"].splitlines() if "CRAWL FAILED TO START" in line]
    assert failed and setting in failed[0], result["stderr"][-2000:]
    first = [line for line in result["stderr"].splitlines() if "scrapy-neardup cannot start" in line]
    assert first and setting in first[0]  # one CRITICAL line naming the setting, before any traceback
    assert not result["items"]


def test_a_misspelled_setting_is_named_with_the_one_meant(tmp_path, site):
    settings = {**ADDON, "NEARDUP_INDEX": str(tmp_path / "i.db"), "NEARDUP_SPOTSIGS_TRESHOLD": 0.9}
    result = crawl(tmp_path, [site + "/"], settings)
    warned = [line for line in result["stderr"].splitlines() if "is not one of its settings" in line]
    assert len(warned) == 1 and "WARNING" in warned[0], result["stderr"][-2000:]
    assert "NEARDUP_SPOTSIGS_TRESHOLD is not" in warned[0]
    assert "did you mean NEARDUP_SPOTSIGS_THRESHOLD?" in warned[0]
    assert result["stats"]["neardup/dropped"] == len(expected("duplicate"))  # the default threshold held


def test_a_full_disk_passes_every_page_on_and_says_so_once(tmp_path, site):
    db = tmp_path / "full.db"
    result = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db)}, index_pages_left=3)
    stats = result["stats"]
    assert stats["finish_reason"] == "finished"
    assert stats["neardup/unjudged/error"] >= 5
    # Every HTML page reached the feed: what could not be judged was let through.
    assert expected("unique") <= {path_of(item["url"]) for item in result["items"]}
    errors = [line for line in result["stderr"].splitlines() if "ERROR" in line and "scrapy-neardup" in line]
    assert len(errors) == 1 and "database or disk is full" in errors[0] and "free disk space" in errors[0]
    assert "Traceback" not in result["stderr"]


@pytest.mark.slow
def test_a_locked_index_is_waited_for_and_the_wait_logged(tmp_path, site):
    db = tmp_path / "locked.db"
    crawl(tmp_path, [site + "/short.html"], {**ADDON, "NEARDUP_INDEX": str(db)})  # the file exists
    hold = (
        "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(7)"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold, str(db)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    result = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db)})
    holder.wait()
    assert "is locked by another process; waited" in result["stderr"]
    assert result["stats"]["neardup/dropped"] == len(expected("duplicate"))


def _pathological_site(root: Path) -> None:
    """A page with one tag of 6,000 attributes (the extractor's parser is quadratic in them: at
    300,000 it took minutes; the spider's parser too, so the test keeps it small), a page that
    takes seconds to extract, and a plain one."""
    attributes = " ".join(f"attribute{i}=1" for i in range(6_000))
    article = "<article><p>" + "The library opened a new reading room for children. " * 30 + "</p></article>"
    pages = {
        "crowded.html": f"<html><body><div {attributes}>x</div>{article}</body></html>",
        "long.html": long_page(40_000),
        "ok.html": f"<html><body>{article}</body></html>",
    }
    links = "".join(f"<a href='/{name}'>{name}</a>" for name in pages)
    (root / "index.html").write_text(f"<html><body>{links}</body></html>")
    for name, html in pages.items():
        (root / name).write_text(html)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 1])
def test_a_pathological_page_is_skipped_and_the_crawl_goes_on(tmp_path, workers):
    root = tmp_path / "site"
    root.mkdir()
    _pathological_site(root)
    settings = {**ADDON, "NEARDUP_INDEX": str(tmp_path / "p.db"), "NEARDUP_WORKERS": workers}
    settings["NEARDUP_EXTRACTOR"] = "trafilatura"  # slow on the long page
    if workers:  # a page that takes longer than the budget (the long one: 7 s) is passed on unjudged
        settings["NEARDUP_PAGE_TIMEOUT"] = 2  # room for the other pages on a loaded machine
    with serve(root) as url:
        result = crawl(tmp_path, [url + "/"], settings)
    stats = result["stats"]
    assert stats.get("neardup/unjudged/pathological") == 1, {k: v for k, v in stats.items() if "neardup" in k}
    assert {path_of(item["url"]) for item in result["items"]} >= {"/crowded.html", "/long.html", "/ok.html"}
    if workers:
        assert stats["neardup/unjudged/timeout"] == 1
    with sqlite3.connect(tmp_path / "p.db") as con:
        ok = con.execute("SELECT status FROM documents WHERE url LIKE '%/ok.html'").fetchone()
    assert ok == ("unique",)


def _all_settings() -> list[str]:
    from scrapy_neardup.config import DedupConfig

    crawl_side = "ACTION DB BACKEND WORKERS PAGE_TIMEOUT ITEM_FIELD URL_FIELD TAG_FIELD REPORT REPORT_FORMAT"
    crawl_side += " CANONICAL DEBUG RESET DROP_UNCHANGED LOG_EXTRACTORS DROP_ABOVE LOCK_TIMEOUT"
    return [f"NEARDUP_{name.upper()}" for name, _, _ in DedupConfig.docs()] + [
        f"NEARDUP_{n}" for n in crawl_side.split()
    ]


@pytest.mark.parametrize("setting", _all_settings())
@pytest.mark.parametrize("value", [["a", "list"], {"a": "dict"}, -7, "nonsense-value"])
def test_every_setting_rejects_a_wrong_value_naming_itself(tmp_path, setting, value):
    """In process, every knob: a wrong type or value is refused with the setting's name, or taken."""
    from scrapy.settings import Settings

    from scrapy_neardup.config import DedupConfig
    from scrapy_neardup.crawl.settings import CrawlSettings
    from scrapy_neardup.exceptions import ConfigError

    settings = Settings({"NEARDUP_INDEX": str(tmp_path / "i.db"), setting: value})
    try:
        DedupConfig.from_settings(settings)
        CrawlSettings.from_settings(settings, "spider")
    except ConfigError as exc:
        assert str(exc).startswith(f"{setting}: ") and "NEARDUP_NEARDUP" not in str(exc), str(exc)
        assert exc.setting == setting


def _foreign(path: Path, kind: str) -> None:
    """Another program's file where NEARDUP_INDEX points."""
    if kind == "database":
        with sqlite3.connect(path) as con:
            con.execute("CREATE TABLE notes (text TEXT)")
            con.execute("INSERT INTO notes VALUES ('a note that must survive a crawl')")
        con.close()
    elif kind == "meta-table":  # a table named like the index's own, in another program's file
        with sqlite3.connect(path) as con:
            con.execute("CREATE TABLE meta (key TEXT, value TEXT)")
            con.execute("CREATE TABLE documents (x)")
        con.close()
    elif kind == "text":
        path.write_text("a user's notes, not an index\n" * 100)
    else:
        path.mkdir()
        (path / "kept.txt").write_text("kept")


@pytest.mark.parametrize("kind", ["database", "meta-table", "text", "folder"])
def test_a_reset_refuses_a_file_that_is_no_index_in_one_line(tmp_path, site, kind):
    db = tmp_path / "their.db"
    _foreign(db, kind)
    (tmp_path / "their.db-wal").write_text("another program's file too")
    before = {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    settings = {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_RESET": True}
    result = crawl(tmp_path, [site + "/"], settings, check=False)
    first = [line for line in result["stderr"].splitlines() if "scrapy-neardup cannot start" in line]
    assert first and str(db) in first[0] and "NEARDUP_RESET deletes an index only" in first[0], first
    assert "Traceback" not in result["stderr"].split("scrapy-neardup cannot start")[0]
    assert not result["items"]
    after = {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.name in before}
    assert after == before


def test_a_reset_deletes_an_index_of_other_settings_with_its_wal(tmp_path, site):
    db = tmp_path / "index.db"
    first = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_SCOPE": "host"})
    held = sqlite3.connect(db, isolation_level=None)  # a change left in the -wal, as a kill leaves it
    held.execute("PRAGMA wal_autocheckpoint = 0")
    held.execute("UPDATE documents SET title = 'changed by hand'")
    left = {name: (tmp_path / name).read_bytes() for name in ("index.db", "index.db-wal", "index.db-shm")}
    held.close()
    for name, data in left.items():
        (tmp_path / name).write_bytes(data)
    again = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_RESET": True})
    assert "is new (reset)" in again["stderr"]
    assert again["stats"]["neardup/dropped"] == first["stats"]["neardup/dropped"]
    with sqlite3.connect(db) as con:
        changed = con.execute("SELECT COUNT(*) FROM documents WHERE title = 'changed by hand'").fetchone()
        assert changed == (0,)
        assert json.loads(dict(con.execute("SELECT key, value FROM meta"))["config"])["scope"] == "global"
    con.close()


def test_a_reset_of_an_empty_file_makes_it_the_index(tmp_path, site):
    db = tmp_path / "empty.db"
    db.touch()
    result = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_RESET": True})
    assert result["stats"]["neardup/dropped"] == len(expected("duplicate"))


_START_AT_ONCE = """
import sys, time
from scrapy.settings import Settings
from scrapy_neardup.config import DedupConfig
from scrapy_neardup.crawl.settings import CrawlSettings
from scrapy_neardup.index import open_index

start, location = float(sys.argv[1]), sys.argv[2]
settings = Settings({"NEARDUP_INDEX": location})
time.sleep(max(0.0, start - time.time()))  # all together, past their imports
crawl = CrawlSettings.from_settings(settings, "site")
index = open_index(crawl.index_spec, DedupConfig.from_settings(settings))
index.begin_run("drop")
index.end_run()
index.close()
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_crawls_started_at_once_in_one_project_folder_all_start(tmp_path, request, backend):
    """Each crawl makes the project's .scrapy/neardup folder, or opens the one Redis index."""
    redis_url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    for round_ in range(6):
        project = tmp_path / f"project-{round_}"
        project.mkdir()
        (project / "scrapy.cfg").write_text("[settings]\ndefault = none\n")
        start = time.time() + 1.0  # forked: past their imports already (tests/forked.py)
        location = f"{redis_url}?prefix=test:{round_}:{time.time_ns()}" if redis_url else ""
        args = [str(start), location]
        runs = [
            forked.Popen(
                [sys.executable, "-c", _START_AT_ONCE, *args], cwd=project, stderr=subprocess.PIPE, text=True
            )
            for _ in range(4)
        ]
        errors = [run.communicate(timeout=120)[1] for run in runs]
        assert [run.returncode for run in runs] == [0] * 4, "\n".join(errors)[-3000:]
        assert (project / ".scrapy" / "neardup").is_dir() == (backend == "sqlite")


def test_a_bad_value_names_its_setting_once(tmp_path, site):
    result = crawl(
        tmp_path,
        [site + "/"],
        {**ADDON, "NEARDUP_INDEX": str(tmp_path / "i.db"), "NEARDUP_ACTION": "delete"},
        check=False,
    )
    first = [line for line in result["stderr"].splitlines() if "scrapy-neardup cannot start" in line]
    assert first and "NEARDUP_ACTION: unknown value 'delete'" in first[0], result["stderr"][-2000:]
    assert "NEARDUP_NEARDUP" not in result["stderr"]
