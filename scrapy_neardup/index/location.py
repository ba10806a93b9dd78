"""Where an index is, from the one string a user gives (``NEARDUP_INDEX``, ``--index``).

``path.sqlite`` (any path, or ``sqlite:path``) is an SQLite file,
``redis://host:6379/0?prefix=<key prefix>`` (``rediss://``, ``unix://``) a Redis index kept
under that prefix, ``postgresql://user@host/db?prefix=<schema>`` a PostgreSQL index in that
schema, ``memory:`` an index that lives and dies with its process, and
``<name>:<where>`` the backend registered as ``name`` in ``BACKENDS``. Nothing outside
``index/`` looks at the form of a location.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import import_module
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..exceptions import IndexFileError

# Each backend's class, by the name ``IndexSpec`` gives it; imported when first used, so a
# backend's client library (redis) is needed only by those who use it.
BACKENDS: dict[str, str] = {
    "sqlite": "scrapy_neardup.index.engines.sqlite:SQLiteIndex",
    "redis": "scrapy_neardup.index.engines.redis:RedisIndex",
    "memory": "scrapy_neardup.index.engines.memory:MemoryIndex",
    "postgres": "scrapy_neardup.index.engines.postgres:PostgresIndex",
}


def backend(name: str) -> Any:
    """The class of the backend called ``name`` (``BACKENDS``)."""
    module, _, attribute = BACKENDS[name].partition(":")
    return getattr(import_module(module), attribute)


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")  # a URL's scheme (RFC 3986); a path has none
# The schemes of a server's URL, and the backend each names.
SERVER_SCHEMES = {
    "redis": "redis", "rediss": "redis", "unix": "redis", "postgresql": "postgres", "postgres": "postgres",
}  # fmt: skip


def safe_url(url: str) -> str:
    """A server's URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@", 1)
    return url


def fit_key_prefix(prefix: str) -> bool:
    """Whether a key prefix suits an index kept under one (Redis): not empty, no surrounding
    spaces, no glob characters (a reset matches the index's keys by it)."""
    return bool(prefix) and prefix.strip() == prefix and not any(c in prefix for c in "*?[]\\")


@dataclass(frozen=True)
class IndexSpec:
    """Which index: its backend's name, where it is (a file, a server's URL without the prefix),
    and for a server the prefix its keys are kept under."""

    backend: str
    where: str = ""
    key: str | None = None
    lock_timeout: float = 60.0  # seconds a file's writer waits for another process's lock

    @classmethod
    def parse(
        cls, location: object, lock_timeout: float = 60.0, default_prefix: str | None = None
    ) -> IndexSpec:
        """The index a location names by its form; a server's index needs its key prefix, from the
        URL's ``prefix`` or ``default_prefix`` (a crawl's is ``<spider>:neardup``)."""
        text = str(location)
        found = _SCHEME.match(text)
        scheme = found.group(1).lower() if found else ""
        name, colon, rest = text.partition(":")
        if colon and name in BACKENDS and name not in SERVER_SCHEMES:  # memory:, sqlite:path, a plugin's
            return cls(name, rest.removeprefix("//"), None, lock_timeout)
        if scheme and scheme not in SERVER_SCHEMES:  # a misspelt server: never a file named after it
            known = ", ".join(f"{name}://" for name in SERVER_SCHEMES)
            raise IndexFileError(
                safe_url(text), f"has an unknown scheme '{scheme}://'; use one of {known}, a file or memory:"
            )
        if scheme not in SERVER_SCHEMES:
            if not text.strip():
                raise IndexFileError(repr(text), "names no index; give a file, redis://... or memory:")
            return cls("sqlite", text, None, lock_timeout)
        parts = urlsplit(text)
        query = parse_qsl(parts.query, keep_blank_values=True)
        prefixes = [value for name, value in query if name == "prefix"]
        prefix = prefixes[-1] if prefixes else default_prefix
        others = urlencode([(n, v) for n, v in query if n != "prefix"], safe=":/")
        url = text.partition("?")[0] + (f"?{others}" if others else "")
        if prefix is None:
            raise IndexFileError(
                safe_url(text), "names no key prefix; add ?prefix=<spider>:neardup (a crawl's prefix)"
            )
        if not fit_key_prefix(prefix):
            raise IndexFileError(
                safe_url(text), f"{prefix!r} cannot prefix an index's keys (empty, spaces or *?[]\\)"
            )
        return cls(SERVER_SCHEMES[scheme], url, prefix, lock_timeout)

    @property
    def is_file(self) -> bool:
        """Whether the index is a file on this machine (a report must not be written over it)."""
        return self.backend == "sqlite"

    def __str__(self) -> str:
        """The location as messages name it (a server's password hidden)."""
        if self.key is None:
            return self.where
        return f"{safe_url(self.where)} {self.key}"


def with_prefix(location: str, prefix: str) -> str:
    """A server's URL with its key prefix stated (``prefix`` where it names none); any other
    location as it is."""
    if location.partition("://")[0].lower() not in SERVER_SCHEMES:
        return location
    parts = urlsplit(location)
    if any(name == "prefix" for name, _ in parse_qsl(parts.query, keep_blank_values=True)):
        return location
    return f"{location}{'&' if parts.query else '?'}{urlencode({'prefix': prefix}, safe=':')}"
