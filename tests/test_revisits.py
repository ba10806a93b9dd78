"""Never lose a page: re-runs, resets, kills and resumes, tag counts, text items, quiet logs.

Each test crawls tests/site (or a JSON API) served on 127.0.0.1, one crawl a process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import forked
import pytest
from crawling import ADDON, RUNNER, SITE, crawl, expected, path_of, run_crawl, serve

JUDGED = len(expected("unique")) + len(expected("duplicate"))


def pipeline_only(tmp_path: Path) -> dict:
    """The pipeline alone, as for items from an API."""
    return {
        "NEARDUP_ENABLED": True,
        "ITEM_PIPELINES": {"scrapy_neardup.NearDupPipeline": 200},
        "NEARDUP_INDEX": str(tmp_path / "items.sqlite"),
    }


def api_folder(tmp_path: Path, entries: list[dict]) -> Path:
    """A folder serving ``entries`` as a JSON API's answer, ``/items.json``."""
    api = tmp_path / "api"
    api.mkdir()
    (api / "items.json").write_text(json.dumps(entries))
    return api


def records(db: Path) -> list[tuple]:
    """(path, status, path of what it duplicates, run, whether that run ended) of every record."""
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT d.url, d.status, o.url, d.run, r.ended_at IS NOT NULL FROM documents d "
            "LEFT JOIN documents o ON o.id = d.duplicate_of LEFT JOIN runs r ON r.id = d.run"
        ).fetchall()
    return [(path_of(u), s, path_of(o) if o else None, run, ended) for u, s, o, run, ended in rows]


def assert_no_self_duplicates(db: Path) -> None:
    rows = records(db)
    assert all(path != of for path, _, of, _, _ in rows)
    paths = [path for path, *_ in rows]
    assert len(paths) == len(set(paths)), "a page has two records"


def item_paths(items: list[dict]) -> list[str]:
    return sorted(path_of(item["url"]) for item in items)


def test_rerun_of_a_finished_crawl_gives_every_page_again(tmp_path, site):
    db = tmp_path / "rerun.sqlite"
    settings = {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_REPORT": str(tmp_path / "report.json")}
    first = crawl(tmp_path, [site + "/"], settings)
    second = crawl(tmp_path, [site + "/"], settings)
    assert item_paths(second["items"]) == item_paths(first["items"])
    assert set(item_paths(second["items"])) >= expected("unique")
    stats = second["stats"]
    assert stats["neardup/revisits"] == JUDGED  # every judged page, once
    assert "neardup/revisits/changed" not in stats
    # A page that duplicated another page stays a duplicate of it.
    assert stats["neardup/dropped"] == first["stats"]["neardup/dropped"] == len(expected("duplicate"))
    assert "holds 15 pages from earlier crawls" in second["stderr"]  # the empty page among them
    assert "is new" in first["stderr"]
    assert_no_self_duplicates(db)
    report = json.loads((tmp_path / "report.json").read_text())
    for cluster in report["clusters"]:
        urls = [m["url"] for m in cluster["members"]]
        assert len(urls) == len(set(urls))


def test_reset_starts_on_an_empty_index(tmp_path, site):
    db = tmp_path / "reset.sqlite"
    settings = {**ADDON, "NEARDUP_INDEX": str(db)}
    first = crawl(tmp_path, [site + "/"], settings)
    by_setting = crawl(tmp_path, [site + "/"], {**settings, "NEARDUP_RESET": True})
    by_argument = crawl(tmp_path, [site + "/"], settings, spider_args={"neardup_reset": "1"})
    for again in (by_setting, by_argument):
        assert "neardup/revisits" not in again["stats"]
        assert again["stats"]["neardup/dropped"] == first["stats"]["neardup/dropped"]
        assert item_paths(again["items"]) == item_paths(first["items"])
        assert "is new (reset)" in again["stderr"]
    assert len(records(db)) == 15


def test_drop_unchanged_drops_the_items_of_unchanged_revisits_only(tmp_path, site):
    db = tmp_path / "incremental.sqlite"
    crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db)})
    with sqlite3.connect(db) as con:  # the heron article changed since the last crawl
        con.execute("UPDATE documents SET exact = NULL, spots = NULL WHERE url LIKE '%/articles/heron.html'")
    again = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_DROP_UNCHANGED": True})
    # Unchanged pages still reach the spider (their links are followed); only their items go.
    assert expected("unique") <= {path_of(u) for u in again["parsed"]}
    # The pages not judged (empty, too short) pass too: when in doubt, a page goes through.
    assert item_paths(again["items"]) == ["/articles/heron.html", "/empty.html", "/short.html"]
    assert again["stats"]["neardup/revisits/changed"] == 1


@pytest.mark.slow
def test_kills_at_several_points_then_resume_lose_no_page(tmp_path, site):
    """After SIGKILLs at several points, a resume with the same JOBDIR and a re-run, every page the
    add-on dropped in a run that closed is a duplicate of a page in the output (the feeds' union),
    and every page has itself or a copy there.

    A resume after a kill fetches little: Scrapy's disk queue loses its pending requests with
    the process (benchmarks/kill_resume.py), so the re-run is what a user does next.
    """
    jobdir = tmp_path / "job"
    db = tmp_path / "index.sqlite"
    slow = {
        **ADDON,
        "JOBDIR": str(jobdir),
        "NEARDUP_INDEX": str(db),
        "DOWNLOAD_DELAY": 0.2,
        "CONCURRENT_REQUESTS": 1,
    }
    feeds = []
    for n, seen in enumerate((3, 7, 11)):
        feed = tmp_path / f"feed-{n}.jsonl"
        feeds.append(feed)
        settings = {"FEEDS": {str(feed): {"format": "jsonlines"}}, "NEARDUP_MIN_TOKENS": 30, **slow}
        config = tmp_path / f"killed-{n}.json"
        config.write_text(
            json.dumps(
                {"start_urls": [site + "/"], "settings": settings, "out": str(tmp_path / "never.json")}
            )
        )
        proc = forked.Popen(
            [sys.executable, str(RUNNER), str(config)], cwd=tmp_path, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and _documents(db) < seen:
                time.sleep(0.1)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert _documents(db) >= seen, "the slow crawl did not get going"
    settings = {**ADDON, "JOBDIR": str(jobdir), "NEARDUP_INDEX": str(db)}
    feeds.append(tmp_path / "feed-resumed.jsonl")
    resumed = run_crawl(tmp_path, [site + "/"], settings, tmp_path / "resumed.json", feeds[-1])
    feeds.append(tmp_path / "feed-rerun.jsonl")
    settings["JOBDIR"] = str(tmp_path / "job2")
    rerun = run_crawl(tmp_path, [site + "/"], settings, tmp_path / "rerun.json", feeds[-1])
    output = set()
    for feed in feeds:
        for line in feed.read_text().splitlines() if feed.exists() else []:
            try:
                output.add(path_of(json.loads(line)["url"]))
            except json.JSONDecodeError:  # a line cut by the kill
                continue
    assert_no_self_duplicates(db)
    rows = records(db)
    dropped_by_closed_runs = [
        (path, of) for path, status, of, _, ended in rows if status == "duplicate" and ended
    ]
    for path, of in dropped_by_closed_runs:
        assert of in output, f"{path} was dropped as a copy of {of}, which is in no output"
    # What the runs that closed let through reached their feeds (a sure duplicate's item is dropped,
    # its original is out); every page or a copy of it is out.
    parsed = {
        path_of(u)
        for run in (resumed, rerun)
        for u in run["parsed"]
        if not (run["meta"].get(u) or {}).get("sure")
    }
    assert parsed - {"/files/data.json", "/files/report.pdf"} <= output
    assert expected("unique") <= output
    assert rerun["stats"]["neardup/revisits"] >= 1
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        runs = con.execute("SELECT COUNT(*), COUNT(ended_at) FROM runs").fetchone()
    assert runs == (5, 2)


def _documents(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return con.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_copy_of_a_page_an_interrupted_crawl_admitted_passes_once(tmp_path, site):
    """The first copy of a page admitted by a crawl that never closed passes (its original's item
    may be lost); the next copy is dropped as a duplicate of the first."""
    db = tmp_path / "interrupted.sqlite"
    crawl(tmp_path, [site + "/articles/library.html"], {**ADDON, "NEARDUP_INDEX": str(db)})
    with sqlite3.connect(db) as con:  # as a SIGKILL leaves it: the run never ended, its process is gone
        con.execute("UPDATE runs SET ended_at = NULL, pid = 999999999")
    copies = [site + "/print/library.html", site + "/articles/library.html?copy=2"]
    resumed = crawl(tmp_path, copies, {**ADDON, "NEARDUP_INDEX": str(db), "CONCURRENT_REQUESTS": 1})
    assert resumed["stats"]["neardup/unconfirmed"] == 1
    assert resumed["stats"]["neardup/dropped"] >= 1  # the copy's item, and those of copies it links to
    stored = item_paths(resumed["items"])
    assert "/print/library.html" in stored and "/articles/library.html?copy=2" not in stored
    assert "which a crawl that never closed admitted" in resumed["stderr"]


def test_pipeline_alone_judges_text_items_from_a_json_api(tmp_path):
    story = " ".join(
        f"The council met on day {n} to discuss the new harbour bridge and its costs." for n in range(8)
    )
    other = " ".join(
        f"Volunteers planted {n} trees along the river path on a rainy Saturday." for n in range(8)
    )
    entries = [
        {"url": f"http://api.example/story/{n}", "text": text}
        for n, text in enumerate([story, story, other, story + " Updated.", "<p>" + other + "</p>"])
    ]
    with serve(api_folder(tmp_path, entries)) as url:
        result = crawl(tmp_path, [url + "/items.json"], pipeline_only(tmp_path))
    assert item_paths(result["items"]) == ["/story/0", "/story/2"]
    assert result["stats"]["neardup/dropped"] == 3
    assert not any(k.startswith("neardup/skipped") for k in result["stats"])
    assert " ERROR: " not in result["stderr"]


def test_the_addon_adds_a_handful_of_log_lines(tmp_path, site):
    base = {"NEARDUP_INDEX": str(tmp_path / "logs.sqlite"), "NEARDUP_ACTION": "tag"}
    without = crawl(tmp_path, [site + "/"], {})
    with_addon = crawl(tmp_path, [site + "/"], {**ADDON, **base})
    assert len(without["items"]) == len(with_addon["items"])

    def lines(log: str) -> int:  # but the stats dump at the end, where the add-on's stats are added
        return sum(1 for line in log.splitlines() if not line.startswith((" '", "{'")))

    assert lines(with_addon["stderr"]) - lines(without["stderr"]) <= 5
    for library in ("trafilatura", "htmldate", "justext", "courlan"):
        assert f"[{library}" not in with_addon["stderr"]


def test_drop_above_lets_uncertain_near_duplicates_through_tagged(tmp_path, site):
    settings = {**ADDON, "NEARDUP_INDEX": str(tmp_path / "margin.sqlite"), "NEARDUP_DROP_ABOVE": 0.999}
    settings["NEARDUP_DEBUG"] = True  # every line: which comes first depends on the crawl's order
    result = crawl(tmp_path, [site + "/"], settings)
    stats = result["stats"]
    assert stats["neardup/dropped"] == 2  # the exact copies: always sure
    assert stats["neardup/uncertain"] == 3  # the near ones, all under 0.999
    items = {path_of(item["url"]): item for item in result["items"]}
    uncertain = [item["neardup"] for item in items.values() if item.get("neardup")]
    assert len(uncertain) == 3
    assert all(
        tag["duplicate"] and tag["method"] != "exact" and tag["similarity"] < 0.999 for tag in uncertain
    )
    assert "Let through uncertain near-duplicate" in result["stderr"]


def test_items_with_relative_urls_or_none_are_revisits_on_a_rerun(tmp_path):
    texts = [" ".join(f"Item {n} says the {w} council met on day {k}." for k in range(12)) for n, w in
             enumerate(["harbour", "orchard", "library"])]  # fmt: skip
    entries = [
        {"url": "/api/a", "text": texts[0]},
        {"url": "/api/b", "text": texts[1]},
        {"text": texts[2]},  # no URL at all
        {"text": texts[2]},  # the same item again in this crawl: a duplicate
    ]
    with serve(api_folder(tmp_path, entries)) as url:
        first = crawl(tmp_path, [url + "/items.json"], pipeline_only(tmp_path))
        second = crawl(tmp_path, [url + "/items.json"], pipeline_only(tmp_path))
    assert len(first["items"]) == 3 and first["stats"]["neardup/dropped"] == 1
    assert sorted(map(json.dumps, second["items"])) == sorted(map(json.dumps, first["items"]))
    assert second["stats"]["neardup/revisits"] >= 3 and second["stats"]["neardup/dropped"] == 1
    for name in ("/api/a", "/api/b", "item:3"):  # never a duplicate of itself
        assert f"{name} of {name} " not in second["stderr"]


def test_a_copy_whose_original_changed_comes_out_even_with_drop_unchanged(tmp_path):
    root = tmp_path / "site"
    shutil.copytree(SITE, root)
    db = tmp_path / "changed-original.sqlite"
    settings = {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_DROP_UNCHANGED": True}
    with serve(root) as url:
        first = crawl(tmp_path, [url + "/"], settings)
        assert "/print/library.html" not in item_paths(first["items"])  # a copy of the article
        article = root / "articles" / "library.html"
        rewritten = " ".join(
            f"The council voted on day {k} to sell the old depot to a cooperative." for k in range(40)
        )
        article.write_text(
            f"<html><head><title>Depot</title></head><body><article><p>{rewritten}</p></article></body></html>"
        )
        article_only = {**settings, "CLOSESPIDER_PAGECOUNT": 1}
        rejudged = crawl(tmp_path, [url + "/articles/library.html"], article_only)
        copy = crawl(tmp_path, [url + "/print/library.html"], article_only)
    assert item_paths(rejudged["items"]) == ["/articles/library.html"]  # changed: judged again, out
    # Its former print copy is unchanged, but it was a duplicate: now alone, it is new to the output.
    assert item_paths(copy["items"]) == ["/print/library.html"]
    assert copy["stats"]["neardup/revisits/changed"] == 1
