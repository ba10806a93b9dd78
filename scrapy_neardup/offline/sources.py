"""Offline readers: saved pages as (url, body) from files, folders, JSON-lines feeds and WARC files.

Readers stream; a record that cannot be read is logged and skipped, never fatal for the
rest of the input. A path that cannot be read at all raises ``InputError`` naming it.
"""

from __future__ import annotations

import dataclasses
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
from pathlib import Path
from urllib.parse import urljoin

from ..exceptions import InputError
from ..text import looks_like_html, storable
from .pages import Page, Skips, path_name
from .warc import read_warc

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


def _kind(path: Path) -> str | None:
    name = path.name.lower()
    inner = name[:-3] if name.endswith(".gz") else name
    for kind, suffixes in (("html", HTML_SUFFIXES), ("text", TEXT_SUFFIXES), ("feed", FEED_SUFFIXES),
                           ("warc", WARC_SUFFIXES)):  # fmt: skip
        if inner.endswith(suffixes):
            return kind
    return None


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
    path: str | Path,
    field: str | None = None,
    skips: Skips | None = None,
    max_body: int = MAX_BODY,
    follow_links: bool = False,
) -> Iterator[Page]:
    """Every page under ``path``: a file of a known kind or a folder of them (recursively).

    What cannot be read is logged and counted in ``skips`` (by reason), and reading goes on.
    In a folder, symbolic links that lead out of it are followed only with ``follow_links``.
    """
    path = Path(path)
    skips = skips if skips is not None else Skips()
    check_input(path)
    if not path.is_dir():
        yield from _read_file(path, path.as_posix(), field, skips, max_body)  # its URL: as named
        return
    done, files, unread = 0, 0, Counter()
    for file in _folder_pages(path, follow_links, skips, unread):
        files += 1
        for page in _read_file(file, file.relative_to(path).as_posix(), field, skips, max_body):
            yield dataclasses.replace(page, read_to=done + page.read_to)
        done += _size(file)
    if not files and unread:
        _say_none_read(path, unread)


def _say_none_read(folder: Path, unread: Counter[str]) -> None:
    """Why a folder gave no page: the files in it are of kinds a folder is not read for."""
    met = ", ".join(f"{n} {suffix}" for suffix, n in sorted(unread.items(), key=lambda kv: (-kv[1], kv[0])))
    named = sorted(s for s in unread if _kind(Path("x" + s)) in ("feed", "warc"))
    hint = f"; scan a {' or '.join(named)} file by naming it" if named else ""
    logger.warning(
        "%s: met %d files (%s) and read none: a folder is read for its %s files (optionally .gz)%s",
        path_name(folder), sum(unread.values()), met, ", ".join(HTML_SUFFIXES + TEXT_SUFFIXES), hint,
    )  # fmt: skip


def _suffix(name: str) -> str:
    """A file's kind as its name shows it: ``.warc``, ``.jl.gz``, or ``no suffix``."""
    name = name.lower()
    gz = name.endswith(".gz") and name != ".gz"
    suffix = Path(name[:-3] if gz else name).suffix + (".gz" if gz else "")
    return suffix or "no suffix"


def input_size(path: str | Path, follow_links: bool = False) -> int:
    """The bytes ``read_pages`` will read from ``path`` (a folder's page files summed), for the
    scan's progress; 0 when they cannot be told."""
    path = Path(path)
    if not path.is_dir():
        return _size(path)
    total = 0
    for folder, _, names in os.walk(path, followlinks=follow_links):
        total += sum(_size(Path(folder, name)) for name in names if _kind(Path(name)) in ("html", "text"))
    return total


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


_SPECIAL = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"))  # fmt: skip


def _folder_pages(root: Path, follow_links: bool, skips: Skips, unread: Counter[str]) -> Iterator[Path]:
    """The page files under ``root``, each folder's files by name and then its folders; every other
    entry that could hold pages is named with why it is skipped (a special file, a link out of
    ``root``, a broken link, a folder that cannot be read), and the other files counted in
    ``unread`` by suffix. Each folder is read once, however many links lead to it."""
    top = root.resolve()
    seen: set[tuple[int, int]] = set()
    folders = [root]  # depth first, without recursion: a folder may nest thousands deep
    while folders:
        folder = folders.pop()
        try:
            real = folder.stat()
            if (real.st_dev, real.st_ino) in seen:
                continue
            seen.add((real.st_dev, real.st_ino))
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            skips("unreadable", path_name(folder), f"cannot read the folder ({exc.strerror or exc})")
            continue
        inner = []
        for entry in entries:
            kind = _entry_kind(Path(entry.path), top, follow_links)
            if kind == "folder":
                inner.append(Path(entry.path))
            elif kind == "file":
                yield Path(entry.path)
            elif kind is not None:
                skips(kind[0], path_name(Path(entry.path)), kind[1])
            elif entry.is_file():
                unread[_suffix(entry.name)] += 1
        folders.extend(reversed(inner))


def _entry_kind(entry: Path, top: Path, follow_links: bool) -> str | tuple[str, str] | None:
    """``file`` (a page file), ``folder``, None (no page: not read, not named), or (reason, why)
    for an entry a folder scan skips."""
    page = _kind(entry) in ("html", "text")
    try:
        mode = entry.lstat().st_mode
        if stat.S_ISLNK(mode):
            target = entry.resolve()
            if not target.exists():
                return ("unreadable", "a broken symbolic link") if page else None
            mode = target.stat().st_mode
            if not follow_links and target != top and top not in target.parents:
                if not (page or stat.S_ISDIR(mode)):
                    return None
                where = path_name(target)
                return (
                    "symlink",
                    f"a symbolic link out of the scanned folder, to {where} (--follow-links reads it)",
                )
    except (OSError, RuntimeError) as exc:  # no permission, a loop of links
        return "unreadable", f"cannot read it ({getattr(exc, 'strerror', None) or exc})"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISREG(mode):
        return "file" if page else None
    what = next((name for test, name in _SPECIAL if test(mode)), "a special file")
    return "special", f"{what}, not a regular file"


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
        yield from read_warc(path, skips, max_body)
    else:
        try:
            yield dataclasses.replace(read_page_file(path, relative, max_body), read_to=_size(path))
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
                    at = (getattr(handle, "fileobj", None) or handle).tell()  # a gzip file's compressed bytes
                    source = f"{path_name(path.resolve())}:{number}"
                    yield Page(page[0], page[1], source, is_text=page[2], read_to=at)
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
        texts = [k for k, v in item.items() if isinstance(v, str)][:8] if isinstance(item, dict) else []
        hint = f"; its text fields: {', '.join(texts)} (name the page's with --field)" if texts else ""
        why = f"needs 'url' and a text field ({field or ' / '.join(FEED_FIELDS)}){hint}"
        skips("bad_record", where, why)
        return None
    value = storable(item[name])
    return storable(item["url"]), value, not looks_like_html(value)
