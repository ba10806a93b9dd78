"""Readers' comments: where a page has them, and when they make a page other content than its match.

The main text never holds them (``text``); a page's fingerprint keeps their words and hash
apart, and ``verify.compare`` weighs them (NEARDUP_COMMENTS).
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

import xxhash
from lxml import etree

from .tokens import words

if TYPE_CHECKING:
    from .methods import Fingerprint

# A page without an element whose class or id names comments has no comment section: the word is
# found first (a plain search, 0.06 ms a page), then whether an attribute before it holds it.
# trafilatura's comment XPaths ask for "comment" or "Comments", in that case.
_IN_CLASS_OR_ID = re.compile(r"""\b(?:class|id)\s*=\s*["']?[^"'<>=]*$""", re.IGNORECASE)


def names_comments(html: str) -> bool:
    """Whether an element of the page has a class or id that names comments ("comment" or
    "Comment", as trafilatura's comment XPaths look for them)."""
    at = html.find("omment", 1)
    while at >= 0:
        if html[at - 1] in "cC" and _IN_CLASS_OR_ID.search(html, max(0, at - 201), at - 1):
            return True
        at = html.find("omment", at + 6)
    return False


# What no reader wrote: a comment widget's script, the reply form, its labels and its notices.
_NOT_SAID = etree.XPath(
    ".//script|.//style|.//noscript|.//template|.//form|.//textarea|.//select|.//button|.//label"
    "|.//*[re:test(concat(@id, ' ', @class),"
    " '(^|[ _-])(form|privacy|consent|login|guidelines)([ _-]|$)', 'i')]",
    namespaces={"re": "http://exslt.org/regular-expressions"},
)


def readers_comments(tree: Any) -> str:
    """The text of a page's readers' comments (an lxml tree): the first section trafilatura's own
    rules call comments (by id and class), without what they leave out of one (reply forms,
    links) nor what no reader wrote (a widget's script, a privacy notice); not one that holds
    the article itself (an ``article``, ``main`` or ``h1``). The main text is extracted with
    comments left out; this is the text it left out as comments."""
    from trafilatura.xpaths import COMMENTS_DISCARD_XPATH, COMMENTS_XPATH

    for find in COMMENTS_XPATH:
        for section in find(tree):
            if section.xpath(".//article|.//main|.//h1"):
                continue
            section = copy.deepcopy(section)
            for discard in COMMENTS_DISCARD_XPATH:
                for node in discard(section):
                    if node.getparent() is not None:
                        node.drop_tree()
            for node in _NOT_SAID(section):
                if node.getparent() is not None:
                    node.drop_tree()
            text = "\n".join(part.strip() for part in section.itertext() if part.strip())
            if text:
                return text
    return ""


# Words of readers' comments one page holds that its match does not that make the two other content
# (NEARDUP_COMMENTS): a comment view of 100 words or more is not a copy of its article, nor the
# article of it.
COMMENT_WORDS = 100


def comments_apart(page: Fingerprint, match: Fingerprint) -> int:
    """Words of readers' comments one of two pages holds that the other does not (the more, when
    each holds others): 0 when neither holds any, or both the same. Either way round: an article
    met after its comment view is not lost as a copy of it (so a print view met after an
    article shown with its comments is kept too)."""
    if page.comment_hash == match.comment_hash:
        return 0
    return max(page.comment_words, match.comment_words)


def holder_of_comments(a: Fingerprint, b: Fingerprint) -> str:
    """Which of two pages ("A" or "B") holds the readers' comments that ``comments_apart`` counts."""
    return "B" if b.comment_words >= a.comment_words else "A"


def comment_signature(comments: str) -> tuple[int, int]:
    """(words, hash) of a page's readers' comments: (0, 0) when it has none."""
    said = words(comments) if comments else []
    return (len(said), xxhash.xxh64_intdigest(b" ".join(said))) if said else (0, 0)


def content_of(fp: Fingerprint) -> int | None:
    """A page's content as one number: the exact hash of its main text, with its readers'
    comments' hash when it has comments (a comment view is other content than its article)."""
    if fp.exact is None or not fp.comment_words:
        return fp.exact
    return xxhash.xxh64_intdigest(fp.exact.to_bytes(16, "big") + fp.comment_hash.to_bytes(8, "big"))
