"""Serve the bundled news site on 127.0.0.1, crawl it with scrapy-neardup on, and show what it found.

    python example_project/run_demo.py [--check] [-- SCRAPY_CRAWL_ARGS ...]

The site in ``site/`` is served by ``http.server`` on a free port in a background thread; the
crawl is ``scrapy crawl news -a start_url=...`` run with this Python from this folder, so it
uses the project's settings (``newsdemo/settings.py``: the add-on in drop mode). The site is
served on port 8765 when it is free, and the index in ``output/`` is kept between runs on the
same address: a second run revisits every page, stores the same items and says so (a run on
another port starts from an empty index, as its URLs are new). Afterwards the script prints the ``neardup/*``
stats, the duplicate clusters the index holds, the paths of the items feed, the index and the
HTML report, and compares the stored items with the site's ground truth (``site/truth.json``).

Exit status: 0 when the crawl finished cleanly; 1 when it failed (scrapy's exit status, no
stats, a finish reason other than ``finished``, errors in the log, or no page checked by
scrapy-neardup); with ``--check``, also 1 when the stored items differ from the ground truth.
Arguments after ``--`` go to ``scrapy crawl`` (e.g. ``-- -s NEARDUP_WORKERS=2``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy_neardup import NearDupError
from scrapy_neardup.config import DedupConfig
from scrapy_neardup.index.engines.sqlite.opening import stored_config

HERE = Path(__file__).resolve().parent
SITE = HERE / "site"
OUTPUT = HERE / "output"
DB = OUTPUT / "neardup.db"
ITEMS = OUTPUT / "items.jsonl"
PREVIOUS_ITEMS = OUTPUT / "items.previous.jsonl"
SITE_URL = OUTPUT / "site-url.txt"  # the address the kept index's pages were crawled at
PORT = 8765
REPORT = OUTPUT / "report.html"
STATS = OUTPUT / "stats.json"
LOG = OUTPUT / "crawl.log"
CRAWL_TIMEOUT = 300


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # a crawl's connections at once (socketserver's 5 drops SYNs: 1 s stalls)


class QuietHandler(SimpleHTTPRequestHandler):
    """Serves ``site/`` without logging every request to the terminal."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(directory: Path) -> ThreadingHTTPServer:
    handler = partial(QuietHandler, directory=str(directory))
    try:
        server = Server(("127.0.0.1", PORT), handler)
    except OSError:  # taken: any free port (the index then starts empty)
        server = Server(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, name="site-server", daemon=True).start()
    return server


def index_fits() -> bool:
    """Whether the kept index was built with the detection settings this version uses; one from an
    earlier version's defaults would stop the crawl at start, so the demo starts afresh instead."""
    if not DB.exists():
        return True
    try:
        fits = stored_config(DB).shaping() == DedupConfig().shaping()
    except NearDupError:
        fits = False
    if not fits:
        print(f"{DB.relative_to(HERE.parent)} was built with other detection settings: starting afresh.")
    return fits


def clean_output(start_url: str) -> None:
    """Keep the last run's items for comparison, and its index when the site is at the same address
    (on another port every URL is new, and each page would be a copy of its old address)."""
    OUTPUT.mkdir(exist_ok=True)
    PREVIOUS_ITEMS.unlink(missing_ok=True)
    if ITEMS.exists():
        ITEMS.rename(PREVIOUS_ITEMS)
    for path in (REPORT, STATS, LOG):
        path.unlink(missing_ok=True)
    if SITE_URL.exists() and SITE_URL.read_text(encoding="utf-8") == start_url and index_fits():
        return
    for path in OUTPUT.glob(DB.name + "*"):  # the database with its -wal and -shm files
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    SITE_URL.write_text(start_url, encoding="utf-8")


def compare_with_previous(items: list[dict[str, Any]]) -> str | None:
    """A line saying whether this run stored the same pages as the last one, or None on a first run."""
    if not PREVIOUS_ITEMS.exists():
        return None
    lines = PREVIOUS_ITEMS.read_text(encoding="utf-8").splitlines()
    previous = sorted(site_path(item["url"]) for item in _json_lines(lines, PREVIOUS_ITEMS))
    now = sorted(site_path(item["url"]) for item in items)
    if previous == now:
        return f"Same {len(now)} items as the previous run."
    gone, new = sorted(set(previous) - set(now)), sorted(set(now) - set(previous))
    return f"Items differ from the previous run: {len(gone)} missing {gone[:5]}, {len(new)} new {new[:5]}."


def crawl_command(start_url: str, settings: dict[str, str], spider_args: tuple = ()) -> list[str]:
    """``scrapy crawl news`` with these settings (``-s``); its items go where ``feed_env`` says."""
    command = [sys.executable, "-m", "scrapy", "crawl", "news", "-a", f"start_url={start_url}", *spider_args]
    for key, value in settings.items():
        command += ["-s", f"{key}={value}"]
    return command


def feed_env(feed: Path) -> dict[str, str]:
    """The environment of a crawl writing its items to ``feed`` (JSON lines) instead of items.jsonl."""
    return {**os.environ, "NEWSDEMO_FEED": str(feed.resolve())}


def crawl(start_url: str, extra: list[str]) -> tuple[int, float]:
    command = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "news",
        "-a",
        f"start_url={start_url}",
        "-s",
        f"LOG_FILE={LOG}",
        *extra,
    ]
    print("$ scrapy crawl news -a start_url=" + start_url, *extra)
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=HERE, timeout=CRAWL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        print(f"the crawl did not finish within {CRAWL_TIMEOUT} s", file=sys.stderr)
        return 1, time.monotonic() - started
    return done.returncode, time.monotonic() - started


def site_path(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def read_items() -> list[dict[str, Any]]:
    if not ITEMS.exists():
        return []
    return _json_lines(ITEMS.read_text(encoding="utf-8").splitlines(), ITEMS)


def _json_lines(lines: list[str], path: Path) -> list[dict[str, Any]]:
    """The items of a JSON-lines feed; a line that is not JSON is said, with where, and left out."""
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except ValueError:
            print(f"{path} line {number} is not JSON ({line[:80]!r}); left out", file=sys.stderr)
    return items


def clusters() -> list[dict[str, Any]]:
    """The duplicate clusters of the index, through the documented ``scrapy-neardup report`` command."""
    cli = Path(sys.executable).parent / "scrapy-neardup"
    if not DB.exists() or not cli.exists():
        return []
    done = subprocess.run(
        [str(cli), "report", "--index", str(DB), "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return []
    try:
        return json.loads(done.stdout).get("clusters", [])
    except ValueError:
        detail = f"{done.stdout[:200]!r} {done.stderr[-300:]!r}"
        print(f"scrapy-neardup report printed no JSON: {detail}", file=sys.stderr)
        return []


def print_stats(stats: dict[str, Any], seconds: float, items: list[dict[str, Any]]) -> None:
    responses = stats.get("downloader/response_count", 0)
    print(f"\nCrawl finished in {seconds:.1f} s: {responses} responses, {len(items)} items stored.\n")
    neardup = {key: value for key, value in stats.items() if key.startswith("neardup/")}
    width = max((len(key) for key in neardup), default=10)
    print("scrapy-neardup stats:")
    for key in sorted(neardup):
        print(f"  {key:<{width}}  {neardup[key]}")


def print_clusters(found: list[dict[str, Any]]) -> None:
    if not found:
        return
    print(f"\nDuplicate clusters in the index ({len(found)}; the page kept first, '=' exact, '~' near):")
    for cluster in found:
        members = cluster["members"]
        print(f"  {site_path(cluster['canonical'])}")
        for member in members[1:]:
            method = member.get("method") or "?"
            mark = "=" if method == "exact" else "~"
            similarity = member.get("similarity")
            detail = method if similarity is None or method == "exact" else f"{method} {similarity:.2f}"
            print(f"    {mark} {site_path(member['url'])}  ({detail})")


def check_truth(items: list[dict[str, Any]], found: list[dict[str, Any]]) -> list[str]:
    """Compare the stored items and the index's clusters with site/truth.json; return the differences.

    Drop mode: every page but the duplicates is stored, each once. Tag mode (the items carry a
    ``neardup`` verdict): every HTML page is stored, each with the expected verdict. Both: each
    duplicate in the index names the expected original.
    """
    truth = json.loads((SITE / "truth.json").read_text(encoding="utf-8"))["pages"]
    stored = {site_path(item["url"]): item for item in items}
    tagged = any("neardup" in item for item in items)
    paths = [site_path(item["url"]) for item in items]
    problems = [f"stored twice: {path}" for path in sorted({p for p in paths if paths.count(p) > 1})]
    matched = {
        site_path(member["url"]): site_path(member["duplicate_of"])
        for cluster in found
        for member in cluster["members"]
        if member.get("duplicate_of")
    }
    for path, expected in sorted(truth.items()):
        duplicate = expected["expect"] == "duplicate"
        html = expected.get("reason") != "not_html"
        if duplicate and path not in matched:
            problems.append(f"{path}: not found to be a copy (of {expected['of']})")
        elif duplicate and matched[path] != expected["of"]:
            problems.append(f"{path}: the index says a copy of {matched[path]}, expected {expected['of']}")
        if not duplicate and path in matched:
            problems.append(
                f"{path}: the index says a copy of {matched[path]}, expected {expected['expect']}"
            )
        if not html:
            continue
        if path not in stored and (tagged or not duplicate):
            problems.append(f"missing: {path} ({expected['expect']})")
        elif path in stored and duplicate and not tagged:
            problems.append(f"duplicate stored: {path} (a copy of {expected['of']})")
        elif path in stored and tagged:
            verdict = stored[path].get("neardup") or {}
            if bool(verdict.get("duplicate")) != duplicate:
                problems.append(
                    f"{path}: tagged duplicate={verdict.get('duplicate')}, expected {expected['expect']}"
                )
            elif expected["expect"] == "skipped" and verdict.get("skip_reason") != expected["reason"]:
                problems.append(
                    f"{path}: skip reason {verdict.get('skip_reason')}, expected {expected['reason']}"
                )
    problems += [f"not in the ground truth: {path}" for path in sorted(set(stored) - set(truth))]
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the items differ from the truth")
    parser.add_argument("scrapy_args", nargs="*", help="after --: extra arguments for scrapy crawl")
    args = parser.parse_args()

    server = serve(SITE)
    start_url = f"http://127.0.0.1:{server.server_address[1]}/"
    clean_output(start_url)
    print(f"Serving {SITE.relative_to(HERE.parent)}/ at {start_url}")
    try:
        code, seconds = crawl(start_url, args.scrapy_args)
    finally:
        server.shutdown()
        server.server_close()

    try:
        stats = json.loads(STATS.read_text(encoding="utf-8")) if STATS.exists() else {}
    except ValueError:  # a stats file cut short (another crawl writing it?): reported below as missing
        stats = {}
    failures = []
    if code != 0:
        failures.append(f"scrapy exited with status {code}")
    if not stats:
        failures.append(f"no stats were written to {STATS}")
    elif stats.get("finish_reason") != "finished":
        failures.append(f"finish reason: {stats.get('finish_reason')}")
    if stats.get("log_count/ERROR", 0):
        failures.append(f"{stats['log_count/ERROR']} errors in the log")
    if stats and not stats.get("neardup/checked"):
        failures.append("scrapy-neardup checked no page (is the add-on enabled in newsdemo/settings.py?)")

    items = read_items()
    found = clusters()
    if stats:
        print_stats(stats, seconds, items)
        print_clusters(found)

    def show(path: Path) -> Path:
        return path.relative_to(HERE.parent)

    print()
    print(f"Items:  {show(ITEMS)}" if ITEMS.exists() else "Items:  (none written)")
    print(f"Index:  {show(DB)}" if DB.exists() else "Index:  (none written)")
    print(f"Report: {show(REPORT)}" if REPORT.exists() else "Report: (none written; is NEARDUP_REPORT set?)")
    if LOG.exists():
        print(f"Log:    {show(LOG)}")

    problems = check_truth(items, found) if stats else []
    truth_pages = len(json.loads((SITE / "truth.json").read_text(encoding="utf-8"))["pages"])
    if problems:
        print(f"\nGround truth (site/truth.json): {len(problems)} differences:")
        for problem in problems:
            print(f"  {problem}")
    elif stats:
        print(f"\nGround truth (site/truth.json): all {truth_pages} URLs as expected.")
    same = compare_with_previous(items) if stats else None
    if same:
        print(same)

    if failures:
        print("\nThe crawl FAILED: " + "; ".join(failures), file=sys.stderr)
        if LOG.exists():
            tail = LOG.read_text(encoding="utf-8", errors="replace").splitlines()[-30:]
            print("Last lines of the log:\n" + "\n".join(tail), file=sys.stderr)
        return 1
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
