"""How a fingerprint is stored: SQLite's signed 64-bit integers, little-endian blobs, and
multisets of spots cut to 32 bits.

Spots are kept as the top 32 bits of their 64-bit hash (the sorted order is the same), so a
document's multiset costs at most 4 bytes a spot (``spots_blob``); a 32-bit collision between
two different spots of a pair can only move its Jaccard by one spot's weight, at odds of
about 1 in 10^5 for two long pages. Every backend compares pages in this form, so they
give the same verdicts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator

import numpy as np

from ..methods import STORED_FIELDS, Fingerprint
from ..signatures.spotsigs import SpotSet
from . import elias_fano

logger = logging.getLogger("scrapy_neardup")
_DAMAGE_SAID: set[str] = set()  # the indexes whose damaged records were said


def signed(value: int) -> int:
    """An unsigned 64-bit value as SQLite's signed INTEGER."""
    return value - (1 << 64) if value >= 1 << 63 else value


def unsigned(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


def spots_blob(spots: SpotSet) -> bytes:
    """A stored multiset of 32-bit spots, in whichever of three forms is smallest.

    First byte 4: the sorted spots, each repeated as often as it occurs, Elias-Fano coded
    (``elias_fano``: about 3.4 bytes an occurrence on a page of some 90 spots, the usual form).
    First byte 3: the same list, 4 bytes an occurrence (smaller for a page of a few spots).
    First byte 1 or 2: the distinct spots, then their counts in 1 or 2 bytes each (2 when a
    count exceeds 255), for pages with many repeats.
    """
    distinct, occurrences = len(spots), int(spots.counts.sum())
    listed = np.repeat(spots.hashes.astype("<u4"), spots.counts)
    coded = 1 + elias_fano.size(listed)
    if coded < 1 + 4 * occurrences and coded <= 1 + 5 * distinct:
        return b"\x04" + elias_fano.encode(listed)
    if 4 * occurrences <= 1 + 5 * distinct:
        return b"\x03" + listed.tobytes()
    wide = int(spots.counts.max()) > 255
    counts = np.minimum(spots.counts, 65535).astype("<u2" if wide else "u1")
    return (b"\x02" if wide else b"\x01") + spots.hashes.astype("<u4").tobytes() + counts.tobytes()


def sound_spots_blob(blob: object) -> bool:
    """Whether ``blob`` is of a form ``spots_blob`` writes (or empty)."""
    if blob is None or blob == b"":
        return True
    if not isinstance(blob, bytes):
        return False
    width = blob[0]
    if width == 4:
        return elias_fano.sound(blob, 1)
    return (len(blob) - 1) % 4 == 0 if width == 3 else width in (1, 2) and (len(blob) - 1) % (4 + width) == 0


def blob_spots(blob: bytes | None) -> SpotSet:
    """The multiset ``spots_blob`` stored; ``ValueError`` for a blob of no such form."""
    if not blob:
        return SpotSet(np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint32))
    if blob[0] == 4 or (blob[0] == 3 and (len(blob) - 1) % 4 == 0):
        hashes, counts, _ = listed_spots([blob])
        return SpotSet(hashes, counts.astype(np.uint32))
    width = blob[0]
    n = (len(blob) - 1) // (4 + width) if width in (1, 2) else -1
    if n < 0 or 1 + n * (4 + width) != len(blob):
        raise ValueError("not a stored multiset of spots")
    hashes = np.frombuffer(blob, dtype="<u4", count=n, offset=1).astype(np.uint64)
    counts = np.frombuffer(blob, dtype="<u2" if width == 2 else "u1", offset=1 + 4 * n).astype(np.uint32)
    return SpotSet(hashes, counts)


def listed_spots(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Distinct spots, counts and distinct-spot lengths of blobs of one listing form (3 or 4),
    laid end to end (``ValueError`` for a damaged form-4 blob)."""
    if blobs and blobs[0][0] == 4:
        spots, lengths = elias_fano.decode_many(blobs, 1)
    else:
        spots = np.frombuffer(b"".join([b[1:] for b in blobs]), "<u4").astype(np.uint64)
        lengths = [(len(b) - 1) // 4 for b in blobs]
    owner = np.repeat(np.arange(len(blobs)), lengths)
    repeat = (spots[1:] == spots[:-1]) & (owner[1:] == owner[:-1])  # a spot occurring again
    if not repeat.any():
        return spots, np.ones(len(spots), dtype=np.int64), lengths
    starts = np.flatnonzero(~np.concatenate(([False], repeat)))
    counts = np.diff(np.append(starts, len(spots)))
    return spots[starts], counts, np.bincount(owner[starts], minlength=len(blobs)).tolist()


# The fields a candidate is verified with, in the order of ``SIGNATURE_COLUMNS``: the ones every
# index keeps, then each method's own (``methods.STORED_FIELDS``), then the page's.
COMMENTS = "_comments"  # a page's readers' comments in its stored ``extra``: [words, hash]

SIGNATURE_FIELDS = (
    "id", "exact", "simhash", "spot_size", "spots", *(s.field for s in STORED_FIELDS), "tokens", "language",
    "extra",
)  # fmt: skip
SIGNATURE_COLUMNS = ", ".join(SIGNATURE_FIELDS)
# Those stored as integers (a Redis reply is bytes until read as a number).
INTEGER_FIELDS = frozenset(
    {"simhash", "spot_size", "tokens", *(s.field for s in STORED_FIELDS if s.sql == "INTEGER")}
)


def row_fingerprint(row: tuple) -> Fingerprint:
    """The stored signatures of a document, enough to verify a pair; ``ValueError`` (or
    ``TypeError``) for a row whose fields do not have the types the index writes.

    ``row``: the ``SIGNATURE_FIELDS``, in order.
    """
    _, exact, sim, _, spots, *own, tokens, language, extra = row
    if not (
        isinstance(tokens, int) and tokens >= 0 and _of(exact, bytes) and len(exact or b"") in (0, 16)
        and _of(sim, int) and -(1 << 63) <= (sim or 0) < 1 << 64
        and _of(language, str) and _of(extra, str) and _of(spots, bytes)
    ):  # fmt: skip
        raise ValueError("a field of another type than the index writes")
    return Fingerprint(
        token_count=tokens, language=language or "und",
        exact=int.from_bytes(exact, "big") if exact else None,
        simhash=unsigned(sim) if sim is not None else None,
        spots=blob_spots(spots),
        **{s.field: s.decode(v) for s, v in zip(STORED_FIELDS, own, strict=True) if v is not None},
        **_extra(extra),
    )  # fmt: skip


def sound_fingerprints(rows: Iterable[tuple], index: object) -> Iterator[tuple[int, Fingerprint]]:
    """(id, signatures) of each ``SIGNATURE_COLUMNS`` row that reads as the index wrote it; a
    damaged one (a file edited by hand, a key written by another program) is no candidate,
    said once for each index."""
    for row in rows:
        try:
            yield row[0], row_fingerprint(row)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            damaged_record(index, row[0], exc)


def damaged_record(index: object, doc: object, exc: BaseException) -> None:
    """Say once for each index that a record could not be read, and is left out."""
    said = str(index) in _DAMAGE_SAID
    _DAMAGE_SAID.add(str(index))
    (logger.debug if said else logger.warning)(
        "scrapy-neardup: index %s: record %s is damaged (%s) and left out; further damaged records "
        "are logged at DEBUG",
        index, str(doc)[:40], f"{type(exc).__name__}: {exc}"[:200],
    )  # fmt: skip


def _of(value: object, kind: type) -> bool:
    return value is None or (isinstance(value, kind) and not isinstance(value, bool))


def _extra(extra: str | None) -> dict:
    """The Fingerprint fields of a stored ``extra``: the registered methods' signatures, and the
    page's comments."""
    found = json.loads(extra) if extra else {}
    if not isinstance(found, dict):
        raise ValueError("registered methods' signatures that are not an object")
    comments = found.pop(COMMENTS, None)
    if comments is None:
        return {"extra": found}
    if not (
        isinstance(comments, list) and len(comments) == 2 and all(type(n) is int and n >= 0 for n in comments)
    ):
        raise ValueError("a page's comments stored as another value than two counts")
    return {"extra": found, "comment_words": comments[0], "comment_hash": comments[1]}


def extra_json(fp: Fingerprint) -> str | None:
    """What a page's record keeps in its ``extra`` field (None when nothing): the registered
    methods' signatures, and its readers' comments' words and hash (``COMMENTS``)."""
    extra = {**fp.extra, COMMENTS: [fp.comment_words, fp.comment_hash]} if fp.comment_words else fp.extra
    return json.dumps(extra, sort_keys=True) if extra else None
