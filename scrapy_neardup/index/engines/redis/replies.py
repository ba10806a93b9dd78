"""Values as a Redis index returns them, read the way it writes them: a value that is not (a key
written by another program, by hand, or damaged) reads as missing, never as an error."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

# What the index writes as an integer: a damaged value (a key written by another program) reads as None.
_INTEGER = re.compile(rb"-?[0-9]{1,20}")


def reply_int(value: bytes | None) -> int | None:
    """An integer field as Redis returns it (None when missing, empty or not an integer)."""
    return int(value) if isinstance(value, bytes) and _INTEGER.fullmatch(value) else None


def reply_float(value: bytes | None) -> float | None:
    """A number field as Redis returns it (None when missing, empty or not a finite number)."""
    try:
        number = float(value) if isinstance(value, bytes) and len(value) < 40 else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def reply_text(value: bytes | None) -> str | None:
    if value in (None, b""):
        return None
    try:
        return value.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # not written by the index
        return value.decode("utf-8", "replace")


def reply_ids(members: Iterable[bytes]) -> list[int]:
    """The document ids of a set or listing, leaving out a member that is none."""
    return [i for i in map(reply_int, members) if i is not None and i >= 0]


def reply_count(value: bytes | None) -> int | None:
    """A counter or id as the index writes it: an integer from 0 and far from overflowing."""
    number = reply_int(value)
    return number if number is not None and 0 <= number < 1 << 60 else None
