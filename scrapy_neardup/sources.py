"""Offline readers: saved pages as (url, body) from files, folders, JSON-lines feeds and WARC files.

Readers stream; a record that cannot be read is logged and skipped, never fatal for the
rest of the input. A path that cannot be read at all raises ``InputError`` naming it.
"""

from __future__ import annotations

import dataclasses
import gzip
import html
import io
import json
import logging
import os
import re
import stat
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

from .exceptions import InputError, one_line
from .text import looks_like_html, storable

logger = logging.getLogger(__name__)

HTML_SUFFIXES = (".html", ".htm", ".xhtml")
TEXT_SUFFIXES = (".txt",)
FEED_SUFFIXES = (".jl", ".jsonl")
WARC_SUFFIXES = (".warc",)
FEED_FIELDS = ("html", "body", "text", "content")
MAX_BODY = 5_000_000  # DedupConfig.max_body's default
_CANONICAL = re.compile(
    rb"""<link\b[^>]{0,1000}?\brel\s*=\s*["']?canonical["']?[^>]{0,1000}>""", re.IGNORECASE
)  # fmt: skip
_HREF = re.compile(rb"""\bhref\s*=\s*["']([^"'>]+)["']""", re.IGNORECASE)


@dataclass(frozen=True)
class Page:
    """One saved page: its URL, where it was read (``source``, unique per input) and its body.

    ``is_text`` when the body is already extracted text. Resuming keys on ``source``, not on
    the URL: two saved copies may well name the same canonical URL.
    """

    url: str
    body: bytes | str
    source: str
    is_text: bool = False
    content_type: str | None = None


def _kind(path: Path) -> str | None:
    name = path.name.lower()
    inner = name[:-3] if name.endswith(".gz") else name
    for kind, suffixes in (("html", HTML_SUFFIXES), ("text", TEXT_SUFFIXES), ("feed", FEED_SUFFIXES),
                           ("warc", WARC_SUFFIXES)):  # fmt: skip
        if inner.endswith(suffixes):
            return kind
    return None


class Skips:
    """Records the readers could not read, by reason; each is logged once with its file and position."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, reason: str, where: str, why: str) -> None:
        logger.warning("skipped %s: %s", where, why)
        self.counts[reason] += 1


def _name(path: Path) -> str:
    return storable(str(path))


def check_input(path: str | Path) -> None:
    """``InputError`` for a path the scan cannot read at all, before anything is written."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{_name(path)}: no such file or folder") from None
    except OSError as exc:
        raise InputError(f"{_name(path)}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        if not os.access(path, os.R_OK | os.X_OK):
            raise InputError(f"{_name(path)}: cannot read the folder (permission denied)")
        return
    if not stat.S_ISREG(mode):
        raise InputError(f"{_name(path)}: not a regular file (a pipe or a device cannot be scanned)")
    if _kind(path) is None:
        raise InputError(
            f"{_name(path)}: unsupported file type; expected .html, .htm, .xhtml, .txt, .jl, .jsonl or .warc "
            "(optionally .gz), or a folder"
        )
    if not os.access(path, os.R_OK):
        raise InputError(f"{_name(path)}: cannot read it (permission denied)")


def read_pages(
    path: str | Path, field: str | None = None, skips: Skips | None = None, max_body: int = MAX_BODY
) -> Iterator[Page]:
    """Every page under ``path``: a file of a known kind or a folder of them (recursively).

    What cannot be read is logged and counted in ``skips`` (by reason), and reading goes on.
    """
    path = Path(path)
    skips = skips if skips is not None else Skips()
    check_input(path)
    if not path.is_dir():
        yield from _read_file(path, path.name, field, skips, max_body)
        return

    def unreadable(exc: OSError) -> None:
        skips(
            "unreadable", _name(Path(exc.filename or path)), f"cannot read the folder ({exc.strerror or exc})"
        )

    for folder, dirs, names in os.walk(path, onerror=unreadable):
        dirs.sort()
        for name in sorted(names):
            file = Path(folder) / name
            if _kind(file) not in ("html", "text"):
                continue
            if file.is_file():
                yield from _read_file(file, file.relative_to(path).as_posix(), field, skips, max_body)
            elif file.is_symlink():
                skips("unreadable", _name(file), "a broken symbolic link")


def _read_bytes(path: Path, max_body: int) -> bytes:
    """A saved file's bytes (decompressed for .gz), at most ``max_body`` of them read."""
    gz = path.name.lower().endswith(".gz")
    try:
        if not gz and path.stat().st_size > max_body:
            raise InputError(f"{_name(path)}: {path.stat().st_size} bytes > max_body {max_body}", "too_large")
        with gzip.open(path, "rb") if gz else path.open("rb") as handle:
            data = handle.read(max_body + 1)
    except InputError:
        raise
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(f"{_name(path)}: not a valid gzip file ({exc})", "damaged") from None
    except OSError as exc:
        raise InputError(f"{_name(path)}: cannot read it ({exc.strerror or exc})", "unreadable") from None
    if len(data) > max_body:
        raise InputError(f"{_name(path)}: more than max_body {max_body} bytes", "too_large")
    return data


def read_page_file(path: str | Path, url: str | None = None, max_body: int = MAX_BODY) -> Page:
    """One saved HTML or text file (optionally .gz) as a page; ``InputError`` when it cannot be."""
    path = Path(path)
    source = _name(path.resolve())
    kind = _kind(path)
    if kind not in ("html", "text"):
        expected = "expected .html, .htm, .xhtml or .txt, optionally .gz"
        raise InputError(f"{_name(path)}: unsupported file type; {expected}")
    body = _read_bytes(path, max_body)
    url = url or path.name
    url = storable(url[:-3] if url.lower().endswith(".gz") else url)
    if kind == "html":
        url = canonical_url(body, url) or url
    return Page(url, body, source, is_text=kind == "text")


def _read_file(path: Path, relative: str, field: str | None, skips: Skips, max_body: int) -> Iterator[Page]:
    kind = _kind(path)
    if kind == "feed":
        yield from _read_feed(path, field, skips, max_body)
    elif kind == "warc":
        yield from _read_warc(path, skips, max_body)
    else:
        try:
            yield read_page_file(path, relative, max_body)
        except InputError as exc:  # one bad file in a folder must not stop the scan
            skips(exc.reason, _name(path), str(exc).split(": ", 1)[-1])


def canonical_url(body: bytes, base: str = "") -> str | None:
    """The ``<link rel=canonical href=...>`` of a page's head, unescaped and joined to ``base``."""
    head = body[:65536]
    for tag in _CANONICAL.finditer(head):
        href = _HREF.search(tag.group(0))
        if href:
            value = html.unescape(href.group(1).decode("utf-8", errors="replace")).strip()
            return urljoin(base, value) if value else None
    return None


def _read_feed(path: Path, field: str | None, skips: Skips, max_body: int) -> Iterator[Page]:
    """Scrapy's JSON-lines feed export: one item per line with a ``url`` and a page field.

    A gzip feed cut short (a crawl killed while writing it) or damaged yields its lines up to
    the damage, and says where it stopped.
    """
    limit = 2 * max_body + 65536  # a JSON string may escape each byte of a page
    number = 0
    try:
        with gzip.open(path, "rb") if path.name.lower().endswith(".gz") else path.open("rb") as handle:
            while raw := handle.readline(limit):
                number += 1
                if number == 1:
                    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark before the first item
                where = f"{_name(path)} line {number}"
                if len(raw) >= limit and not raw.endswith(b"\n"):
                    while (rest := handle.readline(limit)) and not rest.endswith(b"\n"):
                        pass
                    skips("too_large", where, f"a line of more than {limit} bytes")
                    continue
                page = _feed_page(raw.decode("utf-8", errors="replace"), field, where, skips)
                if page is not None:
                    yield Page(page[0], page[1], f"{_name(path.resolve())}:{number}", is_text=page[2])
    except (EOFError, zlib.error, OSError) as exc:
        skips("damaged", f"{_name(path)} after line {number}", f"the rest cannot be read ({exc})")


def _feed_page(line: str, field: str | None, where: str, skips: Skips) -> tuple[str, str, bool] | None:
    """(url, page, is_text) of one feed line, or None (skipped and counted)."""
    if not line.strip():
        return None
    try:
        item = json.loads(line)
    except (ValueError, RecursionError) as exc:  # bad JSON, a 5,000-digit number, deep nesting
        skips("bad_record", where, f"not a JSON item ({str(exc)[:120]})")
        return None
    fields = (field,) if field else FEED_FIELDS
    name = next((f for f in fields if isinstance(item, dict) and isinstance(item.get(f), str)), None)
    if name is None or not isinstance(item.get("url"), str):
        skips("bad_record", where, f"needs 'url' and a text field ({field or ' / '.join(FEED_FIELDS)})")
        return None
    value = storable(item[name])
    return storable(item["url"]), value, not looks_like_html(value)


def _read_warc(path: Path, skips: Skips, max_body: int) -> Iterator[Page]:
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
        where = f"{_name(path)} at offset {offset}"
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
                logger.debug("%s: stray bytes %r at offset %d, before a record", _name(path), gap, at)
                start = header  # a damaged separator: the record after it may be whole
                continue
            if header is not None and not gap.strip():
                at = header  # the failing record's own header, after the blank lines before it
            skips(reason, f"{_name(path)} at offset {at}", why)
            found = _next_record(stream, at + 1, size, b"WARC/1.")
            if found is None:
                return
            start = found
            continue
        stream.seek(at)
        if stream.read(64).strip():
            skips(
                "damaged", f"{_name(path)} at offset {at} of {size}", "the rest cannot be read (cut short?)"
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
    where = f"{_name(path)} at offset {at}"
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
    return Page(storable(url), body, f"{_name(path.resolve())}@{at}", content_type=content_type or None)


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
