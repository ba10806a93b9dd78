"""Two crawler processes, one PostgreSQL index: a site and its mirror, each page stored once.

    python example_project/run_postgres_demo.py

Starts a throwaway PostgreSQL server on 127.0.0.1 (``tests/pg_server.py``: initdb and pg_ctl in
a temporary folder, as the postgres user when run as root), serves the bundled news site, and
runs two ``scrapy crawl news`` processes at once against one index
(``NEARDUP_INDEX = "postgresql://..."``): the first crawls the site at 127.0.0.1, the second
the same site at localhost, a mirror under another host name. Every page of one is a copy of
the other's, so between their two feeds each original page of the site must be stored once,
whichever crawler met it first, and no copy. Exit status 0 when it is.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from run_demo import HERE, OUTPUT, SITE, crawl_command, feed_env, serve, site_path

sys.path.insert(0, str(HERE.parent / "tests"))

import pg_server

CRAWLS = {"first": "127.0.0.1", "second": "localhost"}


def crawl(name: str, start_url: str, index: str) -> subprocess.Popen:
    settings = {
        "NEARDUP_INDEX": index, "NEARDUP_REPORT": "", "CONCURRENT_REQUESTS": "2", "DOWNLOAD_DELAY": "0.1",
        "LOG_FILE": str(OUTPUT / f"postgres-{name}.log"),
        "STATS_FILE": str(OUTPUT / f"postgres-{name}-stats.json"),
    }  # fmt: skip
    print(f"$ scrapy crawl news -a start_url={start_url} -s NEARDUP_INDEX={index}")
    feed = feed_env(OUTPUT / f"postgres-{name}.jsonl")
    return subprocess.Popen(crawl_command(start_url, settings), cwd=HERE, env=feed)


def main() -> int:
    OUTPUT.mkdir(exist_ok=True)
    try:
        url, data = pg_server.start(tempfile.mkdtemp(prefix="neardup-pg-"))
    except pg_server.Unavailable as exc:
        print(f"run_postgres_demo: {exc}", file=sys.stderr)
        return 1
    index = f"{url}?prefix=news"
    server = serve(SITE)
    port = server.server_address[1]
    where = f"{SITE.relative_to(HERE.parent)}/ at 127.0.0.1:{port} and localhost:{port}"
    print(f"Serving {where}; PostgreSQL at {url}")
    try:
        crawls = [crawl(name, f"http://{host}:{port}/", index) for name, host in CRAWLS.items()]
        codes = [process.wait(300) for process in crawls]
        report = OUTPUT / "postgres-report.html"
        cli = Path(sys.executable).parent / "scrapy-neardup"
        subprocess.run([str(cli), "report", "--index", index, "-o", str(report)], check=False)
    finally:
        server.shutdown()
        server.server_close()
        pg_server.stop(data)
    items = {name: _items(OUTPUT / f"postgres-{name}.jsonl") for name in CRAWLS}
    for name in CRAWLS:
        stats = json.loads((OUTPUT / f"postgres-{name}-stats.json").read_text()) if codes else {}
        print(f"  {name}: {len(items[name])} items stored, {stats.get('neardup/dropped', 0)} copies dropped")
    problems = check(items["first"] + items["second"])
    if any(codes) or problems:
        print(f"\nexit statuses {codes}; differences from site/truth.json:", *problems[:10], sep="\n  ")
        return 1
    print(
        f"\nThe two crawlers stored every original page of the site once between them, and no copy. "
        f"Report: {report.relative_to(HERE.parent)}"
    )
    return 0


def check(items: list[dict]) -> list[str]:
    """Each judged original stored once between the two feeds, no copy stored."""
    truth = json.loads((SITE / "truth.json").read_text(encoding="utf-8"))["pages"]
    stored = collections.Counter(site_path(item["url"]) for item in items)
    problems = []
    for path, expected in sorted(truth.items()):
        if expected["expect"] == "unique" and stored[path] != 1:
            problems.append(f"{path}: stored {stored[path]} times, expected once")
        elif expected["expect"] == "duplicate" and stored[path]:
            problems.append(f"{path}: a copy of {expected['of']}, stored {stored[path]} times")
    return problems


def _items(path: Path) -> list[dict]:
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )


if __name__ == "__main__":
    sys.exit(main())
