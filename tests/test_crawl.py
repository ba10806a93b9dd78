"""Crawl tests: real crawls (one process each) of tests/site served on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import types
from pathlib import Path

import forked
import pytest
from crawling import ADDON, RUNNER, SITE, TRUTH, crawl, expected, long_page, path_of, stats_match_truth
from scrapy.settings import Settings

from scrapy_neardup import workers as workers_module
from scrapy_neardup.config import DedupConfig
from scrapy_neardup.crawl.settings import CrawlSettings
from scrapy_neardup.exceptions import ConfigError
from scrapy_neardup.fingerprint import Fingerprint, fingerprint
from scrapy_neardup.workers import AUTO_WORKERS_AFTER, WorkerPool, main_script_guarded


def test_drop_mode_drops_the_items_of_duplicates_and_follows_their_links(tmp_path, site):
    db, report = tmp_path / "drop.sqlite", tmp_path / "out" / "report.html"
    result = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_REPORT": str(report)})
    stats_match_truth(result["stats"])
    assert result["stats"]["neardup/report"] == str(report) and "<svg" in report.read_text()
    page = report.read_text()
    assert '<div class="l">share duplicate</div>' in page
    shown = re.findall(r'<div class="n">([^<]*)</div><div class="l">([^<]*)</div>', page)
    figures = {label: n for n, label in shown}
    seen = int(figures["documents seen"])
    assert (figures["dropped"], figures["pages stored"]) == ("5", str(seen - 5))  # what the crawl did
    data = json.loads(re.search(r'<script type="application/json" id="nd-data">(.*?)</script>', page)[1])
    assert all(m[7] >= 0 for _, members in data["clusters"] for m in members)  # every text shown
    # Each duplicate page reached the spider (its links followed), with its verdict; its item was dropped.
    assert result["stats"]["neardup/dropped"] == 5 == result["stats"]["item_dropped_count"]
    assert "neardup/ignored" not in result["stats"]
    parsed = {path_of(u) for u in result["parsed"]}
    assert expected("unique") | expected("skipped") | expected("duplicate") <= parsed
    for url in result["parsed"]:
        if path_of(url) in expected("duplicate"):
            assert path_of(result["meta"][url]["duplicate_of"]) == TRUTH[path_of(url)]["of"]
    item_paths = {path_of(item["url"]) for item in result["items"]}
    assert item_paths.isdisjoint(expected("duplicate"))
    assert expected("unique") <= item_paths
    # Every HTML page is recorded in the index, the dropped ones with what they duplicate.
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT d.url, d.status, o.url FROM documents d LEFT JOIN documents o ON o.id = d.duplicate_of"
        ).fetchall()
    recorded = {path_of(url): (status, path_of(of) if of else None) for url, status, of in rows}
    for path in expected("duplicate"):
        assert recorded[path] == ("duplicate", TRUTH[path]["of"]), path
    for path in expected("unique"):
        assert recorded[path][0] == "unique", path
    assert "Dropped an item of near-duplicate" in result["stderr"]


def test_ignore_mode_ignores_duplicate_responses_before_the_spider(tmp_path, site):
    settings = {**ADDON, "NEARDUP_ACTION": "ignore", "NEARDUP_INDEX": str(tmp_path / "ignore.sqlite")}
    result = crawl(tmp_path, [site + "/"], settings)
    stats_match_truth(result["stats"])
    assert result["stats"]["neardup/ignored"] == 5 and "neardup/dropped" not in result["stats"]
    parsed = {path_of(u) for u in result["parsed"]}
    assert parsed.isdisjoint(expected("duplicate"))
    assert expected("unique") | expected("skipped") <= parsed
    item_paths = {path_of(item["url"]) for item in result["items"]}
    assert expected("unique") <= item_paths and item_paths.isdisjoint(expected("duplicate"))
    assert "Ignored near-duplicate" in result["stderr"]


def test_tag_mode_lets_everything_through_with_the_verdict(tmp_path, site):
    report = tmp_path / "tag.html"
    settings = {**ADDON, "NEARDUP_ACTION": "tag", "NEARDUP_REPORT": str(report)}
    settings["NEARDUP_INDEX"] = str(tmp_path / "tag.sqlite")
    result = crawl(tmp_path, [site + "/"], settings)
    assert '<div class="l">share tagged</div>' in report.read_text()
    stats_match_truth(result["stats"])
    # Counted once a duplicate page (its item is tagged from the page's verdict, not counted again).
    assert result["stats"]["neardup/tagged"] == 5 and "neardup/dropped" not in result["stats"]
    assert "Tagged near-duplicate" in result["stderr"] and "Filtered near" not in result["stderr"]
    parsed = {path_of(u) for u in result["parsed"]}
    assert expected("duplicate") <= parsed
    items = {path_of(item["url"]): item for item in result["items"]}
    for path in expected("duplicate"):
        tag = items[path]["neardup"]
        assert tag["duplicate"] and path_of(tag["duplicate_of"]) == TRUTH[path]["of"]
        assert tag["method"] == "exact" if TRUTH[path]["match"] == "exact" else tag["method"] != "exact"
        meta = result["meta"][next(u for u in result["parsed"] if path_of(u) == path)]
        assert meta["duplicate"] and meta["similarity"] > 0
    for path in expected("unique"):
        assert items[path]["neardup"]["duplicate"] is False


def test_pipeline_alone_drops_duplicate_items(tmp_path, site):
    settings = {
        "NEARDUP_ENABLED": True,
        "ITEM_PIPELINES": {"scrapy_neardup.NearDupPipeline": 200},
        "NEARDUP_INDEX": str(tmp_path / "items.sqlite"),
    }
    result = crawl(tmp_path, [site + "/"], settings)
    parsed = {path_of(u) for u in result["parsed"]}
    assert expected("duplicate") <= parsed  # no middleware: every page reaches the spider
    item_paths = {path_of(item["url"]) for item in result["items"]}
    assert item_paths.isdisjoint(expected("duplicate"))
    assert expected("unique") <= item_paths
    assert result["stats"]["neardup/dropped"] == 5
    assert result["stats"].get("item_dropped_count") == 5


def test_addon_equals_manual_wiring(tmp_path, site):
    manual = {
        "NEARDUP_ENABLED": True,
        "DOWNLOADER_MIDDLEWARES": {"scrapy_neardup.NearDupDownloaderMiddleware": 570},
        "SPIDER_MIDDLEWARES": {"scrapy_neardup.NearDupSpiderMiddleware": 50},
        "ITEM_PIPELINES": {"scrapy_neardup.NearDupPipeline": 200},
        "NEARDUP_INDEX": str(tmp_path / "manual.sqlite"),
    }
    by_addon = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(tmp_path / "addon.sqlite")})
    by_hand = crawl(tmp_path, [site + "/"], manual)
    keys = [  # what the crawls found, not how long they waited for it
        k
        for k in by_addon["stats"]
        if k.startswith("neardup/") and k != "neardup/report" and "/waited/" not in k
    ]
    assert {k: by_addon["stats"][k] for k in keys} == {k: by_hand["stats"].get(k) for k in keys}
    assert sorted(map(path_of, by_addon["parsed"])) == sorted(map(path_of, by_hand["parsed"]))


def test_addon_respects_neardup_enabled_false(tmp_path, site):
    settings = {**ADDON, "NEARDUP_ENABLED": False, "NEARDUP_INDEX": str(tmp_path / "off.sqlite")}
    result = crawl(tmp_path, [site + "/"], settings)
    assert not any(k.startswith("neardup/") for k in result["stats"])
    assert not (tmp_path / "off.sqlite").exists()


def test_neardup_skip_meta_bypasses_the_check(tmp_path, site):
    db = tmp_path / "skip.sqlite"
    result = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db)}, skip_pattern="/mirror/")
    assert "/mirror/footbridge.html" in {path_of(u) for u in result["parsed"]}
    assert result["stats"]["neardup/unjudged/opted_out"] == 1
    assert result["stats"]["neardup/duplicates/exact"] == 1  # the tracking-parameter copy only
    # The opted-out page's item is not judged by the pipeline either: it reaches the feed.
    assert "/mirror/footbridge.html" in {path_of(item["url"]) for item in result["items"]}
    with sqlite3.connect(db) as con:
        assert not con.execute("SELECT 1 FROM documents WHERE url LIKE '%/mirror/%'").fetchall()


def test_non_html_responses_pass_untouched(tmp_path, site):
    result = crawl(tmp_path, [site + "/files/report.pdf", site + "/files/data.json"], {**ADDON})
    assert sorted(map(path_of, result["parsed"])) == ["/files/data.json", "/files/report.pdf"]
    assert result["stats"]["neardup/unjudged/not_html"] == 2
    assert "neardup/checked" not in result["stats"]
    # Without NEARDUP_INDEX or JOBDIR the index is the project's data folder, one file per spider.
    assert (tmp_path / ".scrapy" / "neardup" / "site.sqlite").exists()


def test_workers_give_the_same_verdicts_as_inline(tmp_path, site):
    inline = crawl(
        tmp_path,
        [site + "/"],
        {**ADDON, "NEARDUP_INDEX": str(tmp_path / "inline.sqlite"), "NEARDUP_WORKERS": 0},
    )
    pooled = crawl(
        tmp_path,
        [site + "/"],
        {**ADDON, "NEARDUP_INDEX": str(tmp_path / "pool.sqlite"), "NEARDUP_WORKERS": 2},
    )

    def verdicts(db: Path) -> set[tuple]:
        with sqlite3.connect(db) as con:
            rows = con.execute(
                "SELECT d.url, d.status, d.skip_reason, o.url, d.method FROM documents d "
                "LEFT JOIN documents o ON o.id = d.duplicate_of"
            ).fetchall()
        return {(path_of(u), s, r, path_of(o) if o else None, m) for u, s, r, o, m in rows}

    assert verdicts(tmp_path / "inline.sqlite") == verdicts(tmp_path / "pool.sqlite")
    assert inline["stats"]["neardup/dropped"] == pooled["stats"]["neardup/dropped"] == 5


def test_default_pool_starts_after_the_first_pages_and_keeps_verdicts(aeb_pages):
    """The default pool starts after ``start_after`` pages; until its workers are ready, pages
    are fingerprinted inline, then by the workers, with the same fingerprints."""
    config = DedupConfig()
    bodies = list(aeb_pages.values())[:12]
    expected = [fingerprint(body, config) for body in bodies]

    async def run() -> tuple[WorkerPool, list]:
        pool = WorkerPool(config, 2, 60.0, start_after=4)
        got = []
        try:
            for round_ in range(200):  # until the workers have taken pages, or about a minute
                got.append(await pool.fingerprint(bodies[round_ % len(bodies)], None, None))
                if round_ == 3:
                    assert pool._pool is None and pool.pooled == 0  # the first 4 pages: inline
                if pool.pooled >= len(bodies):
                    break
                await asyncio.sleep(0.3)  # the crawl's event loop runs between pages
        finally:
            pool.close()
        return pool, got

    pool, got = asyncio.run(run())
    assert pool.pooled >= len(bodies)
    assert len(got) > pool.pooled  # some pages went inline while the workers started
    for n, fp in enumerate(got):
        want = expected[n % len(bodies)]
        assert (fp.exact, fp.simhash, fp.spots.hashes.tolist()) == (
            want.exact, want.simhash, want.spots.hashes.tolist(),
        )  # fmt: skip


def test_pages_waiting_for_a_worker_stopped_by_a_timeout_go_to_the_next_pool(aeb_pages):
    """A page over NEARDUP_PAGE_TIMEOUT stops the pool under the pages waiting for its worker:
    they are fingerprinted by the next pool, not failed."""
    config = DedupConfig(extractor="trafilatura")  # slow on the long page
    bodies = list(aeb_pages.values())[:3]

    async def run() -> tuple[WorkerPool, list]:
        pool = WorkerPool(config, 1, 2.0)
        try:
            slow = asyncio.ensure_future(pool.fingerprint(long_page(40_000), None, None))
            while not pool._slots.locked():  # the slow page has the worker; the others wait for it
                await asyncio.sleep(0.02)
            others = await asyncio.gather(*(pool.fingerprint(body, None, None) for body in bodies))
            return pool, [await slow, *others]
        finally:
            pool.close()

    pool, (slow, *others) = asyncio.run(run())
    assert slow.skip_reason == "timeout"
    assert [fp.exact for fp in others] == [fingerprint(body, config).exact for body in bodies]
    assert pool.pooled == len(bodies)


def test_a_page_whose_workers_are_stopped_twice_passes_unjudged(aeb_pages):
    """A page under which the pool is stopped on both tries is passed on as ``workers_stopped``,
    not an error; a page waiting meanwhile is fingerprinted or passed on the same way."""
    config = DedupConfig(extractor="trafilatura")  # slow on the long page

    async def busy(pool: WorkerPool) -> None:
        while pool._pool is None or not pool._slots.locked():
            await asyncio.sleep(0.02)

    async def run() -> list[Fingerprint]:
        pool = WorkerPool(config, 1, 120.0)
        try:
            slow = asyncio.ensure_future(pool.fingerprint(long_page(40_000), None, None))
            await busy(pool)
            waiting = asyncio.ensure_future(pool.fingerprint(next(iter(aeb_pages.values())), None, None))
            pool.stop()
            await busy(pool)
            pool.stop()
            return [await slow, await waiting]
        finally:
            pool.close()

    slow, waiting = asyncio.run(run())
    assert slow.skip_reason == "workers_stopped" and slow.raw_hash is not None
    assert waiting.skip_reason in (None, "workers_stopped")


def test_a_page_whose_worker_died_is_fingerprinted_by_a_new_pool(aeb_pages, caplog):
    """A worker killed under a page (out of memory, a signal) breaks the pool: the page goes to a
    new one, and so do the pages after it."""
    config = DedupConfig(extractor="trafilatura")  # slow on the long page
    page, body = long_page(5_000), next(iter(aeb_pages.values()))

    async def run() -> tuple[WorkerPool, Fingerprint, Fingerprint]:
        pool = WorkerPool(config, 1, 120.0)
        try:
            job = asyncio.ensure_future(pool.fingerprint(page, None, None))
            while pool._pool is None or pool._warming:  # the worker has started and taken the page
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)
            for process in pool._pool._processes.values():
                process.kill()
            return pool, await job, await pool.fingerprint(body, None, None)
        finally:
            pool.close()

    pool, first, second = asyncio.run(run())
    assert (first.exact, second.exact) == (fingerprint(page, config).exact, fingerprint(body, config).exact)
    assert pool.pooled == 2
    assert "a worker process ended abruptly" in caplog.text


def test_default_workers_follow_the_cores(monkeypatch):
    for cores, workers in [(1, 0), (2, 2), (3, 3), (16, 4)]:
        monkeypatch.setattr(workers_module, "usable_cores", lambda cores=cores: cores)
        settings = CrawlSettings.from_settings(Settings({}), "s")
        assert (settings.workers, settings.workers_after) == (workers, AUTO_WORKERS_AFTER)
    explicit = CrawlSettings.from_settings(Settings({"NEARDUP_WORKERS": "0"}), "s")
    assert (explicit.workers, explicit.workers_after) == (0, 0)
    later = CrawlSettings.from_settings(Settings({"NEARDUP_WORKERS": 2, "NEARDUP_WORKERS_AFTER": 50}), "s")
    assert (later.workers, later.workers_after) == (2, 50)
    with pytest.raises(ConfigError, match="NEARDUP_WORKERS_AFTER"):
        CrawlSettings.from_settings(Settings({"NEARDUP_WORKERS_AFTER": -1}), "s")


UNGUARDED_SCRIPT = """
import scrapy
from scrapy.crawler import CrawlerProcess


class SiteSpider(scrapy.Spider):
    name = "unguarded"
    start_urls = [{start!r}]

    def parse(self, response):
        yield {{"url": response.url}}
        for href in response.css("a::attr(href)").getall():
            if href.endswith(".html") or href.endswith("/"):
                yield response.follow(href)


# As in Scrapy's "run Scrapy from a script": the crawl at the top level, no __main__ guard.
process = CrawlerProcess({{
    "ADDONS": {{"scrapy_neardup.NearDupAddon": 0}}, "NEARDUP_INDEX": {db!r}, "NEARDUP_WORKERS_AFTER": 0,
    "FEEDS": {{{feed!r}: {{"format": "jsonlines"}}}}, "LOG_LEVEL": "INFO",
}})
process.crawl(SiteSpider)
process.start()
"""


def test_a_script_without_main_guard_gets_no_default_pool(tmp_path, site):
    """A default pool's workers would import the script and start its crawl again: such a
    script crawls inline, once, and the log says why."""
    feed, db = tmp_path / "items.jsonl", tmp_path / "unguarded.sqlite"
    script = tmp_path / "run.py"
    script.write_text(UNGUARDED_SCRIPT.format(start=site + "/", db=str(db), feed=str(feed)))
    proc = forked.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "INFO: scrapy-neardup: no worker processes" in proc.stderr and "inline" in proc.stderr
    assert feed.read_text().strip()
    assert proc.stderr.count("Spider opened") == 1  # one crawl, not one more in each worker
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_a_script_without_main_guard_asking_for_workers_runs_inline(tmp_path, site):
    feed, db = tmp_path / "items.jsonl", tmp_path / "asked.sqlite"
    script = tmp_path / "run.py"
    source = UNGUARDED_SCRIPT.format(start=site + "/", db=str(db), feed=str(feed))
    script.write_text(source.replace('"NEARDUP_WORKERS_AFTER": 0', '"NEARDUP_WORKERS": 2'))
    proc = forked.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING: scrapy-neardup: no worker processes" in proc.stderr
    assert proc.stderr.count("Spider opened") == 1 and feed.read_text().strip()


def test_main_script_guard_is_read_from_the_script(tmp_path, monkeypatch):
    module = types.ModuleType("__main__")
    module.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", module)
    for source, guarded in [("run()\n", False), ("if __name__ == '__main__':\n    run()\n", True)]:
        script = tmp_path / "script.py"
        script.write_text(source)
        module.__file__ = str(script)
        assert main_script_guarded() is guarded
    module.__file__ = str(tmp_path / "gone.py")
    assert main_script_guarded() is False
    del module.__file__
    assert main_script_guarded() is True  # an interactive session


def test_two_crawls_sharing_one_index(tmp_path, site):
    db = tmp_path / "shared.sqlite"
    procs = []
    for n in range(2):
        config = tmp_path / f"shared-{n}.json"
        # Tag mode, so both crawls walk the whole site even when the other got there first.
        settings = {**ADDON, "NEARDUP_INDEX": str(db), "CONCURRENT_REQUESTS": 8, "NEARDUP_ACTION": "tag"}
        config.write_text(
            json.dumps(
                {"start_urls": [site + "/"], "settings": settings, "out": str(tmp_path / f"out-{n}.json")}
            )
        )
        procs.append(
            forked.Popen(
                [sys.executable, str(RUNNER), str(config)], cwd=tmp_path, stderr=subprocess.PIPE, text=True
            )
        )
    logs = [p.communicate(timeout=180)[1] for p in procs]
    failed = [log[-3000:] for p, log in zip(procs, logs, strict=True) if p.returncode != 0]
    assert not failed, failed
    locked = [line for log in logs for line in log.splitlines() if "database is locked" in line]
    assert not locked
    with sqlite3.connect(db) as con:
        unique = con.execute("SELECT COUNT(*) FROM documents WHERE status = 'unique'").fetchone()[0]
        judged = con.execute("SELECT COUNT(*) FROM documents WHERE status != 'skipped'").fetchone()[0]
        records = con.execute("SELECT url, status, duplicate_of FROM documents ORDER BY id").fetchall()
    # Each distinct page is admitted once in all: 8 unique pages, whichever crawl got there first;
    # the other crawl's fetch of a page is a copy within the same crawl, not a second record.
    assert unique == len(expected("unique")), records
    assert judged == len(expected("unique")) + len(expected("duplicate")), records
    stats = [json.loads((tmp_path / f"out-{n}.json").read_text())["stats"] for n in range(2)]
    assert sum(s.get("neardup/duplicates/url", 0) for s in stats) >= judged
    assert not any(s.get("neardup/revisits") for s in stats)


@pytest.mark.parametrize(
    ("setting", "value", "needle"),
    [
        ("NEARDUP_ACTION", "explode", "NEARDUP_ACTION"),
        ("NEARDUP_SPOTSIGS_THRESHOLD", "1.5", "NEARDUP_SPOTSIGS_THRESHOLD"),
        ("NEARDUP_WORKERS", "many", "NEARDUP_WORKERS"),
        ("NEARDUP_INDEX", "redis://h/0?prefix=a*", "NEARDUP_INDEX"),
        ("NEARDUP_MAX_WAITING", "0", "NEARDUP_MAX_WAITING"),
        ("NEARDUP_METHODS", "exact,telepathy", "NEARDUP_METHODS"),
    ],
)
def test_bad_settings_stop_the_crawl_at_start(tmp_path, site, setting, value, needle):
    result = crawl(tmp_path, [site + "/"], {**ADDON, setting: value}, check=False)
    assert result["returncode"] != 0
    assert needle in result["stderr"]
    assert "CRAWL FAILED TO START" in result["stderr"]


def test_corrupt_or_unwritable_index_fails_at_start(tmp_path, site):
    bad = tmp_path / "corrupt.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    result = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(bad)}, check=False)
    assert result["returncode"] != 0 and str(bad) in result["stderr"]
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x")
    result = crawl(
        tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(blocked / "index.sqlite")}, check=False
    )
    assert result["returncode"] != 0 and "index.sqlite" in result["stderr"]


def test_a_failing_index_passes_pages_on_unjudged(tmp_path):
    """No page is lost when the index fails mid-crawl: it is logged, counted and let through."""
    import asyncio

    from scrapy.http import HtmlResponse, Request
    from scrapy.utils.test import get_crawler

    from scrapy_neardup.crawl.middleware import NearDupDownloaderMiddleware

    crawler = get_crawler(
        settings_dict={"NEARDUP_ENABLED": True, "NEARDUP_INDEX": str(tmp_path / "i.sqlite")}
    )
    middleware = NearDupDownloaderMiddleware.from_crawler(crawler)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    middleware.session.detector.index.find_raw = broken  # the index fails under the page
    body = (SITE / "articles" / "library.html").read_bytes()
    request = Request("http://example.com/a")
    response = HtmlResponse(request.url, body=body, request=request)
    assert asyncio.run(middleware.process_response(request, response)) is response
    assert crawler.stats.get_value("neardup/unjudged/error") == 1
