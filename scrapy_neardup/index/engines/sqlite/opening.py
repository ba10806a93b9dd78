"""What an index file is before it is used: read-only connections, one error for an unusable file
whatever the command, and whether a file is an index at all (NEARDUP_RESET deletes nothing else)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ....config import DedupConfig
from ....exceptions import IndexFileError
from ... import schema
from ...stores import DOC, META

SQLITE_HEADER = b"SQLite format 3\x00"
# Files up to this size are checked (PRAGMA quick_check) when opened; larger ones would make
# every start slow, and a damage is still met as an error.
QUICK_CHECK_BYTES = 256 << 20
WAL_HEADER_BYTES = 32  # a -wal file this short holds no page
ANOTHER_FILE = " (NEARDUP_INDEX, or --index)"


def damage_advice(exc: BaseException) -> str:
    """What to do about a damaged file, for the one-line errors that name it."""
    if any(sign in str(exc) for sign in ("malformed", "not a database", "Could not decode to UTF-8")):
        return "; restore it from a copy, recover what is readable (sqlite3 FILE .recover), or use a new file"
    return ""


def file_bytes(path: Path) -> int:
    """Bytes on disk of an index file with its WAL and shared-memory files beside it."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def check_intact(con: sqlite3.Connection, path: Path) -> None:
    """Raise what SQLite finds damaged in the file, before anything reads or writes it."""
    if file_bytes(path) <= QUICK_CHECK_BYTES:
        problem = con.execute("PRAGMA quick_check(1)").fetchone()[0]
        if problem != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed: {problem}")


def is_sqlite_file(path: Path) -> bool:
    try:
        with Path(path).open("rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def unusable(path: Path, exc: sqlite3.Error) -> IndexFileError:
    """The error every command gives for a file SQLite cannot use: a file that is no SQLite
    database is no index; one locked or read-only says what to do; one that is gets the advice
    for a damaged file."""
    if Path(path).is_file() and Path(path).stat().st_size and not is_sqlite_file(path):
        return IndexFileError(path, f"is not a scrapy-neardup index ({exc})")
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
        return IndexFileError(
            path, f"another process holds a lock on it ({exc}); stop that process, wait longer "
            f"(NEARDUP_LOCK_TIMEOUT, --lock-timeout) or use another index file{ANOTHER_FILE}",
        )  # fmt: skip
    if "readonly" in str(exc):
        return IndexFileError(
            path, f"cannot be written ({exc}); make the file and its folder writable, or use another "
            f"index file{ANOTHER_FILE}; a report can still read it",
        )  # fmt: skip
    return IndexFileError(path, f"cannot be used as an index ({exc}){damage_advice(exc)}")


def no_index_file(path: Path) -> IndexFileError:
    """The error for a path to read an index from that holds no file: it says what is there."""
    path = Path(path)
    if path.is_dir():
        return IndexFileError(path, "is a folder, not an index file; name the file in it")
    if path.exists():
        return IndexFileError(path, "is not a regular file (a device, a pipe, a socket); name an index file")
    return IndexFileError(path, "no such index file")


def _uri(path: Path, options: str) -> str:
    return f"{Path(path).absolute().as_uri()}?{options}"  # as_uri escapes ?, # and % in the name


def connect_read_only(path: Path, timeout: float = 60.0) -> sqlite3.Connection:
    """A connection that never writes, also on a read-only file system.

    A reader of a WAL file needs its ``-shm`` file, which SQLite cannot make on a read-only
    file system: there, a file without a ``-wal`` (a closed index has none) is opened as
    immutable. A ``-wal`` holding pages is never ignored: the error names the file.
    """
    try:
        con = sqlite3.connect(_uri(path, "mode=ro"), uri=True, timeout=timeout, isolation_level=None)
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # opens the -wal and -shm files
        return con
    except sqlite3.OperationalError as exc:
        if "unable to open" not in str(exc) or not Path(path).is_file():
            raise
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > WAL_HEADER_BYTES:
        raise IndexFileError(
            path,
            f"cannot be read here: its {wal.name} file holds changes that need a {Path(path).name}-shm file, "
            "which cannot be made in its folder (a read-only file system?); copy the three files to a "
            "writable folder",
        )
    return sqlite3.connect(_uri(path, "mode=ro&immutable=1"), uri=True, timeout=timeout, isolation_level=None)


def read_schema(con: sqlite3.Connection) -> tuple[int, set[str]]:
    """The file's schema version and its tables, in one snapshot."""
    con.execute("BEGIN")  # another process may be creating the schema right now
    try:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        con.execute("COMMIT")
    return version, tables


def stored_config(path: Path) -> DedupConfig:
    """The configuration an index file was built with (for reports and stats), read-only."""
    try:
        con = connect_read_only(path)
    except sqlite3.Error as exc:
        raise unusable(path, exc) from None
    try:
        schema.check_version(path, *read_schema(con))
        check_intact(con, path)
        meta = dict(con.execute("SELECT key, value FROM meta"))
    except sqlite3.Error as exc:
        raise unusable(path, exc) from None
    finally:
        con.close()
    if "config" not in meta:
        raise IndexFileError(path, "is not a scrapy-neardup index")
    return schema.config_from_meta(meta, path)


def holds_index(path: Path) -> bool:
    """Whether ``path`` is a scrapy-neardup index (of any schema version, damaged or not); False
    when there is nothing to delete (no file, an empty one); an error for any other file."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return False
    refused = "NEARDUP_RESET deletes an index only; name another NEARDUP_INDEX, or delete the file yourself"
    if not path.is_file():
        raise IndexFileError(path, f"is not a file ({refused})")
    if path.stat().st_size == 0:
        return False  # SQLite makes an index of an empty file
    if not is_sqlite_file(path):
        raise IndexFileError(path, f"is not a scrapy-neardup index ({refused})")
    try:
        con = connect_read_only(path)
        try:
            version, tables = read_schema(con)
            if not tables and version == 0:
                return False  # an empty database: SQLite makes an index of it
            ours = _application(con, tables)
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise IndexFileError(path, f"cannot be read to tell if it is an index ({exc}); {refused}") from None
    if not ours:
        raise IndexFileError(path, f"is not a scrapy-neardup index ({refused})")
    return True


def _application(con: sqlite3.Connection, tables: set[str]) -> bool:
    """Whether the file's meta names scrapy-neardup (for a damaged meta: whether its tables are ours)."""
    if not {META.table[0], DOC.table} <= tables:
        return False
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'application'").fetchone()
    except sqlite3.DatabaseError:
        return "spot_lists" in tables
    return row == (schema.APPLICATION,)
