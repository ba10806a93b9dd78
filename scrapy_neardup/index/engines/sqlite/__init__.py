"""The SQLite engine: one file a user can open in any SQLite tool (the default index)."""

from .index import SQLiteIndex, damage_advice, file_bytes

__all__ = ["SQLiteIndex", "damage_advice", "file_bytes"]
