"""The Redis engine: one index in Redis for crawlers on many machines (extra ``redis``)."""

from .index import RedisIndex

__all__ = ["RedisIndex"]
