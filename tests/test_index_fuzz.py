"""Fuzz of what an index holds: every SQLite table and every Redis key filled with hostile values
(other types, encodings and lengths, pickles, keys of another type), then a crawl, every report
format, a scan and an export. No traceback, no code run, and the crawl stores its pages."""

from __future__ import annotations

import subprocess
import sys
import uuid

import forked
import pytest
from crawling import ADDON, SITE, crawl
from hostile_index import aeb_bodies, build, fuzz_redis, fuzz_sqlite

from scrapy_neardup import DedupConfig
from scrapy_neardup.index import SQLiteIndex

ALL_METHODS = "exact,spotsigs,simhash,minhash,shingles,imatch,ksentence"
CASES = [(1, ""), (2, ALL_METHODS), (3, "")]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return forked.run([sys.executable, "-m", "scrapy_neardup.cli", *args], capture_output=True, text=True)


def _stored(result: dict) -> list[str]:
    return sorted(item["url"].split("/", 3)[3] for item in result["items"])


@pytest.fixture(scope="module")
def fresh_items(site, tmp_path_factory) -> dict[str, list[str]]:
    """What a crawl of the test site stores on a new index, for each set of methods."""
    folder = tmp_path_factory.mktemp("fresh")
    found = {}
    for methods in {m for _, m in CASES}:
        extra = {"NEARDUP_METHODS": methods} if methods else {}
        settings = {
            **ADDON,
            "NEARDUP_INDEX": str(folder / f"{len(found)}.sqlite"),
            "NEARDUP_WORKERS": 0,
            **extra,
        }
        found[methods] = _stored(crawl(folder, [site + "/"], settings))
    return found


def _checked(result, what: str) -> None:
    assert result.returncode == 0, f"{what}: {result.stderr[-2000:]}"
    assert "Traceback" not in result.stderr, f"{what}: {result.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "methods"), CASES)
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_hostile_index_runs_nothing_stops_nothing_and_costs_no_page(
    backend, seed, methods, site, aeb_dir, fresh_items, tmp_path, request
):
    ran = tmp_path / "ran"
    config = DedupConfig.from_options({"methods": tuple(methods.split(","))}) if methods else DedupConfig()
    extra = {"NEARDUP_METHODS": methods} if methods else {}
    if backend == "redis":
        import redis

        from scrapy_neardup.index.engines.redis import RedisIndex

        url, prefix = request.getfixturevalue("redis_url"), f"fuzz:{uuid.uuid4().hex}"
        index = RedisIndex(url, config, prefix=prefix)
        build(index, config, aeb_bodies(aeb_dir, 20))
        index.close()
        assert fuzz_redis(redis.Redis.from_url(url), prefix, seed, ran) > 20
        settings = {"NEARDUP_INDEX": f"{url}?prefix={prefix}"}
        where = ["--index", f"{url}?prefix={prefix}"]
    else:
        db = tmp_path / "index.sqlite"
        with SQLiteIndex(db, config) as index:
            build(index, config, aeb_bodies(aeb_dir, 20))
        assert fuzz_sqlite(db, seed, ran) > 20
        settings, where = {"NEARDUP_INDEX": str(db)}, ["--db", str(db)]

    result = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_WORKERS": 0, **settings, **extra}, check=False)
    _checked(subprocess.CompletedProcess([], result["returncode"], "", result["stderr"]), "crawl")
    stored = _stored(result)
    assert set(fresh_items[methods]) <= set(stored)  # its pages are none of the index's: none lost
    if stored != fresh_items[methods]:  # a store of the wrong type fails writes: those pages pass unjudged
        assert result["stats"].get("neardup/unjudged/error", 0) >= len(stored) - len(fresh_items[methods])
    for suffix in ("html", "json", "csv"):
        _checked(_cli("report", *where, "-o", str(tmp_path / f"report.{suffix}")), f"report {suffix}")
    method_flags = ["--methods", methods] if methods else []
    _checked(_cli("scan", str(SITE / "articles"), *where, "--workers", "0", *method_flags), "scan")
    if backend == "redis":
        _checked(_cli("export", *where, "-o", str(tmp_path / "exported.sqlite")), "export")
    assert not ran.exists()


@pytest.mark.parametrize("seed", range(4))
def test_a_damaged_meta_is_refused_in_one_line(seed, aeb_dir, site, tmp_path):
    db = tmp_path / "index.sqlite"
    with SQLiteIndex(db, DedupConfig()) as index:
        build(index, DedupConfig(), aeb_bodies(aeb_dir, 3))
    tables = ("scopes", "runs", "documents", "spot_classes", "term_df", "texts", "spot_lists", "lookup_keys")
    fuzz_sqlite(
        db, seed, tmp_path / "ran", share=1.0, keep=(*tables, "url_rules", "url_skips", "url_skip_rules")
    )
    result = crawl(
        tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_WORKERS": 0}, check=False
    )
    assert "Traceback" not in result["stderr"]
    said = [line for line in result["stderr"].splitlines() if "CRITICAL" in line]
    assert (len(said) == 1 and str(db) in said[0]) or (result["returncode"] == 0 and result["items"])
    report = _cli("report", "--db", str(db), "-o", str(tmp_path / "r.html"))
    assert "Traceback" not in report.stderr and (report.returncode == 0 or str(db) in report.stderr)
