"""Indexes: where fingerprints are stored and candidates are found. SQLite by default."""

from .base import Index, Verdict
from .memory import MemoryIndex
from .sqlite import SQLiteIndex

__all__ = ["Index", "MemoryIndex", "SQLiteIndex", "Verdict"]
