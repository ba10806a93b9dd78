"""The index's statements on libpq's pipeline, beneath psycopg's cursors.

A check sends five or six statements, most of them small, and psycopg's cursor and pipeline
machinery cost the client about 55 us a statement, as much as the server's work of most
(docs/scale.md, "Where its time goes"). Here each statement is prepared once on its session,
sent with its parameters as text (bytes as binary) and answered in binary, and nothing is
waited for until a result is read: a check waits for the server where it needs an answer,
and once at its end (``sync``), or not at all when it lets its page through
(``commit_unawaited``: its answers are read with the next check's).

Parameters: None, bool, int, float, str, bytes, and lists of str or int (as array text, cast in
the query where the server cannot tell the type). Results: integers, floats, text, bytea, bool.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import select
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from typing import Any

try:
    from psycopg import DataError, OperationalError, errors, pq
    from psycopg.adapt import Transformer
except ImportError:  # pragma: no cover - without the extra, PostgresIndex refuses to start
    DataError = OperationalError = errors = pq = Transformer = None

BYTEA = 17  # the type of a bytes parameter, sent binary; the others are sent as text
MOST_PREPARED = 256  # statements kept prepared on a session; the least recently used go first
_SYNC = "sync"  # a queue entry: the end of a pipeline segment
_PLACEHOLDER = re.compile(r"%%|%s")


# The result types the index reads (int8, int2, int4, oid, float4, float8, bool, bytea, void,
# text, varchar, name, unknown, bpchar), loaded by psycopg's own binary loaders; void as None.
_READ_TYPES = frozenset({20, 21, 23, 26, 700, 701, 16, 17, 2278, 25, 1043, 19, 705, 1042})
_VOID = 2278


class Rows:
    """A statement's result, read from the server when first asked for (``Pipeline.wait``)."""

    __slots__ = ("_at", "_error", "_pipeline", "_rows", "names", "status")

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline, self._rows, self._error, self._at = pipeline, None, None, 0
        self.names: list[str] = []
        self.status = ""  # the command tag: "COMMIT", or "ROLLBACK" for a transaction that failed

    def _ready(self) -> list[tuple]:
        if self._rows is None and self._error is None:
            self._pipeline.wait(self)
        if self._error is not None:
            self._pipeline.error_raised = True
            raise self._error
        return self._rows  # type: ignore[return-value]

    def fetchall(self) -> list[tuple]:
        rows, at = self._ready(), self._at
        self._at = len(rows)
        return rows[at:]

    def fetchone(self) -> tuple | None:
        rows = self._ready()
        if self._at >= len(rows):
            return None
        self._at += 1
        return rows[self._at - 1]

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.fetchall())


class Unawaited:
    """The end of a segment whose answers nobody waits for (a COMMIT that lets a page through):
    read before the next statement's, and its outcome told to ``Pipeline.on_unawaited``."""

    __slots__ = ("commit", "what")

    def __init__(self, commit: Rows, what: str) -> None:
        self.commit, self.what = commit, what


class Pipeline:
    """One session's statements, each sent at once and answered when read, in order."""

    def __init__(self, pgconn: Any, encoding: str = "utf-8", context: Any = None) -> None:
        self.pg, self.encoding = pgconn, encoding
        self.loader = Transformer(context)  # psycopg's loaders (of ``context``'s connection: its encoding)
        self.prepared: OrderedDict[tuple[str, tuple[int, ...]], bytes] = OrderedDict()
        # What the server will answer, in order: a statement's rows, a preparation, a sync.
        self.queue: deque[Rows | tuple[str, tuple[int, ...]] | str | Unawaited] = deque()
        self.error: Exception | None = None  # the first error since the last sync
        self.error_raised = False  # whether a read has raised it already
        self._asked = True  # whether the server was asked to send what it has for the queue
        self.broken = False  # answers were left unread by a failure: the session is not usable
        self._named = 0
        # Told (what, error or None) how each unawaited COMMIT ended, when its answer is read.
        self.on_unawaited: Any = lambda what, error: None
        self._read, self._both = select.poll(), select.poll()
        self._read.register(pgconn.socket, select.POLLIN)
        self._both.register(pgconn.socket, select.POLLIN | select.POLLOUT)

    def send(self, query: str, args: Sequence[Any] = ()) -> Rows:
        """Send a statement (prepared on its first use); its rows are read when asked for."""
        params, types, formats = self._params(args)
        key = (query, types)
        name = self.prepared.get(key)
        self._enter()
        if name is None:
            while len(self.prepared) >= MOST_PREPARED:
                _, old = self.prepared.popitem(last=False)
                self.command("DEALLOCATE " + old.decode())
            name = self.prepared[key] = f"neardup_{self._named}".encode()
            self._named += 1
            self.pg.send_prepare(name, _numbered(query).encode(self.encoding), param_types=types)
            self.queue.append(key)
        else:
            self.prepared.move_to_end(key)
        self.pg.send_query_prepared(name, params, param_formats=formats, result_format=1)
        rows = Rows(self)
        self.queue.append(rows)
        self._asked = False
        return rows

    def command(self, query: str) -> Rows:
        """Send a statement without parameters, not prepared (BEGIN, SAVEPOINT, COMMIT)."""
        self._enter()
        self.pg.send_query_params(query.encode(self.encoding), None)
        rows = Rows(self)
        self.queue.append(rows)
        self._asked = False
        return rows

    def sync(self, raising: bool = True) -> None:
        """End the segment: the server commits an implicit transaction, and every answer sent
        is read. An error of the segment no read has raised is raised here."""
        self._enter()
        self.pg.pipeline_sync()
        self.queue.append(_SYNC)
        with self._reading():
            self._flush()
            while self.queue:
                self._read_entry()
            self.pg.exit_pipeline_mode()
        error, raised = self.error, self.error_raised
        self.error, self.error_raised = None, False
        if error is not None and not raised and raising:
            raise error

    def commit_unawaited(self, what: str) -> None:
        """End the transaction without reading its answers: they are read before the next
        statement's, while the caller goes on with its own work. The COMMIT is a segment of its
        own: after a failed statement it runs all the same, and rolls back (an aborted segment
        would skip it, and leave the transaction open for the next to fail in)."""
        self._enter()
        self.pg.pipeline_sync()
        self.queue.append(_SYNC)
        commit = self.command("COMMIT")
        self.pg.pipeline_sync()
        self.queue.append(Unawaited(commit, what))
        self._asked = True  # a sync has the server send what it has
        with self._reading():
            self._flush()

    @property
    def unawaited(self) -> list[str]:
        """What the unawaited COMMITs not yet answered were for."""
        return [entry.what for entry in self.queue if isinstance(entry, Unawaited)]

    def wait(self, rows: Rows) -> None:
        """Read answers until ``rows`` has its own."""
        with self._reading():
            if not self._asked:
                self.pg.send_flush_request()
                self._asked = True
            self._flush()
            while rows._rows is None and rows._error is None:
                if not self.queue:
                    raise OperationalError("the result of a statement was already read")
                self._read_entry()

    # --- internals -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """A failure while answers are read (the connection lost, an interrupt) leaves them out of
        step with the queue: the session is ``broken``, and its owner opens another."""
        try:
            yield
        except BaseException:
            self.broken = True
            raise

    def _enter(self) -> None:
        if self.pg.pipeline_status == pq.PipelineStatus.OFF:
            self.pg.enter_pipeline_mode()

    def _params(self, args: Sequence[Any]) -> tuple[list[bytes | None], tuple[int, ...], list[int]]:
        params, types, formats = [], [], []
        for value in args:
            if isinstance(value, (bytes, bytearray, memoryview)):
                params.append(bytes(value))
                types.append(BYTEA)
                formats.append(1)
                continue
            text = None if value is None else self._text(value).encode(self.encoding)
            if text is not None and b"\x00" in text:  # libpq would cut it there
                raise DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
            params.append(text)
            types.append(0)
            formats.append(0)
        return params, tuple(types), formats

    def _text(self, value: Any) -> str:
        if isinstance(value, bool):
            return "t" if value else "f"
        if isinstance(value, (int, str)):
            return str(value)
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, (list, tuple)):
            return "{" + ",".join(_element(self._text(v) if v is not None else None, v) for v in value) + "}"
        raise TypeError(f"a parameter of type {type(value).__name__} is not sent to PostgreSQL")

    def _flush(self) -> None:
        """Send what libpq holds, reading answers meanwhile (a server blocked on sending them
        would not read what is sent)."""
        while self.pg.flush():
            if any(event & select.POLLIN for _, event in self._both.poll()):
                self.pg.consume_input()

    def _result(self) -> Any:
        while self.pg.is_busy():
            self._read.poll()
            self.pg.consume_input()
        return self.pg.get_result()

    def _read_entry(self) -> None:
        entry = self.queue[0]  # taken once answered: a connection lost meanwhile leaves it queued
        if entry is _SYNC or isinstance(entry, Unawaited):
            result = self._result()
            self.queue.popleft()
            if result is None or result.status != pq.ExecStatus.PIPELINE_SYNC:
                raise OperationalError("the server's answers are out of order")
            if isinstance(entry, Unawaited):  # its error is its own, not the next segment's
                error = self.error
                if error is None and entry.commit.status != "COMMIT":
                    error = OperationalError("the transaction failed and was not committed")
                self.error, self.error_raised = None, False
                self.on_unawaited(entry.what, error)
            return
        results = []
        while (result := self._result()) is not None:
            results.append(result)
        self.queue.popleft()
        error = self._error_of(results)
        if not isinstance(entry, Rows):  # a preparation: one that failed or was skipped is none
            if error is not None:
                self.prepared.pop(entry, None)
        elif error is not None:
            entry._error = error
        else:
            try:
                entry._rows, entry.names = self._rows_of(results[-1])
            except (TypeError, ValueError, DataError) as exc:  # a type not read here: the read raises
                entry._error = exc
            entry.status = (results[-1].command_status or b"").decode(self.encoding, "replace")

    def _error_of(self, results: list[Any]) -> Exception | None:
        if not results:
            return OperationalError("the server sent no answer to a statement")
        result = results[-1]
        if result.status == pq.ExecStatus.FATAL_ERROR:
            self.error = self.error or _error(result, self.encoding)
            return self.error
        if result.status == pq.ExecStatus.PIPELINE_ABORTED:
            return self.error or OperationalError("the pipeline was aborted")
        return None

    def _rows_of(self, result: Any) -> tuple[list[tuple], list[str]]:
        fields, count = result.nfields, result.ntuples
        names = [result.fname(n).decode(self.encoding) for n in range(fields)]
        kinds = [result.ftype(n) for n in range(fields)]
        for kind in kinds:
            if kind not in _READ_TYPES:
                raise TypeError(f"a result column of type oid {kind} is not read from PostgreSQL")
        if not count:
            return [], names
        self.loader.set_pgresult(result, set_loaders=True, format=pq.Format.BINARY)
        rows = self.loader.load_rows(0, count, tuple)
        if _VOID in kinds:  # a function that returns nothing (a lock's): None, not b""
            voids = [kind == _VOID for kind in kinds]
            rows = [
                tuple(None if void else value for void, value in zip(voids, row, strict=True)) for row in rows
            ]
        return rows, names


def _numbered(query: str) -> str:
    """A query's ``%s`` placeholders as PostgreSQL's ``$1``, ``$2``... (``%%`` is a ``%``)."""
    count = itertools.count(1)
    return _PLACEHOLDER.sub(lambda found: "%" if found[0] == "%%" else f"${next(count)}", query)


def _element(text: str | None, value: Any) -> str:
    """An array element as PostgreSQL's array text has it."""
    if text is None:
        return "NULL"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _error(result: Any, encoding: str) -> Exception:
    """The psycopg error of a failed statement's result (its class by SQLSTATE)."""
    field = pq.DiagnosticField
    state = (result.error_field(field.SQLSTATE) or b"").decode("ascii", "replace")
    message = (result.error_field(field.MESSAGE_PRIMARY) or b"").decode(encoding, "replace")
    detail = result.error_field(field.MESSAGE_DETAIL)
    if detail:
        message += "\nDETAIL:  " + detail.decode(encoding, "replace")
    try:
        kind = errors.lookup(state)
    except KeyError:
        kind = errors.DatabaseError
    return kind(message)
