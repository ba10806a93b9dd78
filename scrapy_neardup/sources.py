"""Offline readers: saved pages as (url, body) from files, folders, JSON-lines feeds and WARC files.

Readers stream; a record that cannot be read is logged and skipped, never fatal for the
rest of the input. A path that cannot be read at all raises ``InputError`` naming it.
"""

from __future__ import annotations

import gzip
import html
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

from .exceptions import InputError
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


def path_name(path: Path) -> str:
    """A path as it can be logged and stored (a file name that is not UTF-8 escaped)."""
    return storable(str(path))


def check_input(path: str | Path) -> None:
    """``InputError`` for a path the scan cannot read at all, before anything is written."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{path_name(path)}: no such file or folder") from None
    except OSError as exc:
        raise InputError(f"{path_name(path)}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        if not os.access(path, os.R_OK | os.X_OK):
            raise InputError(f"{path_name(path)}: cannot read the folder (permission denied)")
        return
    if not stat.S_ISREG(mode):
        raise InputError(f"{path_name(path)}: not a regular file (a pipe or a device cannot be scanned)")
    if _kind(path) is None:
        raise InputError(
            f"{path_name(path)}: unsupported file type; expected .html, .htm, .xhtml, .txt, .jl, .jsonl "
            "or .warc (optionally .gz), or a folder"
        )
    if not os.access(path, os.R_OK):
        raise InputError(f"{path_name(path)}: cannot read it (permission denied)")


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
            "unreadable",
            path_name(Path(exc.filename or path)),
            f"cannot read the folder ({exc.strerror or exc})",
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
                skips("unreadable", path_name(file), "a broken symbolic link")


def _read_bytes(path: Path, max_body: int) -> bytes:
    """A saved file's bytes (decompressed for .gz), at most ``max_body`` of them read."""
    gz = path.name.lower().endswith(".gz")
    try:
        if not gz and path.stat().st_size > max_body:
            raise InputError(
                f"{path_name(path)}: {path.stat().st_size} bytes > max_body {max_body}", "too_large"
            )
        with gzip.open(path, "rb") if gz else path.open("rb") as handle:
            data = handle.read(max_body + 1)
    except InputError:
        raise
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(f"{path_name(path)}: not a valid gzip file ({exc})", "damaged") from None
    except OSError as exc:
        raise InputError(f"{path_name(path)}: cannot read it ({exc.strerror or exc})", "unreadable") from None
    if len(data) > max_body:
        raise InputError(f"{path_name(path)}: more than max_body {max_body} bytes", "too_large")
    return data


def read_page_file(path: str | Path, url: str | None = None, max_body: int = MAX_BODY) -> Page:
    """One saved HTML or text file (optionally .gz) as a page; ``InputError`` when it cannot be."""
    path = Path(path)
    source = path_name(path.resolve())
    kind = _kind(path)
    if kind not in ("html", "text"):
        expected = "expected .html, .htm, .xhtml or .txt, optionally .gz"
        raise InputError(f"{path_name(path)}: unsupported file type; {expected}")
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
        from .warc import read_warc  # (it reads this module's Page and Skips)

        yield from read_warc(path, skips, max_body)
    else:
        try:
            yield read_page_file(path, relative, max_body)
        except InputError as exc:  # one bad file in a folder must not stop the scan
            skips(exc.reason, path_name(path), str(exc).split(": ", 1)[-1])


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
                where = f"{path_name(path)} line {number}"
                if len(raw) >= limit and not raw.endswith(b"\n"):
                    while (rest := handle.readline(limit)) and not rest.endswith(b"\n"):
                        pass
                    skips("too_large", where, f"a line of more than {limit} bytes")
                    continue
                page = _feed_page(raw.decode("utf-8", errors="replace"), field, where, skips)
                if page is not None:
                    yield Page(page[0], page[1], f"{path_name(path.resolve())}:{number}", is_text=page[2])
    except (EOFError, zlib.error, OSError) as exc:
        skips("damaged", f"{path_name(path)} after line {number}", f"the rest cannot be read ({exc})")


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
