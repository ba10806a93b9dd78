"""`scrapy neardup-report`, run inside example_project as a user would, and the report at spider close."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import forked
import pytest
from crawling import lock_held, read_only_index, without_root_override

from scrapy_neardup.cli import main

PROJECT = Path(__file__).resolve().parents[1] / "example_project"
SITE = Path(__file__).parent / "site"


def scrapy(*args: str) -> subprocess.CompletedProcess:
    return forked.run(
        [sys.executable, "-m", "scrapy", *args], cwd=PROJECT, capture_output=True, text=True, timeout=120
    )


def test_neardup_report_command_reads_the_project_settings(tmp_path):
    db = tmp_path / "news.sqlite"
    assert main(["scan", str(SITE), "--db", str(db), "--workers", "0"]) == 0
    listed = scrapy("-h")
    assert "neardup-report" in listed.stdout
    out = tmp_path / "report.json"
    # NEARDUP_INDEX comes from the settings (here overridden with -s, as a project would set it).
    done = scrapy("neardup-report", "news", "-s", f"NEARDUP_INDEX={db}", "-o", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["duplicates"] >= 3 and report["clusters"]
    html = tmp_path / "report.html"
    done = scrapy("neardup-report", "news", "--db", str(db), "-o", str(html), "--canonical", "shortest-url")
    assert done.returncode == 0 and html.read_text().lstrip().lower().startswith("<!doctype html")


def test_neardup_report_command_names_a_missing_index(tmp_path):
    done = scrapy("neardup-report", "news", "-s", f"NEARDUP_INDEX={tmp_path / 'nothing.sqlite'}")
    assert done.returncode == 2
    assert "nothing.sqlite" in done.stderr and "no spider" not in done.stderr
    done = scrapy("neardup-report", "nwes", "-s", f"NEARDUP_INDEX={tmp_path / 'nothing.sqlite'}")
    assert done.returncode == 2
    assert "'nwes' is no spider of this project: `scrapy list` names them" in done.stderr, done.stderr


def test_scrapy_crawl_with_a_bad_setting_fails_in_one_line(tmp_path):
    """`scrapy crawl` exits with status 1 and says why in one line, without a traceback after it."""
    done = scrapy(
        "crawl", "news", "-a", "start_url=http://127.0.0.1:9/", "-s", f"NEARDUP_INDEX={tmp_path / 'i.db'}",
        "-s", "NEARDUP_SPOTSIGS_THRESHOLD=7",
    )  # fmt: skip
    assert done.returncode == 1
    said = [line for line in done.stderr.splitlines() if "scrapy-neardup cannot start" in line]
    assert len(said) == 1 and "NEARDUP_SPOTSIGS_THRESHOLD" in said[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "never retrieved" not in done.stderr
    assert not (tmp_path / "i.db").exists()


def test_scrapy_crawl_with_a_misspelt_index_scheme_fails_in_one_line(tmp_path):
    """A server URL of an unknown scheme is no file name: one line names the setting and the schemes."""
    done = scrapy(
        "crawl",
        "news",
        "-a",
        "start_url=http://127.0.0.1:9/",
        "-s",
        "NEARDUP_INDEX=postgress://crawler@db/crawls",
    )
    assert done.returncode == 1, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if "scrapy-neardup cannot start" in line]
    assert len(said) == 1 and "NEARDUP_INDEX" in said[0] and "'postgress://'" in said[0], done.stderr[-2000:]
    assert "postgresql://" in said[0] and "Traceback" not in done.stderr
    assert not list(PROJECT.rglob("*postgress*"))  # no file made


def _refused_in_one_line(done: subprocess.CompletedProcess, db: Path, needle: str) -> None:
    assert done.returncode == 1, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if "scrapy-neardup cannot start" in line]
    assert len(said) == 1 and str(db) in said[0] and needle in said[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "never retrieved" not in done.stderr


def test_scrapy_crawl_on_a_locked_index_waits_then_fails_in_one_line(tmp_path):
    db = tmp_path / "locked.db"
    assert main(["scan", str(SITE / "articles"), "--db", str(db), "--workers", "0"]) == 0
    with lock_held(db):
        done = scrapy(
            "crawl", "news", "-a", "start_url=http://127.0.0.1:9/", "-s", f"NEARDUP_INDEX={db}",
            "-s", "NEARDUP_LOCK_TIMEOUT=1",
        )  # fmt: skip
    _refused_in_one_line(done, db, "another process holds a lock on it")


@pytest.mark.parametrize("what", ["file", "folder"])
def test_scrapy_crawl_on_a_read_only_index_fails_in_one_line(tmp_path, what):
    db = read_only_index(tmp_path, what)
    folder = db.parent
    before = db.read_bytes()
    command = [sys.executable, "-m", "scrapy", "crawl", "news", "-a", "start_url=http://127.0.0.1:9/"]
    done = subprocess.run(
        [*without_root_override(), *command, "-s", f"NEARDUP_INDEX={db}"],
        cwd=PROJECT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    folder.chmod(0o755)
    _refused_in_one_line(done, db, "make the file and its folder writable")
    assert db.read_bytes() == before


def test_neardup_report_command_reports_a_redis_index(tmp_path, redis_url):
    """The project's NEARDUP_INDEX may name a Redis index: the command reports it as the crawl wrote it."""
    import uuid

    where = f"{redis_url}?prefix=report:{uuid.uuid4().hex}"
    assert main(["scan", str(SITE), "--index", where, "--workers", "0"]) == 0
    out = tmp_path / "report.json"
    done = scrapy("neardup-report", "news", "-s", f"NEARDUP_INDEX={where}", "-o", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["duplicates"] >= 3 and report["clusters"]
    assert main(["report", "--index", where, "-o", str(tmp_path / "same.json")]) == 0
    assert json.loads((tmp_path / "same.json").read_text())["clusters"] == report["clusters"]
