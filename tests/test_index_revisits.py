"""The index's side of revisits and crawl runs: a page's own record, and unconfirmed admissions."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
import time

from detectors import sqlite_detector

from scrapy_neardup import DedupConfig
from scrapy_neardup.index.runs import DEAD_AFTER, alive

CONFIG = DedupConfig(min_tokens=20)
STORY = " ".join(
    f"The harbour board met on day {n} and the mayor said the bridge will reopen." for n in range(12)
)
OTHER = " ".join(
    f"Volunteers counted {n} herons along the river and the survey was a success." for n in range(12)
)
EDITED = STORY.replace("mayor", "council")


def page(text: str) -> str:
    return f"<html><head><title>t</title></head><body><article><p>{text}</p></article></body></html>"


def test_a_page_seen_again_is_a_revisit_of_its_own_record(open_detector):
    with open_detector(CONFIG) as detector:
        first = detector.check("https://a.example/story?b=2&a=1", page(STORY))
        again = detector.check("https://a.example/story?a=1&b=2", page(STORY))  # the same canonical URL
        near = detector.check("https://a.example/story?a=1&b=2", page(EDITED))
        assert not first.duplicate and first.revisit is None
        assert not again.duplicate and again.revisit == "unchanged" and again.doc_id == first.doc_id
        assert not near.duplicate and near.revisit == "unchanged"  # near its own earlier version
        assert detector.index.stats()["documents"] == 1


def test_a_changed_revisit_is_judged_again_and_its_record_updated(open_detector):
    with open_detector(CONFIG) as detector:
        first = detector.check("https://a.example/story", page(STORY))
        changed = detector.check("https://a.example/story", page(OTHER))
        assert changed.revisit == "changed" and changed.doc_id == first.doc_id and not changed.duplicate
        # Its old content is no longer findable: a copy of it elsewhere is admitted ...
        old_copy = detector.check("https://b.example/story", page(STORY))
        assert not old_copy.duplicate
        # ... and its new content is.
        new_copy = detector.check("https://c.example/other", page(OTHER))
        assert new_copy.duplicate and new_copy.duplicate_of == first.doc_id
        assert detector.index.stats()["documents"] == 3


def test_a_duplicate_of_another_page_stays_one_when_seen_again(open_detector):
    with open_detector(CONFIG) as detector:
        original = detector.check("https://a.example/story", page(STORY))
        for _ in range(2):
            copy = detector.check("https://a.example/print/story", page(STORY))
            assert copy.duplicate and copy.duplicate_of == original.doc_id
        assert copy.revisit == "unchanged"
        assert detector.index.stats() | {"bytes": 0} == {
            "documents": 2,
            "unique": 1,
            "duplicates": 1,
            "skipped": 0,
            "forgotten": 0,
            "bytes": 0,
        }


def test_a_scan_keys_pages_on_their_source_not_their_url(open_detector):
    with open_detector(CONFIG) as detector:
        detector.check("https://a.example/story", page(STORY), source="/saved/a.html")
        copy = detector.check("https://a.example/story", page(STORY), source="/saved/b.html")
        assert copy.duplicate and copy.revisit is None


def _interrupted_run(path) -> int:
    """An index holding STORY admitted by a run that never ended, its process gone."""
    with sqlite_detector(path, CONFIG) as detector:
        detector.index.begin_run("drop")
        doc = detector.check("https://a.example/story", page(STORY)).doc_id
    with sqlite3.connect(path) as con:
        con.execute("UPDATE runs SET pid = 999999999")
    return doc


def test_pages_an_interrupted_run_admitted_are_unconfirmed(tmp_path):
    original = _interrupted_run(tmp_path / "i.db")
    with sqlite_detector(tmp_path / "i.db", CONFIG) as detector:
        detector.index.begin_run("drop")
        first = detector.check("https://b.example/copy", page(STORY))
        second = detector.check("https://c.example/copy", page(STORY))
        detector.index.end_run()
    assert not first.duplicate and first.unconfirmed and first.duplicate_of == original
    assert first.method == "exact" and first.duplicate_of_url == "https://a.example/story"
    assert second.duplicate and second.duplicate_of == first.doc_id and not second.unconfirmed


def test_a_revisit_confirms_a_page_an_interrupted_run_admitted(tmp_path):
    original = _interrupted_run(tmp_path / "i.db")
    with sqlite_detector(tmp_path / "i.db", CONFIG) as detector:
        detector.index.begin_run("drop")
        assert detector.check("https://a.example/story", page(STORY)).revisit == "unchanged"
        copy = detector.check("https://b.example/copy", page(STORY))
    assert copy.duplicate and copy.duplicate_of == original


def test_a_dead_runs_page_fetched_again_after_a_copy_let_through_is_a_copy_of_it(tmp_path):
    """The copy met first stands for the group once let through: the recovery's fetch of the
    dead run's own page is then a duplicate of it, not a second item of the content."""
    original = _interrupted_run(tmp_path / "i.db")
    with sqlite_detector(tmp_path / "i.db", CONFIG) as detector:
        detector.index.begin_run("drop")
        copy = detector.check("https://b.example/copy", page(STORY))
        again = detector.check("https://a.example/story", page(STORY))
        other = detector.check("https://c.example/copy", page(STORY))
        detector.index.end_run()
    assert not copy.duplicate and copy.unconfirmed and copy.duplicate_of == original
    assert again.duplicate and again.duplicate_of == copy.doc_id and again.doc_id == original
    assert other.duplicate and other.duplicate_of == copy.doc_id


def _run(started_at: float, host: str, pid: int, beat_at: float | None = None) -> dict:
    return {"started_at": started_at, "host": host, "pid": pid, "beat_at": beat_at}


def test_a_run_whose_process_still_runs_is_alive_until_its_heartbeat_stops(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    here, now = socket.gethostname(), time.time()
    try:
        time.sleep(0.2)
        assert alive(_run(now, here, sleeper.pid), now)
        # The same pid, but the run started before that process did: a pid reused after a kill.
        assert not alive(_run(now - 3600, here, sleeper.pid, beat_at=now), now)
        # Its process lives but it stopped beating (paused, or hung): dead to the others.
        assert not alive(_run(now - 3600, here, sleeper.pid, beat_at=now - DEAD_AFTER - 1), now)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not alive(_run(now, here, sleeper.pid), now)
    assert alive(_run(now - 3600, "another-host.example", 1, beat_at=now - 5), now)
    assert not alive(_run(now - 3600, "another-host.example", 1, beat_at=now - DEAD_AFTER - 1), now)
    assert not alive(_run(now - DEAD_AFTER - 1, "another-host.example", 1), now)  # never beat


def test_items_sharing_a_url_keep_a_record_each_and_are_revisits_when_seen_again(open_detector):
    with open_detector(CONFIG) as detector:
        first = [detector.check("https://a.example/list", page(text), item=True) for text in (STORY, OTHER)]
        assert [v.revisit for v in first] == [None, None] and not any(v.duplicate for v in first)
        assert detector.index.stats()["documents"] == 2  # the second item did not replace the first
        again = [detector.check("https://a.example/list", page(text), item=True) for text in (STORY, OTHER)]
        assert [v.revisit for v in again] == ["unchanged", "unchanged"]
        assert [v.doc_id for v in again] == [v.doc_id for v in first]
        assert detector.index.stats()["documents"] == 2
