"""A connection to the server and the pipelined transactions of a check on it.

Exact under concurrency without a global lock: a check's transaction (READ COMMITTED) first
takes transaction-scoped advisory locks on its *candidate keys*, in sorted order, in one
statement (``search.PostgresSearch.find``): each lookup key it reads or posts, and the spot
(scope and spot hash) of each SpotSigs list it probes or is posted to. Two near-duplicates
always share one (the exactness argument of ``pruning``: the first's posting is in the
second's probe), so the second waits until the first commits, then reads its postings:
they never both pass. Unrelated pages take other locks and run in parallel. Each check also
holds the index's check lock shared, and a page of more keys than a lock table spares (a long
manual: thousands) holds it alone instead of its keys: it runs alone. A deadlock
(rows locked in another order: a revisit's old postings, URL rules) fails one transaction
(``Conflict``: the Detector judges the page again, a bounded number of times).

A transaction that records only pages let through (admitted as unique) is committed without
waiting for the answer (``commit_unawaited``): the page passes whatever the COMMIT's outcome,
and the server commits while the crawler goes on to the next page. The answer is read before
the next statement's; a COMMIT that failed (or whose connection was lost before it answered)
is logged and counted (``unrecorded``): its page was let through, unrecorded. A page dropped
as a duplicate always waits for its record.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

from ....exceptions import one_line
from ...base import Conflict
from .pipeline import Pipeline, Rows

try:
    import psycopg
    from psycopg import errors
except ImportError:  # pragma: no cover - without the extra, PostgresIndex refuses to start
    psycopg = errors = None

logger = logging.getLogger(__name__)


def conflicts() -> tuple[type[Exception], ...]:
    """The errors that mean another transaction got in the way: the check is made again. Out of
    shared memory: the server's lock table (``max_locks_per_transaction``) is full of the locks
    of other checks of large pages, until they end."""
    return (errors.SerializationFailure, errors.DeadlockDetected, errors.LockNotAvailable, errors.OutOfMemory)


class Session:
    """The tables of ``schema`` on one connection (autocommit between transactions, so a read
    outside one sees what others committed), written and read in pipelined transactions."""

    def __init__(self, connect: Callable[[], Any], schema: str, path: str) -> None:
        self.connect, self.db = connect, connect()
        self.pipeline = self._pipeline()
        self.schema, self.path, self.name = schema, path, path
        self._depth = 0
        self._recorded: list[str | None] = []  # its pages: let through, or None (``commit_unawaited``)
        self.unrecorded = 0  # pages let through whose unawaited COMMIT failed or was never answered
        self.search: Any = None  # the index's search (``search.PostgresSearch``), set by the index
        self._next_doc: Any = None  # a check's document id, asked for with its locks (``lock``)
        self._writes: dict[Hashable, tuple[str, list[Any]]] = {}  # a transaction's writes (``later``)

    def t(self, table: str) -> str:
        return f"{self.schema}.{table}"

    def execute(self, query: str, args: Sequence[Any] = ()) -> Rows:
        """Send a statement; inside a transaction its rows are read when asked for, outside one
        it is answered (and committed) at once."""
        if self._depth == 0 and (self.db.closed or self.db.broken or self.pipeline.broken):
            self._reconnect()
        if self._writes:
            self.flush()
        rows = self.pipeline.send(query, args)
        if self._depth == 0:
            self.pipeline.sync()
        return rows

    def later(self, slot: Hashable, query: str, args: list[Any]) -> None:
        """A write whose answer nobody waits for: inside a transaction, kept and sent with the
        others as one statement before the next read or the commit (a statement costs the client
        and the server each about as much as the work of most). ``slot`` names what it writes: a
        second write to the same slot sends the first before it."""
        if not self._depth:
            self.execute(query, args)
            return
        if slot in self._writes:
            self.flush()
        self._writes[slot] = (query, args)

    def flush(self) -> None:
        """Send the kept writes, as one statement (each a data-modifying WITH of the last; none
        writes a row another writes)."""
        writes, self._writes = list(self._writes.values()), {}
        if writes:
            *first, (last, args) = writes
            query = "".join(f"{'WITH' if n == 0 else ','} w{n} AS ({q}) " for n, (q, _) in enumerate(first))
            self.execute(query + last, [a for _, write_args in first for a in write_args] + args)

    def lock(
        self, keys: list[int], shared: bool = False, doc_id: bool = False, first: int | None = None
    ) -> None:
        """Advisory locks on these keys until the transaction ends, taken in sorted order, after
        ``first`` (held shared). Sent, not waited for: the server runs what is sent after it once
        it holds them (one round trip for the locks and the reads they guard). ``doc_id``: a check
        begins, and its page's id is asked for with its locks (``new_id`` takes the answer; a page
        not recorded leaves a gap)."""
        function = f"pg_advisory_xact_lock{'_shared' if shared else ''}"
        locks = f"SELECT {function}(k) FROM (SELECT k FROM unnest(%s::bigint[]) AS k ORDER BY k) AS k"
        args: list[Any] = [ints(sorted(set(keys)))]
        if first is not None:  # an Append runs its parts in order: this one first
            locks = f"SELECT pg_advisory_xact_lock_shared(%s::bigint) UNION ALL {locks}"
            args.insert(0, first)
        if doc_id and self._depth and self._next_doc is None:
            self._next_doc = self.execute(
                f"SELECT nextval(%s::regclass), (SELECT count(*) FROM ({locks}) AS locked)",
                [self.t("doc_ids"), *args],
            )
        elif keys or first is not None:
            self.execute(locks, args)

    def commit_unawaited(self, page: str | None) -> None:
        """The transaction recorded ``page``, let through, or (None) a page whose record must be
        waited for: its COMMIT goes unawaited when every page it recorded was let through."""
        if self._depth:
            self._recorded.append(page)

    def _pipeline(self) -> Pipeline:
        pipeline = Pipeline(self.db.pgconn, self.db.info.encoding, self.db)
        pipeline.on_unawaited = self._unawaited_ended
        return pipeline

    def _unawaited_ended(self, what: str, error: Exception | None) -> None:
        """How an unawaited COMMIT ended: a failure is logged (the first at WARNING) and counted."""
        if error is None:
            return
        self.unrecorded += 1
        log = logger.warning if self.unrecorded == 1 else logger.debug
        log(
            "scrapy-neardup: %s was let through but not recorded in %s (%s); pages whose record "
            "fails are counted as neardup/unrecorded, and logged again only at DEBUG",
            what, self.path, one_line(f"{type(error).__name__}: {error}"),
        )  # fmt: skip

    def _reconnect(self) -> None:
        """A server lost and back: a new connection (a failure is a storage error: the page passes)."""
        self.close()
        self.db = self.connect()
        self.pipeline = self._pipeline()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """READ COMMITTED, or a savepoint inside one; a deadlock with another process is ``Conflict``."""
        if self._depth == 0 and (self.db.closed or self.db.broken or self.pipeline.broken):
            self._reconnect()
        if self._depth:
            self.flush()  # a savepoint's writes are sent inside it, and go if it is rolled back
        self._depth += 1
        try:
            with self._outermost() if self._depth == 1 else self._savepoint(f"neardup_{self._depth}"):
                yield
                self.flush()
        except conflicts() as exc:
            raise Conflict(str(exc)) from None
        finally:
            self._depth -= 1
            self._writes = {}  # sent, or rolled back with what failed
            if self._depth == 0:
                self._next_doc, self._recorded = None, []

    @contextlib.contextmanager
    def _outermost(self) -> Iterator[None]:
        """BEGIN and COMMIT sent with the statements between them, in one pipeline segment: a
        check waits for the server where it needs an answer and once at the end."""
        pipeline = self.pipeline
        try:
            pipeline.command("BEGIN")
            if self.search is not None:
                self.search.begin()
            yield
            if self._recorded and None not in self._recorded:
                pipeline.commit_unawaited(", ".join(map(str, self._recorded)))
                return
            committed = pipeline.command("COMMIT")
            pipeline.sync()
            if committed.status != "COMMIT":  # a failed statement whose error was caught and let go
                raise psycopg.OperationalError("the transaction failed and was not committed")
        except BaseException:
            self._roll_back()
            raise

    @contextlib.contextmanager
    def _savepoint(self, name: str) -> Iterator[None]:
        pipeline, recorded = self.pipeline, len(self._recorded)
        pipeline.command(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            del self._recorded[recorded:]  # what it recorded is rolled back
            # An error of the server's skips what follows it until a sync: read to one, then
            # roll back to the savepoint (a failed savepoint leaves the transaction failed: its
            # COMMIT is not committed, and says so).
            with contextlib.suppress(psycopg.Error):
                pipeline.sync(raising=False)
                pipeline.command(f"ROLLBACK TO SAVEPOINT {name}")
            raise
        pipeline.command(f"RELEASE SAVEPOINT {name}")

    def _roll_back(self) -> None:
        """After a failure: every answer read, and the server's transaction rolled back; a
        connection left in doubt is closed (the next transaction opens another)."""
        try:
            self.pipeline.sync(raising=False)
            if self.db.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                self.pipeline.command("ROLLBACK")
                self.pipeline.sync(raising=False)
        except Exception:
            with contextlib.suppress(Exception):
                self.db.close()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Each page of a scan's batch is its own transaction (a conflict costs one page's work)."""
        yield

    def close(self) -> None:
        """Close the connection once the unawaited COMMITs are answered; one never answered
        (the connection lost) may or may not have committed: it counts as unrecorded."""
        with contextlib.suppress(Exception):
            if self.pipeline.unawaited and not self.pipeline.broken:
                self.pipeline.sync(raising=False)
        lost = psycopg.OperationalError("the connection was lost before the COMMIT's answer")
        for what in self.pipeline.unawaited:
            self._unawaited_ended(what, lost)
        self.pipeline.queue.clear()
        with contextlib.suppress(Exception):
            self.db.close()


def ints(values: Iterable[int]) -> str:
    """An array of integers as PostgreSQL's text for it (cast in the query): sent many times a
    check, and far cheaper to write than psycopg's adaptation of a list, number by number."""
    return "{" + ",".join(map(str, map(int, values))) + "}"


def lock_key(name: str, field: str) -> int:
    """A stable 64-bit advisory lock key for a map's field (the same in every process)."""
    digest = hashlib.blake2b(f"{name}\0{field}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
