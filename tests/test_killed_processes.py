"""A crawl or a scan killed with SIGKILL leaves none of its processes behind: its worker processes
and multiprocessing's resource tracker end with it. Processes are found by session, not by name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from crawling import documents_in, long_page, serve

PROJECT = Path(__file__).resolve().parents[1] / "example_project"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")


def in_session(sid: int) -> list[str]:
    """The command lines of the live processes of session ``sid`` (zombies are already gone)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        state, _, _, session = stat[stat.rindex(")") + 2 :].split()[:4]
        if int(session) == sid and state != "Z":
            found.append(f"{entry.name} {command[:120]}")
    return found


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def slow_pages(root: Path, count: int = 12) -> None:
    """Pages that take a worker about a second each, all distinct (a copy is not sent to a worker)."""
    root.mkdir()
    for n in range(count):
        (root / f"{n}.html").write_text(long_page(5_000).replace("<article>", f"<article><h1>Page {n}</h1>"))
    links = "".join(f"<a href='/{n}.html'>Page {n}</a>" for n in range(count))
    (root / "index.html").write_text(f"<html><body>{links}</body></html>")


def kill_and_look(process: subprocess.Popen) -> list[str]:
    """SIGKILL ``process`` (a session leader) and return what is left of its session 5 s later."""
    process.send_signal(signal.SIGKILL)
    process.wait()
    wait_for(lambda: not in_session(process.pid), 5)
    left = in_session(process.pid)
    for line in left:  # no leak into the next tests
        os.kill(int(line.split()[0]), signal.SIGKILL)
    return left


@pytest.mark.slow
def test_a_killed_crawl_leaves_no_worker_nor_resource_tracker(tmp_path):
    slow_pages(tmp_path / "site")
    with serve(tmp_path / "site") as url:
        settings = {
            "NEARDUP_INDEX": tmp_path / "i.db", "NEARDUP_REPORT": tmp_path / "r.html", "NEARDUP_WORKERS": 2,
            "NEARDUP_WORKERS_AFTER": 0, "STATS_FILE": tmp_path / "stats.json", "FEEDS": "{}",
            "NEARDUP_EXTRACTOR": "trafilatura",  # slow on the long pages: the workers are busy
            "ROBOTSTXT_OBEY": False,
        }  # fmt: skip
        command = [sys.executable, "-m", "scrapy", "crawl", "news", "-a", f"start_url={url}/"]
        for name, value in settings.items():
            command += ["-s", f"{name}={value}"]
        with (tmp_path / "crawl.log").open("w") as log:  # not a pipe: a full one would stop the crawl
            crawl = subprocess.Popen(command, cwd=PROJECT, start_new_session=True, stdout=log, stderr=log)
        # Two workers start, and then work on the slow pages.
        started = wait_for(lambda: sum("spawn_main" in p for p in in_session(crawl.pid)) == 2, 60)
        busy = started and wait_for(lambda: documents_in(tmp_path / "i.db") >= 3, 60)
        before = in_session(crawl.pid)
        left = kill_and_look(crawl)
    assert busy, (tmp_path / "crawl.log").read_text()[-2000:]
    assert sum("resource_tracker" in p for p in before) == 1 and len(before) == 4, before
    assert left == []
    assert "leaked semaphore" not in (tmp_path / "crawl.log").read_text()  # removed, without a word


def test_a_killed_scan_leaves_no_worker_nor_resource_tracker(tmp_path):
    slow_pages(tmp_path / "pages", 40)
    db = tmp_path / "i.db"
    command = [sys.executable, "-m", "scrapy_neardup.cli", "scan", str(tmp_path / "pages"), "--db", str(db)]
    with (tmp_path / "scan.log").open("w") as log:
        scan = subprocess.Popen(
            [*command, "--workers", "2", "--batch", "2"], start_new_session=True, stdout=log, stderr=log
        )
    busy = wait_for(lambda: documents_in(db) >= 2, 60)
    before = in_session(scan.pid)
    left = kill_and_look(scan)
    assert busy, (tmp_path / "scan.log").read_text()[-2000:]
    assert sum("spawn_main" in p for p in before) == 2, before
    assert left == []
    assert "leaked semaphore" not in (tmp_path / "scan.log").read_text()


@pytest.mark.parametrize("death_signal", [True, False])
def test_a_worker_ends_with_its_parent_by_the_signal_or_by_its_check(death_signal):
    """The check alone (systems without Linux's parent-death signal) ends the worker too."""
    worker = (
        "import sys, time; from scrapy_neardup.parent_watch import end_with_parent; "
        f"end_with_parent(int(sys.argv[1]), {death_signal}); print('ready', flush=True); time.sleep(60)"
    )
    parent = (
        "import os, subprocess, sys, time; "
        f"w = subprocess.Popen([sys.executable, '-c', {worker!r}, str(os.getpid())], stdout=-1); "
        "print(w.stdout.readline().decode().strip(), flush=True); time.sleep(60)"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", parent], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    with process.stdout:
        assert process.stdout.readline().strip() == "ready"
    assert len(in_session(process.pid)) == 2
    assert kill_and_look(process) == []
