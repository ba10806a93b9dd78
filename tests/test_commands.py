"""`scrapy neardup-report`, run inside example_project as a user would, and the report at spider close."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from scrapy_neardup.cli import main

PROJECT = Path(__file__).resolve().parents[1] / "example_project"
SITE = Path(__file__).parent / "site"


def scrapy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args], cwd=PROJECT, capture_output=True, text=True, timeout=120
    )


def test_neardup_report_command_reads_the_project_settings(tmp_path):
    db = tmp_path / "news.sqlite"
    assert main(["scan", str(SITE), "--db", str(db), "--workers", "0"]) == 0
    listed = scrapy("-h")
    assert "neardup-report" in listed.stdout
    out = tmp_path / "report.json"
    # NEARDUP_DB comes from the settings (here overridden with -s, as a project would set it).
    done = scrapy("neardup-report", "news", "-s", f"NEARDUP_DB={db}", "-o", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["duplicates"] >= 3 and report["clusters"]
    html = tmp_path / "report.html"
    done = scrapy("neardup-report", "news", "--db", str(db), "-o", str(html), "--canonical", "shortest-url")
    assert done.returncode == 0 and html.read_text().lstrip().lower().startswith("<!doctype html")


def test_neardup_report_command_names_a_missing_index(tmp_path):
    done = scrapy("neardup-report", "news", "-s", f"NEARDUP_DB={tmp_path / 'nothing.sqlite'}")
    assert done.returncode == 2
    assert "nothing.sqlite" in done.stderr
