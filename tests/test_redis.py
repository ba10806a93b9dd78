"""The Redis index across processes and in crawls, against a real redis-server.

The storage protocol itself is tested on every backend in test_index_protocol.py and the
property tests in test_index.py; here: many processes at once, crawls, settings and faults.
"""

from __future__ import annotations

import collections
import json
import shutil
import socket
import subprocess
import threading
import time
import uuid

import pytest
from crawling import ADDON, crawl, crawl_and_rerun_on, expected, path_of, stats_match_truth
from detectors import sqlite_detector
from race import CONFIG, GROUPS, four_processes

from scrapy_neardup.detector import Detector
from scrapy_neardup.exceptions import IndexFileError
from scrapy_neardup.index.engines.redis import RedisIndex


@pytest.mark.slow
def test_four_processes_admit_each_group_once(redis_url):
    """4 processes check the same groups' pages at once, 20 rounds: one page of each group admitted."""
    four_processes(RedisIndex, redis_url, 20)


REDIS = ADDON


def test_a_crawl_dedups_through_redis_and_a_rerun_is_a_revisit(tmp_path, site, redis_url):
    crawl_and_rerun_on(tmp_path, site, f"{redis_url}?prefix=crawl:{uuid.uuid4().hex}")


def test_a_reset_deletes_an_index_of_other_settings_and_refuses_keys_not_its_own(tmp_path, site, redis_url):
    """As NEARDUP_RESET on an SQLite file: an index goes whatever built it, anything else stays."""
    import redis as redis_client

    key = f"reset:{uuid.uuid4().hex}"
    settings = {**REDIS, "NEARDUP_INDEX": f"{redis_url}?prefix={key}"}
    crawl(tmp_path, [site + "/"], {**settings, "NEARDUP_SCOPE": "host"})
    again = crawl(tmp_path, [site + "/"], {**settings, "NEARDUP_RESET": True})
    assert "is new (reset)" in again["stderr"] and "neardup/revisits" not in again["stats"]
    assert again["stats"]["neardup/dropped"] == len(expected("duplicate"))
    RedisIndex.open_existing(redis_url, key).remove()
    r = redis_client.Redis.from_url(redis_url)
    r.set(f"{key}:ids", "another program's key")
    refused = crawl(tmp_path, [site + "/"], {**settings, "NEARDUP_RESET": True}, check=False)
    said = [line for line in refused["stderr"].splitlines() if "scrapy-neardup cannot start" in line]
    assert said and "no scrapy-neardup index" in said[0] and key in said[0], refused["stderr"][-2000:]
    assert r.get(f"{key}:ids") == b"another program's key"
    r.delete(f"{key}:ids")


def test_the_prefix_defaults_to_the_spider_s_and_unreachable_fails_at_start(tmp_path, site, redis_url):
    RedisIndex.reset_keys(redis_url, "site:neardup")  # the spider's prefix, used by no other test
    result = crawl(tmp_path, [site + "/"], {**REDIS, "NEARDUP_INDEX": redis_url})
    stats_match_truth(result["stats"])
    RedisIndex.open_existing(redis_url, "site:neardup").remove()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there
    failed = crawl(
        tmp_path, [site + "/"], {**REDIS, "NEARDUP_INDEX": f"redis://127.0.0.1:{port}/0"}, check=False
    )
    assert failed["returncode"] != 0
    assert f"scrapy-neardup cannot start: index redis://127.0.0.1:{port}/0" in failed["stderr"]


def test_two_crawlers_sharing_the_queue_store_one_page_a_group(tmp_path, site, redis_url):
    """scrapy-redis shares the request queue and URL filter, the add-on the content index: the union
    of two crawlers' items holds every original page once and no copy, wherever each was fetched."""
    pytest.importorskip("scrapy_redis")
    key = uuid.uuid4().hex
    settings = {
        **REDIS, "NEARDUP_INDEX": f"{redis_url}?prefix={key}:neardup", "REDIS_URL": redis_url,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_QUEUE_KEY": f"{key}:requests", "SCHEDULER_DUPEFILTER_KEY": f"{key}:dupefilter",
        "CONCURRENT_REQUESTS": 1, "DOWNLOAD_DELAY": 0.4,
        # The first crawler to close would otherwise clear the shared filter under the other.
        "SCHEDULER_PERSIST": True,
    }  # fmt: skip
    results: dict[str, dict] = {}

    def run(name: str, start_urls: list[str]) -> None:
        results[name] = crawl(tmp_path, start_urls, settings, check=False)

    first = threading.Thread(target=run, args=("first", [site + "/"]))  # seeds the shared queue
    second = threading.Thread(target=run, args=("second", []))  # takes requests from it
    first.start()
    time.sleep(1.5)
    second.start()
    for thread in (first, second):
        thread.join(200)
    for result in results.values():
        assert result["returncode"] == 0, result["stderr"][-2000:]
    stored = collections.Counter(path_of(item["url"]) for r in results.values() for item in r["items"])
    assert set(stored) == expected("unique") | {"/empty.html", "/short.html"}
    assert set(stored.values()) == {1}
    assert all(r["items"] for r in results.values())  # both crawlers did part of the work


def _documents(url: str, prefix: str) -> int:
    """Pages the Redis index under ``prefix`` holds so far (0 before it exists)."""
    try:
        index = RedisIndex.open_existing(url, prefix)
    except IndexFileError:  # not made yet
        return 0
    try:
        return index.stats()["documents"]
    finally:
        index.close()


@pytest.mark.slow(20)
def test_redis_lost_mid_crawl_passes_pages_and_the_index_stays_whole(tmp_path, site):
    """redis-server killed and restarted while a crawl runs: pages pass unjudged and are counted."""
    server = shutil.which("redis-server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    start = [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", "",
             "--appendonly", "yes"]  # fmt: skip
    redis_process = subprocess.Popen(start, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    _wait_for(port)
    settings = {**REDIS, "NEARDUP_INDEX": url, "DOWNLOAD_DELAY": 1.0, "CONCURRENT_REQUESTS": 1}
    outcome = {}
    crawler = threading.Thread(
        target=lambda: outcome.update(crawl(tmp_path, [site + "/"], settings, check=False))
    )
    crawler.start()
    deadline = time.time() + 60
    while time.time() < deadline and _documents(url, "site:neardup") < 2:  # the crawl is under way
        time.sleep(0.1)
    redis_process.kill()  # lost mid-crawl
    redis_process.wait()
    time.sleep(8)  # longer than the client's retries wait
    redis_process = subprocess.Popen(start, stdout=subprocess.DEVNULL)  # back, with what it had written
    _wait_for(port)
    restarted_at = time.time()
    crawler.join(180)
    try:
        assert outcome["returncode"] == 0, outcome["stderr"][-2000:]
        stats = outcome["stats"]
        assert stats.get("neardup/unjudged/error", 0) >= 1
        assert len(outcome["items"]) >= len(expected("unique")) - 1  # no page the crawl parsed was lost
        index = RedisIndex.open_existing(url, "site:neardup")  # the spider's own prefix by default
        documents = list(index.documents())
        assert index.stats()["documents"] == len(documents)  # counts and records agree: no half-written page
        assert all(r["status"] in ("unique", "duplicate", "skipped") for r in documents)
        assert any(r["seen_at"] > restarted_at for r in documents)  # judged again once Redis was back
        index.close()
    finally:
        redis_process.kill()


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"redis-server did not come up on {port}")


def test_scan_report_and_export_work_from_redis(tmp_path, capsys, copied_pages, redis_url):
    """``--index redis://...?prefix=KEY`` for scan and report; ``export`` copies the index into a
    file whose report is the same."""
    from scrapy_neardup.cli import main

    folder = copied_pages
    key = f"scan:{uuid.uuid4().hex}"
    where = f"{redis_url}?prefix={key}"
    assert main(["scan", str(folder), "--index", where, "--workers", "0"]) == 0
    assert "3 duplicates" in capsys.readouterr().out
    assert main(["scan", str(folder), "--db", str(tmp_path / "local.db"), "--workers", "0"]) == 0
    capsys.readouterr()

    def clusters(*where: str) -> list:
        assert main(["report", *where, "--format", "json"]) == 0
        found = json.loads(capsys.readouterr().out)["clusters"]
        return [[(m["url"], m.get("method")) for m in c["members"]] for c in found]

    from_redis = clusters("--index", where)
    assert len(from_redis) == 3 and from_redis == clusters("--db", str(tmp_path / "local.db"))
    exported = tmp_path / "exported.db"
    assert main(["export", "--index", where, "-o", str(exported)]) == 0
    assert clusters("--db", str(exported)) == from_redis
    with sqlite_detector(exported) as detector:  # a working index: its pages are findable
        copy = (folder / "1.html").read_bytes().replace(b"<body", b"<body data-copy='2'", 1)
        assert detector.check("http://elsewhere.example/1", copy).duplicate
    out = tmp_path / "from-redis.html"
    assert main(["report", "--index", where, "-o", str(out)]) == 0 and "<html" in out.read_text()
    assert main(["report", "--index", redis_url, "--format", "json"]) == 2
    assert "names no key prefix" in capsys.readouterr().err
    assert main(["export", "--index", str(exported), "-o", str(tmp_path / "again.db")]) == 2
    assert "is no index on a server" in capsys.readouterr().err
    RedisIndex.open_existing(redis_url, key).remove()


def test_reset_removes_the_index_own_keys_only_and_prefixes_are_checked(redis_url, capsys):
    """A reset must never delete another program's keys, nor another index under a longer prefix."""
    import redis as redis_client

    from scrapy_neardup.cli import main
    from scrapy_neardup.exceptions import ConfigError, IndexFileError

    base = f"own{uuid.uuid4().hex[:8]}"
    r = redis_client.Redis.from_url(redis_url)
    r.set(f"{base}:requests", "scrapy-redis's queue")
    r.set(f"{base}:neardup:notes", "a user's key")
    index, other = (RedisIndex(redis_url, CONFIG, p) for p in (f"{base}:neardup", f"{base}:neardup:eu"))
    for each in (index, other):
        Detector(CONFIG, each).check("http://a.example/1", GROUPS[0])
    assert index.remove() > 5
    assert r.get(f"{base}:requests") and r.get(f"{base}:neardup:notes")
    assert other.stats()["documents"] == 1 and not r.exists(f"{base}:neardup:meta")
    other.remove()
    for bad in ("", " x", "a*", "b?", "c[1]"):
        with pytest.raises(IndexFileError, match="cannot prefix"):
            RedisIndex(redis_url, CONFIG, bad)
    r.set(f"{base}:taken:ids", "not ours")
    with pytest.raises(IndexFileError, match="choose another"):
        RedisIndex(redis_url, CONFIG, f"{base}:taken")
    from scrapy.settings import Settings

    from scrapy_neardup.crawl.settings import CrawlSettings

    with pytest.raises(ConfigError, match=r"NEARDUP_INDEX.*cannot prefix"):
        CrawlSettings.from_settings(Settings({"NEARDUP_INDEX": "redis://h/0?prefix=*"}), "news")
    for command in (
        ["report", "--index", "redis://h:x/0?prefix=k"],
        ["export", "--index", "redis://h:x/0?prefix=k", "-o", "o.db"],
    ):
        assert main(command) == 2
        assert "is not a Redis URL" in capsys.readouterr().err
    r.delete(f"{base}:requests", f"{base}:neardup:notes", f"{base}:taken:ids")


def test_an_index_the_server_lost_is_made_anew(redis_url, caplog):
    """A server restarted without persistence mid-crawl: the index starts again empty, with a warning."""
    index = RedisIndex(redis_url, CONFIG, f"lost:{uuid.uuid4().hex}")
    detector = Detector(CONFIG, index)
    assert not detector.check("http://a.example/1", GROUPS[0]).duplicate
    for key in index.r.scan_iter(match=index.k("*")):
        index.r.delete(key)
    index.engine._checks = 0  # the next check looks for the meta
    assert not detector.check("http://a.example/2", GROUPS[1]).duplicate
    assert detector.check("http://a.example/3", GROUPS[1]).duplicate
    assert "the index is gone from Redis" in caplog.text
    assert RedisIndex.open_existing(redis_url, index.prefix).stats()["documents"] == 2
    index.remove()
