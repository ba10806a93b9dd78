"""The PostgreSQL index's statements on libpq's pipeline (``engines.postgres.pipeline``), against a
real server the test run starts: every parameter and result type the index uses, errors where
they are read, transactions that fail, savepoints, and the prepared statements' bound."""

from __future__ import annotations

import math
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_neardup.index.engines.postgres import PostgresIndex
from scrapy_neardup.index.engines.postgres import pipeline as pipeline_module
from scrapy_neardup.index.engines.postgres.engine import Conflict
from scrapy_neardup.index.engines.postgres.pipeline import Pipeline

psycopg = pytest.importorskip("psycopg")
from race import CONFIG  # noqa: E402


@pytest.fixture
def engine(postgres_url):
    index = PostgresIndex(postgres_url, CONFIG, prefix=f"pipe_{uuid.uuid4().hex}")
    yield index.engine
    index.remove()


@pytest.fixture(scope="module")
def session(postgres_url):
    with psycopg.connect(postgres_url, autocommit=True) as db:
        yield Pipeline(db.pgconn, db.info.encoding, db)


def _echo(session: Pipeline, query: str, *args):
    rows = session.send(query, args)
    session.sync()
    return rows.fetchall()


TEXTS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, width=64),
    TEXTS,
    st.binary(max_size=300),
    st.lists(st.one_of(st.none(), TEXTS), max_size=6),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6),
    st.booleans(),
)
def test_parameters_and_results_come_back_as_they_went(
    session, number, real, text, blob, texts, numbers, yes
):
    """Text parameters (quotes, backslashes, braces and any character in arrays), bytes sent
    binary, and each result type the index reads."""
    row = _echo(
        session, "SELECT %s::bigint, %s::double precision, %s::text, %s::bytea, %s::boolean",
        number, real, text, blob, yes,
    )[0]  # fmt: skip
    assert row == (number, real, text, blob, yes)
    assert _echo(session, "SELECT unnest(%s::text[])", texts) == [(t,) for t in texts]
    assert _echo(session, "SELECT unnest(%s::bigint[])", numbers) == [(n,) for n in numbers]


def test_a_nul_character_in_text_is_refused_not_cut(session):
    """libpq sends a text parameter up to its first NUL: psycopg's error, not a shorter value."""
    for value in ("a\x00b", ["x", "a\x00b"]):
        with pytest.raises(psycopg.DataError, match="NUL"):
            session.send("SELECT %s::text", [value])
    assert _echo(session, "SELECT %s::text", "a b") == [("a b",)]


def test_every_result_type_the_index_reads(session):
    row = _echo(
        session,
        "SELECT 1::smallint, 2::integer, 3::bigint, 4::oid, 1.5::real, 2.5::double precision, "
        "'x'::varchar, 'y'::name, 'z'::char(2), NULL::bigint, pg_advisory_unlock_all(), "
        "'Infinity'::double precision, %s::double precision",
        float("-inf"),
    )[0]
    assert row == (1, 2, 3, 4, 1.5, 2.5, "x", "y", "z ", None, None, math.inf, -math.inf)
    with pytest.raises(TypeError, match="oid 1700"):
        _echo(session, "SELECT 1::numeric")
    assert _echo(session, "SELECT 2") == [(2,)]  # read in step all the same


def test_a_failed_statement_raises_where_it_is_read_and_skips_what_follows(engine):
    table = engine.t("meta")
    with pytest.raises(psycopg.errors.UniqueViolation), engine.transaction():
        engine.execute(f"INSERT INTO {table} VALUES ('k1', 'a')")
        engine.execute(f"INSERT INTO {table} VALUES ('k1', 'b')")  # sent, not read
        after = engine.execute(f"INSERT INTO {table} VALUES ('k2', 'c')")
        after.fetchall()  # the error is its segment's, raised here
    assert engine.execute(f"SELECT key FROM {table} WHERE key LIKE 'k%%'").fetchall() == []
    with engine.transaction():  # the session goes on
        engine.execute(f"INSERT INTO {table} VALUES ('k3', 'd')")
    assert engine.execute(f"SELECT value FROM {table} WHERE key = %s", ["k3"]).fetchall() == [("d",)]


def test_an_error_no_read_raised_is_raised_at_the_commit_and_nothing_is_committed(engine):
    table = engine.t("meta")
    with pytest.raises(psycopg.errors.NotNullViolation), engine.transaction():
        engine.execute(f"INSERT INTO {table} VALUES ('n1', 'a')")
        engine.execute(f"INSERT INTO {table} VALUES ('n2', NULL)")  # never read
    assert engine.execute(f"SELECT key FROM {table} WHERE key LIKE 'n%%'").fetchall() == []


def test_a_deadlock_is_a_conflict(engine):
    with pytest.raises(Conflict), engine.transaction():
        engine.execute("DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40P01'; END $$").fetchall()


def test_a_bad_statement_is_not_kept_prepared(session):
    for _ in range(2):  # not "prepared statement does not exist" the second time
        with pytest.raises(psycopg.errors.UndefinedTable):
            _echo(session, "SELECT * FROM no_such_table_here WHERE 1 = %s", 1)
    assert _echo(session, "SELECT %s::integer + 1", 1) == [(2,)]


def test_a_savepoint_rolled_back_after_a_server_error_takes_only_its_own_work(engine):
    table = engine.t("meta")
    with engine.transaction():
        engine.execute(f"INSERT INTO {table} VALUES ('sv-1', 'kept')")
        with pytest.raises(psycopg.errors.UniqueViolation), engine.transaction():
            engine.execute(f"INSERT INTO {table} VALUES ('sv-2', 'gone')")
            engine.execute(f"INSERT INTO {table} VALUES ('sv-1', 'twice')").fetchall()
        engine.execute(f"INSERT INTO {table} VALUES ('sv-3', 'kept')")
    found = engine.execute(f"SELECT key, value FROM {table} WHERE key LIKE 'sv-%%' ORDER BY key").fetchall()
    assert found == [("sv-1", "kept"), ("sv-3", "kept")]


def test_the_least_recently_used_statements_are_deallocated_and_prepared_again(session, monkeypatch):
    monkeypatch.setattr(pipeline_module, "MOST_PREPARED", 3)
    for n in [*range(6), 0, 1, 5]:
        assert _echo(session, f"SELECT %s::integer + {n}", 1) == [(1 + n,)]
    assert len(session.prepared) <= 3
    names = _echo(session, "SELECT name FROM pg_prepared_statements WHERE name LIKE 'neardup_%%'")
    assert {name for (name,) in names} <= {name.decode() for name in session.prepared.values()}


def test_a_large_parameter_is_sent_while_answers_wait(session):
    """libpq's send buffer and the server's answers meet: neither side blocks the other."""
    blob = bytes(range(256)) * 40_000  # 10 MB
    for _ in range(20):
        session.send("SELECT repeat('x', 100000)")
    big = session.send("SELECT octet_length(%s::bytea)", [blob])
    session.sync()
    assert big.fetchone() == (len(blob),)


def test_a_server_lost_mid_transaction_is_an_error_and_the_next_transaction_reconnects(engine, postgres_url):
    with (
        psycopg.connect(postgres_url, autocommit=True) as killer,
        pytest.raises(psycopg.OperationalError),
        engine.transaction(),
    ):
        engine.execute("SELECT 1").fetchall()
        killer.execute("SELECT pg_terminate_backend(%s)", [engine.db.info.backend_pid])
        engine.execute("SELECT pg_sleep(0.2)").fetchall()
    with engine.transaction():
        assert engine.execute("SELECT 41 + 1").fetchone() == (42,)


def test_a_transaction_whose_failed_statement_was_let_go_is_not_committed(engine):
    """An error read and caught inside the transaction leaves it failed: the server turns its
    COMMIT into a rollback, and the transaction says so instead of passing for committed."""
    table = engine.t("meta")
    with pytest.raises(psycopg.OperationalError, match="not committed"), engine.transaction():
        engine.execute(f"INSERT INTO {table} VALUES ('lg-1', 'a')")
        with pytest.raises(psycopg.errors.UniqueViolation):
            engine.execute(f"INSERT INTO {table} VALUES ('lg-1', 'b')").fetchall()
    assert engine.execute(f"SELECT key FROM {table} WHERE key LIKE 'lg-%%'").fetchall() == []
    with engine.transaction():  # rolled back: the next transaction starts clean
        engine.execute(f"INSERT INTO {table} VALUES ('lg-2', 'c')")
    assert engine.execute(f"SELECT key FROM {table} WHERE key LIKE 'lg-%%'").fetchall() == [("lg-2",)]
