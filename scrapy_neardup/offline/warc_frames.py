"""WARC records found by their own lengths, each length checked against the bytes after it.

A record's Content-Length must end where blank lines and then the next record header (or the
end of the stream) begin. One that does not (longer, shorter, absurd) is damaged: it is
reported and reading resumes at the next record header after its start, so a wrong length
costs that record only and never hides the records after it.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from ..exceptions import one_line

RECORD_START = re.compile(rb"WARC/1\.[0-9]\r?\n")
HEADER_END = re.compile(rb"\r?\n\r?\n")
MAX_HEADER = 1 << 16  # a record's WARC header block, at most
CHUNK = 1 << 20
BLANK = b" \t\r\n"
MAX_OFFSET = 1 << 62  # seek no further: an absurd Content-Length is past any stream's end
STRAY = 8  # non-blank bytes before a record header that are a damaged separator, not a record
CUT_SHORT = "the record is cut short (the file may still be being written)"


@dataclass(frozen=True)
class Frame:
    """A record whose length checks out, from ``at`` to ``end`` (its block's end): ``data`` is its
    header and block, None when it is over the reader's limit (not read); ``headers`` its WARC
    headers, names in lower case."""

    at: int
    end: int
    headers: dict[str, str]
    data: bytes | None


@dataclass(frozen=True)
class Damage:
    """A record that cannot be read, at ``at``: reason ``damaged``, ``bad_record`` or ``incomplete``."""

    at: int
    reason: str
    why: str


class _Bytes:
    """Reads forward through a seekable stream, keeping the bytes from ``base`` on: a gzip stream
    seeks back only by decompressing again from its start, so reading only goes back to resume
    after a damaged record that was too large to keep."""

    def __init__(self, stream, start: int, size: int | None) -> None:
        self.stream, self.size = stream, size
        self.base, self.buf, self.eof = start, bytearray(), False
        stream.seek(start)

    @property
    def end(self) -> int:
        return self.base + len(self.buf)

    def fill(self, upto: int) -> bool:
        """Read up to offset ``upto``; whether the stream reaches that far."""
        while self.end < upto and not self.eof:
            try:
                chunk = self.stream.read(min(max(upto - self.end, 1 << 16), CHUNK))
            except (EOFError, zlib.error, gzip.BadGzipFile):  # a gzip stream cut short or damaged
                chunk = b""
            self.eof = not chunk
            self.buf += chunk
        return self.end >= upto

    def get(self, start: int, stop: int) -> bytes:
        self.fill(stop)
        return bytes(self.buf[max(0, start - self.base) : stop - self.base])

    def move(self, offset: int) -> bool:
        """Forget the bytes before ``offset``, going there (back, or past bytes never read);
        whether the stream reaches that far."""
        if self.base <= offset <= self.end:
            del self.buf[: offset - self.base]
            self.base = offset
            return True
        beyond = self.size is not None and offset > self.size
        reached = (
            -1 if beyond else self.stream.seek(min(offset, MAX_OFFSET))
        )  # a gzip stream stops at its end
        self.base, self.buf = offset, bytearray()
        self.eof = reached < offset or offset == self.size
        return reached >= offset

    def blank_to(self, offset: int) -> int:
        """The first offset from ``offset`` on that is not a blank byte (or the end)."""
        while self.fill(offset + 1):
            rest = bytes(self.buf[offset - self.base : offset - self.base + (1 << 16)])
            stripped = rest.lstrip(BLANK)
            offset += len(rest) - len(stripped)
            if stripped:
                return offset
        return offset

    def find(self, after: int) -> int | None:
        """The offset of the next record header from ``after`` on."""
        if after < self.base:
            self.move(after)
        at = after
        while True:
            self.fill(at + CHUNK)
            found = RECORD_START.search(self.buf, at - self.base)
            if found:
                return self.base + found.start()
            if self.eof:
                return None
            at = max(at, self.end - 16)  # a header across two reads is found whole on the next
            if at - self.base > CHUNK:  # searched bytes are not needed again
                self.move(at)


def frames(stream, start: int, size: int | None, limit: int, growing: bool) -> Iterator[Frame | Damage]:
    """The records of ``stream`` from ``start``; blocks over ``limit`` bytes are checked, not read.
    ``growing``: the stream is a file that may still be being written, so a last record cut
    short is *incomplete* (read by a later scan), not damaged."""
    data = _Bytes(stream, start, size)
    pos = start
    while True:
        pos = data.blank_to(pos)
        data.move(pos)
        if not data.fill(pos + 1):
            return
        record = _record_at(data, pos, limit, growing)
        if isinstance(record, Frame):
            yield record
            pos = record.end
            continue
        if record is not None:
            yield record
            if record.reason == "incomplete":
                return
        found = data.find(pos + 1)  # resynchronised on the next record header
        if found is None:
            return
        pos = found


def _record_at(data: _Bytes, pos: int, limit: int, growing: bool) -> Frame | Damage | None:
    """The record at ``pos``: a Frame when its length checks out, else what is wrong."""
    head = data.get(pos, pos + MAX_HEADER)
    end = HEADER_END.search(head) if RECORD_START.match(head) else None
    if end is None:
        return _no_record(data, pos, head, growing)
    headers = _headers(head[: end.start()])
    length = headers.get("content-length", "").strip()
    if not length.isdigit():  # none, negative or not a number
        return Damage(
            pos, "bad_record", f"a record without a valid Content-Length ({one_line(length, 40)!r})"
        )
    block, size = pos + end.end(), int(length)
    fits = _ends_a_record(data, block + size, keep=size <= limit)
    if fits:
        return Frame(pos, block + size, headers, data.get(pos, block + size) if size <= limit else None)
    if fits is None and growing and data.find(block) is None:
        return Damage(pos, "incomplete", CUT_SHORT)
    ends = "runs past the end" if fits is None else "does not end at a record boundary"
    return Damage(pos, "damaged", f"a damaged record (its Content-Length of {size} bytes {ends})")


def _no_record(data: _Bytes, pos: int, head: bytes, growing: bool) -> Damage | None:
    """What is at ``pos`` when no record header is; None for a few stray bytes before one (a
    damaged separator: the record after them may be whole)."""
    found = data.find(pos + 1)
    if found is not None and found - pos <= 64 and len(data.get(pos, found).strip(BLANK)) <= STRAY:
        return None
    if not RECORD_START.match(head):
        return Damage(pos, "damaged", "a damaged record (no WARC/1.x record header)")
    if growing and found is None and len(head) < MAX_HEADER:
        return Damage(pos, "incomplete", CUT_SHORT)
    return Damage(pos, "damaged", f"a damaged record (a header without its end in {len(head)} bytes)")


def _ends_a_record(data: _Bytes, stop: int, keep: bool) -> bool | None:
    """Whether the record's separator (an empty line), or blank lines and then a record header
    or the end, follow ``stop``; None when the stream ends before ``stop``. After a separator,
    bytes that are no record header are damage between records, met as such next."""
    reached = data.fill(stop) if keep else data.move(stop)  # past a block too large to keep
    if not reached:
        return None
    if data.get(stop, stop + 4) == b"\r\n\r\n" or data.get(stop, stop + 2) == b"\n\n":
        return True
    after = data.blank_to(stop)
    return not data.fill(after + 1) or data.get(after, after + 7) == b"WARC/1."


def _headers(block: bytes) -> dict[str, str]:
    """A record's WARC headers (the first of each name), names in lower case."""
    headers: dict[str, str] = {}
    for line in block.decode("utf-8", "replace").splitlines()[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers.setdefault(name.strip().lower(), value.strip())
    return headers
