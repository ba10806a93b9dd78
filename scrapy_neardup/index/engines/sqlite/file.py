"""IndexFile: one SQLite index file opened for use, its checks at opening, and its transactions.

A check runs in one ``BEGIN IMMEDIATE`` transaction, so processes sharing the file serialize
on it and two copies can never both be admitted; a scan groups many checks into one
transaction (``batch``), each page in a savepoint of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

from ....config import DedupConfig
from ....exceptions import IndexFileError
from ... import schema
from .checkpoint import Checkpointer
from .opening import check_intact, connect_read_only, read_schema, unusable

logger = logging.getLogger(__name__)

# WAL pages before a commit copies them back into the file itself: the ``Checkpointer`` thread
# copies the WAL beside the checks, so this is only a backstop for checks that come back to back.
WAL_AUTOCHECKPOINT = 131072

# Prepared statements a connection keeps: a check's queries bind as many values as the page has
# spot ranges, candidates or lookup keys, so their texts vary more than Python's 128 hold.
STATEMENT_CACHE = 1024

# Seconds SQLite waits for another process's lock before the wait is logged (and retried up
# to the index's timeout).
LOCK_NOTICE = 5.0


def is_busy(exc: BaseException) -> bool:
    """Whether SQLite refused for a lock another connection holds."""
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


class IndexFile:
    """The connection to an index file, checked against ``config`` when opened."""

    def __init__(
        self,
        path: str | Path,
        config: DedupConfig,
        timeout: float,
        simhash_keys: bool,
        on_rollback: Callable,
        read_only: bool = False,
    ) -> None:
        """Open (or create) ``path``; ``simhash_keys``: whether a new file stores SimHash keys;
        ``on_rollback`` forgets what rolled-back work made (cached ids, a freeze); ``read_only``:
        open an existing index for reading, which needs no write anywhere (``connect_read_only``)."""
        self.path = Path(path)
        self.config = config
        self._on_rollback = on_rollback
        self._in_batch = False
        self._checkpointer: Checkpointer | None = None
        self._timeout = timeout
        self._read_only = read_only
        try:
            if read_only:
                self.db = connect_read_only(self.path, timeout)
            else:
                if self.path.parent and not self.path.parent.exists():
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                self.db = sqlite3.connect(  # used by one thread at a time: a crawl's lane, or its own
                    str(self.path), timeout=timeout, isolation_level=None, cached_statements=STATEMENT_CACHE,
                    check_same_thread=False,
                )  # fmt: skip
            self.db.execute(f"PRAGMA busy_timeout = {int(min(timeout, LOCK_NOTICE) * 1000)}")
            self._open_retrying(timeout, simhash_keys)
            if not read_only:
                self._check_writable()
        except sqlite3.DatabaseError as exc:
            raise unusable(self.path, exc) from None
        except OSError as exc:
            raise IndexFileError(self.path, f"cannot be created ({exc.strerror or exc})") from None

    def _open_retrying(self, timeout: float, simhash_keys: bool) -> None:
        """``_open``, retried while another process holds the lock (two crawls creating one file).

        Switching a new file to WAL takes an exclusive lock that SQLite does not wait for.
        """
        deadline = time.monotonic() + timeout
        for attempt in itertools.count(1):
            try:
                return self._open(simhash_keys)
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or time.monotonic() > deadline:
                    raise
                time.sleep(min(0.5, 0.02 * attempt))

    def _open(self, simhash_keys: bool) -> None:
        version, tables = read_schema(self.db)
        if version == 0 and not tables and not self._read_only:
            self.db.execute(f"PRAGMA page_size = {schema.PAGE_SIZE}")
            self.db.execute("PRAGMA journal_mode = WAL")
            with self.transaction():
                if not self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                    schema.create(self.db, self.config, simhash_keys)  # unless another process just did
        else:
            schema.check_version(self.path, version, tables)
        if not self._read_only:
            self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
        if not self._read_only:  # a reader's file was checked by ``stored_config``, as here
            check_intact(self.db, self.path)  # never write into a damaged file
        try:
            meta = dict(self.db.execute("SELECT key, value FROM meta"))
            self.spot_keys, self.stores_simhash = schema.spot_keys(meta, self.config, self.path)
        except (KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:  # forged or damaged
            raise IndexFileError(self.path, f"has damaged settings in its meta table ({exc!r})") from None

    def _check_writable(self) -> None:
        """Meet a file that cannot be written, or another process's lock held past the timeout,
        here: a header field rewritten with its own value and rolled back, as a check would
        write it. SQLite opens a file it may not write without a word, and takes the lock of
        BEGIN IMMEDIATE on it."""
        self._begin()
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            self.db.execute(f"PRAGMA user_version = {int(version)}")
        finally:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")

    @contextlib.contextmanager
    def impatient(self) -> Iterator[None]:
        """Statements that wait for no other process's lock: SQLite's "database is locked" at once."""
        self.db.execute("PRAGMA busy_timeout = 0")
        timeout, self._timeout = self._timeout, 0.0
        try:
            yield
        finally:
            self._timeout = timeout
            self.db.execute(f"PRAGMA busy_timeout = {int(min(timeout, LOCK_NOTICE) * 1000)}")

    # --- transactions ---------------------------------------------------------------------

    def _begin(self) -> None:
        """BEGIN IMMEDIATE, waiting for another process's lock up to the timeout, and saying so."""
        started = time.monotonic()
        while True:
            try:
                self.db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                waited = time.monotonic() - started
                if not is_busy(exc) or waited >= self._timeout:
                    raise
                logger.warning(
                    "%s is locked by another process; waited %.0f s of %.0f for it", self.path, waited,
                    self._timeout,
                )  # fmt: skip

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """A BEGIN IMMEDIATE transaction, or a savepoint of the open batch (so a page that fails
        leaves the batch's other pages in place)."""
        if self._in_batch:
            self.db.execute("SAVEPOINT page")
            try:
                yield
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK TO page")
                    self.db.execute("RELEASE page")
                self._on_rollback()
                raise
            self.db.execute("RELEASE page")
            return
        self._begin()
        try:
            yield
        except BaseException:
            self._rollback()
            raise
        self._commit()

    def _rollback(self) -> None:
        if self.db.in_transaction:  # SQLite may have rolled back already (a full disk)
            self.db.execute("ROLLBACK")
        self._on_rollback()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group many pages into one transaction (the offline scan): all of them or none."""
        if self._in_batch:
            yield
            return
        self._begin()
        self._in_batch = True
        try:
            yield
        except BaseException:
            self._in_batch = False
            self._rollback()
            raise
        self._in_batch = False
        self._commit()

    def _commit(self) -> None:
        self.db.execute("COMMIT")
        if self._checkpointer is None:  # started by the first write: readers never need one
            wal = self.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            self._checkpointer = Checkpointer(self.path if wal else None)
            self._unclosed = weakref.finalize(self, self._checkpointer.stop, wait=False)  # never closed

    def close(self) -> None:
        if self._checkpointer is not None:
            self._unclosed.detach()
            self._checkpointer.stop()  # first: the last connection to close checkpoints the rest
            self._checkpointer = None
        with contextlib.suppress(sqlite3.Error):
            self.db.close()
