"""A third index backend, this module and one line in ``index.BACKENDS`` (the test adds it):
the in-memory index's records, kept in a pickle file between crawls.

It shows what a backend owns: how a spec opens it (``from_spec``, ``existing``), its reset
(only a file of its own is deleted), its name in messages, and its test of a storage failure.
"""

from __future__ import annotations

import pickle
from pathlib import Path

from scrapy_neardup.exceptions import IndexFileError
from scrapy_neardup.index.memory import MemoryIndex

MAGIC = "toy-neardup-index"


class ToyIndex(MemoryIndex):
    def __init__(self, path: str | Path, config, read_only: bool = False) -> None:
        super().__init__(config)
        self.path, self.name, self.read_only = Path(path), Path(path).name, read_only
        if self.path.exists():
            self._state = _load(self.path)["state"]

    @classmethod
    def from_spec(cls, spec, config) -> ToyIndex:
        return cls(spec.where, config)

    @classmethod
    def existing(cls, spec) -> ToyIndex:
        return cls(spec.where, _load(Path(spec.where))["config"], read_only=True)

    @classmethod
    def reset(cls, spec) -> None:
        path = Path(spec.where)
        if path.exists():
            _load(path)  # refuses a file that is not one of its own
            path.unlink()

    def is_storage_error(self, exc: Exception) -> bool:
        return isinstance(exc, OSError)

    def failure_advice(self, exc: Exception) -> str:
        return f"the toy index {self.path} failed"

    def close(self) -> None:
        if not self.read_only:
            self.path.write_bytes(pickle.dumps({"magic": MAGIC, "config": self.config, "state": self._state}))


def _load(path: Path) -> dict:
    try:
        held = pickle.loads(path.read_bytes())
    except Exception:
        held = None
    if not isinstance(held, dict) or held.get("magic") != MAGIC:
        raise IndexFileError(path, "is not a toy index; name another NEARDUP_INDEX")
    return held
