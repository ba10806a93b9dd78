"""A real article's comment view: the page with a section of readers' comments appended.

The comments are sentences of other real articles, about 500 words in all, in the markup blogs
use (``<section id="comments">`` of ``<div class="comment">``), so an extractor told to keep
comments finds them and one told to leave them out sees the article alone.
"""

from __future__ import annotations

import re
from html import escape

READERS = ("Ann", "Bo", "Chidi", "Dana", "Eli", "Farah", "Gus", "Hana")


def comment_sentences(bodies: list[str], words: int) -> list[str]:
    """Sentences of ``bodies`` (other articles' text), in order, up to about ``words`` words."""
    taken: list[str] = []
    count = 0
    for body in bodies:
        for sentence in re.split(r"(?<=[.!?])\s+", " ".join(body.split())):
            if count >= words:
                return taken
            if 8 <= len(sentence.split()) <= 40:
                taken.append(sentence)
                count += len(sentence.split())
    return taken


def with_comments(html: str, sentences: list[str], per_comment: int = 3) -> str:
    """``html`` with a comment section before ``</body>``: ``sentences``, ``per_comment`` a reader."""
    comments = []
    for n, at in enumerate(range(0, len(sentences), per_comment)):
        said = " ".join(sentences[at : at + per_comment])
        comments.append(
            f'<div class="comment" id="comment-{n + 1}"><p class="comment-author">{READERS[n % len(READERS)]}'
            f"</p><p>{escape(said)}</p></div>"
        )
    section = f'<section id="comments" class="comments"><h2>Comments</h2>{"".join(comments)}</section>'
    end = html.lower().rfind("</body>")
    return html[:end] + section + html[end:] if end >= 0 else html + section
