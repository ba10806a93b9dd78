"""An index that forgets: pages not seen lately leave every lookup, on every backend
(``conftest.BACKENDS``); a copy of a forgotten page is a new page again."""

from __future__ import annotations

import json
import random
import sqlite3

import pytest
from crawling import ADDON, crawl, expected

from scrapy_neardup import DedupConfig, fingerprint
from scrapy_neardup.detector import Detector
from scrapy_neardup.index.engines.postgres.packing import lookup_entries
from scrapy_neardup.index.forgetting import forget
from scrapy_neardup.index.ledger import LOOKUP
from scrapy_neardup.index.lookup_keys import lookup_keys

CONFIG = DedupConfig(extractor="text", min_tokens=5)
WORDS = [
    "harbour",
    "boat",
    "mill",
    "river",
    "heron",
    "survey",
    "concert",
    "council",
    "market",
    "bridge",
    "rain",
    "festival",
]
DAY = 86400.0


def article(seed: int, sentences: int = 30) -> str:
    """A text of its own, with the stopwords SpotSigs anchors on."""
    pick = random.Random(seed).choice
    return " ".join(
        f"the {pick(WORDS)} {seed} is a {pick(WORDS)} there said the {pick(WORDS)} of {pick(WORDS)} {n}."
        for n in range(sentences)
    )


def edited(text: str) -> str:
    """A near-duplicate: the same text with its last sentence changed."""
    return text.rsplit(".", 2)[0] + ". the end is near said the editor."


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def timed(open_detector):
    """A Detector whose index is told the time by a clock the test turns."""
    detector = open_detector(CONFIG)
    detector.index.clock = clock = Clock()
    return detector, clock


def posted_ids(detector: Detector) -> set[int]:
    """Every document id any posting of the index holds (lookup keys and spot lists)."""
    index, found = detector.index, set()
    engine = index.engine
    if hasattr(engine, "schema"):  # PostgreSQL: its tables
        rows = engine.execute(f"SELECT docs FROM {engine.t('lookup_keys')}").fetchall()
        found |= set(lookup_entries(bytes(blob) for (blob,) in rows)["doc"].tolist())
        for (blob,) in engine.execute(f"SELECT docs FROM {engine.t('spot_lists')}"):
            found |= {int.from_bytes(blob[i : i + 4], "little") for i in range(0, len(blob), 4)}
    elif hasattr(engine, "db"):  # SQLite: its tables
        found |= {doc for (doc,) in engine.db.execute("SELECT doc FROM lookup_keys")}
        for (blob,) in engine.db.execute("SELECT docs FROM spot_lists"):
            found |= {int.from_bytes(blob[i : i + 4], "little") for i in range(0, len(blob), 4)}
    elif hasattr(engine, "r"):  # Redis: its sets and spot-list hashes
        for key in engine.r.scan_iter(match=engine.k("lk", "*")):
            found |= {int(m) for m in engine.r.smembers(key)}
        for key in engine.r.scan_iter(match=engine.k("sl", "*")):
            for blob in engine.r.hvals(key):
                found |= {int.from_bytes(blob[i : i + 4], "little") for i in range(0, len(blob), 4)}
    else:  # the memory and toy engines: their sets
        sets = engine.state["sets"] if hasattr(engine, "state") else None
        if sets is not None:
            found |= {
                doc for (name, _), members in sets.items() if name in ("lk", "admitted") for doc in members
            }
        else:
            found |= {doc for key, members in engine.data["sets"].items() if '"lk"' in key for doc in members}
    return found


def test_pages_not_seen_lately_are_forgotten_with_their_copies_and_postings(timed):
    detector, clock = timed
    old, kept = article(1), article(2)
    first = detector.check("http://a.example/old", old)
    copy = detector.check("http://a.example/old-copy", edited(old))
    assert copy.duplicate and copy.duplicate_of == first.doc_id
    clock.now += 3 * DAY
    other = detector.check("http://a.example/kept", kept)
    assert not other.duplicate

    assert forget(detector.index, before=clock.now - DAY) == 2  # the page, and its copy with it
    assert detector.index.get(first.doc_id) is None and detector.index.get(copy.doc_id) is None
    assert posted_ids(detector) == {other.doc_id}
    stats = detector.index.stats()
    assert (stats["documents"], stats["unique"], stats["duplicates"], stats["forgotten"]) == (1, 1, 0, 2)
    keys = lookup_keys(fingerprint(old, CONFIG), 1, CONFIG, raw=True)
    assert not set().union(*detector.index.engine.members(LOOKUP, keys))

    again = detector.check("http://a.example/old-copy", edited(old))  # a copy of a forgotten page
    assert not again.duplicate and again.revisit is None
    assert again.doc_id > copy.doc_id  # a forgotten page's id is never given again
    assert detector.check("http://a.example/old", old).duplicate_of == again.doc_id


def test_a_copy_met_keeps_its_original_and_a_revisit_keeps_itself(timed):
    detector, clock = timed
    copied, revisited, alone = article(3), article(4), article(5)
    original = detector.check("http://b.example/1", copied)
    page = detector.check("http://b.example/2", revisited)
    detector.check("http://b.example/3", alone)
    clock.now += 10 * DAY
    assert detector.check("http://b.example/1-copy", edited(copied)).duplicate_of == original.doc_id
    assert detector.check("http://b.example/2", revisited).revisit == "unchanged"

    assert forget(detector.index, before=clock.now - DAY) == 1  # only the page met by neither
    assert detector.index.get(original.doc_id) and detector.index.get(page.doc_id)
    assert detector.check("http://b.example/2-copy", edited(revisited)).duplicate


def test_max_pages_keeps_the_most_recently_seen(timed):
    detector, clock = timed
    verdicts = []
    for n in range(6):
        clock.now += 60
        verdicts.append(detector.check(f"http://c.example/{n}", article(10 + n)))
    clock.now += 60
    detector.check("http://c.example/0", article(10))  # met again: now the most recent

    assert forget(detector.index, keep=3) == 3
    left = {record["url"] for record in detector.index.documents()}
    assert left == {"http://c.example/0", "http://c.example/4", "http://c.example/5"}
    assert posted_ids(detector) == {verdicts[0].doc_id, verdicts[4].doc_id, verdicts[5].doc_id}
    assert forget(detector.index, keep=3) == 0


def test_a_page_let_through_beside_a_forgotten_one_keeps_its_record(open_detector):
    detector = open_detector(DedupConfig(extractor="text", min_tokens=5))
    detector.index.clock = clock = Clock()
    weak = detector.check("http://d.example/1", article(20))
    text = article(20).split(". ")
    near = ". ".join(text[:20] + [f"a new line {n} of the harbour there" for n in range(10)])
    clock.now += 5 * DAY
    fp = fingerprint(near, CONFIG)
    with detector.index.transaction():  # a weak match let through: admitted, linked to its match
        let = detector.index.record("http://d.example/2", fp, "", (weak.doc_id, 0.6, "spotsigs"), admit=True)
    assert forget(detector.index, before=clock.now - DAY) == 1
    kept = detector.index.get(let.doc_id)
    assert kept["status"] == "unique" and kept["duplicate_of"] is None


# --- in a crawl (tests/site on 127.0.0.1, one crawl a process) ----------------------------------


def test_a_crawl_forgets_pages_not_seen_for_long_and_stores_them_again(tmp_path, site):
    db = tmp_path / "crawl.sqlite"
    settings = {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_FORGET_AFTER": "7d"}
    first = crawl(tmp_path, [site + "/"], settings)
    with sqlite3.connect(db) as con:  # as if the crawl had run eight days ago
        con.execute("UPDATE documents SET last_seen = last_seen - 8 * 86400")
        held = con.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    report = tmp_path / "report.json"
    second = crawl(tmp_path, [site + "/"], {**settings, "NEARDUP_REPORT": str(report)})
    assert second["stats"]["neardup/forgotten"] == held
    assert f"forgot {held} pages not seen lately" in second["stderr"]
    assert "neardup/revisits" not in second["stats"]  # every page is new again, and stored again
    assert sorted(i["url"] for i in second["items"]) == sorted(i["url"] for i in first["items"])
    assert json.loads(report.read_text())["forgotten"] == held


def test_a_crawl_keeps_at_most_max_pages(tmp_path, site):
    db = tmp_path / "crawl.sqlite"
    result = crawl(tmp_path, [site + "/"], {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_MAX_PAGES": 5})
    with sqlite3.connect(db) as con:
        left = con.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    assert left <= 5
    assert result["stats"]["neardup/forgotten"] + left == result["stats"]["neardup/checked"]
    assert len(result["items"]) >= len(expected("unique"))  # forgetting costs no page of the crawl


@pytest.mark.parametrize(("name", "value"), [("NEARDUP_FORGET_AFTER", "a week"), ("NEARDUP_MAX_PAGES", 0)])
def test_a_bad_forgetting_setting_stops_the_crawl_at_start_naming_it(tmp_path, site, name, value):
    result = crawl(tmp_path, [site + "/"], {**ADDON, name: value}, check=False)
    assert result["returncode"] != 0 and not result["items"]
    assert name in result["stderr"] and "Traceback" not in result["stderr"]
