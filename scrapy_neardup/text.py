"""HTML to main text: decoding, extractor choice, the page's title and repeated lines.

Every function here is total on web input: bad bytes are decoded with replacement,
binary bodies are recognized, and an extractor that fails raises ``SkipPage`` with a
reason instead of an arbitrary exception, so a crawl never dies for one page.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from html import unescape
from typing import Any

from .comments import names_comments, readers_comments
from .exceptions import MissingExtraError, SkipPage
from .tokens import TOKEN, words

logger = logging.getLogger(__name__)

Extracted = tuple[str | None, str]  # an extractor's main text of a page, and its readers' comments

# Tags are bounded: an unbounded ``[^>]*`` or ``.*?`` retried at each of 100,000 "<title"s is quadratic.
# A tag this long is looked at for attributes (a data: URI is long too, with few of them).
HUGE_TAG, MAX_ATTRIBUTES = 65_536, 5_000
_HUGE_TAG = re.compile(f"<[^<>]{{{HUGE_TAG}}}")  # linear: each try stops at the next < or >
_TITLE_OPEN = re.compile(r"<title[^>]{0,500}>", re.IGNORECASE)
_TITLE_CLOSE = re.compile(r"</title\s*>", re.IGNORECASE)
_HTML_TAG = re.compile(
    rb"<(?:!doctype|html|head|body|p|div|br|span|article|section|main|table|ul|ol|li|h[1-6]|a|title|meta)\b[^>]{0,500}>",
    re.IGNORECASE,
)
_PAGE_TAG = re.compile(rb"<(?:!doctype|html|head|body)\b", re.IGNORECASE)
# resiliparse's extraction (and its parser, for open formatting tags) takes time quadratic in how
# deep elements nest: 10,000 levels 1.7 s, 200,000 about 13 minutes, in C that no signal stops.
# Real pages nest tens of levels (51 at most over the test data, by ``nesting_depth``). Rows and
# cells do not count: resiliparse takes 0.4 s on 60,000 nested tables.
MAX_DEPTH = 5_000
# trafilatura spends 20 to 100 microseconds an element: past this many tags, resiliparse judges the page.
MAX_TRAFILATURA_TAGS = 100_000
# A tag's name and the rest up to its ">" (or the next "<"): nothing after a run can fail, so no backtracking.
_TAG = re.compile(r"<(/?)([a-zA-Z][^\s/<>]*)([^<>]*)")
# Tags after which nothing nests (void), or that the parser closes at the next of their kind or at
# their container's end (an unclosed <p>, <li>, <td> nests nothing): they do not count.
_FLAT = frozenset((
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr", "param", "keygen", "image", "frame", "basefont", "bgsound", "p", "li", "dt", "dd", "tr",
    "td", "th", "option", "optgroup", "thead", "tbody", "tfoot", "colgroup", "caption", "rb", "rt",
    "rp", "rtc",
))  # fmt: skip
# A closing tag below one of these closes nothing; a formatting element a closing tag skips is
# reopened by the parser at the next text.
_BOUNDARIES = frozenset((
    "table", "template", "marquee", "object", "applet", "html",
))  # fmt: skip
_FORMATTING = frozenset((
    "a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u",
))  # fmt: skip
# Elements whose content is text up to their closing tag, not tags.
_RAW_TEXT = {
    name: re.compile(f"</{name}", re.IGNORECASE)
    for name in ("script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes")
}
# HTML's own elements, which a "/>" does not close (in SVG and MathML it does).
_HTML_NAMES = frozenset((
    "a", "abbr", "address", "article", "aside", "audio", "b", "bdi", "bdo", "big", "blink",
    "blockquote", "body", "button", "canvas", "center", "cite", "code", "data", "datalist", "del",
    "details", "dfn", "dialog", "dir", "div", "dl", "em", "fieldset", "figcaption", "figure", "font",
    "footer", "form", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup",
    "html", "i", "iframe", "ins", "kbd", "label", "legend", "main", "map", "mark", "marquee", "menu",
    "meter", "nav", "nobr", "noembed", "noframes", "noscript", "object", "ol", "output", "picture",
    "pre", "progress", "q", "ruby", "s", "samp", "script", "search", "section", "select", "slot",
    "small", "span", "strike", "strong", "style", "sub", "summary", "sup", "table", "template",
    "textarea", "time", "title", "tt", "u", "ul", "var", "video", "xmp",
))  # fmt: skip

# Magic numbers of bodies that are certainly not HTML: images, PDF, archives, fonts, media.
_BINARY_MAGIC = (
    b"%PDF", b"\x89PNG", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"PK\x03\x04", b"\x1f\x8b",
    b"RIFF", b"OggS", b"ID3", b"\x7fELF", b"wOFF", b"wOF2", b"BM", b"\x00\x00\x01\x00",
    b"II*\x00", b"MM\x00*", b"7z\xbc\xaf", b"Rar!", b"\x28\xb5\x2f\xfd", b"%!PS",
)  # fmt: skip
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CONTROL_BYTES = bytes([*range(9), *range(14, 32)])  # control characters text never holds


def looks_binary(body: bytes) -> bool:
    """True for bodies that are not text: a known magic number, or control bytes in the first 4 KiB."""
    head = body[:4096]
    if head.startswith(_BINARY_MAGIC):
        return True
    if head.startswith(_UTF16_BOMS) or head.startswith(b"\xef\xbb\xbf"):
        return False
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    return controls > max(8, len(head) // 50)


def _sniff_encoding(body: bytes) -> str | None:
    """Guess for bodies that declare no charset: UTF-8 if it decodes, else charset-normalizer's guess."""
    try:
        body.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - trafilatura depends on it
        return None
    best = from_bytes(body[:65536]).best()
    return best.encoding if best else None


def decode(body: bytes | str, content_type: str | None = None) -> str:
    """Bytes to text the way a browser does: BOM, HTTP header, ``<meta charset>``, a sniff, then UTF-8.

    Undecodable bytes become U+FFFD; this never raises on page content.
    """
    if isinstance(body, str):
        return body
    from w3lib.encoding import html_to_unicode

    try:
        _, text = html_to_unicode(content_type, body, auto_detect_fun=_sniff_encoding)
    except (LookupError, ValueError):
        text = body.decode("utf-8", errors="replace")
    return text


def looks_like_navigation(text: str) -> bool:
    """True when most of a text's words sit in lines of three words or fewer: menus, breadcrumbs.

    Article prose comes in sentences; a "main text" made of one-word lines is a site's
    navigation, which every page of the site shares.
    """
    total = short = 0
    for line in text.splitlines():
        words = len(TOKEN.findall(line))
        total += words
        if words <= 3:
            short += words
    return total > 0 and short >= 0.5 * total


def _trafilatura(html: str, fast: bool) -> Extracted:
    if html.count("<") > MAX_TRAFILATURA_TAGS:  # minutes in trafilatura, a second or two in resiliparse
        try:
            return _resiliparse(html)
        except MissingExtraError:
            detail = f"over {MAX_TRAFILATURA_TAGS:,} tags, and no resiliparse"
            raise SkipPage("pathological", detail) from None
    import trafilatura
    from trafilatura.utils import load_html

    tree = load_html(html)  # one parse for the comments and the text (which it may change)
    if tree is None:
        return None, ""
    comments = readers_comments(tree) if names_comments(html) else ""
    # Never deduplicate=True: trafilatura would then drop repeated pages on its own, unrecorded.
    options = {
        "include_comments": False,
        "include_tables": True,
        "deduplicate": False,
        "output_format": "txt",
    }
    text = trafilatura.extract(tree, fast=fast, **options)
    if text and looks_like_navigation(text):
        # On a page with (almost) no content of its own - a stub, a "this page has moved" -
        # trafilatura returns the site's menus, and two such pages of a site would match on
        # their template alone. Its precision mode keeps the little real text there is.
        text = trafilatura.extract(html, fast=fast, favor_precision=True, **options)
    return text, comments


# resiliparse leaves out what trafilatura does (post meta, figures and their captions, and comments
# unless asked for): a page's copy under another template does not carry them.
_RESILIPARSE_SKIP = ("figure", "figcaption", "[class*=caption]", "[id*=caption]")
# The ``auto`` extractor: pages with more elements than this go to resiliparse; a fast-mode text
# with less than this share of the page's visible words is taken again in the full mode.
LARGE_PAGE, MISSED_SHARE = 1500, 0.1


def _resiliparse_module() -> Any:
    try:
        import resiliparse.extract.html2text as html2text
        import resiliparse.parse.html as parse_html
    except ImportError:
        feature = "NEARDUP_EXTRACTOR = 'resiliparse' or 'auto'"
        raise MissingExtraError(feature, "fast", "resiliparse") from None
    return html2text, parse_html


def _resiliparse(html: Any, source: str | None = None) -> Extracted:
    """resiliparse's main content of a page (a string, or a tree it parsed from ``source``), and
    its readers' comments (``readers_comments``, where the page's markup names comments)."""
    html2text, _ = _resiliparse_module()
    text = html2text.extract_plain_text(
        html, main_content=True, preserve_formatting=True, alt_texts=False, list_bullets=False,
        comments=False, post_meta=False, skip_elements=_RESILIPARSE_SKIP,
    )  # fmt: skip
    page = source if source is not None else html
    if not isinstance(page, str) or not names_comments(page):
        return text, ""
    from trafilatura.utils import load_html

    tree = load_html(page)
    return text, readers_comments(tree) if tree is not None else ""


def _auto(html: str) -> Extracted:
    """trafilatura's fast mode on a page of usual size, resiliparse on a large one.

    trafilatura's time grows faster than the page's element count, resiliparse's with it; on a
    long page (a reference manual, a long listing) the boilerplate is a small share of the
    text, so resiliparse's coarser cut changes little. The fast mode leaves out trafilatura's
    fallback extractors, which are there for a page whose main text it missed: when its text
    holds under ``MISSED_SHARE`` of the page's visible words (a block of teasers taken for the
    article), the full mode runs. One parse serves the count, the visible words and resiliparse.
    """
    try:
        html2text, parse_html = _resiliparse_module()
    except MissingExtraError:  # no wheel for this platform (musl, Windows on ARM): trafilatura alone
        fast = _trafilatura(html, True)
        return fast if fast[0] else _trafilatura(html, False)
    tree = parse_html.HTMLTree.parse(html)
    if tree.body is not None and len(tree.body.query_selector_all("*")) > LARGE_PAGE:
        return _resiliparse(tree, html)
    extracted = _trafilatura(html, True)
    visible = html2text.extract_plain_text(tree, alt_texts=False, list_bullets=False)
    if not extracted[0] or len(words(extracted[0])) < MISSED_SHARE * len(words(visible)):
        full = _trafilatura(html, False)
        extracted = full if full[0] else extracted
    return extracted if extracted[0] else _resiliparse(tree, html)


def _plain(html: str) -> Extracted:
    """All visible text: the document without head, scripts, styles and templates (readers'
    comments in it, none apart)."""
    import lxml.html
    from lxml import etree

    # Parse bytes so an <?xml encoding=...?> declaration in a str cannot make lxml refuse it.
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True)
    try:
        root = lxml.html.document_fromstring(html.encode("utf-8", errors="replace"), parser=parser)
    except (etree.ParserError, ValueError):
        return None, ""
    for node in root.xpath("//head|//script|//style|//noscript|//template|//svg"):
        node.drop_tree()
    return "\n".join(part.strip() for part in root.itertext() if part.strip()), ""


def _text(text: str) -> Extracted:
    return text, ""


# Each takes the page and gives its main text and, apart, the readers' comments it found.
EXTRACTOR_FUNCS: dict[str, Callable[[str], Extracted]] = {
    "trafilatura": lambda html: _trafilatura(html, False),
    "trafilatura-fast": lambda html: _trafilatura(html, True),
    "resiliparse": _resiliparse,
    "auto": _auto,
    "plain": _plain,
    "text": _text,
}


def main_text(
    body: bytes | str,
    extractor: str = "trafilatura",
    content_type: str | None = None,
    max_body: int = 5_000_000,
) -> str:
    """A page's main text, or ``SkipPage`` saying why it has none worth judging.

    Reasons: ``empty``, ``too_large``, ``binary``, ``extraction_failed``, ``no_text``.
    """
    return extract_page(body, extractor, content_type, max_body)[0]


def storable(text: str) -> str:
    """``text`` with lone surrogates (a ``\\ud800`` escape in JSON, a file name that is not UTF-8)
    written as backslash escapes, so it can be stored and printed."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _crowded_tag(html: str) -> bool:
    """Whether a tag of the page holds more than ``MAX_ATTRIBUTES`` attributes."""
    if len(html) < HUGE_TAG or html.count("=") <= MAX_ATTRIBUTES or max(map(len, html.split("<"))) < HUGE_TAG:
        return False  # no tag can be that crowded: the usual page, without a regex pass over it
    for match in _HUGE_TAG.finditer(html):
        end = html.find(">", match.start())
        if html.count("=", match.start(), end if end >= 0 else len(html)) > MAX_ATTRIBUTES:
            return True
    return False


def nesting_depth(html: str) -> int:
    """An upper estimate of how deep the page's elements nest, in one pass over its tags.

    Opening tags push, except those in ``_FLAT``; a closing tag pops down to its element when that
    is among the top few and nothing the parser would keep or reopen is above it. Any other closing
    tag is ignored, so sloppy markup makes the estimate deeper than the parser's tree, never
    shallower.
    """
    stack: list[str] = []
    deepest = 0
    tag = _TAG.search(html)
    while tag:
        closing, name, rest = tag.groups()
        name = name.lower()
        end = tag.end()
        if name in _FLAT:
            pass
        elif not closing:
            if not rest.endswith("/") or name in _HTML_NAMES:
                stack.append(name)
                deepest = max(deepest, len(stack))
            if name in _RAW_TEXT:
                raw_end = _RAW_TEXT[name].search(html, end)
                end = raw_end.start() if raw_end else len(html)
        else:
            for at in range(len(stack) - 1, max(len(stack) - 9, -1), -1):
                if stack[at] == name:
                    del stack[at:]
                    break
                if stack[at] in _BOUNDARIES or stack[at] in _FORMATTING:
                    break
        tag = _TAG.search(html, end)
    return deepest


def _too_deep(html: str) -> bool:
    """Whether elements may nest more than ``MAX_DEPTH`` deep; without a pass over the tags when
    there are too few tags for that (the usual page)."""
    return html.count("<") > MAX_DEPTH and nesting_depth(html) > MAX_DEPTH


def looks_like_html(value: bytes | str) -> bool:
    """Whether an item's field holds HTML (it starts with a tag, or a known tag comes soon) rather
    than plain text."""
    head = value[:8192]
    head = head.encode("utf-8", errors="replace") if isinstance(head, str) else head
    return head.lstrip()[:1] == b"<" or bool(_HTML_TAG.search(head))


def item_extractor(value: bytes | str) -> str | None:
    """The extractor for an item's field: None (the configured one) for a page, ``plain`` for an HTML
    fragment, whose few tags give a main-text extractor nothing to go on, ``text`` for plain text."""
    if not looks_like_html(value):
        return "text"
    head = value[:8192]
    head = head.encode("utf-8", errors="replace") if isinstance(head, str) else head
    return None if _PAGE_TAG.search(head) else "plain"


def page_title(html: str) -> str:
    """The ``<title>`` of a page, unescaped and collapsed (for reports; empty when there is none)."""
    opening = _TITLE_OPEN.search(html, 0, 200_000)
    closing = opening and _TITLE_CLOSE.search(html, opening.end(), opening.end() + 20_000)
    if not closing:
        return ""
    return " ".join(unescape(html[opening.end() : closing.start()]).split())[:300]


def extract_page(
    body: bytes | str,
    extractor: str = "trafilatura",
    content_type: str | None = None,
    max_body: int = 5_000_000,
) -> tuple[str, str]:
    """(main text, title) of a page; raises ``SkipPage`` like ``main_text``."""
    return extract_parts(body, extractor, content_type, max_body)[:2]


def extract_parts(
    body: bytes | str,
    extractor: str = "trafilatura",
    content_type: str | None = None,
    max_body: int = 5_000_000,
) -> tuple[str, str, str]:
    """(main text, title, readers' comments) of a page: the comment sections the extractor finds
    are never part of the main text, and are given apart ("" when none); raises ``SkipPage``
    like ``main_text``."""
    size = len(body) if isinstance(body, bytes) else len(body.encode("utf-8", errors="replace"))
    if size > max_body:
        raise SkipPage("too_large", f"{size} bytes > max_body {max_body}")
    if isinstance(body, bytes):
        if looks_binary(body):
            raise SkipPage("binary", "the body is not text")
        body = decode(body, content_type)
    elif looks_binary(body[:4096].encode("utf-8", "surrogatepass")):  # an item of a binary body, decoded
        raise SkipPage("binary", "the body is not text")
    if not body.strip():
        raise SkipPage("empty", "the body is empty")
    if extractor != "text" and _crowded_tag(body):
        # One tag of 300,000 attributes kept trafilatura busy for minutes: not a page to judge.
        raise SkipPage("pathological", f"a tag with more than {MAX_ATTRIBUTES:,} attributes")
    if extractor != "text" and _too_deep(body):
        # resiliparse takes minutes on 200,000 nested <div>s; lxml drops what lies below 256 levels.
        raise SkipPage("pathological", f"elements nested more than {MAX_DEPTH:,} deep")
    func = EXTRACTOR_FUNCS[extractor]
    try:
        text, comments = func(body)
    except (MissingExtraError, SkipPage):
        raise
    except Exception as exc:  # an extractor bug on one page must not stop the crawl
        logger.debug("extractor %s failed: %r", extractor, exc)
        raise SkipPage("extraction_failed", f"{extractor}: {exc!r}"[:300]) from exc
    if not text or not text.strip():
        raise SkipPage("no_text", f"{extractor} found no main text")
    if extractor == "text":
        return text, "", ""
    return drop_repeated_lines(text), page_title(body), comments


def drop_repeated_lines(text: str, min_chars: int = 30) -> str:
    """The text with every line of ``min_chars`` or more kept at its first occurrence only.

    Pages carry hidden second copies of their article (AMP, print and mobile variants); an
    extractor that takes them all would make the page's spot multiset two or three times
    its copy's, and the two would no longer match. Short lines (menu items, table cells,
    code) may repeat legitimately and are kept.
    """
    lines = text.splitlines()
    # A line's key: its words joined by single spaces ("" when the line is too short to count:
    # its collapsed form is shorter still). Keys under min_chars do not count either.
    keys = [" ".join(line.split()) if len(line) >= min_chars else "" for line in lines]
    counted = [key for key in keys if len(key) >= min_chars]
    if len(set(counted)) == len(counted):
        return "\n".join(lines)  # the usual page: no long line repeats
    first = {key: at for at, key in reversed(list(enumerate(keys)))}
    pairs = enumerate(zip(lines, keys, strict=True))
    return "\n".join(line for at, (line, key) in pairs if len(key) < min_chars or first[key] == at)
