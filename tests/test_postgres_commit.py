"""A check that lets its page through does not wait for its COMMIT (``session.Session``): the
answer is read with the next statement's, a failure is logged and counted, a connection lost
before it counts the page as unrecorded, and a page dropped as a duplicate always waits."""

from __future__ import annotations

import logging
import uuid

import pytest
from race import CONFIG, GROUPS, variants

from scrapy_neardup.detector import Detector
from scrapy_neardup.exceptions import IndexFailure
from scrapy_neardup.index.engines.postgres import PostgresIndex

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def prefix(postgres_url):
    name = f"unawaited_{uuid.uuid4().hex}"
    yield name
    PostgresIndex(postgres_url, CONFIG, prefix=name).remove()


def _urls(url: str, prefix: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as db:
        return {row[0] for row in db.execute(f'SELECT url FROM "{prefix}".documents')}


def test_a_page_let_through_is_committed_unawaited_and_a_duplicate_waits(postgres_url, prefix):
    index = PostgresIndex(postgres_url, CONFIG, prefix=prefix)
    with Detector(CONFIG, index) as detector:
        first = detector.check("https://a.example/first", GROUPS[0])
        assert not first.duplicate and index.engine.pipeline.unawaited == ["https://a.example/first"]
        copy = detector.check("https://a.example/copy", variants(GROUPS[0])[1])
        assert copy.duplicate and copy.duplicate_of_url == "https://a.example/first"
        assert index.engine.pipeline.unawaited == []  # read before the copy's answers, which it waited for
        assert _urls(postgres_url, prefix) == {"https://a.example/first", "https://a.example/copy"}
        detector.check("https://a.example/other", GROUPS[1])
    assert _urls(postgres_url, prefix) == {f"https://a.example/{name}" for name in ("first", "copy", "other")}
    assert index.unrecorded == 0


def test_a_failed_unawaited_commit_is_logged_and_counted_and_the_next_page_is_judged(
    postgres_url, prefix, caplog
):
    index = PostgresIndex(postgres_url, CONFIG, prefix=prefix)
    with psycopg.connect(postgres_url, autocommit=True) as db:  # the server refuses one page's record
        db.execute(
            f'CREATE FUNCTION "{prefix}".refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN '
            "IF NEW.url LIKE '%/refused' THEN RAISE EXCEPTION 'refused by a trigger'; END IF; "
            "RETURN NEW; END $$"
        )
        db.execute(f'CREATE TRIGGER refuse BEFORE INSERT ON "{prefix}".documents FOR EACH ROW '
                   f'EXECUTE FUNCTION "{prefix}".refuse()')  # fmt: skip
    with caplog.at_level(logging.WARNING), Detector(CONFIG, index) as detector:
        refused = detector.check("https://a.example/refused", GROUPS[0])
        assert not refused.duplicate  # let through: its record fails later
        again = detector.check("https://a.example/again", variants(GROUPS[0])[2])
        assert not again.duplicate  # its original was never recorded: it passes, and is recorded
        assert index.unrecorded == 1
        assert not detector.check("https://a.example/other", GROUPS[1]).duplicate
    said = [r.getMessage() for r in caplog.records if "neardup/unrecorded" in r.getMessage()]
    assert len(said) == 1 and "https://a.example/refused" in said[0] and "refused by a trigger" in said[0]
    assert _urls(postgres_url, prefix) == {"https://a.example/again", "https://a.example/other"}
    with psycopg.connect(postgres_url, autocommit=True) as db:  # the index drops only its own objects
        db.execute(f'DROP FUNCTION "{prefix}".refuse() CASCADE')


def test_a_connection_lost_before_the_answer_counts_the_page_unrecorded(postgres_url, prefix):
    index = PostgresIndex(postgres_url, CONFIG, prefix=prefix)
    detector = Detector(CONFIG, index)
    detector.check("https://a.example/before", GROUPS[2])
    with psycopg.connect(postgres_url) as blocker:  # holds the record back until the connection is cut
        blocker.execute(f'LOCK TABLE "{prefix}".documents IN EXCLUSIVE MODE')
        assert not detector.check("https://a.example/cut", GROUPS[0]).duplicate
        assert index.engine.pipeline.unawaited == ["https://a.example/cut"]
        blocker.execute("SELECT pg_terminate_backend(%s)", [index.engine.db.info.backend_pid])
        blocker.rollback()
    with pytest.raises(IndexFailure):  # the page after it meets the lost connection: it passes unjudged
        detector.check("https://a.example/lost", GROUPS[1])
    assert not detector.check("https://a.example/after", variants(GROUPS[0])[1]).duplicate
    assert index.unrecorded == 1
    detector.close()
    assert _urls(postgres_url, prefix) == {"https://a.example/before", "https://a.example/after"}
