"""Crawl runs sharing one index: runs at the same time are one crawl; a dead run is unconfirmed
for all, and what it admitted is claimed once and fetched again (every shared backend)."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest
from race import GROUPS, together

from scrapy_neardup import DedupConfig
from scrapy_neardup.detector import Arrival, Detector
from scrapy_neardup.fingerprint import fingerprint
from scrapy_neardup.index import MemoryIndex, SQLiteIndex

CONFIG = DedupConfig(extractor="text", min_tokens=5)
STORY, OTHER = GROUPS[0], GROUPS[1]  # two distinct pages
DEAD_PID = 2**22 + 12345  # beyond pid_max's default: no process has it
SHARED = ("sqlite", "redis", "postgres")


@dataclasses.dataclass(frozen=True)
class Opener:
    """Opens the same new index again and again (as crawlers on many machines do); picklable, so
    that a process of its own can open it too."""

    backend: str
    where: str
    prefix: str = ""

    def __call__(self):
        if self.backend == "sqlite":
            return SQLiteIndex(Path(self.where), CONFIG)
        if self.backend == "redis":
            from scrapy_neardup.index.engines.redis import RedisIndex

            return RedisIndex(self.where, CONFIG, prefix=self.prefix)
        from scrapy_neardup.index.engines.postgres import PostgresIndex

        return PostgresIndex(self.where, CONFIG, prefix=self.prefix)


def _opener(backend: str, tmp_path, request) -> Opener:
    if backend == "sqlite":
        return Opener(backend, str(tmp_path / "shared.sqlite"))
    return Opener(backend, request.getfixturevalue(f"{backend}_url"), f"runs_{uuid.uuid4().hex}")


@pytest.fixture(params=SHARED)
def crawlers(request, tmp_path):
    """``crawlers(n)``: n Detectors, each a crawler of its own on one shared index."""
    made: list[Detector] = []
    opened = _opener(request.param, tmp_path, request)

    def make(n: int) -> list[Detector]:
        made.extend(Detector(CONFIG, opened()) for _ in range(n))
        return made[-n:]

    make.opened = opened
    yield make
    if request.param != "sqlite" and made:
        made[0].index.remove()
    for detector in made:
        detector.close()


def _judge(detector: Detector, url: str, text: str, request: bytes | None = None):
    page = Arrival(url, text, extractor="text", request=request)
    return detector.decide(page, fingerprint(text, CONFIG))


def _die(detector: Detector) -> None:
    """The run's process gone, as after a SIGKILL (the index keeps its open run)."""
    index = detector.index
    index.engine.put("run", index.runs.current, {"pid": DEAD_PID})
    index.runs = type(index.runs)()  # this object no longer speaks for the run


def test_a_url_or_content_a_run_beside_recorded_is_a_copy_and_an_ended_run_s_a_revisit(crawlers):
    a, b = crawlers(2)
    a.index.begin_run("drop")
    first = _judge(a, "http://h/story", STORY)
    b.index.begin_run("drop")
    again = _judge(b, "http://h/story", STORY)  # the same URL, by the crawler beside it
    assert again.duplicate and again.duplicate_of == first.doc_id and again.revisit is None
    assert _judge(b, "http://h/story?utm=1", STORY).duplicate
    b_own = _judge(b, "http://h/other", OTHER)
    assert _judge(a, "http://h/other", OTHER).duplicate  # a run begun after it is this crawl too
    a.index.end_run()
    (c,) = crawlers(1)
    c.index.begin_run("drop")
    revisit = _judge(c, "http://h/story", STORY)  # A ended before C began: an earlier crawl
    assert not revisit.duplicate and revisit.revisit == "unchanged" and revisit.doc_id == first.doc_id
    assert _judge(c, "http://h/other", OTHER).duplicate  # B still runs: this crawl's
    assert not _judge(b, "http://h/other", OTHER).revisit
    assert b_own.doc_id is not None


def test_a_copy_of_an_earlier_crawl_s_page_goes_out_once_whichever_crawler_meets_it_first(crawlers):
    a, b, c = crawlers(3)
    a.index.begin_run("drop")
    original = _judge(a, "http://h/story", STORY)
    a.index.end_run()
    b.index.begin_run("drop")
    c.index.begin_run("drop")
    first = _judge(b, "http://h/print/story", STORY)
    assert not first.duplicate and first.revisit == "unchanged" and first.doc_id == original.doc_id
    second = _judge(c, "http://h/amp/story", STORY)
    assert second.duplicate and second.duplicate_of == original.doc_id
    assert _judge(c, "http://h/story", STORY).duplicate  # its own URL too: B met its content


def test_a_dead_run_is_unconfirmed_and_one_live_run_claims_what_it_admitted(crawlers):
    a, b, c = crawlers(3)
    a.index.begin_run("drop")
    kept = _judge(a, "http://h/story", STORY, request=b'{"url": "http://h/story"}')
    _judge(a, "http://h/copy", STORY)  # a copy A dropped: no request kept for it
    b.index.begin_run("drop")
    c.index.begin_run("drop")
    assert b.index.beat() == []  # A is alive
    dead_run = a.index.runs.current
    _die(a)
    assert b.index.beat() == [dead_run] and c.index.beat() == [dead_run]
    assert b.index.claim(dead_run) and not c.index.claim(dead_run)  # one live run takes it
    assert b.index.pending(dead_run) == [(kept.doc_id, b'{"url": "http://h/story"}')]
    assert c.index.beat() == []  # B fetches them again
    let_through = _judge(c, "http://elsewhere/story", STORY)  # a copy of what A may have lost
    assert not let_through.duplicate and let_through.unconfirmed
    # B fetches A's page again: the copy C let through stands for it, so it is a copy of that.
    again = _judge(b, "http://h/story", STORY, request=b'{"url": "http://h/story", "again": 1}')
    assert again.duplicate and again.duplicate_of == let_through.doc_id
    b.index.fetched_again(kept.doc_id, dead_run)
    assert b.index.pending(dead_run) == []
    assert b.index.pending(b.index.runs.current) == []  # it put no item out
    assert _judge(c, "http://elsewhere/2", STORY).duplicate_of == let_through.doc_id
    b.index.beat()  # nothing left of the dead run: recovered, claimed by nobody again
    assert c.index.beat() == [] and not b.index.pending(dead_run)
    b_run = b.index.runs.current
    b.index.end_run()
    assert b.index.pending(b_run) == []


def test_a_dead_run_s_page_fetched_again_goes_out_and_is_kept_in_the_live_run_s_name(crawlers):
    a, b = crawlers(2)
    a.index.begin_run("drop")
    kept = _judge(a, "http://h/story", STORY, request=b'{"url": "http://h/story"}')
    b.index.begin_run("drop")
    dead_run = a.index.runs.current
    _die(a)
    assert b.index.beat() == [dead_run] and b.index.claim(dead_run)
    again = _judge(b, "http://h/story", STORY, request=b'{"url": "http://h/story", "again": 1}')
    assert again.revisit == "unchanged" and again.unconfirmed and not again.duplicate  # its items go out
    b.index.fetched_again(kept.doc_id, dead_run)
    assert b.index.pending(dead_run) == []
    assert b.index.pending(b.index.runs.current) == [(kept.doc_id, b'{"url": "http://h/story", "again": 1}')]
    assert _judge(b, "http://elsewhere/2", STORY).duplicate  # B's now: confirmed


def test_a_run_that_closes_leaves_nothing_to_fetch_again(crawlers):
    (a,) = crawlers(1)
    a.index.begin_run("drop")
    run = a.index.runs.current
    for n, text in enumerate(GROUPS[2:7]):  # distinct pages
        _judge(a, f"http://h/{n}", text, request=b"{}")
    assert len(a.index.pending(run)) == 5
    a.index.end_run()
    assert a.index.pending(run) == []


def test_a_claim_on_a_dead_run_passes_on_when_its_claimer_dies(crawlers):
    a, b, c = crawlers(3)
    a.index.begin_run("drop")
    _judge(a, "http://h/story", STORY, request=b"{}")
    dead_run = a.index.runs.current
    _die(a)
    b.index.begin_run("drop")
    assert b.index.claim(dead_run)
    _die(b)
    c.index.begin_run("drop")
    assert c.index.beat() == [dead_run] and c.index.claim(dead_run)


def _claim_share(opened, ids: list[int], barrier, results) -> None:
    index = opened()
    barrier.wait()
    results.put(index.claim_url_skips(ids))
    index.close()


@pytest.mark.parametrize("backend", SHARED)
def test_four_processes_claiming_skipped_requests_take_each_once(backend, tmp_path, request):
    opened = _opener(backend, tmp_path, request)
    index = opened()
    ids = [index.add_url_skip(["rule"], f"http://h/{n}?sid=1", f"http://h/{n}", b"{}") for n in range(40)]
    index.close()
    claimed = together(_claim_share, [(opened, ids)] * 4, start="clean")  # no thread of this one's
    assert sorted(claimed) == ids  # every one claimed, none twice
    index = opened()
    assert index.url_skips(["rule"]) == [] and index.claim_url_skips(ids) == []
    if backend != "sqlite":
        index.remove()
    index.close()


def test_the_memory_index_keeps_runs_as_the_others():
    detector = Detector(CONFIG, MemoryIndex(CONFIG))
    detector.index.begin_run("drop")
    first = _judge(detector, "http://h/story", STORY, request=b"{}")
    assert _judge(detector, "http://h/story", STORY).duplicate  # met again within its own crawl
    assert detector.index.pending(detector.index.runs.current) == [(first.doc_id, b"{}")]


def test_a_reset_is_refused_while_a_crawl_uses_the_index(crawlers):
    """NEARDUP_RESET under a live crawler would delete what it stored: the other crawlers would
    store it again. Refused in one line naming the run; once that run ended, the reset goes on."""
    from scrapy_neardup.exceptions import IndexFileError
    from scrapy_neardup.index import IndexSpec, open_index

    (a,) = crawlers(1)
    a.index.begin_run("drop")
    _judge(a, "http://h/story", STORY)
    opened = crawlers.opened
    location = opened.where if opened.backend == "sqlite" else f"{opened.where}?prefix={opened.prefix}"
    spec = IndexSpec.parse(location)
    run = a.index.runs.current
    with pytest.raises(IndexFileError, match=rf"is in use by crawl run {run} \(host .*NEARDUP_RESET"):
        open_index(spec, CONFIG, reset=True)
    assert a.index.stats()["documents"] == 1  # nothing deleted
    a.index.end_run()
    with open_index(spec, CONFIG, reset=True) as fresh:
        assert fresh.stats()["documents"] == 0
