"""SQLiteIndex: the default, persistent index, one file a user can open in any SQLite tool.

The ledger over the SQLite engine (``engine``), which searches with the file's own tables
(``search``); the file and its transactions are ``file``, its tables ``schema``. Only admitted
(non-duplicate) pages are findable: the index stands for what was stored.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ....config import DedupConfig
from ....exceptions import IndexFailure, IndexFileError
from ...lanes import WouldWait
from ...ledger import Ledger
from .engine import SQLiteEngine
from .file import IndexFile, is_busy
from .opening import damage_advice, file_bytes, holds_index, no_index_file, stored_config, unusable
from .spots import SpotLists

if TYPE_CHECKING:
    from ...location import IndexSpec

__all__ = ["SQLiteIndex", "damage_advice", "file_bytes"]


class SQLiteIndex(Ledger):
    """Persistent candidate search over admitted pages, with every verdict recorded."""

    def __init__(
        self, path: str | Path, config: DedupConfig, timeout: float = 60.0, read_only: bool = False
    ) -> None:
        engine = SQLiteEngine(path, config, timeout, read_only)
        if engine.search.probe_simhash and not engine.file.stores_simhash and "simhash" in config.methods:
            tau = config.spotsigs_threshold
            engine.close()
            raise IndexFileError(
                engine.path,
                f"has no SimHash lookup tables (it was built with NEARDUP_SIMHASH_CONFIRM at least "
                f"the SpotSigs threshold {tau}), which NEARDUP_SIMHASH_CONFIRM = "
                f"{config.simhash_confirm!r} needs; use a confirm of at least {tau} or a new index file",
            )
        super().__init__(engine, config)
        self.engine: SQLiteEngine = engine

    @contextlib.contextmanager
    def at_once(self) -> Iterator[None]:
        """Work that waits for no other process (``lanes.Lanes``): ``WouldWait`` instead where the
        file is locked, before anything is written (the lock is the write transaction's first
        step; a reader of a WAL file waits for nothing)."""
        try:
            with self.file.impatient():
                yield
        except (sqlite3.OperationalError, IndexFailure) as exc:
            if is_busy(exc.cause if isinstance(exc, IndexFailure) else exc):
                raise WouldWait(str(self.path)) from None
            raise

    @property
    def db(self) -> sqlite3.Connection:
        """The file's connection (for maintenance and tests; the ledger writes through the engine)."""
        return self.engine.db

    @property
    def file(self) -> IndexFile:
        return self.engine.file

    @property
    def spots(self) -> SpotLists:
        return self.engine.search.spots

    @classmethod
    def open_existing(cls, path: str | Path) -> SQLiteIndex:
        """Open an index for reading, with the settings it was built with (reports, stats)."""
        return cls(path, stored_config(Path(path)), read_only=True)

    @classmethod
    def from_spec(cls, spec: IndexSpec, config: DedupConfig) -> SQLiteIndex:
        return cls(spec.where, config, spec.lock_timeout)

    @classmethod
    def existing(cls, spec: IndexSpec) -> SQLiteIndex:
        path = Path(spec.where)
        if not path.is_file():
            raise no_index_file(path)
        return cls.open_existing(path)

    @classmethod
    def reset(cls, spec: IndexSpec) -> None:
        """Delete an index file with its WAL and shared-memory files (NEARDUP_RESET); any other file
        there is refused (``IndexFileError``), as the Redis reset refuses keys not its own."""
        path = Path(spec.where)
        if not holds_index(path):
            return  # no file, or an empty one, which becomes the index
        for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + "-journal"):
            (path.parent / name).unlink(missing_ok=True)

    @classmethod
    def failure_line(cls, spec: IndexSpec, exc: Exception) -> str | None:
        """A damaged, locked or vanished file met while a command used it."""
        return str(unusable(Path(spec.where), exc)) if isinstance(exc, sqlite3.DatabaseError) else None

    def is_storage_error(self, exc: Exception) -> bool:
        return isinstance(exc, (sqlite3.Error, OSError))

    def failure_advice(self, exc: Exception) -> str:
        """What to do when the file fails under a crawl."""
        return f"the index {self.path} failed; free disk space or end what holds its lock{damage_advice(exc)}"
