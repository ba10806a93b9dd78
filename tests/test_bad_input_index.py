"""A damaged, forged or mismatched index: one line naming the file and what to do, never a
traceback, never a write into a damaged file; a damaged stored text costs only that text."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import forked
import pytest
from crawling import lock_held, read_only_index, without_root_override

from scrapy_neardup.cli import main
from scrapy_neardup.report import write_report

SITE = Path(__file__).parent / "site"


@pytest.fixture(scope="module")
def index_file(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("index") / "base.db"
    assert main(["scan", str(SITE), "--db", str(db), "--workers", "0"]) == 0
    return db


def _cli(*args: str) -> subprocess.CompletedProcess:
    return forked.run([sys.executable, "-m", "scrapy_neardup.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize("seed", range(12))
def test_a_damaged_index_gives_one_line_and_is_never_written_into(tmp_path, index_file, seed):
    damaged = tmp_path / "damaged.db"
    shutil.copy(index_file, damaged)
    size, rnd = damaged.stat().st_size, random.Random(seed)
    with damaged.open("r+b") as handle:
        for _ in range(3):  # three random 1 KiB pages overwritten
            handle.seek(rnd.randrange(1, size // 1024) * 1024)
            handle.write(rnd.randbytes(1024))
    try:
        healthy = sqlite3.connect(damaged).execute("PRAGMA integrity_check").fetchone() == ("ok",)
    except sqlite3.DatabaseError:
        healthy = False
    before = hashlib.sha256(damaged.read_bytes()).hexdigest()
    scan = _cli("scan", str(SITE / "articles"), "--db", str(damaged), "--workers", "0")
    report = _cli("report", "--db", str(damaged), "--format", "json")
    for run in (scan, report):
        assert "Traceback" not in run.stderr
        if run.returncode:
            assert run.returncode == 2 and run.stderr.count("\n") == 1 and str(damaged) in run.stderr
    if not healthy:  # the same damage, the same line from every command
        assert scan.returncode == 2 and "restore it from a copy" in scan.stderr
        assert report.stderr == scan.stderr
        assert hashlib.sha256(damaged.read_bytes()).hexdigest() == before


def test_a_malformed_schema_gets_the_same_advice_from_scan_and_report(tmp_path, index_file):
    db = tmp_path / "schema.db"
    shutil.copy(index_file, db)
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA writable_schema = ON")
        con.execute("UPDATE sqlite_master SET sql = 'CREATE TABLE documents (' WHERE name = 'documents'")
    con.close()
    scan = _cli("scan", str(SITE / "articles"), "--db", str(db), "--workers", "0")
    report = _cli("report", "--db", str(db), "--format", "json")
    assert scan.returncode == report.returncode == 2
    assert "malformed database schema" in scan.stderr and "restore it from a copy" in scan.stderr
    assert report.stderr == scan.stderr and scan.stderr.count("\n") == 1


def test_forged_meta_rows_are_named(tmp_path, index_file):
    forgeries = [
        "DELETE FROM meta WHERE key = 'config'",
        "UPDATE meta SET value = '{not json' WHERE key = 'config'",
        "UPDATE meta SET value = 'many' WHERE key = 'spot_overlap'",
    ]
    for forged in forgeries:
        db = tmp_path / "forged.db"
        shutil.copy(index_file, db)
        with sqlite3.connect(db) as con:
            con.execute(forged)
        run = _cli("scan", str(SITE / "articles"), "--db", str(db), "--workers", "0")
        assert run.returncode == 2 and "Traceback" not in run.stderr and "meta" in run.stderr, forged


def test_a_damaged_stored_text_is_left_out_of_the_report(tmp_path, index_file, caplog):
    db = tmp_path / "texts.db"
    shutil.copy(index_file, db)
    with sqlite3.connect(db) as con:
        doc = con.execute("SELECT duplicate_of FROM documents WHERE method != 'exact' LIMIT 1").fetchone()[0]
        con.execute("UPDATE texts SET text = ? WHERE doc = ?", (b"not zlib at all", doc))
        assert zlib.decompress(
            con.execute("SELECT text FROM texts WHERE doc != ? LIMIT 1", (doc,)).fetchone()[0]
        )
    out = write_report(db, tmp_path / "report.html")
    assert "<svg" in out.read_text()
    assert f"the stored text of document {doc} is damaged" in caplog.text


def test_a_different_scope_on_an_existing_index_is_refused(tmp_path, capsys):
    db = tmp_path / "scoped.db"
    assert main(["scan", str(SITE / "articles"), "--db", str(db), "--workers", "0"]) == 0
    assert main(["scan", str(SITE / "mirror"), "--db", str(db), "--scope", "domain"]) == 2
    err = capsys.readouterr().err
    assert "scope" in err and "'global'" in err and "'domain'" in err and str(db) in err


def test_a_report_killed_while_writing_leaves_no_file_behind_the_next_one(tmp_path, index_file):
    out = tmp_path / "report.html"
    (tmp_path / ".report.html.abc123.tmp").write_text("half a report from a killed run")
    write_report(index_file, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_an_index_path_that_is_not_utf8_gets_its_report(tmp_path, index_file):
    db = os.fsencode(tmp_path) + b"/index-\xff.db"
    shutil.copy(index_file, db)
    out = write_report(os.fsdecode(db), tmp_path / "report.html")
    assert "index-\\udcff.db" in out.read_text(encoding="utf-8")


def test_a_report_never_replaces_its_index_nor_a_device(tmp_path, index_file, capsys):
    db = tmp_path / "self.db"
    shutil.copy(index_file, db)
    before = db.read_bytes()
    for target in (db, tmp_path / "self.db-wal", Path("/dev/null")):
        assert main(["report", "--db", str(db), "-o", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(target) in err
    assert db.read_bytes() == before and Path("/dev/null").is_char_device()


def test_a_report_that_cannot_be_written_out_says_so_in_one_line(index_file):
    for fmt in ("csv", "json", "html"):
        with open("/dev/full", "w") as full:
            command = [sys.executable, "-m", "scrapy_neardup.cli", "report", "--db", str(index_file)]
            run = forked.run([*command, "--format", fmt], stdout=full, stderr=subprocess.PIPE, text=True)
        assert run.returncode == 2 and "Traceback" not in run.stderr and "No space left" in run.stderr
        assert "standard output: No space left" in run.stderr
    closed = _cli_with_closed_stdout("report", "--db", str(index_file))
    assert closed.returncode == 2 and "-o FILE" in closed.stderr and "Traceback" not in closed.stderr


def _cli_with_closed_stdout(*args: str) -> subprocess.CompletedProcess:
    code = "import sys, os; os.close(1); sys.stdout = None; from scrapy_neardup.cli import main; "
    code += "sys.exit(main(sys.argv[1:]))"
    return forked.run([sys.executable, "-c", code, *args], stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE documents SET url = x'ff00fe', title = x'00ff'",
        "UPDATE documents SET similarity = 'x' WHERE similarity IS NOT NULL",
        "UPDATE documents SET similarity = 9e999 WHERE similarity IS NOT NULL",
        "UPDATE documents SET seen_at = 'yesterday'",
        "UPDATE documents SET seen_at = 1e300",
        "UPDATE documents SET tokens = 'many', duplicate_of = 'x' WHERE status = 'duplicate'",
    ],
)
def test_a_report_reads_rows_of_wrong_types(tmp_path, index_file, change):
    db = tmp_path / "typed.db"
    shutil.copy(index_file, db)
    with sqlite3.connect(db) as con:
        con.execute(change)
    for fmt in ("csv", "json", "html"):
        run = _cli("report", "--db", str(db), "--format", fmt)
        assert run.returncode == 0 and "Traceback" not in run.stderr, (fmt, run.stderr[-500:])


def test_garbage_meta_gives_the_report_one_line(tmp_path, index_file):
    db = tmp_path / "meta.db"
    shutil.copy(index_file, db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE meta SET value = 'garbage' WHERE key = 'config'")
    run = _cli("report", "--db", str(db))
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "meta" in run.stderr


def test_the_newest_record_deleted_by_hand_does_not_break_later_scans(tmp_path, index_file):
    db = tmp_path / "edited.db"
    shutil.copy(index_file, db)
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM documents WHERE id = (SELECT MAX(id) FROM documents)")
    other = tmp_path / "more"
    other.mkdir()
    (other / "new.html").write_text(
        "<html><body><article><p>"
        + "A new page about the old mill and its wheel. " * 30
        + "</p></article></body></html>"
    )
    assert main(["scan", str(other), "--db", str(db), "--workers", "0"]) == 0


def _on_read_only_fs(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """The command line run with ``folder`` mounted read-only, in a mount namespace of its own."""
    mount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    command = ["unshare", "-Urm", "sh", "-c", mount, str(folder), sys.executable, "-m", "scrapy_neardup.cli"]
    return subprocess.run([*command, *args], capture_output=True, text=True)


@pytest.fixture
def read_only_fs(tmp_path):
    """A folder to fill, then read on a read-only file system."""
    probe = ["unshare", "-Urm", "sh", "-c", 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0"']
    if shutil.which("unshare") is None or subprocess.run([*probe, str(tmp_path)]).returncode:
        pytest.skip("cannot mount a read-only file system here (unshare -Urm)")
    folder = tmp_path / "ro"
    folder.mkdir()
    return folder


def _clusters(run: subprocess.CompletedProcess) -> int:
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    return len(json.loads(run.stdout)["clusters"])


def test_an_index_on_a_read_only_file_system_gets_its_report(read_only_fs, index_file, tmp_path):
    db = read_only_fs / "index.db"
    shutil.copy(index_file, db)
    db.chmod(0o444)
    expected = _clusters(_cli("report", "--db", str(index_file), "--format", "json"))
    assert expected and _clusters(_on_read_only_fs(read_only_fs, "report", "--db", str(db))) == expected
    html = _on_read_only_fs(read_only_fs, "report", "--db", str(db), "-o", str(tmp_path / "r.html"))
    assert html.returncode == 0 and "<svg" in (tmp_path / "r.html").read_text()
    scan = _on_read_only_fs(read_only_fs, "scan", str(SITE / "articles"), "--db", str(db), "--workers", "0")
    assert scan.returncode == 2 and scan.stderr.count("\n") == 1 and str(db) in scan.stderr
    assert sorted(p.name for p in read_only_fs.iterdir()) == ["index.db"]


def test_an_index_left_with_its_wal_is_read_whole_on_a_read_only_file_system(read_only_fs, index_file):
    """A crawl killed (or still running) leaves pages in the -wal: a reader sees them, or says why not."""
    db = read_only_fs / "index.db"
    shutil.copy(index_file, db)
    held = sqlite3.connect(db, isolation_level=None)
    held.execute("PRAGMA wal_autocheckpoint = 0")
    held.execute("UPDATE documents SET status = 'unique', duplicate_of = NULL")  # only in the -wal
    left = {p.name: p.read_bytes() for p in read_only_fs.iterdir()}
    held.close()
    for name, data in left.items():
        (read_only_fs / name).write_bytes(data)
    assert set(left) == {"index.db", "index.db-wal", "index.db-shm"}
    assert _clusters(_on_read_only_fs(read_only_fs, "report", "--db", str(db))) == 0
    (read_only_fs / "index.db-shm").unlink()
    run = _on_read_only_fs(read_only_fs, "report", "--db", str(db))
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert str(db) in run.stderr and "index.db-wal file holds changes" in run.stderr


def _scan_refused_in_one_line(run: subprocess.CompletedProcess, db: Path, needle: str) -> None:
    """One line, and no worker's traceback nor a worker called lost after it."""
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr[-3000:]
    assert str(db) in run.stderr and needle in run.stderr
    assert "Traceback" not in run.stderr and "abruptly" not in run.stderr


def test_a_scan_of_a_locked_index_waits_then_stops_in_one_line(tmp_path, index_file):
    db = tmp_path / "locked.db"
    shutil.copy(index_file, db)
    with lock_held(db):
        run = _cli("scan", str(SITE), "--db", str(db), "--workers", "2", "--lock-timeout", "1")
    _scan_refused_in_one_line(run, db, "another process holds a lock on it")


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_scan_of_a_read_only_index_stops_in_one_line(tmp_path, what):
    db = read_only_index(tmp_path, what)
    folder = db.parent
    before = db.read_bytes()
    command = [
        sys.executable,
        "-m",
        "scrapy_neardup.cli",
        "scan",
        str(SITE),
        "--db",
        str(db),
        "--workers",
        "2",
    ]
    run = subprocess.run([*without_root_override(), *command], capture_output=True, text=True)
    folder.chmod(0o755)
    _scan_refused_in_one_line(run, db, "make the file and its folder writable")
    assert db.read_bytes() == before
    report = subprocess.run(
        [*without_root_override(), sys.executable, "-m", "scrapy_neardup.cli", "report", "--db", str(db)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert report.returncode == 0 and "clusters" in json.loads(report.stdout), report.stderr


def test_a_report_of_a_path_holding_no_index_file_says_what_is_there(tmp_path):
    (tmp_path / "folder.db").mkdir()
    (tmp_path / "null.db").symlink_to("/dev/null")
    said = {
        "folder.db": "is a folder, not an index file",
        "null.db": "is not a regular file",
        "none.db": "no such index file",
    }
    for name, needle in said.items():
        for out in ([], ["-o", str(tmp_path / "r.html")]):
            run = _cli("report", "--db", str(tmp_path / name), *out)
            assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
            assert str(tmp_path / name) in run.stderr and needle in run.stderr, run.stderr


def test_a_text_that_is_not_utf8_gets_a_report_the_advice_for_damage(tmp_path, index_file):
    db = tmp_path / "texts.db"
    shutil.copy(index_file, db)
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA ignore_check_constraints = ON")  # as a damage writes it
        con.execute("UPDATE documents SET status = CAST(x'ff75' AS TEXT) WHERE id = 3")
    con.close()
    report = _cli("report", "--db", str(db), "--format", "json")
    scan = _cli("scan", str(SITE / "articles"), "--db", str(db), "--workers", "0")
    for run in (report, scan):
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
        assert f"index {db}: cannot be used as an index" in run.stderr
        assert "restore it from a copy, recover what is readable" in run.stderr, run.stderr


def test_a_report_file_on_a_full_disk_is_named(tmp_path, index_file):
    """A 16 KiB file system of its own (tmpfs, mounted in a mount namespace as read_only_fs is)."""
    full = tmp_path / "full"
    full.mkdir()
    mount = 'mount -t tmpfs -o size=16k tmpfs "$0" && exec "$@"'
    command = ["unshare", "-Urm", "sh", "-c", mount, str(full), sys.executable, "-m", "scrapy_neardup.cli"]
    if shutil.which("unshare") is None or subprocess.run([*command[:5], str(full), "true"]).returncode:
        pytest.skip("cannot mount a small file system here (unshare -Urm, tmpfs)")
    out = full / "report.html"
    run = subprocess.run(
        [*command, "report", "--db", str(index_file), "-o", str(out)], capture_output=True, text=True
    )
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"{out}: cannot write the report there (No space left on device)" in run.stderr
