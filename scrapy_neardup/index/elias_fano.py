"""Elias-Fano coding of a sorted list of 32-bit values, repeats allowed (Elias 1974, Fano
1971; as posting lists use it, Vigna, "Quasi-succinct indices", WSDM 2013).

Each value keeps its low ``L = floor(log2(2**32 / n))`` bits as they are, packed; its high
bits go in unary, as the position ``high + i`` of the i-th set bit of a second bit vector.
That is at most ``2 + L`` bits a value: a page's 90 spots take 3.4 bytes each, not 4.

Layout: n (uint32, little-endian), L (one byte), the low bits (``ceil(n * L / 8)`` bytes),
the high bit vector (the rest); bits little-endian within each byte.
"""

from __future__ import annotations

import struct

import numpy as np

_HEAD = struct.Struct("<IB")
_PAD = bytes(8)  # after each list's low bits: every value's bits are read as 8 bytes


def _low_bits(count: int) -> int:
    """L: the bits of a value kept as they are, floor(log2(2**32 / count))."""
    return (2**32 // count).bit_length() - 1


def size(values: np.ndarray) -> int:
    """The bytes ``encode(values)`` takes (``values`` sorted, not empty)."""
    n, low = len(values), _low_bits(len(values))
    return _HEAD.size + (n * low + 7) // 8 + (n + (int(values[-1]) >> low) + 7) // 8


def encode(values: np.ndarray) -> bytes:
    """``values``: sorted 32-bit values (any unsigned dtype), at least one."""
    n, low = len(values), _low_bits(len(values))
    wide = values.astype(np.uint64)
    lows = (wide[:, None] >> np.arange(low, dtype=np.uint64)) & np.uint64(1)
    highs = (wide >> np.uint64(low)).astype(np.int64) + np.arange(n)
    upper = np.zeros(int(highs[-1]) + 1, dtype=np.uint8)
    upper[highs] = 1
    packed_low = np.packbits(lows.astype(np.uint8).ravel(), bitorder="little").tobytes()
    return _HEAD.pack(n, low) + packed_low + np.packbits(upper, bitorder="little").tobytes()


def sound(data: bytes, offset: int = 0) -> bool:
    """Whether ``data[offset:]`` reads as an encoding: its header, lengths and set bits agree."""
    if len(data) < offset + _HEAD.size:
        return False
    n, low = _HEAD.unpack_from(data, offset)
    start = offset + _HEAD.size + (n * low + 7) // 8
    most = (n + (1 << (32 - low)) + 7) // 8 if low <= 32 else 0
    return (
        n > 0 and low <= 32 and start < len(data) <= start + most
        and int.from_bytes(data[start:], "little").bit_count() == n
    )  # fmt: skip


def decode(data: bytes, offset: int = 0) -> np.ndarray:
    """The sorted values (uint64) of ``data[offset:]``; ``ValueError`` when it is not sound."""
    return decode_many([data], offset)[0]


def decode_many(blobs: list[bytes], offset: int = 0) -> tuple[np.ndarray, list[int]]:
    """The values of every blob's list (from ``offset``) laid end to end, and each list's
    length: one numpy pass for them all (a check reads tens). ``ValueError`` when one is not
    sound."""
    if not all(sound(blob, offset) for blob in blobs):
        raise ValueError("not an Elias-Fano list")
    heads = [_HEAD.unpack_from(blob, offset) for blob in blobs]
    ends = [offset + _HEAD.size + (n * low + 7) // 8 for n, low in heads]
    lengths = [n for n, _ in heads]
    each = np.array(lengths, dtype=np.int64)  # each list's values, to repeat a list's figures
    rank = np.arange(int(each.sum())) - np.repeat(np.cumsum(each) - each, each)  # place in its list
    # Low bits: the value's L bits read from the 8 bytes where they begin (lists padded).
    lows_at = [blob[offset + _HEAD.size : end] + _PAD for blob, end in zip(blobs, ends, strict=True)]
    starts = np.repeat(np.cumsum([0] + [len(part) for part in lows_at[:-1]]), each)
    low = np.repeat(np.array([bits for _, bits in heads], dtype=np.int64), each)
    bit = starts * 8 + rank * low
    raw = np.frombuffer(b"".join(lows_at), np.uint8)
    window = raw[(bit >> 3)[:, None] + np.arange(8)].view("<u8").ravel()
    lows = (window >> (bit & 7).astype(np.uint64)) & ((np.uint64(1) << low.astype(np.uint64)) - np.uint64(1))
    # High bits: the i-th set bit of a list's vector is at high + i (sound: n set bits each).
    uppers = [blob[end:] for blob, end in zip(blobs, ends, strict=True)]
    upper_start = np.repeat(np.cumsum([0] + [8 * len(part) for part in uppers[:-1]]), each)
    ones = np.flatnonzero(np.unpackbits(np.frombuffer(b"".join(uppers), np.uint8), bitorder="little"))
    highs = (ones - upper_start - rank).astype(np.uint64)
    return (highs << low.astype(np.uint64)) | lows, lengths
