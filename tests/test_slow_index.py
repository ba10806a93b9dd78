"""A locked or slow index delays verdicts, never downloads: the index's work runs on lanes, beside
the crawl, and the spider waits for a page's verdict while the crawl downloads on."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from crawling import ADDON, RUNNER, documents_in, serve

PAGES = 30


def _site(root: Path) -> None:
    """``PAGES`` distinct articles linked from one page."""
    root.mkdir()
    words = [f"w{n}" for n in range(3000)] + ["the", "a", "is", "was", "will", "has", "can"] * 50
    for n in range(PAGES):
        text = " ".join(random.Random(n).choices(words, k=300))
        (root / f"{n}.html").write_text(
            f"<html><body><article><h1>Story {n}</h1><p>{text}</p></article></body></html>"
        )
    links = "".join(f"<a href='/{n}.html'>{n}</a>" for n in range(PAGES))
    (root / "index.html").write_text(f"<html><body>{links}</body></html>")


def test_a_locked_index_delays_verdicts_not_downloads(tmp_path):
    """Another process holds the index file's write lock for 4 s mid-crawl: responses keep
    arriving meanwhile, and every page is judged once the lock is let go, none lost."""
    _site(tmp_path / "site")
    db, feed, out = tmp_path / "index.sqlite", tmp_path / "items.jsonl", tmp_path / "out.json"
    settings = {
        **ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_WORKERS": 0, "NEARDUP_MIN_TOKENS": 30,
        "CONCURRENT_REQUESTS": 2, "DOWNLOAD_DELAY": 0.1, "FEEDS": {str(feed): {"format": "jsonlines"}},
    }  # fmt: skip
    arrived: list[float] = []
    with serve(tmp_path / "site") as base:
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"start_urls": [base + "/"], "settings": settings, "out": str(out)}))
        crawler = subprocess.Popen(
            [sys.executable, str(RUNNER), str(config)], cwd=tmp_path, stderr=subprocess.PIPE, text=True
        )

        def read() -> None:
            for line in crawler.stderr:
                if "Crawled (200)" in line:
                    arrived.append(time.monotonic())

        reader = threading.Thread(target=read)
        reader.start()
        deadline = time.monotonic() + 60
        while documents_in(db) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        locked = time.monotonic()
        time.sleep(4)
        holder.execute("ROLLBACK")
        holder.close()
        released = time.monotonic()
        crawler.wait(120)
        reader.join(10)
    assert crawler.returncode == 0
    during = [t for t in arrived if locked + 0.5 < t < released]
    assert len(during) >= 5, f"{len(during)} responses in the 4 s the index was locked"
    stats = json.loads(out.read_text())["stats"]
    items = [json.loads(line) for line in feed.read_text().splitlines()]
    assert len(items) == PAGES + 1 and stats["neardup/checked"] == PAGES + 1  # every page checked, kept
    assert "neardup/unjudged/error" not in stats and stats.get("neardup/unjudged/too_short") == 1  # the list
    assert stats["neardup/waited/max_ms"] >= 3000  # the pages waited for their verdicts
