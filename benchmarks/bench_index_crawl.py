"""What a crawl pays for its index, on this machine and across a network: the crawl, not the check.

    python benchmarks/bench_index_crawl.py [--repeat 3] [--indexes sqlite,redis,postgres]
                                           [--rtt 0,1,5] [--baseline CHECKOUT]

Crawls bench_crawl's site (the LLVM and Clang docs, 658 pages; built when missing) in a fresh
process a crawl, with the add-on's defaults and each index: an SQLite file, a Redis and a
PostgreSQL server on this machine (both started here), and each server behind a proxy on
127.0.0.1 that adds a round trip of ``--rtt`` milliseconds (``latency_proxy``; 1 ms is a
same-zone cloud network); beside the same crawl without the add-on. Configurations are
interleaved, ``--repeat`` rounds, each crawl on a fresh index. ``--baseline`` runs every
configuration with the add-on of another checkout too (old and new side by side).

Printed per configuration (medians of the rounds): pages downloaded a second, its ratio to
the crawl without the add-on and to the same index on this machine, the round trips a
checked page cost (counted by the proxy: a client's request after the server's answer), and
the crawl loop's lag (how late a callback due every 5 ms ran, p99 and max, in ms): the time
the crawl's thread was held and could download or parse nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import uuid
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from bench_crawl import SITE, QuietHandler, Server  # noqa: E402
from bench_urls import redis_server  # noqa: E402
from latency_proxy import LatencyProxy  # noqa: E402


def build_site() -> None:
    if not (SITE / "index.html").exists():
        script = HERE.parent.parent / "shared" / "scripts" / "get-llvm-docs"
        subprocess.run([sys.executable, str(script), "--out", str(SITE)], check=True)


def crawl(url: str, settings: dict | None, work: Path, checkout: Path | None) -> dict:
    """One crawl in a fresh process (bench_crawl's), its figures."""
    out = work / f"{uuid.uuid4().hex}.json"
    settings = {} if settings is None else {"ADDONS": {"scrapy_neardup.NearDupAddon": 0}, **settings}
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    command = [sys.executable, str(HERE / "bench_crawl.py"), "--crawl", url, json.dumps(settings), str(out)]
    subprocess.run(command, check=True, cwd=work, env=env)
    return json.loads(out.read_text())


def index_url(server: str, port: int) -> str:
    """The same server's URL on another port (its proxy's)."""
    parts = urlsplit(server)
    user = parts.netloc.rpartition("@")[0]
    return parts._replace(netloc=f"{user + '@' if user else ''}{parts.hostname}:{port}").geturl()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--indexes", default="sqlite,redis,postgres")
    parser.add_argument("--rtt", default="1,5", help="round trips the proxy adds, ms (0: the proxy alone)")
    parser.add_argument("--baseline", type=Path, metavar="CHECKOUT", help="another checkout, beside")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    build_site()
    indexes = [name.strip() for name in args.indexes.split(",") if name.strip()]
    rtts = [float(ms) for ms in args.rtt.split(",") if ms.strip()]
    versions = [("new", None)] + ([("old", args.baseline)] if args.baseline else [])
    server = Server(("127.0.0.1", 0), partial(QuietHandler, directory=str(SITE)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_address[1]}/index.html"
    with tempfile.TemporaryDirectory(prefix="bench-index-crawl-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        servers: dict[str, str] = {}
        if "redis" in indexes:
            servers["redis"] = stack.enter_context(redis_server(shutil.which("redis-server"), work))
        if "postgres" in indexes:
            import pg_server

            servers["postgres"], data = pg_server.start()
            stack.callback(pg_server.stop, data)
        proxies: dict[tuple[str, float], LatencyProxy] = {}
        for name, url in servers.items():
            parts = urlsplit(url)
            for rtt in rtts:
                proxies[name, rtt] = stack.enter_context(LatencyProxy(parts.hostname, parts.port, rtt))
        configs: list[tuple[str, str | None, float | None]] = [("without", None, None)]
        configs += [(name, name, None) for name in indexes]
        configs += [(f"{name} +{rtt:g} ms", name, rtt) for name in servers for rtt in rtts]
        results: dict[str, list[dict]] = {}
        for round_ in range(args.repeat):
            for label, index, rtt in configs:
                for version, checkout in versions if index else versions[:1]:
                    settings: dict | None = None
                    proxy = proxies.get((index, rtt)) if index and rtt is not None else None
                    if index == "sqlite":
                        settings = {"NEARDUP_INDEX": str(work / f"{uuid.uuid4().hex}.sqlite")}
                    elif index:
                        base = servers[index] if proxy is None else index_url(servers[index], proxy.port)
                        prefix = f"b{uuid.uuid4().hex[:16]}"
                        settings = {"NEARDUP_INDEX": f"{base}?prefix={prefix}"}
                    trips = proxy.round_trips if proxy else 0
                    figures = crawl(site, settings, work, checkout)
                    checked = figures["neardup"].get("neardup/checked", 0)
                    figures["trips"] = (proxy.round_trips - trips) / checked if proxy and checked else None
                    key = label if not index else f"{label} ({version})"
                    results.setdefault(key, []).append(figures)
                    speed = figures["pages"] / figures["seconds"]
                    print(f"round {round_ + 1} {key}: {speed:.1f} pages/s, lag {figures['lag_ms']}")
        print()
        rate = {k: statistics.median(r["pages"] / r["seconds"] for r in rows) for k, rows in results.items()}
        header = ("configuration", "pages/s", "x without", "x here", "trips/page", "lag p99", "lag max")
        print("{:<26}{:>9}{:>11}{:>9}{:>12}{:>9}{:>9}".format(*header))
        for key, rows in results.items():
            here = key.split(" +")[0] + (f" ({key.rsplit('(', 1)[1]}" if " +" in key else "")
            trips = [r["trips"] for r in rows if r["trips"] is not None]
            row = (
                key, f"{rate[key]:.1f}", f"{rate[key] / rate['without']:.2f}",
                f"{rate[key] / rate[here]:.2f}" if " +" in key and here in rate else "",
                f"{statistics.median(trips):.1f}" if trips else "",
                f"{statistics.median(r['lag_ms']['p99'] for r in rows):.1f}",
                f"{statistics.median(r['lag_ms']['max'] for r in rows):.0f}",
            )  # fmt: skip
            print("{:<26}{:>9}{:>11}{:>9}{:>12}{:>9}{:>9}".format(*row))
    server.shutdown()


if __name__ == "__main__":
    main()
