"""How the PostgreSQL index packs its postings, many to a row: a row costs about 40 bytes
of header and key, and an entry in the primary key about 28 more, so a row a posting (most
SpotSigs lists hold one page) made the lists 2,500 bytes a page.

- SpotSigs lists are kept by bucket: the scope and the spot's top 20 bits (as ``spot_search``
  keys a rare spot once the order is frozen), every length partition together. A bucket's
  postings fill rows of up to ROW_IDS ids (uint32), one after the other (the row key is the
  bucket and the row's number), so at 10**6 pages a bucket is about one row of some fifty
  ids, and a spot met in many pages never makes a row that every posting rewrites whole.
  A probe reads each spot's bucket, every row, and counts each partition it covers with that
  partition's own shared spots over the spots that reach it (``search.partition_counted``);
  a page found is read only with a spot size of the partitions it was found for. The
  bucket's other spots only add candidates, which the count filter and the bounds drop, so
  the search stays exact.
- A lookup-key row is keyed by the key's top LOOKUP_BITS bits and its chunk of 2**20 ids, and
  holds (key, id) pairs: reading a key reads its bucket's rows and keeps that key's pairs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

ROW_IDS = 256  # ids a SpotSigs row takes before the next row of its bucket (1 KB: never TOASTed)
CHUNK_BITS = 20  # document ids a lookup-key row spans: 2**20 (ids are below 2**32)
LOOKUP_BITS = 18  # lookup-key buckets: 2**18 (at 10**6 pages, about seven keys a row)
_LOW = 4095  # a row key's low 12 bits: a bucket's row number, a lookup row's chunk
LOOKUP_ENTRY = np.dtype([("key", "<i8"), ("doc", "<u4")])


def spot_bucket(key: Any) -> Any:
    """The first row key of the bucket of a SpotSigs posting or probe ``key`` (its rows are
    this key to this key + 4095); of each key of an int64 array."""
    return key >> 24 << 12


def bucket_rows(bucket: int, ids: list[int]) -> list[tuple[int, bytes]]:
    """A bucket's rows for these sorted ids, as a freeze writes them: ROW_IDS ids a row, the
    last possible row (bucket + 4095) taking all that come after."""
    packed = np.array(ids, dtype="<u4")
    full = min(-(-len(packed) // ROW_IDS), _LOW)
    rows = [(bucket + n, packed[n * ROW_IDS : (n + 1) * ROW_IDS].tobytes()) for n in range(full)]
    if len(packed) > ROW_IDS * _LOW:
        rows.append((bucket + _LOW, packed[ROW_IDS * _LOW :].tobytes()))
    return rows


def lookup_row(key: int, doc: int) -> int:
    """The row a page's lookup ``key`` goes to."""
    return (key >> (64 - LOOKUP_BITS) << 12) | (doc >> CHUNK_BITS) & _LOW


def lookup_bucket(key: int) -> int:
    """The first row key of the bucket that may hold lookup ``key`` (its rows are this key to
    this key + 4095)."""
    return key >> (64 - LOOKUP_BITS) << 12


def lookup_entry(key: int, doc: int) -> bytes:
    return np.array([(key, doc)], dtype=LOOKUP_ENTRY).tobytes()


def lookup_entries(blobs: Iterable[bytes]) -> np.ndarray:
    """The (key, doc) pairs of lookup rows (a damaged row, not a multiple of an entry, is cut)."""
    joined = b"".join(blobs)
    return np.frombuffer(joined[: len(joined) - len(joined) % LOOKUP_ENTRY.itemsize], dtype=LOOKUP_ENTRY)
