"""The PostgreSQL engine: one index on disk for crawlers on many machines (extra ``postgres``)."""

from .index import PostgresIndex

__all__ = ["PostgresIndex"]
