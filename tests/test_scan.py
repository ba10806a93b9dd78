from __future__ import annotations

import gzip
import json
import sqlite3
from io import BytesIO
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from scrapy_neardup import workers as workers_module
from scrapy_neardup.cli import main
from scrapy_neardup.index import SQLiteIndex
from scrapy_neardup.offline.sources import canonical_url, read_pages
from scrapy_neardup.report.clusters import Member, cluster_members


@pytest.fixture
def articles(aeb_pages) -> list[bytes]:
    return list(aeb_pages.values())[:12]


def scan(capsys, *args: str) -> str:
    assert main(["scan", *args, "--workers", "0"]) == 0
    return capsys.readouterr().out


def report(capsys, db: Path) -> dict:
    assert main(["report", "--db", str(db), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_scan_folder_finds_copies_and_resumes(tmp_path, capsys, articles):
    site = tmp_path / "site"
    (site / "news").mkdir(parents=True)
    (site / "print").mkdir()
    for i, body in enumerate(articles):
        (site / "news" / f"{i}.html.gz").write_bytes(gzip.compress(body))
    for i in (1, 4, 7):
        (site / "print" / f"{i}.htm").write_bytes(articles[i].replace(b"<body", b"<body class='print'", 1))
    (site / "notes.pdf").write_bytes(b"%PDF-1.4 ignored: not a page type")
    db = tmp_path / "index.db"
    out = scan(capsys, str(site), "--db", str(db), "--batch", "5")
    assert "scanned 15 pages" in out and "3 duplicates" in out and "3 clusters" in out
    again = scan(capsys, str(site), "--db", str(db))
    assert "scanned 0 pages (15 already in the index)" in again
    result = report(capsys, db)
    assert result["documents"] == 15 and result["duplicates"] == 3
    assert all(c["size"] == 2 for c in result["clusters"])
    member = result["clusters"][0]["members"][1]
    assert member["method"] == "exact" and member["similarity"] == 1.0
    assert member["duplicate_of"] == result["clusters"][0]["canonical"]


def test_files_named_one_by_one_are_urled_by_their_path_as_named(tmp_path, capsys, articles, monkeypatch):
    """Two files of one name in two folders, named on the command line: two URLs, so the
    report never shows a page as a copy of itself."""
    for folder in ("news", "print"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "article.html").write_bytes(articles[0].replace(b"canonical", b"x"))
    monkeypatch.chdir(tmp_path)
    scan(capsys, "news/article.html", "print/article.html", "--db", "i.db")
    members = report(capsys, tmp_path / "i.db")["clusters"][0]["members"]
    assert [m["url"] for m in members] == ["news/article.html", "print/article.html"]


def test_scan_with_workers_gives_the_same_verdicts(tmp_path, capsys, articles):
    folder = tmp_path / "pages"
    folder.mkdir()
    for i, body in enumerate(articles[:6] + articles[:2]):
        (folder / f"{i:02d}.html").write_bytes(body)
    inline = scan(capsys, str(folder), "--db", str(tmp_path / "a.db"))
    assert main(["scan", str(folder), "--db", str(tmp_path / "b.db"), "--workers", "2"]) == 0
    pooled = capsys.readouterr().out
    assert inline.replace("a.db", "x") == pooled.replace("b.db", "x")

    def verdicts(db):
        clusters = report(capsys, db)["clusters"]
        return [[(m["url"], m["duplicate_of"], m["method"]) for m in c["members"]] for c in clusters]

    assert verdicts(tmp_path / "a.db") == verdicts(tmp_path / "b.db") != []


def test_scan_jsonlines_feed(tmp_path, capsys, aeb_truth):
    texts = [v["articleBody"] for v in list(aeb_truth.values())[:5]]
    feed = tmp_path / "items.jl"
    lines = [json.dumps({"url": f"https://a.example/{i}", "text": t}) for i, t in enumerate(texts)]
    lines.append(json.dumps({"url": "https://b.example/copy", "text": texts[2] + " Share this article."}))
    lines += ["not json at all", json.dumps({"title": "no url"})]
    feed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = scan(capsys, str(feed), "--db", str(tmp_path / "f.db"))
    assert "scanned 6 pages" in out and "1 duplicates" in out
    cluster = report(capsys, tmp_path / "f.db")["clusters"][0]
    assert cluster["canonical"] == "https://a.example/2"
    assert cluster["members"][1]["url"] == "https://b.example/copy"
    assert cluster["members"][1]["method"] in ("spotsigs", "simhash")


def test_scan_jsonlines_custom_field(tmp_path, capsys, articles):
    feed = tmp_path / "items.jsonl"
    rows = [
        {"url": f"https://a.example/{i}", "page": b.decode("utf-8", "replace")}
        for i, b in enumerate(articles[:3])
    ]
    rows.append({"url": "https://a.example/again", "page": rows[0]["page"]})
    feed.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    out = scan(capsys, str(feed), "--db", str(tmp_path / "c.db"), "--field", "page")
    assert "scanned 4 pages" in out and "1 duplicates" in out


def _warc(path: Path, records: list[tuple[str, bytes, str]]) -> None:
    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        for url, body, content_type in records:
            headers = StatusAndHeaders("200 OK", [("Content-Type", content_type)], protocol="HTTP/1.1")
            writer.write_record(
                writer.create_warc_record(url, "response", payload=BytesIO(body), http_headers=headers)
            )


def test_scan_warc(tmp_path, capsys, articles):
    warc = tmp_path / "crawl.warc.gz"
    _warc(warc, [
        ("https://a.example/1", articles[0], "text/html; charset=utf-8"),
        ("https://a.example/logo.png", b"\x89PNG\r\n\x1a\n", "image/png"),
        ("https://a.example/2", articles[1], "text/html"),
        ("https://mirror.example/1", articles[0], "text/html"),
    ])  # fmt: skip
    pages = list(read_pages(warc))
    assert [p.url for p in pages] == [
        "https://a.example/1",
        "https://a.example/2",
        "https://mirror.example/1",
    ]
    assert len({p.source for p in pages}) == 3
    out = scan(capsys, str(warc), "--db", str(tmp_path / "w.db"))
    assert "scanned 3 pages" in out and "1 duplicates" in out


def test_canonical_url_names_a_document():
    head = b'<html><head><link href="https://x.example/story" rel="canonical"></head><body>x</body></html>'
    assert canonical_url(head) == "https://x.example/story"
    assert canonical_url(b"<html><head></head></html>") is None
    relative = b'<head><link rel="canonical" href="/story?a=1&amp;b=2"></head>'
    assert canonical_url(relative, "https://x.example/news/print.html") == "https://x.example/story?a=1&b=2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["scan", "{tmp}/missing", "--db", "{tmp}/i.db"], "no such file or folder"),
        (["scan", "{tmp}/data.csv", "--db", "{tmp}/i.db"], "unsupported file type"),
        (["scan", "{tmp}", "--db", "{tmp}/garbage.db"], "garbage.db"),
        (["report", "--db", "{tmp}/none.db"], "no such index file"),
        (["report", "--db", "{tmp}/garbage.db"], "not a scrapy-neardup index"),
    ],
)
def test_scan_and_report_errors_are_one_line(tmp_path, capsys, args, message):
    (tmp_path / "data.csv").write_text("a,b")
    (tmp_path / "bad.warc").write_bytes(b"this is no warc")
    (tmp_path / "garbage.db").write_bytes(b"not sqlite" * 500)
    assert main([a.format(tmp=tmp_path) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scrapy-neardup: error: ") and message in err and "Traceback" not in err


def test_a_file_with_nothing_readable_exits_1_naming_it(tmp_path, capsys, caplog):
    (tmp_path / "bad.warc").write_bytes(b"this is no warc")
    assert main(["scan", str(tmp_path / "bad.warc"), "--db", str(tmp_path / "i.db")]) == 1
    assert "1 records skipped (1 damaged)" in capsys.readouterr().out
    assert f"skipped {tmp_path / 'bad.warc'} at offset 0: a damaged record" in caplog.text


def test_clusters_join_chains_and_pick_the_first_seen():
    members = [Member(i, f"http://a.example/{i}") for i in range(1, 10)]
    clusters = cluster_members([(2, 1), (3, 2), (5, 4), (7, 6), (8, 7), (9, 6)], members)
    assert [[m.id for m in c.members] for c in clusters] == [[6, 7, 8, 9], [1, 2, 3], [4, 5]]


def test_a_byte_identical_copy_is_recorded_without_its_extraction(tmp_path, capsys, articles, monkeypatch):
    """The scan takes the crawl's road: a copy of a recorded page's bytes is never extracted."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "a.html").write_bytes(articles[0])
    (second / "copy.html").write_bytes(articles[0])
    (second / "other.html").write_bytes(articles[1])
    db = tmp_path / "index.db"
    scan(capsys, str(first), "--db", str(db))
    extracted = []
    real = workers_module.fingerprint
    monkeypatch.setattr(
        workers_module, "fingerprint", lambda body, *a, **k: extracted.append(body) or real(body, *a, **k)
    )
    assert "1 duplicates" in scan(capsys, str(second), "--db", str(db))
    assert extracted == [articles[1]]
    (cluster,) = report(capsys, db)["clusters"]
    assert [m.get("method") for m in cluster["members"]] == [None, "exact"]


def test_a_copy_another_scan_recorded_meanwhile_is_counted_once(tmp_path, capsys, articles, monkeypatch):
    """Between the copy lookup and its record, another scan of the same folder records the page:
    this scan then counts it as already in the index, and the index holds it once."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "a.html").write_bytes(articles[0])
    (second / "copy.html").write_bytes(articles[0])
    db = tmp_path / "index.db"
    scan(capsys, str(first), "--db", str(db))
    real = SQLiteIndex.record_copy

    def raced(index, url, raw, original, scope="", source=None, key=None):
        real(index, url, raw, original, scope, source, key)  # the other scan, first
        return real(index, url, raw, original, scope, source, key)

    monkeypatch.setattr(SQLiteIndex, "record_copy", raced)
    out = scan(capsys, str(second), "--db", str(db))
    assert "scanned 0 pages (1 already in the index): 0 duplicates" in out
    with sqlite3.connect(db) as con:
        sources = con.execute("SELECT source, status FROM documents ORDER BY id").fetchall()
    assert [(Path(source).name, status) for source, status in sources] == [
        ("a.html", "unique"), ("copy.html", "duplicate"),
    ]  # fmt: skip


def test_a_page_over_its_time_in_a_worker_is_recorded_as_timeout_and_the_scan_goes_on(
    tmp_path, capsys, articles
):
    """The scan's workers are the crawl's pool, with its per-page time budget (--page-timeout)."""
    from crawling import long_page

    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "a.html").write_bytes(articles[0])
    (folder / "b-slow.html").write_text(long_page(40_000))  # seconds of extraction
    (folder / "c.html").write_bytes(articles[1])
    db = tmp_path / "index.db"
    args = ["scan", str(folder), "--db", str(db), "--workers", "1", "--page-timeout", "0.5"]
    args += ["--extractor", "trafilatura"]  # slow on the long page
    assert main(args) == 0
    assert "scanned 3 pages (0 already in the index): 0 duplicates, 1 not judged" in capsys.readouterr().out
    with sqlite3.connect(db) as con:
        rows = dict(con.execute("SELECT source, COALESCE(skip_reason, status) FROM documents"))
    assert {Path(source).name: what for source, what in rows.items()} == {
        "a.html": "unique", "b-slow.html": "timeout", "c.html": "unique",
    }  # fmt: skip


def test_a_match_let_through_is_counted_apart_and_the_counts_agree_with_the_index(tmp_path, capsys):
    """A page matched on thin evidence is recorded as an original: the scan's duplicates are the
    index's, and the uncertain match is counted apart, not as a duplicate."""
    import re

    import weak_site

    folder = tmp_path / "site"
    weak_site.build(folder)
    db = tmp_path / "index.db"
    assert main(["scan", str(folder), "--db", str(db), "--workers", "0"]) == 0
    out = capsys.readouterr().out
    scanned = int(re.search(r"\): (\d+) duplicates", out).group(1))
    indexed = int(re.search(r"documents, (\d+) duplicates", out).group(1))
    assert "1 let through as uncertain matches" in out
    with sqlite3.connect(db) as con:
        recorded = con.execute("SELECT COUNT(*) FROM documents WHERE status = 'duplicate'").fetchone()[0]
    assert scanned == indexed == recorded
