"""The PostgreSQL index across processes, in crawls and under faults, against a real server the
test run starts (``pg_server``). The storage protocol is tested on every backend in
test_index_protocol.py and the property tests in test_index.py."""

from __future__ import annotations

import collections
import json
import random
import socket
import threading
import time
import uuid

import numpy as np
import pytest
import race
from crawling import ADDON, crawl, crawl_and_rerun_on, expected
from hypothesis import given
from hypothesis import strategies as st
from race import CONFIG, GROUPS, four_processes, together

from scrapy_neardup import DedupConfig, fingerprint
from scrapy_neardup.detector import Detector
from scrapy_neardup.exceptions import IndexFileError
from scrapy_neardup.index import IndexSpec
from scrapy_neardup.index.engines.postgres import PostgresIndex
from scrapy_neardup.index.engines.postgres import search as postgres_search
from scrapy_neardup.index.engines.postgres.packing import (
    ROW_IDS,
    lookup_bucket,
    lookup_entries,
    lookup_entry,
    lookup_row,
    spot_bucket,
)

psycopg = pytest.importorskip("psycopg")


@pytest.mark.slow
def test_four_processes_admit_each_group_once(postgres_url):
    """4 processes check the same groups' pages at once, 10 rounds: one page of each group admitted."""
    four_processes(PostgresIndex, postgres_url, 10, separator="_")


def test_a_crawl_dedups_through_postgres_and_a_rerun_is_a_revisit(tmp_path, site, postgres_url):
    crawl_and_rerun_on(tmp_path, site, f"{postgres_url}?prefix=crawl_{uuid.uuid4().hex}")


@pytest.mark.slow
def test_another_program_s_tables_are_refused_and_a_reset_drops_only_the_index(tmp_path, site, postgres_url):
    schema = f"shop_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
        db.execute(f'CREATE TABLE "{schema}".orders (id int)')
    settings = {**ADDON, "NEARDUP_INDEX": f"{postgres_url}?prefix={schema}"}
    for extra in ({}, {"NEARDUP_RESET": True}):
        refused = crawl(tmp_path, [site + "/"], {**settings, **extra}, check=False)
        said = [line for line in refused["stderr"].splitlines() if "scrapy-neardup cannot start" in line]
        assert refused["returncode"] != 0 and said and "another program" in said[0], refused["stderr"][-2000:]
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute(f'DROP TABLE "{schema}".orders')
        db.execute(f'CREATE TABLE "{schema}".notes (id int)')  # a user's own table beside the index
        db.execute(f'DROP TABLE "{schema}".notes')
    crawl(tmp_path, [site + "/"], {**settings, "NEARDUP_SCOPE": "host"})
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute(f'CREATE TABLE "{schema}".notes (id int)')
    again = crawl(tmp_path, [site + "/"], {**settings, "NEARDUP_RESET": True})  # other settings: reset
    assert "is new (reset)" in again["stderr"] and "neardup/revisits" not in again["stats"]
    with psycopg.connect(postgres_url, autocommit=True) as db:
        tables = {
            r[0]
            for r in db.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", [schema]
            )
        }
    assert "notes" in tables and "documents" in tables  # the user's table stayed


@pytest.mark.parametrize("prefix", ["public", "pg_x", "PG_temp", "information_schema"])
def test_a_prefix_naming_the_server_s_or_everyone_s_schema_is_refused(postgres_url, prefix):
    said = r"is a schema of the server's or everyone's; name another \?prefix="
    with pytest.raises(IndexFileError, match=said):
        PostgresIndex(postgres_url, DedupConfig(), prefix=prefix)


def test_an_unreachable_server_stops_the_crawl_at_start_in_one_line(tmp_path, site):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there
    where = f"postgresql://u@127.0.0.1:{port}/db"
    failed = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": where}, check=False)
    assert failed["returncode"] != 0 and not failed["items"]
    said = [line for line in failed["stderr"].splitlines() if "scrapy-neardup cannot start" in line]
    assert said and f"127.0.0.1:{port}/db site:neardup: cannot be reached" in said[0]
    assert "Traceback" not in failed["stderr"]


def test_a_read_only_role_is_told_in_one_line_and_may_report(postgres_url, capsys):
    from scrapy_neardup.cli import main

    role = f"reader_{uuid.uuid4().hex[:8]}"
    with Detector(CONFIG, PostgresIndex(postgres_url, CONFIG, f"ro_{role}")) as detector:
        detector.check("http://a.example/1", GROUPS[0])
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute(f"CREATE ROLE {role} LOGIN")
        db.execute(f'GRANT USAGE ON SCHEMA "ro_{role}" TO {role}')
        db.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "ro_{role}" TO {role}')
    url = postgres_url.replace("postgres@", f"{role}@")
    assert main(["report", "--index", f"{url}?prefix=ro_{role}", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 1
    with pytest.raises(IndexFileError, match=r"cannot be written by this user"):
        PostgresIndex(url, CONFIG, f"ro_{role}")
    with pytest.raises(IndexFileError, match="cannot be written by this user"):
        PostgresIndex(url, CONFIG, f"new_{role}")  # may not even make its schema
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA "ro_{role}" FROM {role}')
        db.execute(f'REVOKE ALL ON SCHEMA "ro_{role}" FROM {role}')
    PostgresIndex(postgres_url, CONFIG, f"ro_{role}").remove()


def test_scan_report_export_and_forget_work_on_postgres(tmp_path, capsys, copied_pages, postgres_url):
    from scrapy_neardup.cli import main

    folder = copied_pages
    where = f"{postgres_url}?prefix=scan_{uuid.uuid4().hex}"
    assert main(["scan", str(folder), "--index", where, "--workers", "0"]) == 0
    assert "3 duplicates" in capsys.readouterr().out
    assert main(["report", "--index", where, "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["clusters"]) == 3
    exported = tmp_path / "exported.db"
    assert main(["export", "--index", where, "-o", str(exported)]) == 0
    assert main(["report", "--index", str(exported), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["clusters"]) == 3
    assert main(["forget", "--index", where, "--max-pages", "2"]) == 0
    assert "left" in capsys.readouterr().err
    assert PostgresIndex.existing(IndexSpec.parse(where)).stats()["documents"] <= 2


@pytest.mark.slow(20)
def test_server_stopped_and_started_mid_crawl_loses_no_page(tmp_path, site):
    """A server of its own, stopped while a crawl runs and started again: pages pass unjudged and
    counted meanwhile, are judged again once it is back, and none is lost."""
    import pg_server

    try:
        url, data = pg_server.start()
    except pg_server.Unavailable as exc:
        pytest.skip(str(exc))
    where = f"{url}?prefix=lost"
    settings = {**ADDON, "NEARDUP_INDEX": where, "DOWNLOAD_DELAY": 0.5, "CONCURRENT_REQUESTS": 1}
    outcome: dict = {}
    crawler = threading.Thread(
        target=lambda: outcome.update(crawl(tmp_path, [site + "/"], settings, check=False))
    )
    try:
        crawler.start()
        deadline = time.time() + 60
        while time.time() < deadline and _documents(url) < 2:  # the crawl is under way
            time.sleep(0.2)
        pg_server.stop(data, "fast", remove=False)
        time.sleep(2)
        pg_server.restart(data)
        restarted_at = time.time()
        crawler.join(180)
        assert outcome["returncode"] == 0, outcome["stderr"][-2000:]
        assert outcome["stats"].get("neardup/unjudged/error", 0) >= 1
        assert len(outcome["items"]) >= len(expected("unique"))  # no page the crawl parsed was lost
        index = PostgresIndex.existing(IndexSpec.parse(where))
        documents = list(index.documents())
        assert index.stats()["documents"] == len(documents)
        assert any(r["seen_at"] > restarted_at for r in documents)  # judged again once it was back
        index.close()
    finally:
        pg_server.stop(data)


def _documents(url: str) -> int:
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as db:
            return db.execute('SELECT COUNT(*) FROM "lost".documents').fetchone()[0]
    except psycopg.Error:
        return 0


def test_text_postgres_cannot_hold_is_stored_escaped(postgres_url):
    config = DedupConfig(min_tokens=5)
    index = PostgresIndex(postgres_url, config, f"nul_{uuid.uuid4().hex}")
    with Detector(config, index) as detector:
        words = " ".join(
            f"the river survey counted {n} herons near the old mill this spring." for n in range(40)
        )
        page = (
            f"<html><head><title>a\x00b</title></head><body><article><p>{words}</p></article></body></html>"
        )
        verdict = detector.check("http://a.example/\udcff\x00", page.encode(), content_type="text/html")
        assert verdict.judged and not verdict.duplicate, verdict
        record = index.get(verdict.doc_id)
        assert record["url"] == "http://a.example/\\udcff\\x00"
        assert record["title"] is None or "\x00" not in record["title"]
        index.remove()


def _check_same_urls(url: str, prefix: str, barrier, results) -> None:
    with Detector(CONFIG, PostgresIndex(url, CONFIG, prefix)) as detector:
        barrier.wait()
        results.put(
            [detector.check(f"http://same.example/{g}", text).as_dict() for g, text in enumerate(GROUPS)]
        )


def test_processes_meeting_one_url_at_once_make_it_a_revisit_never_a_duplicate_of_itself(postgres_url):
    for _ in range(5):
        prefix = f"same_{uuid.uuid4().hex}"
        PostgresIndex(postgres_url, CONFIG, prefix).close()
        verdicts = together(_check_same_urls, [(postgres_url, prefix)] * 4)
        assert not [v for v in verdicts if v["duplicate"]]  # each page met again is a revisit of itself
        index = PostgresIndex(postgres_url, CONFIG, prefix)
        assert index.stats()["documents"] == len(GROUPS)  # one record a URL
        index.remove()


def _open_new(url: str, prefix: str, barrier, results) -> None:
    barrier.wait()
    PostgresIndex(url, CONFIG, prefix).close()
    results.put([prefix])


def test_crawlers_starting_at_once_on_a_new_index_make_it_once(postgres_url):
    for _ in range(3):
        prefix = f"new_{uuid.uuid4().hex}"
        assert together(_open_new, [(postgres_url, prefix)] * 4) == [prefix] * 4  # none refused
        index = PostgresIndex(postgres_url, CONFIG, prefix)
        assert index.stats()["documents"] == 0
        index.remove()


def test_the_index_sessions_never_compile_a_query_nor_plan_one_twice(postgres_url):
    """JIT off (index._connect): past a million list rows the planner compiled every bucket read;
    generic plans: a check's prepared statements were planned again at each run."""
    index = PostgresIndex(postgres_url, CONFIG, prefix=f"jit_{uuid.uuid4().hex}")
    for _ in range(2):
        assert index.engine.execute("SHOW jit").fetchone()[0] == "off"
        assert index.engine.execute("SHOW plan_cache_mode").fetchone()[0] == "force_generic_plan"
        index.engine._reconnect()  # a connection made again after the server was lost
    index.remove()


def test_the_locks_asked_with_the_page_s_id_are_held_until_the_commit(postgres_url):
    """``lock(doc_id=True)`` takes every key's advisory lock (not optimised away beside the id)."""
    index = PostgresIndex(postgres_url, CONFIG, prefix=f"locks_{uuid.uuid4().hex}")
    engine, keys = index.engine, [-(2**63), -5, 7, 2**40 + 3]
    query = (
        "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks "
        "WHERE locktype = 'advisory' AND pid = %s"
    )
    with psycopg.connect(postgres_url, autocommit=True) as watcher:
        with engine.transaction():
            engine.lock([*keys, 7], doc_id=True)
            assert engine.new_id("doc") >= 1
            held = {row[0] for row in watcher.execute(query, [engine.db.info.backend_pid])}
        left = watcher.execute(query, [engine.db.info.backend_pid]).fetchall()
    assert held == set(keys) and not left
    index.remove()


def test_writes_wait_for_a_read_or_the_commit_and_a_rolled_back_savepoint_takes_its_own(postgres_url):
    """A transaction's writes are kept and sent as one statement (``PostgresEngine.later``): a read
    sees them, a savepoint rolled back takes only the writes made inside it, and two lookup keys
    of one row in one transaction are both kept."""
    index = PostgresIndex(postgres_url, CONFIG, prefix=f"later_{uuid.uuid4().hex}")
    engine, sent = index.engine, []
    send = engine.pipeline.send
    engine.pipeline.send = lambda query, *args: sent.append(query) or send(query, *args)
    first, second = 5 << 46, (5 << 46) + 1  # one lookup row: the same top bits, the same id chunk
    with engine.transaction():
        engine.put("doc", 1, {"url": "https://a.example/1", "status": "unique"})
        engine.put("doc", 2, {"url": "https://a.example/2", "status": "unique"})
        engine.add("lk", first, 1)
        engine.add("lk", second, 1)
        held = len(sent)
        assert engine.get("doc", [1], ["url"])[0]["url"] == "https://a.example/1"
        assert len(sent) == held + 2  # the writes kept since in one statement, then the read
        engine.put("doc", 3, {"url": "https://a.example/3"})
        with pytest.raises(LookupError), engine.transaction():
            engine.put("doc", 4, {"url": "https://a.example/4"})
            engine.put("doc", 3, {"url": "https://a.example/3b"})
            raise LookupError("the savepoint's work fails")
    assert [doc and doc["url"] for doc in engine.get("doc", [1, 2, 3, 4], ["url"])] == [
        "https://a.example/1",
        "https://a.example/2",
        "https://a.example/3",
        None,
    ]
    assert engine.members("lk", [first, second]) == [{1}, {1}]
    index.remove()


@given(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**32 - 1), st.integers(0, 4095))
def test_a_posting_is_in_the_bucket_every_probe_of_its_spot_reads(key, doc, partition):
    """Packed rows (``packing``): a probe of the same spot from any partition reads the bucket a
    posting went to, and a lookup key's row is among those its reads cover."""
    assert spot_bucket((key >> 12 << 12) | partition) == spot_bucket(key)
    assert lookup_bucket(key) <= lookup_row(key, doc) <= lookup_bucket(key) + 4095
    assert lookup_entries([lookup_entry(key, doc)]).tolist() == [(key, doc)]


@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=6, unique=True),
    st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from([0, 1, 2, 4094, 4095]), st.booleans()), max_size=12
    ),
)
def test_a_posting_goes_to_the_last_row_of_its_bucket_the_read_found(buckets, rows):
    """The rows a check read tell where each of its postings goes: a bucket's last row, the next
    once that one is full (not past the bucket's last possible row), its first for an empty one."""
    buckets = sorted(n << 24 << 12 for n in buckets)
    rows = {((n << 24 << 12) + row): ROW_IDS * 4 if full else 8 for n, row, full in rows}
    expected = []
    for bucket in buckets:
        mine = [key for key in rows if bucket <= key <= bucket + 4095]
        last = max(mine, default=None)
        full = last is not None and rows[last] >= ROW_IDS * 4 and last < bucket + 4095
        expected.append(bucket if last is None else last + full)
    read = np.zeros(len(rows), dtype=postgres_search._ROW_READ)
    read["key"], read["size"] = list(rows), list(rows.values())
    tails = postgres_search._tails(buckets, read)
    assert [postgres_search._target(bucket, tails[bucket]) for bucket in buckets] == expected


@given(
    st.lists(st.tuples(st.integers(0, 3), st.lists(st.integers(0, 12), max_size=8)), max_size=12),
    st.lists(st.integers(1, 4), min_size=1, max_size=4),
)
def test_a_bucket_count_by_partition_equals_counting_each_partition_alone(rows, needs):
    """A row counts for the partitions up to its spot's reach: a document is found with the
    lowest and highest partition where it is in as many such rows as that partition asks."""
    start = 2
    rows = [(start + reach, np.array(ids, dtype="<u4").tobytes()) for reach, ids in rows]
    expected = {}
    for part, need in enumerate(needs, start):
        hits = collections.Counter(
            doc for reach, blob in rows if reach >= part for doc in np.frombuffer(blob, "<u4").tolist()
        )
        for doc in (doc for doc, n in hits.items() if n >= need):
            expected[doc] = (expected.get(doc, (part, part))[0], part)
    assert postgres_search.partition_counted(rows, start, needs) == expected
    damaged = [(reach, blob + b"\x01") for reach, blob in rows]  # a stray byte: the whole ids still count
    assert postgres_search.partition_counted(damaged, start, needs) == expected


@pytest.mark.parametrize("searched", [False, True], ids=["posted alone", "searched then posted"])
def test_a_bucket_fills_rows_one_after_another_and_a_page_leaves_them(postgres_url, searched):
    """Pages posting one spot fill its bucket's rows ROW_IDS ids at a time, every id kept, whether
    the server finds each bucket's last row or the check's read did; a page taken out
    (forgetting, a revisit) leaves the row it was in."""
    index = PostgresIndex(postgres_url, CONFIG, prefix=f"rows_{uuid.uuid4().hex}")
    search, engine = index.engine.search, index.engine
    fp = fingerprint(" ".join(f"word{n} is the {n}th of a long text" for n in range(60)), CONFIG)
    pages = ROW_IDS * 2 + 10
    for doc in range(1, pages + 1):
        with engine.transaction():
            if searched:  # the read's rows tell where the bucket ends
                assert not list(search.find(fp, 1)) and search._tails[0] is search._walked
            search.post(doc, fp, 1)
    bucket = spot_bucket(search._posting_keys(fp.spots, 1)[0])
    query = f"SELECT key, docs FROM {engine.t('spot_lists')} WHERE key BETWEEN %s AND %s ORDER BY key"
    rows = [
        (key, np.frombuffer(bytes(docs), "<u4"))
        for key, docs in engine.execute(query, [bucket, bucket + 4095])
    ]
    assert [(key, len(ids)) for key, ids in rows] == [
        (bucket, ROW_IDS),
        (bucket + 1, ROW_IDS),
        (bucket + 2, 10),
    ]
    assert sorted(np.concatenate([ids for _, ids in rows]).tolist()) == list(range(1, pages + 1))
    with engine.transaction():
        search.unpost(ROW_IDS + 1, fp, 1)
    left = {
        key: np.frombuffer(bytes(docs), "<u4") for key, docs in engine.execute(query, [bucket, bucket + 4095])
    }
    assert ROW_IDS + 1 not in left[bucket + 1] and len(left[bucket + 1]) == ROW_IDS - 1
    index.remove()


def test_four_processes_admit_each_group_once_while_the_spot_order_freezes(postgres_url, monkeypatch):
    """The spot order freezes in the middle of a race (FREEZE_AT lowered): a freeze waits for the
    checks in flight and every later check reads it, so no group is admitted twice."""
    groups = [" ".join(random.Random(100 + g).choices(race._WORDS, k=120)) for g in range(30)]
    monkeypatch.setattr(race, "GROUPS", groups)
    monkeypatch.setattr(postgres_search, "FREEZE_AT", 20)
    prefix = f"freeze_{uuid.uuid4().hex}"
    PostgresIndex(postgres_url, CONFIG, prefix).close()
    verdicts = together(race._check_all, [(PostgresIndex, postgres_url, prefix, n, 0) for n in range(4)])
    admitted = collections.Counter(page.split("/")[3] for page, duplicate in verdicts if not duplicate)
    assert admitted == {str(g): 1 for g in range(len(groups))}
    index = PostgresIndex(postgres_url, CONFIG, prefix)
    assert index.engine.execute(f"SELECT 1 FROM {index.engine.t('meta')} WHERE key = 'spot_order'").fetchone()
    index.remove()


def test_a_page_of_more_keys_than_the_lock_table_holds_is_checked_alone_and_recorded():
    """A long page takes one lock (the check lock, held alone) instead of one a key: on a server
    whose lock table holds fewer than its keys (10 a connection here; 64 by default, which a long
    manual of the LLVM docs overflowed beside three other checks), its check failed every time
    it was made. Beside it, a short page takes its keys' locks and the check lock shared."""
    import pg_server

    try:
        url, data = pg_server.start(extra="max_locks_per_transaction = 10\n")
    except pg_server.Unavailable as exc:
        pytest.skip(str(exc))
    words = [f"w{i:05d}" for i in range(12_000)]
    triples = zip(words[::3], words[1::3], words[2::3], strict=True)
    long_text = " ".join(f"the {a} of {b} is {c}" for a, b, c in triples)
    long_page = f"<html><body><article><p>{long_text}</p></article></body></html>".encode()
    short = " ".join(f"a story of {w} and the river" for w in words[:40])
    short_page = f"<html><body><p>{short}</p></body></html>"
    config = DedupConfig()
    try:
        with Detector(config, PostgresIndex(url, config, prefix="long")) as detector:
            first = detector.check("https://a.example/manual", long_page)
            copy = detector.check("https://b.example/manual", long_page + b" ")
            assert first.judged and not first.duplicate
            assert (copy.duplicate, copy.duplicate_of) == (True, first.doc_id)
            assert detector.check("https://a.example/short", short_page).judged
    finally:
        pg_server.stop(data)
