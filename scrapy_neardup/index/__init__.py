"""Indexes: where fingerprints are stored and candidates found, behind one door.

``open_index(spec, config)`` opens (or makes) the index a spec names (``IndexSpec.parse`` reads
one from its location: a file, ``redis://...``, ``memory:``), ``open_existing(spec)`` opens one
for reading with the settings it was built with; each backend owns its reset, its
name in messages, its damage check and its test of a storage failure. A backend is a class
in a module of its own and one line in ``BACKENDS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exceptions import IndexFileError, NearDupError
from .engines.memory import MemoryIndex
from .engines.sqlite import SQLiteIndex
from .ledger import Ledger
from .location import BACKENDS, IndexSpec, backend
from .runs import DEAD_AFTER

if TYPE_CHECKING:
    from ..config import DedupConfig

# An index: the ledger over one backend's engine (``ledger.Ledger``, subclassed by each backend).
Index = Ledger

__all__ = [
    "BACKENDS",
    "Index",
    "IndexSpec",
    "MemoryIndex",
    "SQLiteIndex",
    "backend",
    "open_existing",
    "open_index",
    "storage_failure",
]


def open_index(spec: IndexSpec, config: DedupConfig, *, reset: bool = False) -> Index:
    """The index ``spec`` names, made when missing; with ``reset``, deleted first (only an index:
    anything else found there is refused, naming it)."""
    kind = backend(spec.backend)
    if reset:
        _refuse_reset_in_use(spec)
        kind.reset(spec)
    return kind.from_spec(spec, config)


def _refuse_reset_in_use(spec: IndexSpec) -> None:
    """A reset deletes the index: never under a crawl using it now, which would store again what
    the index held (its runs' heartbeats tell)."""
    try:
        with open_existing(spec) as index:
            live = index.live_runs()
    except Exception:  # no index there, or a damaged one: the reset itself says or does the rest
        return
    if live:
        run, found = live[0]
        raise IndexFileError(
            str(spec),
            f"is in use by crawl run {run} (host {found.get('host')}, pid {found.get('pid')}): NEARDUP_RESET "
            "would delete it under that crawl; reset it once that crawl has ended (one that died "
            f"counts as ended {DEAD_AFTER:.0f} s after its last heartbeat)",
        )


def open_existing(spec: IndexSpec) -> Index:
    """The index ``spec`` names, for reading, with the settings it was built with."""
    return backend(spec.backend).existing(spec)


def storage_failure(location: str | None, exc: Exception) -> str | None:
    """One line for ``exc`` when it is a failure of the index at ``location`` met after it opened
    (a damaged or locked file), naming what to do; None when it is not one."""
    if location is None:
        return None
    try:
        spec = IndexSpec.parse(location)
    except NearDupError:
        return None
    return backend(spec.backend).failure_line(spec, exc)
