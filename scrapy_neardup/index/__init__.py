"""Indexes: where fingerprints are stored and candidates are found. SQLite by default."""

from .base import Index, Verdict
from .sqlite import SQLiteIndex

__all__ = ["Index", "SQLiteIndex", "Verdict"]
