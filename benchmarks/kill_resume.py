"""Pages lost to SIGKILLs and JOBDIR resumes, with and without the add-on, on the same kill pattern.

    python benchmarks/kill_resume.py [--kills 3] [--every 120] [--rounds 2]

Builds a site of the aeb articles, each under three URLs (the article, a print version under
another template, the article with a tracking parameter), linked from listing pages, and
serves it on 127.0.0.1. Each configuration crawls it with a JOBDIR and is killed with SIGKILL
``--kills`` times, each time after the server has answered ``--every`` more requests (the
same kill pattern for both); then the job is resumed to its end, and then crawled once more
with a new JOBDIR on the same index (a re-run). Every run writes its own feed. Printed per
configuration and phase: the article groups (an article and its copies) in the union of the
feeds so far, the groups lost, and the groups stored more than once. Scrapy alone loses
what a kill catches in its buffers (feed exports, ``requests.seen``, the disk queue's state);
the add-on must lose nothing more.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NEARDUP_SHARED", REPO.parent / "shared"))
RUNNER = REPO / "tests" / "crawl_runner.py"
PER_LIST = 20


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # a crawl's connections at once (socketserver's 5 drops SYNs: 1 s stalls)


class Counting(SimpleHTTPRequestHandler):
    """Serves the site quietly and counts the requests answered (the kill pattern's clock)."""

    served = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        type(self).served += 1
        super().do_GET()


def build_site(root: Path) -> int:
    """The site's files under ``root``; returns the number of article groups."""
    truth = json.loads((SHARED / "data" / "aeb" / "ground-truth.json").read_text())
    bodies = [v["articleBody"] for v in truth.values() if len(v.get("articleBody", "").split()) >= 80]
    (root / "a").mkdir(parents=True)
    (root / "print").mkdir()
    (root / "list").mkdir()
    for n, body in enumerate(bodies):
        paragraphs = "".join(f"<p>{html.escape(p)}</p>" for p in body.split("\n") if p.strip())
        (root / "a" / f"{n}.html").write_text(
            f"<html><head><title>Story {n}</title></head><body><nav><a href='/'>Home</a></nav>"
            f"<article><h1>Story {n}</h1>{paragraphs}</article><footer>The Courier</footer></body></html>"
        )
        (root / "print" / f"{n}.html").write_text(
            f"<html><head><title>Print: story {n}</title></head><body><div class='print'>"
            f"<h2>Story {n}</h2>{paragraphs}<p>Printed from the Courier.</p></div></body></html>"
        )
    lists = range(0, len(bodies), PER_LIST)
    for k, start in enumerate(lists):
        links = "".join(
            f"<li><a href='/a/{n}.html'>{n}</a> <a href='/print/{n}.html'>print</a> "
            f"<a href='/a/{n}.html?ref=list{k}'>share</a></li>"
            for n in range(start, min(start + PER_LIST, len(bodies)))
        )
        (root / "list" / f"{k}.html").write_text(f"<html><body><ul>{links}</ul></body></html>")
    index = "".join(f"<li><a href='/list/{k}.html'>page {k}</a></li>" for k in range(len(lists)))
    (root / "index.html").write_text(f"<html><body><ul>{index}</ul></body></html>")
    return len(bodies)


def run(work: Path, name: str, site: str, settings: dict, kill_after: int | None) -> Path:
    """One crawl in ``work``; killed once the server answered ``kill_after`` more requests, else run out."""
    feed = work / f"{name}.jsonl"
    config = work / f"{name}.json"
    settings = {**settings, "FEEDS": {str(feed): {"format": "jsonlines"}}, "LOG_LEVEL": "WARNING"}
    config.write_text(
        json.dumps({"start_urls": [site + "/"], "settings": settings, "out": str(work / "out.json")})
    )
    proc = subprocess.Popen([sys.executable, str(RUNNER), str(config)], cwd=work, stderr=subprocess.DEVNULL)
    if kill_after is None:
        proc.wait(timeout=1800)
        return feed
    until = Counting.served + kill_after
    while Counting.served < until and proc.poll() is None:
        time.sleep(0.01)
    if proc.poll() is None:  # else it finished first: nothing left to kill
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    return feed


def groups_out(feeds: list[Path]) -> Counter[str]:
    """How many items of each article group the feeds hold (lines cut by a kill are skipped)."""
    found: Counter[str] = Counter()
    for feed in feeds:
        if not feed.exists():
            continue
        for line in feed.read_text().splitlines():
            try:
                url = json.loads(line)["url"]
            except (json.JSONDecodeError, KeyError):
                continue
            path = url.split("/", 3)[3]
            if path.startswith(("a/", "print/")):
                found[path.split("/")[1].split(".")[0]] += 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument(
        "--every", type=int, default=120, help="requests answered in each run before its kill"
    )
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="kill-resume-"))
    groups = build_site(base / "site")
    server = Server(("127.0.0.1", 0), partial(Counting, directory=str(base / "site")))
    Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_address[1]}"
    common = {"CONCURRENT_REQUESTS": 4, "NEARDUP_MIN_TOKENS": 30}
    configs = {
        "scrapy alone": common,
        "with the add-on (drop)": {**common, "ADDONS": {"scrapy_neardup.NearDupAddon": 0}},
    }
    print(f"{groups} article groups of 3 URLs; {args.kills} kills, each {args.every} requests into a run")
    header = ("configuration", "round", "after", "groups", "lost", "stored 2+", "items")
    print("{:<23}{:>5}  {:<8}{:>7}{:>6}{:>10}{:>7}".format(*header))
    for round_ in range(args.rounds):
        for name, settings in configs.items():  # interleaved, so both meet the same machine state
            work = base / f"{name.split()[0]}-{round_}"
            work.mkdir()
            settings = {**settings, "JOBDIR": str(work / "job"), "NEARDUP_INDEX": str(work / "index.sqlite")}
            feeds = [run(work, f"killed-{k}", site, settings, args.every) for k in range(args.kills)]
            feeds.append(run(work, "resumed", site, settings, None))
            phases = [("resume", list(feeds))]
            feeds.append(run(work, "rerun", site, {**settings, "JOBDIR": str(work / "job2")}, None))
            phases.append(("re-run", feeds))
            for phase, so_far in phases:
                out = groups_out(so_far)
                items, twice = sum(out.values()), sum(1 for n in out.values() if n > 1)
                row = (name, round_, phase, len(out), groups - len(out), twice, items)
                print("{:<23}{:>5}  {:<8}{:>7}{:>6}{:>10}{:>7}".format(*row))
    server.shutdown()
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
