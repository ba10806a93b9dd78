"""Pages built to be slow for a parser or an extractor (tests/pathological_pages.py) are each judged
or skipped as ``pathological`` within seconds: inline, in a worker, in a scan and in a crawl, which
a SIGTERM then still stops. Time bounds are loose (a shared, busy machine): they catch hangs."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import sys
import time
from pathlib import Path

import forked
import pytest
from crawling import ADDON, RUNNER, crawl, path_of, serve
from pathological_pages import PAGES, TEXT, write

from scrapy_neardup import text
from scrapy_neardup.cli import main
from scrapy_neardup.config import DedupConfig
from scrapy_neardup.fingerprint import fingerprint
from scrapy_neardup.workers import WorkerPool

# The pages nested too deep to judge (a tag of 100,000 attributes is its own check).
SKIPPED = {
    "deep_divs", "deep_with_text", "deep_mixed_tags", "deep_unclosed", "unclosed_formatting",
    "nested_tables", "nested_lists", "crowded_tag",
}  # fmt: skip
SLOWEST_JUDGED = ("tiny_elements", "million_elements", "huge_table")  # 1.7 to 2.8 s each here
FAST_JUDGED = ("long_word", "many_titles", "many_comments", "unclosed_script")  # < 0.4 s each here
BUDGET = 60  # seconds; each page takes at most 4 s on a busy 2-core machine
GOOD = f"<html><body><article><p>{TEXT}</p></article></body></html>"


@pytest.mark.parametrize(
    ("html", "depth"),
    [
        ("<div><div><span>x</span></div></div>", 3),
        ("<div><p>a<p>b<ul><li>c<li>d</ul><br><img src=x></div>", 2),  # unclosed and void tags
        ("<div>" + "</zz><div>" * 50, 51),  # a stray closing tag closes nothing
        ("<div><table></div>" * 50, 100),  # nor one for an element outside the table
        ("<div><b></div>" * 50, 100),  # nor one skipping a formatting element the parser reopens
        ("<div><span></div>" * 50, 2),  # a misnested span is closed with its div
        ("<script>" + "'<div>'" * 50 + "</script><div>", 1),  # a script's text holds no tags
        ("<svg>" + "<path d='M0'/>" * 50 + "</svg>", 1),
        ("<div/>" * 50, 50),  # HTML's own elements are not closed by "/>"
    ],
)
def test_nesting_depth_counts_what_a_parser_keeps_open(html, depth):
    assert text.nesting_depth(html) == depth


def test_no_real_page_is_nested_near_the_limit(aeb_pages, cleanportaleval_dir):
    pages = [text.decode(body) for body in aeb_pages.values()]
    pages += [
        p.read_bytes().split(b"\n", 1)[1].decode("utf-8", "replace")
        for p in cleanportaleval_dir.glob("input/*.html")
    ]
    depths = [text.nesting_depth(html) for html in pages]
    assert len(pages) > 200 and max(depths) < text.MAX_DEPTH / 20
    assert not any(text._too_deep(html) for html in pages)


@pytest.mark.parametrize("name", PAGES)
def test_each_page_is_judged_or_skipped_inline_within_its_budget(name):
    html = PAGES[name]()
    assert len(html.encode()) < DedupConfig().max_body
    start = time.monotonic()
    fp = fingerprint(html, DedupConfig())
    assert time.monotonic() - start < BUDGET
    if name in SKIPPED:
        assert fp.skip_reason == "pathological", fp.skip_detail
    else:
        assert fp.skip_reason is None and fp.token_count >= 100, fp.skip_detail


@pytest.mark.parametrize(
    ("name", "extractor"),
    [
        ("deep_divs", "resiliparse"),
        ("unclosed_formatting", "resiliparse"),
        ("deep_with_text", "plain"),
        ("million_elements", "trafilatura"),
        ("many_links", "trafilatura"),
        ("tiny_elements", "trafilatura-fast"),
    ],
)
def test_each_extractor_meets_the_budget_on_the_pages_it_was_slow_on(name, extractor):
    start = time.monotonic()
    try:
        assert TEXT.split()[1] in text.extract_page(PAGES[name](), extractor)[0]
    except text.SkipPage as skip:
        assert skip.reason == "pathological" and name in SKIPPED
    assert time.monotonic() - start < BUDGET


@pytest.mark.slow
def test_pages_are_judged_in_a_worker_within_the_page_timeout():
    names = ["deep_divs", "unclosed_formatting", "million_elements", "huge_table"]

    async def run() -> list:
        pool = WorkerPool(DedupConfig(), 1, page_timeout=BUDGET)
        try:
            return [await pool.fingerprint(PAGES[name](), "text/html", None) for name in names]
        finally:
            pool.stop()

    fps = asyncio.run(run())
    assert [fp.skip_reason for fp in fps] == ["pathological", "pathological", None, None]


@pytest.mark.slow(15)
def test_a_scan_of_the_pages_inline_ends_within_its_budget(tmp_path, capsys):
    # Each page is timed inline above, and reading one takes a scan milliseconds: so the pages it
    # must skip, and the quickest of those it judges.
    write(tmp_path / "pages", [*SKIPPED, *FAST_JUDGED])
    (tmp_path / "pages" / "good.html").write_text(GOOD)
    db = tmp_path / "index.db"
    start = time.monotonic()
    assert main(["scan", str(tmp_path / "pages"), "--db", str(db), "--workers", "0"]) == 0
    assert time.monotonic() - start < 4 * BUDGET
    assert f"{len(SKIPPED)} not judged" in capsys.readouterr().out
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT url, status, skip_reason FROM documents").fetchall()
    con.close()
    skipped = {Path(url).stem for url, _, reason in rows if reason == "pathological"}
    assert skipped == SKIPPED
    assert ("unique", None) in {(status, reason) for url, status, reason in rows if Path(url).stem == "good"}


def _site(root: Path, names: list[str]) -> None:
    root.mkdir()
    for name in names:
        (root / f"{name}.html").write_text(PAGES[name]())
    (root / "good.html").write_text(GOOD)
    links = "".join(f"<a href='/{name}.html'>{name}</a>" for name in [*names, "good"])
    (root / "index.html").write_text(f"<html><body>{links}</body></html>")


def test_a_crawl_skips_200000_nested_divs_and_stores_the_good_page(tmp_path):
    _site(tmp_path / "site", ["deep_divs"])
    settings = {**ADDON, "NEARDUP_INDEX": str(tmp_path / "p.db")}  # the default extractor and workers
    start = time.monotonic()
    with serve(tmp_path / "site") as url:
        result = crawl(tmp_path, [url + "/"], settings)
    assert time.monotonic() - start < 2 * BUDGET
    stats = result["stats"]
    assert stats.get("neardup/unjudged/pathological") == 1, {k: v for k, v in stats.items() if "neardup" in k}
    assert {"/deep_divs.html", "/good.html"} <= {path_of(item["url"]) for item in result["items"]}
    with sqlite3.connect(tmp_path / "p.db") as con:
        good = con.execute("SELECT status FROM documents WHERE url LIKE '%/good.html'").fetchone()
    con.close()
    assert good == ("unique",)


@pytest.mark.slow(45)
def test_sigterm_stops_a_crawl_judging_the_pages_inline(tmp_path):
    # The spider itself parses each page for links: lxml takes minutes on the crowded tag, and
    # the spider's 200,000 requests from many_links half a minute, neither of it the add-on's.
    # The pages to skip and the three slowest to judge; each of the rest is timed inline above.
    names = [name for name in PAGES if name in SKIPPED - {"crowded_tag"} or name in SLOWEST_JUDGED]
    _site(tmp_path / "site", names)
    log = tmp_path / "crawl.log"
    with serve(tmp_path / "site") as url:
        settings = {**ADDON, "NEARDUP_INDEX": str(tmp_path / "p.db"), "NEARDUP_WORKERS": 0}
        config = tmp_path / "config.json"
        config.write_text(
            json.dumps({"start_urls": [url + "/"], "settings": settings, "out": str(tmp_path / "r")})
        )
        with log.open("w") as out:
            process = forked.Popen([sys.executable, str(RUNNER), str(config)], stdout=out, stderr=out)
        try:
            deadline = time.monotonic() + BUDGET
            while "deep_divs.html> (referer" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            process.send_signal(signal.SIGTERM)
            start = time.monotonic()
            process.wait(timeout=BUDGET)
            took = time.monotonic() - start
        finally:
            process.kill()
    assert "Received SIGTERM, shutting down gracefully" in log.read_text(), log.read_text()[-2000:]
    # It stops rather than hangs: the pages downloaded already (7, at most 4 s each on a busy
    # machine) are judged first.
    assert took < BUDGET
