"""Indexes: where fingerprints are stored and candidates found, behind one door.

``open_index(spec, config)`` opens (or makes) the index a spec names, ``open_existing(spec)``
opens one for reading with the settings it was built with; each backend owns its reset, its
name in messages, its damage check and its test of a storage failure. A backend is a class
in a module of its own and one line in ``BACKENDS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

from .base import Index, Reader, Store, Verdict
from .memory import MemoryIndex
from .sqlite import SQLiteIndex

if TYPE_CHECKING:
    from ..config import DedupConfig

__all__ = [
    "BACKENDS",
    "Index",
    "IndexSpec",
    "MemoryIndex",
    "Reader",
    "SQLiteIndex",
    "Store",
    "Verdict",
    "backend",
    "open_existing",
    "open_index",
]

# Each backend's class, by the name NEARDUP_BACKEND gives it; imported when first used, so a
# backend's client library (redis) is needed only by those who use it.
BACKENDS: dict[str, str] = {
    "sqlite": "scrapy_neardup.index.sqlite:SQLiteIndex",
    "redis": "scrapy_neardup.index.redis:RedisIndex",
    "memory": "scrapy_neardup.index.memory:MemoryIndex",
}
# Locations whose form names their backend; any other location is an SQLite file.
_SCHEMES = {"redis://": "redis", "rediss://": "redis", "unix://": "redis", "memory:": "memory"}


@dataclass(frozen=True)
class IndexSpec:
    """Which index: its backend's name, where it is (a file, a server's URL), and for a server the
    prefix its keys are kept under."""

    backend: str
    where: str = ""
    key: str | None = None
    lock_timeout: float = 60.0  # seconds a file's writer waits for another process's lock

    @classmethod
    def parse(cls, where: Any, key: str | None = None, lock_timeout: float = 60.0) -> IndexSpec:
        """The spec a location names by its form: a Redis URL, ``memory:``, else an SQLite file."""
        text = str(where)
        name = next((name for scheme, name in _SCHEMES.items() if text.startswith(scheme)), "sqlite")
        return cls(name, text, key, lock_timeout)


def backend(name: str) -> Any:
    """The class of the backend called ``name`` (``BACKENDS``)."""
    module, _, attribute = BACKENDS[name].partition(":")
    return getattr(import_module(module), attribute)


def open_index(spec: IndexSpec, config: DedupConfig, *, reset: bool = False) -> Index:
    """The index ``spec`` names, made when missing; with ``reset``, deleted first (only an index:
    anything else found there is refused, naming it)."""
    kind = backend(spec.backend)
    if reset:
        kind.reset(spec)
    return kind.from_spec(spec, config)


def open_existing(spec: IndexSpec) -> Index:
    """The index ``spec`` names, for reading, with the settings it was built with."""
    return backend(spec.backend).existing(spec)
