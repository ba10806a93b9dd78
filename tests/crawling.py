"""Helpers of the crawl tests: the test site, a local server, and one crawl in its own process (forked
from a warm one: tests/forked.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import forked
import pytest

SITE = Path(__file__).parent / "site"
RUNNER = Path(__file__).parent / "crawl_runner.py"
TRUTH = json.loads((SITE / "truth.json").read_text())["pages"]
ADDON = {"ADDONS": {"scrapy_neardup.NearDupAddon": 0}}


class Server(ThreadingHTTPServer):
    """A threading HTTP server whose listen queue holds a crawl's connections at once: with
    socketserver's 5, the SYNs of a crawl's sixth and later connections are dropped and sent
    again by TCP after a second."""

    request_queue_size = 128


class QuietHandler(SimpleHTTPRequestHandler):
    on_request: Callable[[str], None] | None = None

    def log_message(self, *args: object) -> None:
        pass

    def send_head(self):  # every method's answer begins here
        if self.on_request is not None:
            self.on_request(self.path)
        return super().send_head()


@contextlib.contextmanager
def serve(
    directory: Path, on_request: Callable[[str], None] | None = None, handler: type = QuietHandler
) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 (a free port) serving ``directory``; yields its base URL.
    ``on_request`` is told the path of every request it answers; ``handler``: a QuietHandler
    of the test's own."""
    told = staticmethod(on_request) if on_request else None
    handler = type("Handler", (handler,), {"on_request": told})
    server = Server(("127.0.0.1", 0), partial(handler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def crawl(tmp_path: Path, start_urls: list[str], settings: dict, check: bool = True, **extra) -> dict:
    """Run one crawl in a process of its own; the result has stats, parsed URLs, meta, feed items, stderr."""
    out = tmp_path / f"result-{time.monotonic_ns()}.json"
    feed = tmp_path / f"items-{time.monotonic_ns()}.jsonl"
    return run_crawl(tmp_path, start_urls, settings, out, feed, check, **extra)


def run_crawl(
    tmp_path: Path, start_urls: list[str], settings: dict, out: Path, feed: Path, check: bool = True, **extra
) -> dict:
    """``crawl`` with the result and feed files named."""
    # truth.json counts pages under 30 words as too short, whatever the default becomes.
    settings = {"FEEDS": {str(feed): {"format": "jsonlines"}}, "NEARDUP_MIN_TOKENS": 30, **settings}
    config = tmp_path / f"config-{time.monotonic_ns()}.json"
    config.write_text(json.dumps({"start_urls": start_urls, "settings": settings, "out": str(out), **extra}))
    proc = forked.run(
        [sys.executable, str(RUNNER), str(config)], cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text()) if out.exists() else {}
    result["stderr"] = proc.stderr
    result["returncode"] = proc.returncode
    result["items"] = [json.loads(line) for line in feed.read_text().splitlines()] if feed.exists() else []
    return result


def long_page(paragraphs: int) -> str:
    """A page that takes trafilatura about a second for each 5,000 paragraphs (the default extractor
    gives a page of so many elements to resiliparse, which is fast: ask for trafilatura)."""
    line = "<p>Paragraph {} of a long page about the harbour and its boats.</p>"
    return "<html><body><article>" + "".join(map(line.format, range(paragraphs))) + "</article></body></html>"


def path_of(url: str) -> str:
    """The path (and query) of a test-site URL, as truth.json names pages."""
    return "/" + url.split("/", 3)[3]


def expected(kind: str) -> set[str]:
    return {path for path, page in TRUTH.items() if page["expect"] == kind}


def stats_match_truth(stats: dict) -> None:
    assert stats.get("neardup/duplicates/exact") == 2
    assert stats.get("neardup/duplicates/near") == 3
    assert stats.get("neardup/unjudged/empty") == 1
    assert stats.get("neardup/unjudged/not_html") == 2
    assert stats.get("neardup/unjudged/too_short") == 1


def without_root_override() -> list[str]:
    """A prefix that runs a command without root's right to write any file (CAP_DAC_OVERRIDE),
    so a file's mode holds for it as for any user; none is needed for another user."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("as root a file's mode does not stop writes, and setpriv is not here to drop that right")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all"]


@contextlib.contextmanager
def lock_held(db: Path) -> Iterator[None]:
    """Another process holding an exclusive transaction on the SQLite file ``db`` meanwhile."""
    hold = (
        "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait()


def read_only_index(tmp_path: Path, what: str) -> Path:
    """An index of the test site's articles made read-only: the ``file`` itself, or its ``folder``."""
    from scrapy_neardup.cli import main

    folder = tmp_path / "kept"
    folder.mkdir()
    db = folder / "index.db"
    assert main(["scan", str(SITE / "articles"), "--db", str(db), "--workers", "0"]) == 0
    (db if what == "file" else folder).chmod(0o444 if what == "file" else 0o555)
    return db


def crawl_and_rerun_on(tmp_path: Path, site: str, index: str) -> None:
    """A crawl on a server's index drops every copy and reports; a re-run meets every page as a revisit."""
    settings = {**ADDON, "NEARDUP_INDEX": index}
    report = tmp_path / "report.html"
    first = crawl(tmp_path, [site + "/"], {**settings, "NEARDUP_REPORT": str(report)})
    stats_match_truth(first["stats"])
    assert not {path_of(item["url"]) for item in first["items"]} & expected("duplicate")
    assert report.exists() and "print/library.html" in report.read_text(encoding="utf-8")
    again = crawl(tmp_path, [site + "/"], settings)
    assert again["stats"].get("neardup/revisits") == 13  # every judged page, as on SQLite (test_revisits)
    assert again["stats"].get("neardup/dropped") == first["stats"]["neardup/dropped"] == 5
    assert sorted(item["url"] for item in again["items"]) == sorted(item["url"] for item in first["items"])


def documents_in(db: Path) -> int:
    """Pages an index file holds, read without a lock (0 while it does not exist yet)."""
    import sqlite3

    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return con.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    except sqlite3.Error:
        return 0
