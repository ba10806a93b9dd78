"""Offline readers: saved pages as (url, body) from files, folders, JSON-lines feeds and WARC files.

Readers stream; a record that cannot be read is logged and skipped, never fatal for the
rest of the input. A path that cannot be read at all raises ``InputError`` naming it.
"""

from __future__ import annotations

import gzip
import html
import json
import logging
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

from .exceptions import InputError
from .text import looks_like_html

logger = logging.getLogger(__name__)

HTML_SUFFIXES = (".html", ".htm", ".xhtml")
TEXT_SUFFIXES = (".txt",)
FEED_SUFFIXES = (".jl", ".jsonl")
WARC_SUFFIXES = (".warc",)
FEED_FIELDS = ("html", "body", "text", "content")
_CANONICAL = re.compile(
    rb"""<link\b[^>]*\brel\s*=\s*["']?canonical["']?[^>]*>""", re.IGNORECASE
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


def read_pages(path: str | Path, field: str | None = None) -> Iterator[Page]:
    """Every page under ``path``: a file of a known kind or a folder of them (recursively)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and _kind(p) in ("html", "text"))
        for file in files:
            yield from _read_file(file, file.relative_to(path).as_posix(), field)
        return
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if _kind(path) is None:
        raise InputError(
            f"{path}: unsupported file type; expected .html, .htm, .xhtml, .txt, .jl, .jsonl or .warc "
            "(optionally .gz), or a folder"
        )
    yield from _read_file(path, path.name, field)


def _open_bytes(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if not path.name.lower().endswith(".gz"):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: not a valid gzip file ({exc})") from None


def read_page_file(path: str | Path, url: str | None = None) -> Page:
    """One saved HTML or text file (optionally .gz) as a page; ``InputError`` when it cannot be."""
    path = Path(path)
    source = str(path.resolve())
    kind = _kind(path)
    if kind not in ("html", "text"):
        expected = "expected .html, .htm, .xhtml or .txt, optionally .gz"
        raise InputError(f"{path}: unsupported file type; {expected}")
    body = _open_bytes(path)
    url = url or path.name
    url = url[:-3] if url.lower().endswith(".gz") else url
    if kind == "html":
        url = canonical_url(body, url) or url
    return Page(url, body, source, is_text=kind == "text")


def _read_file(path: Path, relative: str, field: str | None) -> Iterator[Page]:
    kind = _kind(path)
    if kind == "feed":
        yield from _read_feed(path, field)
    elif kind == "warc":
        yield from _read_warc(path)
    else:
        try:
            yield read_page_file(path, relative)
        except InputError as exc:  # one bad file in a folder must not stop the scan
            logger.warning("skipped %s", exc)


def canonical_url(body: bytes, base: str = "") -> str | None:
    """The ``<link rel=canonical href=...>`` of a page's head, unescaped and joined to ``base``."""
    head = body[:65536]
    for tag in _CANONICAL.finditer(head):
        href = _HREF.search(tag.group(0))
        if href:
            value = html.unescape(href.group(1).decode("utf-8", errors="replace")).strip()
            return urljoin(base, value) if value else None
    return None


def _read_feed(path: Path, field: str | None) -> Iterator[Page]:
    """Scrapy's JSON-lines feed export: one item per line with a ``url`` and a page field."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        handle = opener(path, "rt", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc})") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                logger.warning("skipped %s line %d: not JSON (%s)", path, number, exc.msg)
                continue
            fields = (field,) if field else FEED_FIELDS
            name = next((f for f in fields if isinstance(item, dict) and isinstance(item.get(f), str)), None)
            if name is None or not isinstance(item.get("url"), str):
                wanted = field or " / ".join(FEED_FIELDS)
                logger.warning("skipped %s line %d: needs 'url' and a text field (%s)", path, number, wanted)
                continue
            value = item[name]
            source = f"{path.resolve()}:{number}"
            yield Page(item["url"], value, source, is_text=not looks_like_html(value))


def _read_warc(path: Path) -> Iterator[Page]:
    """HTML response records of a WARC file (warcio reads .warc and .warc.gz alike)."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    try:
        stream = path.open("rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with stream:
        try:
            records = ArchiveIterator(stream)
            for record in records:
                if record.rec_type != "response" or record.http_headers is None:
                    continue
                content_type = record.http_headers.get_header("Content-Type") or ""
                if "html" not in content_type.lower():
                    continue
                url = record.rec_headers.get_header("WARC-Target-URI")
                body = record.content_stream().read()
                source = f"{path.resolve()}@{records.get_record_offset()}"
                yield Page(url, body, source, content_type=content_type)
        except ArchiveLoadFailed as exc:
            raise InputError(f"{path}: not a readable WARC file ({exc})") from None
