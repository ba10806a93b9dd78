"""How a method's signature is stored: a column (or field) of its own, its SQL type, and the
codec between the Fingerprint value and the stored one. Every index reads these from the
method registry, so a method's stored form is declared once, beside the method."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

_MAX = 1 << 64


@dataclass(frozen=True)
class Stored:
    """One Fingerprint field as indexes keep it; ``decode`` raises ``ValueError`` or ``TypeError``
    for a stored value of another type than ``encode`` writes (a damaged record)."""

    field: str
    sql: str  # "BLOB" or "INTEGER": what SQLite declares, and whether Redis replies need a number
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


def _signed(value: int) -> int:
    return value - _MAX if value >= 1 << 63 else value


def _unsigned(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not -(1 << 63) <= value < _MAX:
        raise ValueError(f"a stored 64-bit value out of range or of another type: {value!r}")
    return value + _MAX if value < 0 else value


def uint64(name: str) -> Stored:
    """An unsigned 64-bit int, stored as SQLite's signed INTEGER."""
    return Stored(name, "INTEGER", lambda v: None if v is None else _signed(v), _unsigned)


def uint_array(name: str, dtype: str, as_tuple: bool = False) -> Stored:
    """An array (or tuple) of unsigned ints as little-endian bytes (``<u4`` or ``<u8``); None when empty."""
    wide = np.uint64 if dtype == "<u8" else np.uint32

    def encode(values: Any) -> bytes | None:
        if values is None or len(values) == 0:
            return None
        return np.asarray(values, dtype=wide).astype(dtype).tobytes()

    def decode(blob: Any) -> Any:
        if blob is None or blob == b"":
            return () if as_tuple else None
        if not isinstance(blob, bytes):
            raise TypeError(f"a stored array of another type: {type(blob).__name__}")
        values = np.frombuffer(blob, dtype=dtype)
        return tuple(int(x) for x in values) if as_tuple else values.astype(wide)

    return Stored(name, "BLOB", encode, decode)
