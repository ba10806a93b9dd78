"""WARC files read record by record: .warc.gz member by member, plain WARCs resynchronised on the
next record header, every damaged or odd record skipped, counted and named (``sources.Skips``)."""

from __future__ import annotations

import dataclasses
import io
import logging
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from .exceptions import one_line
from .sources import Page, Skips, path_name
from .text import looks_like_html, storable

logger = logging.getLogger(__name__)


def read_warc(path: Path, skips: Skips, max_body: int) -> Iterator[Page]:
    """HTML response records of a WARC file (.warc, or .warc.gz: a gzip member a record).

    A damaged record is skipped and reading resumes at the next one (a .warc.gz member by
    member, so damage never reaches past its member); a last record cut short is *incomplete*
    (a WARC still being written): not read, so a later scan of the grown file reads it whole.
    """
    with path.open("rb") as stream:
        if stream.read(2) == b"\x1f\x8b":
            yield from _read_warc_members(path, stream, skips, max_body)
        else:
            yield from _read_warc_stream(path, stream, 0, skips, max_body)


def _read_warc_members(path: Path, stream, skips: Skips, max_body: int) -> Iterator[Page]:
    from warcio.archiveiterator import ArchiveIterator

    limit = max(max_body * 2, 64 << 20)  # a member this large is one gzip stream for the whole file
    for offset, data, problem in _gzip_members(stream, limit):
        where = f"{path_name(path)} at offset {offset}"
        if problem == "too large":
            yield from _read_warc_stream(path, stream, offset, skips, max_body)
            return
        if data is None:
            skips("incomplete" if problem == "cut short" else "damaged", where, f"a {problem} gzip member")
            continue
        try:
            records = ArchiveIterator(io.BytesIO(data))
            for record in records:
                page = _warc_page(path, record, offset, skips, max_body)
                inner = records.get_record_offset()  # records after the first of one member
                if page is not None:
                    yield dataclasses.replace(page, source=f"{page.source}+{inner}") if inner else page
        except Exception as exc:  # warcio's errors on damaged bytes are of many kinds
            reason, why = _warc_problem(exc)
            skips(reason, where, why)


def _gzip_members(stream, limit: int) -> Iterator[tuple[int, bytes | None, str]]:
    """(offset, decompressed bytes or None, what is wrong) for each gzip member of ``stream``."""
    stream.seek(0, io.SEEK_END)
    size = stream.tell()
    offset = 0
    while offset < size:
        stream.seek(offset)
        inflate = zlib.decompressobj(wbits=31)
        parts, fed, held = [], 0, 0
        problem = ""
        while not inflate.eof:
            chunk = stream.read(1 << 16)
            if not chunk:
                problem = "cut short"
                break
            try:
                part = inflate.decompress(chunk)
            except zlib.error as exc:
                problem = f"damaged ({exc})"
                break
            fed += len(chunk)
            held += len(part)
            if held > limit:
                yield offset, None, "too large"
                return
            parts.append(part)
        if problem:
            yield offset, None, problem
            found = _next_record(stream, offset + 1, size, b"\x1f\x8b\x08")
            if found is None:
                return
            offset = found
            continue
        yield offset, b"".join(parts), ""
        offset += fed - len(inflate.unused_data)


WARC_TYPES = frozenset(
    ("warcinfo", "response", "resource", "request", "metadata", "revisit", "conversion", "continuation")
)


class BadRecord(Exception):
    """A WARC record that is well-formed enough to skip but not to read (counted ``bad_record``)."""


def _read_warc_stream(path: Path, stream, start: int, skips: Skips, max_body: int) -> Iterator[Page]:
    """Records of an uncompressed WARC (or one gzip stream) from ``start``, resynchronised on the
    next ``WARC/1.`` header after a record that cannot be read (each counted once, at its start)."""
    from warcio.archiveiterator import ArchiveIterator

    stream.seek(0, io.SEEK_END)
    size = stream.tell()
    while start < size:
        stream.seek(start)
        records = ArchiveIterator(stream)
        at = start  # where the record being read starts
        try:
            for record in records:
                page = _warc_page(path, record, at, skips, max_body)
                at = start + records.get_record_offset() + (records.get_record_length() or 0)
                if page is not None:
                    yield page
        except Exception as exc:  # warcio's errors on damaged bytes are of many kinds
            reason, why = _warc_problem(exc)
            header = _next_record(stream, at, size, b"WARC/1.")
            stream.seek(at)
            gap = stream.read(header - at) if header is not None else b""
            if header is not None and gap.strip() and len(gap) <= 8:
                logger.debug("%s: stray bytes %r at offset %d, before a record", path_name(path), gap, at)
                start = header  # a damaged separator: the record after it may be whole
                continue
            if header is not None and not gap.strip():
                at = header  # the failing record's own header, after the blank lines before it
            skips(reason, f"{path_name(path)} at offset {at}", why)
            found = _next_record(stream, at + 1, size, b"WARC/1.")
            if found is None:
                return
            start = found
            continue
        stream.seek(at)
        if stream.read(64).strip():
            skips(
                "damaged",
                f"{path_name(path)} at offset {at} of {size}",
                "the rest cannot be read (cut short?)",
            )
        return


def _warc_problem(exc: Exception) -> tuple[str, str]:
    """(reason, message) for an exception met reading a WARC record."""
    if isinstance(exc, BadRecord):
        return "bad_record", str(exc)
    if isinstance(exc, AttributeError) and "startswith" in str(exc):  # warcio on a missing target URI
        return "bad_record", "a response record without WARC-Target-URI"
    return "damaged", f"a damaged record ({_short(exc)})"


def _warc_page(path: Path, record, at: int, skips: Skips, max_body: int) -> Page | None:
    """The page of a response record starting at offset ``at`` (None for what is not a page).

    An HTML page is one whose HTTP Content-Type says so, or, without one (no HTTP headers,
    a target URI warcio does not parse them for), whose body looks like HTML.
    """
    length = record.rec_headers.get_header("Content-Length") or ""
    if not length.strip().isdigit():  # in a plain WARC it would swallow the records after it
        raise BadRecord(f"a record without a valid Content-Length ({one_line(length, 40)!r})")
    if record.rec_type not in WARC_TYPES:
        raise BadRecord(f"a record of unknown WARC-Type {one_line(str(record.rec_type), 40)!r}")
    if record.rec_type != "response":
        return None
    where = f"{path_name(path)} at offset {at}"
    url = record.rec_headers.get_header("WARC-Target-URI")
    if not url:
        raise BadRecord("a response record without WARC-Target-URI")
    if (record.length or 0) > max_body + 65536:
        skips("too_large", where, f"a record of {record.length} bytes")
        return None
    headers = record.http_headers
    if headers is not None and not (headers.protocol or "").upper().startswith("HTTP/"):
        raise BadRecord("a response record whose block is not an HTTP response")
    content_type = headers.get_header("Content-Type") if headers is not None else None
    if content_type is not None and "html" not in content_type.lower():
        return None
    encoding = (headers.get_header("Content-Encoding") or "").strip().lower() if headers is not None else ""
    if encoding == "br":  # warcio's brotli decoding fails with brotli >= 1.2: decoded here
        body = _brotli(record.raw_stream.read())
        if body is None:
            skips("damaged", where, "a brotli body that cannot be decoded")
            return None
    else:
        body = record.content_stream().read()
    if getattr(record.raw_stream, "limit", 0):
        skips("incomplete", where, "the record is cut short (the file may still be being written)")
        return None
    if headers is None and body[:5] == b"HTTP/":  # headers warcio left in the body
        head, _, body = body.partition(b"\r\n\r\n")
        found = re.search(rb"(?im)^content-type:\s*([^\r\n]*)", head)
        content_type = found.group(1).decode("latin-1") if found else None
        if content_type is not None and "html" not in content_type.lower():
            return None
    if content_type is None and not looks_like_html(body):
        return None
    return Page(storable(url), body, f"{path_name(path.resolve())}@{at}", content_type=content_type or None)


def _brotli(data: bytes) -> bytes | None:
    try:
        import brotli
    except ImportError:
        return None
    try:
        return brotli.decompress(data)
    except brotli.error:
        return None


def _next_record(stream, after: int, size: int, marker: bytes) -> int | None:
    """The offset of the next ``marker`` (a gzip member's or a WARC record's start) after ``after``."""
    stream.seek(after)
    while after < size:
        block = stream.read(1 << 20)
        found = block.find(marker)
        if found >= 0:
            return after + found
        after += max(1, len(block) - len(marker) + 1)
        stream.seek(after)
    return None


def _short(exc: BaseException) -> str:
    """An exception in one printable line (warcio quotes the damaged bytes)."""
    text = str(exc).split(", first line:")[0]  # warcio goes on with the damaged bytes themselves
    return one_line(f"{type(exc).__name__}: {text}", 160)
