"""Two crawler processes, one Redis: a shared queue (scrapy-redis) and a shared index (scrapy-neardup).

    python example_project/run_redis_demo.py [--redis URL] [--index LOCATION]

Starts a redis-server on 127.0.0.1 (a free port, nothing kept), serves the bundled news site,
and runs two ``scrapy crawl news`` processes against both: the first seeds scrapy-redis's shared
request queue with the start URL, the second only takes requests from it, and both check every
page against one Redis index (``NEARDUP_INDEX = "redis://..."``). Each writes its own items feed;
the union of the two feeds must hold every original page of the site once and none of its
copies, whichever process fetched a copy or its original. Exit status 0 when it does.
``--redis``: a running server instead (the queue's and the index's keys then of this run
alone); ``--index``: another index for the two (a PostgreSQL URL).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from run_demo import HERE, OUTPUT, SITE, check_truth, crawl_command, feed_env, serve, site_path

from scrapy_neardup.index.location import with_prefix

CRAWLS = ("first", "second")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_redis(folder: str) -> tuple[subprocess.Popen, str]:
    server = shutil.which("redis-server")
    if server is None:
        sys.exit("run_redis_demo: redis-server is not installed (Debian: apt-get install redis-server)")
    port = free_port()
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", folder, "--save", ""],
        stdout=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    process.kill()
    sys.exit(f"run_redis_demo: redis-server did not start on port {port}")


def crawl(name: str, start_url: str, redis_url: str, index: str, run: str) -> subprocess.Popen:
    settings = {
        "NEARDUP_INDEX": index, "REDIS_URL": redis_url, "NEARDUP_REPORT": "",
        "SCHEDULER_QUEUE_KEY": f"news{run}:requests", "SCHEDULER_DUPEFILTER_KEY": f"news{run}:dupefilter",
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        # The first crawler to close would otherwise clear the shared URL filter under the other,
        # which would then fetch every page again (revisits, stored again).
        "SCHEDULER_PERSIST": "True",
        "CONCURRENT_REQUESTS": "2", "DOWNLOAD_DELAY": "0.2", "LOG_FILE": str(OUTPUT / f"redis-{name}.log"),
        "STATS_FILE": str(OUTPUT / f"redis-{name}-stats.json"),
    }  # fmt: skip
    seed = ("-a", "seed=0") if name != "first" else ()  # takes requests from the queue the first seeds
    command = crawl_command(start_url, settings, seed)
    print(f"$ scrapy crawl news ({name}) with NEARDUP_INDEX={index} and scrapy-redis's scheduler")
    return subprocess.Popen(command, cwd=HERE, env=feed_env(OUTPUT / f"redis-{name}.jsonl"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", help="a running redis-server's URL (else one is started)")
    parser.add_argument("--index", help="the index (default: the Redis server's)")
    args = parser.parse_args()
    OUTPUT.mkdir(exist_ok=True)
    run = f"-{uuid.uuid4().hex[:8]}" if args.redis else ""  # a server's keys of this run alone
    with tempfile.TemporaryDirectory(prefix="neardup-redis-") as folder:
        redis_process, redis_url = (None, args.redis) if args.redis else start_redis(folder)
        index = with_prefix(args.index or redis_url, f"news{run}:neardup")
        server = serve(SITE)
        start_url = f"http://127.0.0.1:{server.server_address[1]}/"
        print(f"Serving {SITE.relative_to(HERE.parent)}/ at {start_url}; Redis at {redis_url}")
        try:
            first = crawl("first", start_url, redis_url, index, run)
            time.sleep(2)  # the first crawler seeds the queue; the second joins while it is full
            second = crawl("second", start_url, redis_url, index, run)
            codes = [first.wait(300), second.wait(300)]
            report = OUTPUT / "redis-report.html"
            cli = Path(sys.executable).parent / "scrapy-neardup"
            where = ["--index", index]
            subprocess.run([str(cli), "report", *where, "-o", str(report)], check=False)
            done = subprocess.run(
                [str(cli), "report", *where, "--format", "json"], capture_output=True, text=True
            )
            found = json.loads(done.stdout).get("clusters", []) if done.returncode == 0 else []
        finally:
            server.shutdown()
            server.server_close()
            if redis_process is not None:
                redis_process.terminate()
                redis_process.wait(10)
    items = {name: _items(OUTPUT / f"redis-{name}.jsonl") for name in CRAWLS}
    for name in CRAWLS:
        stats = json.loads((OUTPUT / f"redis-{name}-stats.json").read_text()) if codes else {}
        dropped = stats.get("neardup/dropped", 0)
        print(f"  {name}: {len(items[name])} items stored, {dropped} copies dropped "
              f"({', '.join(sorted(site_path(i['url']) for i in items[name]))[:120]}...)")  # fmt: skip
    union = items["first"] + items["second"]
    problems = check_truth(union, found)
    if any(codes) or problems:
        print(f"\nexit statuses {codes}; differences from site/truth.json:", *problems[:10], sep="\n  ")
        return 1
    print(f"\nThe two crawlers stored {len(union)} items between them: every original page of the site once, "
          f"no copy. Report: {report.relative_to(HERE.parent)}")  # fmt: skip
    return 0


def _items(path: Path) -> list[dict]:
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )


if __name__ == "__main__":
    sys.exit(main())
