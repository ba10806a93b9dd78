"""PostgresIndex: the index in PostgreSQL, on disk, shared by every crawler that reaches the server.

The ledger over the PostgreSQL engine (``engine``) and its search (``search``), in one schema
of its own (``postgresql://user@host/db?prefix=<schema>``, by default the crawl's
``<spider>:neardup``). A schema that holds tables but no index is another program's: refused,
never written into, never dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....config import DedupConfig
from ....exceptions import IndexFileError, MissingExtraError
from ... import schema
from ...ledger import Ledger
from ...location import safe_url
from .engine import PostgresEngine
from .search import PostgresSearch
from .session import lock_key
from .tables import MARK, OWN, SEQUENCES, create_statements

if TYPE_CHECKING:
    from ...location import IndexSpec

try:
    import psycopg
    from psycopg import sql
except ImportError:  # pragma: no cover - the extra is missing
    psycopg = sql = None


def _require_psycopg() -> None:
    if psycopg is None:
        feature = "a PostgreSQL index (NEARDUP_INDEX = 'postgresql://...')"
        raise MissingExtraError(feature, "postgres", "psycopg")


def _connect(url: str, timeout: float) -> Any:
    db = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)))
    # A check's queries are small, but the planner's estimate of a bucket read grows with the
    # lists (it cannot see how few rows a bucket holds): past jit_above_cost the server would
    # compile each read (6 to 76 ms measured) for work of a fraction of a millisecond.
    db.execute("SET jit = off")
    # A prepared check statement is planned again at every run while the server expects a plan for
    # its arrays' values to be cheaper (measured: 0.7 ms of the server's 1.8 ms a check): the
    # statements look rows up by key, and one plan serves them all.
    db.execute("SET plan_cache_mode = force_generic_plan")
    return db


def _reconnecting(first: Any, url: str, timeout: float) -> Any:
    """A connect function that gives ``first`` once, then new connections."""
    made = [first]
    return lambda: made.pop() if made else _connect(url, timeout)


def _quoted(name: str) -> str:
    return sql.Identifier(name).as_string(None)


def _literal(text: str) -> str:
    return sql.Literal(text).as_string(None)


def _tables(db: Any, name: str) -> set[str]:
    rows = db.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", [name])
    return {row[0] for row in rows}


class PostgresIndex(Ledger):
    """Candidate search over admitted pages kept in PostgreSQL, with every verdict recorded."""

    def __init__(
        self,
        url: str,
        config: DedupConfig,
        prefix: str = "neardup",
        timeout: float = 10.0,
        read_only: bool = False,
    ) -> None:
        _require_psycopg()
        self.url, self.prefix = url, prefix
        path = f"{safe_url(url)} {prefix}"
        try:
            db = _connect(url, timeout)
        except psycopg.Error as exc:
            raise IndexFileError(path, f"cannot be reached ({str(exc).strip().splitlines()[0]})") from None
        quoted = _quoted(prefix)
        if len(prefix.encode("utf-8")) > 63:
            db.close()
            raise IndexFileError(path, f"{prefix!r} is longer than a schema name may be (63 bytes)")
        if prefix.lower().startswith("pg_") or prefix in ("public", "information_schema"):
            db.close()  # the server's own schemas, and the one every user's tables default to
            why = f"{prefix!r} is a schema of the server's or everyone's; name another ?prefix="
            raise IndexFileError(path, why)
        try:
            tables = _tables(db, prefix)
            if tables and MARK not in tables:
                raise IndexFileError(
                    path, f"schema {prefix!r} holds tables of another program; use another ?prefix="
                )
            reset = MARK in tables and not db.execute(f"SELECT 1 FROM {quoted}.{MARK} LIMIT 1").fetchone()
            if tables and not reset and not set(OWN) <= tables:
                raise IndexFileError(
                    path, f"schema {prefix!r} is of a development version; reset it or use another ?prefix="
                )
            if (not tables or reset) and not read_only:
                with db.transaction():  # one process makes it: crawlers starting at once wait for it
                    db.execute("SELECT pg_advisory_xact_lock(%s)", [lock_key("schema", prefix)])
                    for statement in create_statements(quoted):
                        db.execute(statement)
                    db.cursor().executemany(
                        f"INSERT INTO {quoted}.{MARK} VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                        schema.meta_rows(config, not config.simhash_within_spotsigs),
                    )
            meta = dict(db.execute(f"SELECT key, value FROM {quoted}.{MARK}").fetchall())
            keys, simhash_keys = schema.spot_keys(meta, config, path, "another ?prefix=")
            writable = f"has_table_privilege({_literal(quoted + '.documents')}, 'INSERT')"
            if not read_only and not db.execute(f"SELECT {writable}").fetchone()[0]:
                raise IndexFileError(
                    path, "cannot be written by this user (a read-only role); reports can read it"
                )
        except psycopg.errors.InsufficientPrivilege as exc:
            db.close()
            raise IndexFileError(
                path, f"cannot be written by this user ({str(exc).strip().splitlines()[0]})"
            ) from None
        except psycopg.Error as exc:
            db.close()
            raise IndexFileError(path, f"failed at opening ({str(exc).strip().splitlines()[0]})") from None
        except (IndexFileError, KeyError, ValueError) as exc:
            db.close()
            if isinstance(exc, IndexFileError):
                raise
            raise IndexFileError(path, f"has damaged settings in its meta table ({exc!r})") from None
        engine = PostgresEngine(_reconnecting(db, url, timeout), quoted, path)
        engine.search = PostgresSearch(engine, config, keys, not config.simhash_within_spotsigs, simhash_keys)
        super().__init__(engine, config)
        self.engine: PostgresEngine = engine
        self._timeout = timeout

    lanes = 4  # each check waits for its round trips: several at once overlap them

    def another(self) -> PostgresIndex:
        return self._joined(PostgresIndex(self.url, self.config, self.prefix, self._timeout))

    @classmethod
    def from_spec(cls, spec: IndexSpec, config: DedupConfig) -> PostgresIndex:
        return cls(spec.where, config, spec.key or "neardup")

    @classmethod
    def existing(cls, spec: IndexSpec) -> PostgresIndex:
        """Open an index with the settings it was built with (reports, exports, forget)."""
        _require_psycopg()
        path, prefix = f"{safe_url(spec.where)} {spec.key}", spec.key or "neardup"
        try:
            with _connect(spec.where, 10.0) as db:
                if MARK not in _tables(db, prefix):
                    raise IndexFileError(path, "holds no scrapy-neardup index")
                meta = dict(db.execute(f"SELECT key, value FROM {_quoted(prefix)}.{MARK}").fetchall())
        except psycopg.Error as exc:
            raise IndexFileError(path, f"cannot be reached ({str(exc).strip().splitlines()[0]})") from None
        return cls(spec.where, schema.config_from_meta(meta, path), prefix, read_only=True)

    @classmethod
    def reset(cls, spec: IndexSpec) -> None:
        """NEARDUP_RESET: drop the index's own tables and sequences, nothing else in the schema."""
        _require_psycopg()
        prefix, path = spec.key or "neardup", f"{safe_url(spec.where)} {spec.key}"
        try:
            with _connect(spec.where, 10.0) as db:
                if MARK not in _tables(db, prefix):
                    return  # no index here (another program's tables are refused at opening)
                quoted = _quoted(prefix)
                with db.transaction():
                    for table in OWN:
                        if table != MARK:
                            db.execute(f"DROP TABLE IF EXISTS {quoted}.{table}")
                    for sequence in SEQUENCES:
                        db.execute(f"DROP SEQUENCE IF EXISTS {quoted}.{sequence}")
                    db.execute(f"DELETE FROM {quoted}.{MARK}")  # the schema stays the index's
        except psycopg.Error as exc:
            raise IndexFileError(path, f"cannot be reset ({str(exc).strip().splitlines()[0]})") from None

    def remove(self) -> None:
        """Drop this index's own tables, and its schema when nothing else is in it (tests' clean-up)."""
        self.close()
        self.reset(_spec(self.url, self.prefix))
        with _connect(self.url, 10.0) as db:
            db.execute(f"DROP TABLE IF EXISTS {_quoted(self.prefix)}.{MARK}")
            if not _tables(db, self.prefix):
                db.execute(f"DROP SCHEMA IF EXISTS {_quoted(self.prefix)}")

    @classmethod
    def failure_line(cls, spec: IndexSpec, exc: Exception) -> str | None:
        return None  # its failures are errors of its own already

    def is_storage_error(self, exc: Exception) -> bool:
        return isinstance(exc, OSError) or type(exc).__module__.startswith("psycopg")

    def failure_advice(self, exc: Exception) -> str:
        return f"the PostgreSQL index {self.path} failed; pages are judged again once it answers"


def _spec(url: str, prefix: str) -> IndexSpec:
    from ...location import IndexSpec

    return IndexSpec("postgres", url, prefix)
