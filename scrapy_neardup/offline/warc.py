"""WARC files read record by record: .warc.gz member by member, each record found by its checked
length (``warc_frames``), every damaged or odd record skipped, counted and named (``sources.Skips``)."""

from __future__ import annotations

import contextlib
import gzip
import io
import logging
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from ..exceptions import one_line
from ..text import looks_like_html, storable
from .pages import Page, Skips, path_name
from .warc_frames import Damage, Frame, frames

logger = logging.getLogger(__name__)


def read_warc(path: Path, skips: Skips, max_body: int) -> Iterator[Page]:
    """HTML response records of a WARC file (.warc, or .warc.gz: a gzip member a record).

    Records are found by their lengths, each checked (``warc_frames``): a damaged record is
    skipped and reading resumes at the next record header (in a .warc.gz, the next member); a
    last record cut short is *incomplete* (a WARC still being written): not read, so a later
    scan of the grown file reads it whole.
    """
    logging.getLogger("warcio").setLevel(logging.ERROR)  # its warnings quote the page's bytes
    with path.open("rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        limit = max_body + 65536  # a record's block: the page and its HTTP headers
        if stream.read(2) == b"\x1f\x8b":
            yield from _read_warc_members(path, stream, skips, max_body)
        else:
            records = frames(stream, 0, size, limit, growing=True)
            yield from _pages(path, records, skips, _plain_name)


# A gzip member larger than this, decompressed, is one gzip stream for a whole file: it is read
# as it is decompressed rather than held whole.
ONE_STREAM_BYTES = 64 << 20


def _read_warc_members(path: Path, stream, skips: Skips, max_body: int) -> Iterator[Page]:
    limit = max(max_body * 2, ONE_STREAM_BYTES)
    for offset, data, problem in _gzip_members(stream, limit):
        where = f"{path_name(path)} at offset {offset}"

        def name(record: Frame | Damage, member: int = offset) -> tuple[str, str]:
            inner = f"+{record.at}" if record.at else ""  # a record after the member's first
            return f"{member}{inner}", f"{member}{inner}"

        if problem == "too large":  # decompressed as it is read: a member a record is the norm
            stream.seek(offset)
            with gzip.GzipFile(fileobj=stream) as whole:
                records = frames(whole, 0, None, max_body + 65536, growing=True)
                yield from _pages(path, records, skips, name)
            return
        if data is None:
            skips("incomplete" if problem == "cut short" else "damaged", where, f"a {problem} gzip member")
            continue
        records = frames(io.BytesIO(data), 0, len(data), max_body + 65536, growing=False)
        yield from _pages(path, records, skips, name)


def _plain_name(record: Frame | Damage) -> tuple[str, str]:
    """A plain WARC record's position, and its source's suffix: its offset."""
    return str(record.at), str(record.at)


def _pages(path: Path, records, skips: Skips, name) -> Iterator[Page]:
    """The pages of framed records; ``name(record)``: its position and its source's suffix."""
    for record in records:
        at, suffix = name(record)
        where = f"{path_name(path)} at offset {at}"
        if isinstance(record, Damage):
            skips(record.reason, where, record.why)
            continue
        try:
            page = _frame_page(record, where, skips)
        except Exception as exc:  # warcio's errors on damaged bytes are of many kinds
            reason, why = _warc_problem(exc)
            skips(reason, where, why)
            continue
        if page is not None:
            source = f"{path_name(path.resolve())}@{suffix}"
            yield Page(page[0], page[1], source, content_type=page[2], read_to=int(at.split("+")[0]))


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


def _warc_problem(exc: Exception) -> tuple[str, str]:
    """(reason, message) for an exception met reading a WARC record."""
    if isinstance(exc, BadRecord):
        return "bad_record", str(exc)
    if isinstance(exc, AttributeError) and "startswith" in str(exc):  # warcio on a missing target URI
        return "bad_record", "a response record without WARC-Target-URI"
    return "damaged", f"a damaged record ({_short(exc)})"


def _frame_page(frame: Frame, where: str, skips: Skips) -> tuple[str, bytes, str | None] | None:
    """(url, body, content type) of a response record (None for what is not a page).

    An HTML page is one whose HTTP Content-Type says so, or, without one (no HTTP headers,
    a target URI warcio does not parse them for), whose body looks like HTML.
    """
    kind = frame.headers.get("warc-type", "")
    if kind not in WARC_TYPES:
        raise BadRecord(f"a record of unknown WARC-Type {one_line(kind, 40)!r}")
    if kind != "response":
        return None
    if not frame.headers.get("warc-target-uri"):
        raise BadRecord("a response record without WARC-Target-URI")
    if frame.data is None:
        skips("too_large", where, f"a record of {frame.headers['content-length']} bytes")
        return None
    from warcio.archiveiterator import ArchiveIterator

    record = next(iter(ArchiveIterator(io.BytesIO(frame.data + b"\r\n\r\n"))))
    url = record.rec_headers.get_header("WARC-Target-URI")
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
        said = io.StringIO()
        with contextlib.redirect_stderr(said):  # warcio writes a body it cannot decode there
            body = record.content_stream().read()
        if said.getvalue().strip():
            skips("damaged", where, f"a {encoding or 'encoded'} body that cannot be decoded ({_said(said)})")
            return None
    if headers is None and body[:5] == b"HTTP/":  # headers warcio left in the body
        head, _, body = body.partition(b"\r\n\r\n")
        found = re.search(rb"(?im)^content-type:\s*([^\r\n]*)", head)
        content_type = found.group(1).decode("latin-1") if found else None
        if content_type is not None and "html" not in content_type.lower():
            return None
    if content_type is None and not looks_like_html(body):
        return None
    return storable(url), body, content_type or None


def _said(stream: io.StringIO) -> str:
    return one_line(stream.getvalue(), 120)


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
