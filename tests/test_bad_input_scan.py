"""Bad input to the offline scan: each bad record is skipped, logged with its file and position,
counted by reason, and the good records before and after it are recorded."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import sqlite3
import stat
from pathlib import Path

import forked
import pytest

from scrapy_neardup.cli import main

STORY = " ".join(f"Story {{n}} reports that the council met on day {k} about the bridge." for k in range(40))


def page(n: int) -> str:
    words = STORY.replace("{n}", str(n)).split()
    words = words[n % 7 :] + words[: n % 7]  # distinct enough: each page is its own
    text = " ".join(w + str(n * 31 % (i + 2)) for i, w in enumerate(words))
    return f"<html><body><article><p>{text}</p></article></body></html>"


def item(n: int) -> str:
    return json.dumps({"url": f"http://a.example/{n}", "html": page(n)})


def scan(tmp_path: Path, *inputs: Path | str, code: int = 0) -> tuple[list[str], str]:
    """Run the scan; return the recorded sources' URLs and the skip lines logged."""
    db = tmp_path / "index.db"
    assert main(["scan", *map(str, inputs), "--db", str(db), "--workers", "0"]) == code
    with sqlite3.connect(db) as con:
        urls = [r[0] for r in con.execute("SELECT url FROM documents ORDER BY id")]
    return urls, ""


def skipped_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipped ")]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ('{"url": "http://a.example/big", "html": ' + "1" * 5000 + "}", "not a JSON item"),  # int digits
        ("[" * 100_000 + "]" * 100_000, "not a JSON item"),  # recursion
        ("{not json", "not a JSON item"),
        ('{"url": 5, "html": "<p>x</p>"}', "needs 'url'"),
    ],
)
def test_a_bad_feed_line_is_skipped_and_the_rest_scanned(tmp_path, caplog, capsys, bad, reason):
    feed = tmp_path / "feed.jl"
    feed.write_text("\n".join([item(1), bad, item(2), item(3)]) + "\n")
    urls, _ = scan(tmp_path, feed)
    assert urls == ["http://a.example/1", "http://a.example/2", "http://a.example/3"]
    assert [line for line in skipped_lines(caplog) if reason in line and f"{feed} line 2" in line]
    assert "1 records skipped (1 bad_record)" in capsys.readouterr().out


def test_a_lone_surrogate_in_a_url_is_stored_escaped(tmp_path):
    feed = tmp_path / "feed.jl"
    feed.write_text(
        "\n".join([item(1), '{"url": "http://a.example/\\ud800", "html": ' + json.dumps(page(5)) + "}"])
    )
    urls, _ = scan(tmp_path, feed)
    assert urls == ["http://a.example/1", "http://a.example/\\ud800"]


def test_a_cut_gzip_feed_yields_its_lines_up_to_the_cut(tmp_path, caplog, capsys):
    data = gzip.compress(("\n".join(item(n) for n in range(1, 30)) + "\n").encode())
    cut = tmp_path / "killed.jl.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])  # what a crawl killed while writing its feed leaves
    urls, _ = scan(tmp_path, cut)
    assert urls and urls == [f"http://a.example/{n}" for n in range(1, len(urls) + 1)]
    assert [
        line for line in skipped_lines(caplog) if f"{cut} after line" in line and "cannot be read" in line
    ]
    assert "(1 damaged)" in capsys.readouterr().out
    damaged = bytearray(data)
    damaged[-6] ^= 0xFF  # the CRC / size trailer
    (tmp_path / "crc.jl.gz").write_bytes(bytes(damaged))
    assert (
        main(["scan", str(tmp_path / "crc.jl.gz"), "--db", str(tmp_path / "crc.db"), "--workers", "0"]) == 0
    )


def _warc(path: Path, count: int, gz: bool = True, without_uri: int | None = None) -> None:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as out:
        writer = WARCWriter(out, gzip=gz)
        for n in range(count):
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            record = writer.create_warc_record(
                f"http://w.example/{n}",
                "response",
                payload=io.BytesIO(page(n).encode()),
                http_headers=headers,
            )
            if n == without_uri:
                record.rec_headers.remove_header("WARC-Target-URI")
            writer.write_record(record)


def _offsets(path: Path) -> list[int]:
    from warcio.archiveiterator import ArchiveIterator

    with path.open("rb") as stream:
        records = ArchiveIterator(stream)
        return [records.get_record_offset() for _ in records]


def test_a_warc_response_without_a_target_uri_is_skipped(tmp_path, caplog):
    warc = tmp_path / "a.warc.gz"
    _warc(warc, 6, without_uri=2)
    urls, _ = scan(tmp_path, warc)
    assert urls == [f"http://w.example/{n}" for n in (0, 1, 3, 4, 5)]
    assert [line for line in skipped_lines(caplog) if str(warc) in line and "offset" in line]


def test_a_damaged_warc_gz_member_is_skipped_and_reading_resumes_at_the_next(tmp_path, caplog, capsys):
    warc = tmp_path / "a.warc.gz"
    _warc(warc, 12)
    offsets = _offsets(warc)
    data = bytearray(warc.read_bytes())
    data[offsets[5] + 40 : offsets[5] + 60] = bytes(20)  # 20 bytes inside the sixth record's member
    warc.write_bytes(bytes(data))
    urls, _ = scan(tmp_path, warc)
    assert urls == [f"http://w.example/{n}" for n in range(12) if n != 5]
    lines = skipped_lines(caplog)
    assert len(lines) == 1 and f"{warc} at offset {offsets[5]}" in lines[0] and "\\x00" not in lines[0]
    assert "Error -3" not in capsys.readouterr().err


def test_a_warc_gz_cut_short_says_where_it_stopped_and_is_read_on_when_grown(tmp_path, caplog, capsys):
    whole = tmp_path / "whole.warc.gz"
    _warc(whole, 10)
    offsets = _offsets(whole)
    warc = tmp_path / "a.warc.gz"
    warc.write_bytes(whole.read_bytes()[: offsets[6] + 50])
    urls, _ = scan(tmp_path, warc)
    assert urls == [f"http://w.example/{n}" for n in range(6)]
    assert [line for line in skipped_lines(caplog) if f"{warc} at offset {offsets[6]}" in line]
    assert "(1 incomplete)" in capsys.readouterr().out
    warc.write_bytes(whole.read_bytes())
    urls, _ = scan(tmp_path, warc)
    assert urls == [f"http://w.example/{n}" for n in range(10)]


def test_an_incomplete_last_record_is_read_once_the_warc_has_grown(tmp_path, caplog):
    whole = tmp_path / "whole.warc"
    _warc(whole, 5, gz=False)
    growing = tmp_path / "growing.warc"
    growing.write_bytes(whole.read_bytes()[:-200])  # still being written
    urls, _ = scan(tmp_path, growing)
    assert urls == [f"http://w.example/{n}" for n in range(4)]
    assert [line for line in skipped_lines(caplog) if "cut short" in line]
    growing.write_bytes(whole.read_bytes())
    urls, _ = scan(tmp_path, growing)
    assert urls == [f"http://w.example/{n}" for n in range(5)]


def test_a_file_name_that_is_not_utf8_is_scanned(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "good.html").write_text(page(1))
    os.close(os.open(os.fsencode(folder) + b"/bad-\xff.html", os.O_CREAT | os.O_WRONLY))
    with open(os.fsencode(folder) + b"/bad-\xff.html", "w") as handle:
        handle.write(page(2))
    urls, _ = scan(tmp_path, folder)
    assert sorted(urls) == ["bad-\\udcff.html", "good.html"]


def test_a_page_is_recorded_once_however_it_is_named(tmp_path, capsys):
    folder = tmp_path / "pages"
    folder.mkdir()
    for n in range(3):
        (folder / f"{n}.html").write_text(page(n))
    (folder / "link.html").symlink_to(folder / "0.html")
    urls, _ = scan(tmp_path, folder, folder, folder / "1.html", str(folder) + "/../pages/2.html")
    assert sorted(urls) == ["0.html", "1.html", "2.html"]
    assert "scanned 3 pages (7 already in the index)" in capsys.readouterr().out  # 10 names, 3 pages


def test_concurrent_scans_over_the_same_inputs_record_each_page_once(tmp_path):
    import subprocess
    import sys

    folder = tmp_path / "pages"
    folder.mkdir()
    for n in range(60):
        (folder / f"{n}.html").write_text(page(n))
    db = tmp_path / "shared.db"
    command = [sys.executable, "-m", "scrapy_neardup.cli", "scan", str(folder), "--db", str(db)]
    command += ["--workers", "0", "--batch", "4"]
    procs = [forked.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(4)]
    errors = [p.communicate(timeout=300)[1].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*), COUNT(DISTINCT source) FROM documents").fetchone() == (60, 60)


@pytest.mark.parametrize("name", ["missing.html", "fifo.html", "unreadable.html", "data.csv"])
def test_an_input_that_cannot_be_read_fails_before_the_index_is_made(tmp_path, capsys, name):
    (tmp_path / "data.csv").write_text("a,b")
    os.mkfifo(tmp_path / "fifo.html")
    (tmp_path / "unreadable.html").write_text(page(1))
    (tmp_path / "unreadable.html").chmod(0)
    if name == "unreadable.html" and os.access(tmp_path / "unreadable.html", os.R_OK):
        pytest.skip("running as a user who can read any file (root)")
    assert main(["scan", str(tmp_path / name), "--db", str(tmp_path / "i.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and name in err and "Traceback" not in err
    assert not (tmp_path / "i.db").exists()


def test_an_unreadable_subfolder_is_named_and_the_rest_scanned(tmp_path, caplog):
    folder = tmp_path / "pages"
    (folder / "closed").mkdir(parents=True)
    (folder / "open.html").write_text(page(1))
    (folder / "closed" / "x.html").write_text(page(2))
    (folder / "closed").chmod(0)
    try:
        if os.access(folder / "closed", os.R_OK):
            pytest.skip("running as a user who can read any folder (root)")
        urls, _ = scan(tmp_path, folder)
    finally:
        (folder / "closed").chmod(0o755)
    assert urls == ["open.html"]
    assert [line for line in skipped_lines(caplog) if "closed" in line]


def test_a_file_over_max_body_is_skipped_without_being_read(tmp_path, caplog):
    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "a.html").write_text(page(1))
    with (folder / "huge.html").open("wb") as handle:
        handle.truncate(50_000_000)  # sparse: reading it whole would take 50 MB
    urls, _ = scan(tmp_path, folder)
    assert urls == ["a.html"]
    assert [line for line in skipped_lines(caplog) if "huge.html" in line and "max_body" in line]


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--batch", "99999999999999999999"], "--batch"), (["--workers", "100000"], "--workers")],
)
def test_scan_flags_out_of_range_give_one_line(tmp_path, capsys, args, needle):
    (tmp_path / "a.html").write_text(page(1))
    assert main(["scan", str(tmp_path / "a.html"), "--db", str(tmp_path / "i.db"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


def test_an_empty_path_is_refused(tmp_path, capsys):
    assert main(["scan", "", "--db", str(tmp_path / "i.db")]) == 2
    assert "empty path" in capsys.readouterr().err


def test_an_empty_field_name_is_refused(tmp_path, capsys):
    (tmp_path / "feed.jl").write_text(item(1) + "\n")
    assert main(["scan", str(tmp_path / "feed.jl"), "--db", str(tmp_path / "i.db"), "--field", ""]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--field" in err and not (tmp_path / "i.db").exists()


def test_a_feed_with_a_byte_order_mark_keeps_its_first_item(tmp_path):
    feed = tmp_path / "bom.jl"
    feed.write_bytes(b"\xef\xbb\xbf" + ("\n".join([item(1), item(2)]) + "\n").encode())
    urls, _ = scan(tmp_path, feed)
    assert urls == ["http://a.example/1", "http://a.example/2"]


def test_a_broken_symlink_in_a_folder_is_named(tmp_path, caplog):
    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "a.html").write_text(page(1))
    (folder / "gone.html").symlink_to(folder / "missing.html")
    urls, _ = scan(tmp_path, folder)
    assert urls == ["a.html"]
    assert [line for line in skipped_lines(caplog) if "gone.html" in line and "broken symbolic link" in line]


def _raw_record(url: str | None, block: bytes, length: str | None = None, kind: str = "response") -> bytes:
    head = f"WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Record-ID: <urn:uuid:{abs(hash((url, block)))}>\r\n"
    head += f"WARC-Target-URI: {url}\r\n" if url else ""
    head += "Content-Type: application/http; msgtype=response\r\n"
    head += f"Content-Length: {len(block) if length is None else length}\r\n" if length != "" else ""
    return head.encode() + b"\r\n" + block + b"\r\n\r\n"


HTTP = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"


@pytest.mark.parametrize(
    ("record", "reason", "kept"),
    [
        (_raw_record("http://w.example/x", HTTP + page(7).encode(), length=""), "bad_record", False),
        (_raw_record("http://w.example/x", HTTP + page(7).encode(), length="abc"), "bad_record", False),
        (_raw_record(None, HTTP + page(7).encode()), "bad_record", False),
        (_raw_record("http://w.example/x", HTTP + page(7).encode(), kind="responqe"), "bad_record", False),
        (_raw_record("http://w.example/x", page(7).encode()), "bad_record", False),  # no HTTP block
        (
            _raw_record("http://w.example/x", b"HTTP/1.1 200 OK\r\n\r\n" + page(7).encode()),
            None,
            True,
        ),  # no type
        (_raw_record("httr://w.example/x", HTTP + page(7).encode()), None, True),  # headers left unparsed
    ],
)
@pytest.mark.parametrize("gz", [False, True])
def test_an_odd_warc_record_is_read_or_counted_and_never_hides_the_next(
    tmp_path, capsys, record, reason, kept, gz
):
    good = _raw_record("http://w.example/good", HTTP + page(8).encode())
    warc = tmp_path / ("odd.warc.gz" if gz else "odd.warc")
    warc.write_bytes(gzip.compress(record) + gzip.compress(good) if gz else record + good)
    urls, _ = scan(tmp_path, warc)
    assert "http://w.example/good" in urls
    assert any(u.endswith("w.example/x") for u in urls) == kept
    out = capsys.readouterr().out
    assert (f"(1 {reason})" in out) if reason else "skipped" not in out


def test_a_brotli_encoded_page_in_a_warc_is_read(tmp_path):
    brotli = pytest.importorskip("brotli")
    block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: br\r\n\r\n" + brotli.compress(
        page(9).encode()
    )
    warc = tmp_path / "br.warc"
    warc.write_bytes(_raw_record("http://w.example/br", block))
    urls, _ = scan(tmp_path, warc)
    assert urls == ["http://w.example/br"]


def test_a_warc_gz_compressed_as_one_stream_gives_every_record(tmp_path):
    plain = tmp_path / "plain.warc"
    _warc(plain, 5, gz=False)
    one = tmp_path / "one-stream.warc.gz"
    one.write_bytes(gzip.compress(plain.read_bytes()))  # not a member a record: one gzip stream
    urls, _ = scan(tmp_path, one)
    assert urls == [f"http://w.example/{n}" for n in range(5)]


def _with_length(record: bytes, length: object) -> bytes:
    head, _, block = record.partition(b"\r\n\r\n")
    head = re.sub(rb"Content-Length: \d+", f"Content-Length: {length}".encode(), head)
    return head + b"\r\n\r\n" + block


@pytest.mark.parametrize("packing", ["plain", "members", "one-stream", "one-large-stream"])
@pytest.mark.parametrize("wrong", ["times 50", "10 more", "100 fewer", "negative", "absurd"])
def test_a_wrong_content_length_costs_its_record_only(tmp_path, capsys, caplog, monkeypatch, packing, wrong):
    """A record whose Content-Length is wrong is skipped and named; every record after it is read."""
    from scrapy_neardup.offline import warc as warc_module

    records = [_raw_record(f"http://w.example/{n}", HTTP + page(n).encode()) for n in range(6)]
    size = len(HTTP + page(2).encode())
    length = {"times 50": size * 50, "10 more": size + 10, "100 fewer": size - 100, "negative": -size,
              "absurd": 10**30}[wrong]  # fmt: skip
    records[2] = _with_length(records[2], length)
    at = len(records[0] + records[1])
    if packing == "plain":
        data = b"".join(records)
    elif packing == "members":
        data = b"".join(gzip.compress(r) for r in records)
        at = len(gzip.compress(records[0]) + gzip.compress(records[1]))
    else:
        data = gzip.compress(b"".join(records))
        at = f"0+{at}"
        if packing == "one-large-stream":  # read as it is decompressed, not held whole
            monkeypatch.setattr(warc_module, "ONE_STREAM_BYTES", 1000)
    warc = tmp_path / ("long.warc" if packing == "plain" else "long.warc.gz")
    warc.write_bytes(data)
    urls, _ = scan(tmp_path, warc)
    assert urls == [f"http://w.example/{n}" for n in range(6) if n != 2]
    out, err = capsys.readouterr()
    reason = "bad_record" if wrong == "negative" else "damaged"
    assert f"1 records skipped (1 {reason})" in out
    assert skipped_lines(caplog) == [skipped_lines(caplog)[0]] and f"{warc} at offset {at}:" in caplog.text
    assert "Content-Length" in caplog.text and "<html>" not in caplog.text
    assert "not followed by newline" not in err and not err.strip()


def test_a_last_record_longer_than_the_file_is_incomplete_until_the_file_grows(tmp_path, capsys):
    records = [_raw_record(f"http://w.example/{n}", HTTP + page(n).encode()) for n in range(3)]
    warc = tmp_path / "growing.warc"
    warc.write_bytes(records[0] + records[1] + _with_length(records[2], 10**6))
    urls, _ = scan(tmp_path, warc)
    assert urls == ["http://w.example/0", "http://w.example/1"]
    assert "(1 incomplete)" in capsys.readouterr().out


def test_a_body_warcio_cannot_decode_is_one_skip_and_nothing_on_stderr(tmp_path, capsys, caplog):
    import random

    words = " ".join(
        random.Random(5).choice(["harbour", "boat", "tide", "quay", "net"]) + str(n) for n in range(9000)
    )
    body = bytearray(gzip.compress(f"<html><body><p>{words}</p></body></html>".encode()))
    assert len(body) > 20000  # warcio decodes in blocks of 16 KiB; the damage is after the first
    body[-3000:-2000] = bytes(1000)
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n\r\n"
    good = _raw_record("http://w.example/good", HTTP + page(3).encode())
    warc = tmp_path / "encoded.warc"
    warc.write_bytes(_raw_record("http://w.example/bad", http + bytes(body)) + good)
    urls, _ = scan(tmp_path, warc)
    assert urls == ["http://w.example/good"]
    out, err = capsys.readouterr()
    assert "(1 damaged)" in out and not err.strip()
    assert [line for line in skipped_lines(caplog) if "gzip body that cannot be decoded" in line]


def test_warcio_warnings_stay_out_of_the_output(tmp_path, capsys, caplog):
    warc = tmp_path / "spaces.warc"
    warc.write_bytes(_raw_record("http://w.example/a page", HTTP + page(4).encode()))
    urls, _ = scan(tmp_path, warc)
    assert urls == ["http://w.example/a%20page"]
    assert "Replacing spaces" not in caplog.text + capsys.readouterr().err


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("length", ["right", "wrong"])
def test_a_record_over_max_body_is_checked_without_being_read(tmp_path, caplog, gz, length):
    big = _raw_record("http://w.example/big", HTTP + page(9).encode() * 40)
    if length == "wrong":
        big = _with_length(big, len(HTTP + page(9).encode()) * 39)
    records = [_raw_record("http://w.example/0", HTTP + page(0).encode()), big]
    records += [_raw_record(f"http://w.example/{n}", HTTP + page(n).encode()) for n in (1, 2)]
    warc = tmp_path / ("big.warc.gz" if gz else "big.warc")
    warc.write_bytes(b"".join(gzip.compress(r) for r in records) if gz else b"".join(records))
    db = tmp_path / "index.db"
    assert main(["scan", str(warc), "--db", str(db), "--workers", "0", "--max-body", "20000"]) == 0
    with sqlite3.connect(db) as con:
        urls = [r[0] for r in con.execute("SELECT url FROM documents ORDER BY id")]
    assert urls == [f"http://w.example/{n}" for n in range(3)]
    said = "a record of" if length == "right" else "does not end at a record boundary"
    assert [line for line in skipped_lines(caplog) if said in line]


def test_warc_records_are_named_by_their_offsets(tmp_path):
    """The names an index stores for WARC records: a rescan finds them (their pages are skipped)."""
    from scrapy_neardup.offline.sources import read_pages

    records = [_raw_record(f"http://w.example/{n}", HTTP + page(n).encode()) for n in range(3)]
    warc = tmp_path / "named.warc"
    warc.write_bytes(b"xx" + b"".join(records))  # two stray bytes first: the first record is at 2
    starts = [2 + len(b"".join(records[:n])) for n in range(3)]
    assert [p.source.rsplit("@", 1)[1] for p in read_pages(warc)] == [str(at) for at in starts]
    gz = tmp_path / "named.warc.gz"
    gz.write_bytes(gzip.compress(records[0]) + gzip.compress(records[1] + records[2]))
    first = len(gzip.compress(records[0]))
    assert [p.source.rsplit("@", 1)[1] for p in read_pages(gz)] == [
        "0",
        str(first),
        f"{first}+{len(records[1])}",
    ]


def test_junk_between_two_whole_records_costs_no_record(tmp_path, caplog, capsys):
    records = [_raw_record(f"http://w.example/{n}", HTTP + page(n).encode()) for n in range(3)]
    warc = tmp_path / "junk.warc"
    warc.write_bytes(records[0] + b"junk left by a crashed writer\r\n" + records[1] + records[2])
    urls, _ = scan(tmp_path, warc)
    assert urls == [f"http://w.example/{n}" for n in range(3)]
    assert "(1 damaged)" in capsys.readouterr().out
    assert f"{warc} at offset {len(records[0])}: a damaged record (no WARC/1.x record header)" in caplog.text


def test_special_files_in_a_folder_are_named_and_skipped(tmp_path, caplog, capsys):
    import socket

    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "a.html").write_text(page(1))
    os.mkfifo(folder / "fifo.html")  # read, it would block the scan for good
    os.mkfifo(folder / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(folder / "socket.html"))
    named = ["fifo.html: a FIFO", "pipe: a FIFO", "socket.html: a socket"]
    try:
        os.mknod(folder / "device.html", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        named.append("device.html: a character device")
    except PermissionError:  # not root: no device node
        pass
    try:
        urls, _ = scan(tmp_path, folder)
    finally:
        listener.close()
    assert urls == ["a.html"]
    for name in named:
        assert [line for line in skipped_lines(caplog) if f"{folder}/{name}" in line], name
    assert f"({len(named)} special)" in capsys.readouterr().out


def test_symlinks_out_of_a_scanned_folder_are_named_unless_followed(tmp_path, caplog, capsys):
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text("root:x:0:0:root:/root:/bin/bash " * 20)
    (outside / "sub" / "far.html").write_text(page(7))
    folder = tmp_path / "pages"
    (folder / "inner").mkdir(parents=True)
    (folder / "a.html").write_text(page(1))
    (folder / "inner" / "b.html").write_text(page(2))
    (folder / "passwd.txt").symlink_to(outside / "secret.txt")
    (folder / "away").symlink_to(outside / "sub")
    (folder / "here.html").symlink_to(folder / "a.html")  # inside: read (once, as a.html's source)
    (folder / "again").symlink_to(folder / "inner")  # inside: its folder is read once
    (folder / "inner" / "up").symlink_to(folder)  # a loop back up
    urls, _ = scan(tmp_path, folder)
    assert sorted(urls) == ["a.html", "again/b.html"]
    lines = skipped_lines(caplog)
    assert len(lines) == 2 and "root:x" not in caplog.text
    assert [
        line for line in lines if f"{folder}/passwd.txt: a symbolic link out of the scanned folder" in line
    ]
    assert [
        line
        for line in lines
        if f"{folder}/away: a symbolic link out of" in line and "--follow-links" in line
    ]
    assert "(2 symlink)" in capsys.readouterr().out
    db = tmp_path / "followed.db"
    assert main(["scan", str(folder), "--db", str(db), "--workers", "0", "--follow-links"]) == 0
    with sqlite3.connect(db) as con:
        followed = sorted(r[0] for r in con.execute("SELECT url FROM documents"))
    assert followed == ["a.html", "again/b.html", "away/far.html", "passwd.txt"]


def test_records_without_the_field_are_named_a_few_times_with_the_fields_they_have(tmp_path, caplog, capsys):
    feed = tmp_path / "feed.jl"
    lines = [item(1), *(json.dumps({"url": f"http://a.example/x{n}", "article": page(n)}) for n in range(20))]
    feed.write_text("\n".join(lines) + "\n")
    urls, _ = scan(tmp_path, feed)
    assert urls == ["http://a.example/1"]
    named = skipped_lines(caplog)
    assert len(named) == 6  # five records, then the summary
    assert "its text fields: url, article (name the page's with --field)" in named[0]
    assert named[-1] == "skipped 15 more records for bad_record (the first 5 are named above)"
    assert "20 records skipped (20 bad_record)" in capsys.readouterr().out
    urls, _ = scan(tmp_path, feed, "--field", "article")  # the hint works
    assert len(urls) == 21


def test_the_progress_line_gives_the_rate_and_the_share_read(tmp_path, capsys):
    from scrapy_neardup.offline.scan import Progress
    from scrapy_neardup.offline.sources import read_pages

    folder = tmp_path / "pages"
    folder.mkdir()
    for n in range(4):
        (folder / f"{n}.html").write_text(page(n))
    feed = tmp_path / "feed.jl.gz"
    with gzip.open(feed, "wt") as handle:
        handle.write("\n".join(item(n) for n in range(10, 30)) + "\n")
    inputs = [str(folder), str(feed)]
    meter = Progress(inputs, follow_links=False)
    assert meter.total == sum(p.stat().st_size for p in folder.iterdir()) + feed.stat().st_size
    shares = []
    for n, path in enumerate(inputs):
        for found in read_pages(path):
            meter.track(n, found)
            shares.append(meter.read / meter.total)
    assert shares == sorted(shares) and shares[-1] == 1.0 and shares[0] < 0.2
    meter.show(24, 3)
    line = capsys.readouterr().err
    assert re.match(r"\rscanned 24 pages, 3 duplicates, [\d,]+ pages/s; 100% of 0\.0 MB read$", line)


def test_a_folder_of_files_a_folder_is_not_read_for_says_why_none_was_read(tmp_path, caplog, capsys):
    folder = tmp_path / "feeds"
    (folder / "old").mkdir(parents=True)
    (folder / "a.jl").write_text(item(1) + "\n")
    (folder / "b.jl").write_text(item(2) + "\n")
    (folder / "old" / "crawl.warc.gz").write_bytes(gzip.compress(b""))
    (folder / "notes").write_text("no pages here")
    urls, _ = scan(tmp_path, folder, code=1)  # a scan that read nothing
    assert urls == [] and "scanned 0 pages" in capsys.readouterr().out
    said = [r.getMessage() for r in caplog.records if "read none" in r.getMessage()]
    assert said == [
        f"{folder}: met 4 files (2 .jl, 1 .warc.gz, 1 no suffix) and read none: a folder is read for its "
        ".html, .htm, .xhtml, .txt files (optionally .gz); scan a .jl or .warc.gz file by naming it"
    ], said
    (folder / "page.html").write_text(page(3))  # one page file read: nothing to explain
    caplog.clear()
    assert scan(tmp_path, folder)[0] == ["page.html"]
    assert not [r for r in caplog.records if "read none" in r.getMessage()]
