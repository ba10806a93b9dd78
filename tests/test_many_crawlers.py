"""Many crawlers on one index behave as one crawl, and a crawler that dies costs no page.

Real crawls in processes of their own, on the test site, against a real redis-server and
PostgreSQL. A killed crawler's feed is gzipped (Scrapy writes it only when the crawl closes),
so a kill loses every item it exported: whatever the other crawlers dropped as copies of its
pages must come back, fetched again.
"""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import forked
import pytest
from crawling import ADDON, RUNNER, TRUTH, crawl, expected, path_of, serve

STORED = expected("unique") | {"/empty.html", "/short.html"}  # one item each: what one crawl stores
GZIP = {"format": "jsonlines", "postprocessing": ["scrapy.extensions.postprocessing.GzipPlugin"]}


def _index(backend: str, request) -> str:
    url = request.getfixturevalue(f"{backend}_url")
    return f"{url}?prefix={'many_' if backend == 'postgres' else 'many:'}{uuid.uuid4().hex}"


def _shared_queue(redis_url: str) -> dict:
    key = uuid.uuid4().hex
    return {
        "REDIS_URL": redis_url, "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_QUEUE_KEY": f"{key}:requests", "SCHEDULER_DUPEFILTER_KEY": f"{key}:dupefilter",
        "SCHEDULER_PERSIST": True, "SCHEDULER_IDLE_BEFORE_CLOSE": 3,
    }  # fmt: skip


def _at_once(tmp_path: Path, runs: list[tuple[list[str], dict]], stagger: float = 0.0) -> list[dict]:
    """Crawls started together (``stagger`` seconds apart), each in its process; their results."""
    results: list[dict] = [{} for _ in runs]

    def run(n: int) -> None:
        results[n] = crawl(tmp_path, runs[n][0], runs[n][1], check=False)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(runs))]
    for thread in threads:
        thread.start()
        time.sleep(stagger)
    for thread in threads:
        thread.join(200)
    for result in results:
        assert result.get("returncode") == 0, result.get("stderr", "")[-3000:]
    return results


def _stored(feeds: list[list[dict]]) -> collections.Counter:
    return collections.Counter(path_of(item["url"]) for feed in feeds for item in feed)


@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgres"])
def test_two_crawlers_of_the_whole_site_store_what_one_stores(backend, tmp_path, site, request):
    """No shared queue: each crawler fetches every page. What one fetched first, the other meets as
    a copy within the same crawl (its URL, or its content), never as a revisit."""
    index = str(tmp_path / "shared.sqlite") if backend == "sqlite" else _index(backend, request)
    settings = {**ADDON, "NEARDUP_INDEX": index, "CONCURRENT_REQUESTS": 2, "DOWNLOAD_DELAY": 0.1}
    results = _at_once(tmp_path, [([site + "/"], settings)] * 2)
    stored = _stored([r["items"] for r in results])
    assert set(stored) == STORED and set(stored.values()) == {1}, stored
    assert sum(r["stats"].get("neardup/duplicates/url", 0) for r in results)  # met again by its URL
    assert not any(r["stats"].get("neardup/revisits") for r in results)


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_two_crawlers_sharing_a_queue_store_what_one_stores(backend, tmp_path, site, request, redis_url):
    pytest.importorskip("scrapy_redis")
    settings = {
        **ADDON, **_shared_queue(redis_url), "NEARDUP_INDEX": _index(backend, request),
        "CONCURRENT_REQUESTS": 1, "DOWNLOAD_DELAY": 0.3,
    }  # fmt: skip
    results = _at_once(tmp_path, [([site + "/"], settings), ([], settings)], stagger=1.0)
    stored = _stored([r["items"] for r in results])
    assert set(stored) == STORED and set(stored.values()) == {1}, stored
    assert all(r["items"] for r in results)  # both crawlers did part of the work


def _start(
    tmp_path: Path, name: str, start_urls: list[str], settings: dict, feed: dict, close_delay: float = 0
) -> subprocess.Popen:
    """A crawl in its own process, its log on a pipe (read it: a full pipe stops the crawl)."""
    out = tmp_path / f"{name}.jsonl{'.gz' if feed is GZIP else ''}"
    config = tmp_path / f"{name}.json"
    settings = {**settings, "FEEDS": {str(out): feed}, "NEARDUP_MIN_TOKENS": 30}
    config.write_text(
        json.dumps({"start_urls": start_urls, "settings": settings, "out": str(tmp_path / f"{name}.out"),
                    "close_delay": close_delay})
    )  # fmt: skip
    return forked.Popen(
        [sys.executable, str(RUNNER), str(config)], cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )


def _kill_when(process: subprocess.Popen, said: str, times: int = 1, log: list[str] | None = None) -> bool:
    """SIGKILL ``process`` once its log has said ``said`` ``times`` times; whether it did (else it
    ended first)."""
    for line in process.stderr:
        times -= said in line
        if log is not None:
            log.append(line)
        if times <= 0:
            process.send_signal(signal.SIGKILL)
            process.wait()
            return True
    process.wait()
    return False


def _feed(path: Path) -> list[dict]:
    if not path.exists():
        return []
    items = []
    for line in path.read_text().splitlines():
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a kill
            continue
    return items


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_crawler_killed_beside_another_costs_no_page(backend, tmp_path, site, request, redis_url):
    """A and B share a queue and an index; A is killed after it admitted pages whose items die with
    it (its feed is written only at close), while B drops their copies. B finds A dead and fetches
    A's pages again; A started again finishes the crawl with B."""
    pytest.importorskip("scrapy_redis")
    settings = {
        **ADDON, **_shared_queue(redis_url), "NEARDUP_INDEX": _index(backend, request),
        "CONCURRENT_REQUESTS": 1, "DOWNLOAD_DELAY": 0.5,
    }  # fmt: skip
    log: list[str] = []
    a = _start(tmp_path, "a", [site + "/"], settings, GZIP)
    time.sleep(1.5)
    b = _start(tmp_path, "b", [], settings, {"format": "jsonlines"})
    reader = threading.Thread(target=lambda: log.extend(b.stderr))  # B's pipe never fills
    reader.start()
    assert _kill_when(a, "Crawled (200)", times=5), "A ended before its kill"
    again = _start(tmp_path, "a-again", [], settings, {"format": "jsonlines"})
    again_log = again.stderr.read()
    again.wait(180)
    b.wait(180)
    reader.join(10)
    assert b.returncode == 0 and again.returncode == 0, "".join(log)[-3000:] + again_log[-2000:]
    stored = _stored([_feed(tmp_path / "b.jsonl"), _feed(tmp_path / "a-again.jsonl")])
    assert _cost_by_the_add_on(settings["NEARDUP_INDEX"], set(stored)) == set(), "".join(log)[-3000:]
    assert "died without closing: fetching again" in "".join(log) + again_log


def _group(path: str) -> str:
    return TRUTH.get(path, {}).get("of", path)


def _cost_by_the_add_on(location: str, stored: set[str]) -> set[str]:
    """The contents in no feed of which a crawler that closed dropped a copy: lost to the add-on.
    (A content whose pages only the killed crawler fetched dies with it, as without the add-on.)"""
    from scrapy_neardup.index import IndexSpec, open_existing

    with open_existing(IndexSpec.parse(location)) as index:
        engine = index.engine
        runs = list(engine.listing("run"))
        closed = {
            run for run, found in zip(runs, engine.get("run", runs), strict=True) if found.get("ended_at")
        }
        ids = list(engine.listing("doc"))
        records = [r for r in engine.get("doc", ids, ("url", "status", "duplicate_of", "run")) if r]
        urls = dict(zip(ids, (r and r["url"] for r in engine.get("doc", ids, ("url",))), strict=True))
    dropped = {
        _group(path_of(urls[r["duplicate_of"]]))
        for r in records
        if r["status"] == "duplicate" and r.get("run") in closed and r.get("duplicate_of") in urls
    }
    return dropped - {_group(path) for path in stored}


def test_a_crawl_killed_during_its_close_and_resumed_costs_no_page(tmp_path, site):
    """JOBDIR: the resumed crawl fetches nothing Scrapy has seen, so the pages of the killed run,
    whose feed died with it, must be fetched again by the add-on."""
    settings = {**ADDON, "JOBDIR": str(tmp_path / "job"), "CONCURRENT_REQUESTS": 2}
    killed = _start(tmp_path, "killed", [site + "/"], settings, GZIP, close_delay=30)
    killed_log: list[str] = []
    assert _kill_when(killed, "Closing slowly", log=killed_log), "the crawl ended before its kill"
    (tmp_path / "killed.log").write_text("".join(killed_log))
    resumed = _start(tmp_path, "resumed", [site + "/"], settings, {"format": "jsonlines"})
    log = resumed.stderr.read()
    (tmp_path / "resumed.log").write_text(log)
    assert resumed.wait(180) == 0, log[-3000:]
    stored = _stored([_feed(tmp_path / "resumed.jsonl")])
    assert set(stored) >= expected("unique"), log[-3000:]  # (the pages not judged: Scrapy's loss)
    assert "died without closing: fetching again" in log


def test_rows_planted_in_a_shared_index_fetch_nothing_elsewhere(tmp_path, site):
    """Skipped requests and a dead run's pages rewritten to name another server, a POST, a proxy or
    credentials: none is fetched from anywhere the crawl did not ask for; the crawl stores its pages."""
    from scrapy import Request

    from scrapy_neardup import DedupConfig
    from scrapy_neardup.crawl import kept_requests
    from scrapy_neardup.index import SQLiteIndex
    from scrapy_neardup.url_rule import PARAM, RuleKey

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "index.html").write_text("<html><body>internal</body></html>")
    hits = []
    with serve(tmp_path / "elsewhere", on_request=hits.append) as elsewhere:
        db = tmp_path / "planted.sqlite"
        index = SQLiteIndex(db, DedupConfig())
        rule = RuleKey(site, "", PARAM, "utm").text()
        index.add_url_evidence({rule: (30, 0)}, 29)
        index.add_url_evidence({rule: (0, 1)}, 29)  # revoked: its skips are scheduled again at start
        own = json.loads(kept_requests.keep(Request(site + "/index.html?utm=1"), None))
        at = site + "/index.html?utm="
        planted = {
            f"{elsewhere}/": {**own, "url": f"{elsewhere}/"},
            at + "2": {**own, "url": at + "2", "method": "POST"},
            at + "3": {**own, "url": at + "3", "meta": {"proxy": elsewhere}},
            at + "4": {**own, "url": at + "4", "headers": {"Authorization": ["Basic cm9vdDpyb290"]}},
        }
        for url, fields in planted.items():
            index.add_url_skip([rule], url, site + "/index.html", json.dumps(fields).encode())
        index.begin_run("drop")  # a run that died, its pending page on the other server
        index.engine.put("pending", 10**6, {"run": index.runs.current, "request": json.dumps(
            {**own, "url": f"{elsewhere}/"}).encode()})  # fmt: skip
        index.engine.put("run", index.runs.current, {"pid": 2**22 + 12345})
        index.close()
        result = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db), "CONCURRENT_REQUESTS": 2})
    assert hits == []
    assert set(path_of(item["url"]) for item in result["items"]) == STORED
    assert result["stats"]["neardup/urls/unreadable"] == 3  # the POST, the proxy, the credentials
    assert "Traceback" not in result["stderr"]
