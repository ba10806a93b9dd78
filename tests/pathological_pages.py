"""Pages built to be slow for an HTML parser or extractor, each under the default NEARDUP_MAX_BODY.

``PAGES`` maps a name to a function making the page's HTML; each page also holds a paragraph of
ordinary text, so an extractor that copes with it has something to judge.

    python tests/pathological_pages.py FOLDER   # writes FOLDER/<name>.html for each page
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path

TEXT = "The river rose by two metres overnight and the town council closed the old bridge. " * 12
DEPTH = 200_000


def _page(body: str) -> str:
    return f"<!doctype html><html><head><title>A page</title></head><body>{body}</body></html>"


def deep_divs() -> str:
    return _page("<div>" * DEPTH + f"<p>{TEXT}</p>" + "</div>" * DEPTH)


def deep_with_text() -> str:
    return _page("<div>a " * DEPTH + f"<p>{TEXT}</p>" + "b</div>" * DEPTH)


def deep_mixed_tags() -> str:
    names = ("div", "section", "span", "article", "b", "em", "ul", "li", "blockquote", "font")
    opening = "".join(f"<{names[i % len(names)]}>" for i in range(DEPTH // 2))
    closing = "".join(f"</{names[i % len(names)]}>" for i in reversed(range(DEPTH // 2)))
    return _page(opening + f"<p>{TEXT}</p>" + closing)


def deep_unclosed() -> str:
    return _page("<div>" * DEPTH + f"<p>{TEXT}</p>")


def unclosed_formatting() -> str:
    """Formatting tags left open, then many paragraphs: each one reopens the open formatting tags."""
    names = ("b", "i", "u", "s", "em", "strong", "small", "big", "code", "tt", "font", "nobr", "strike")
    opened = "".join(f"<{names[i % len(names)]} class=c{i}>" for i in range(20_000))
    return _page(opened + "<p>x" * 100_000 + f"<p>{TEXT}</p>")


def crowded_tag() -> str:
    attributes = " ".join(f"a{i}=1" for i in range(100_000))
    return _page(f"<div {attributes}>x</div><p>{TEXT}</p>")


def tiny_elements() -> str:
    return _page("<i>" * 10 + "<b></b>" * 600_000 + f"<p>{TEXT}</p>")


def million_elements() -> str:
    return _page("<br>" * 1_000_000 + f"<p>{TEXT}</p>")


def huge_table() -> str:
    row = "<tr>" + "<td>x" * 200
    return _page(f"<p>{TEXT}</p><table>" + row * 2_000 + "</table>")


def long_word() -> str:
    return _page(f"<p>{TEXT}</p><p>" + "w" * 2_000_000 + "</p>")


def long_line() -> str:
    return _page("<p>" + "word " * 900_000 + "</p>")


def many_lines() -> str:
    return _page("<pre>" + "".join(f"line {i} of the long listing here\n" for i in range(120_000)) + "</pre>")


def many_titles() -> str:
    return _page(f"<p>{TEXT}</p>" + "<title" * 500_000)


def many_comments() -> str:
    return _page(f"<p>{TEXT}</p>" + "<!--" * 1_000_000)


def unclosed_script() -> str:
    return _page(f"<p>{TEXT}</p><script>" + "var a = '<div>';\n" * 200_000)


def many_entities() -> str:
    return _page(f"<p>{TEXT}</p><p>" + "&amp;&#x41;&lt" * 300_000 + "</p>")


def many_links() -> str:
    return _page(f"<p>{TEXT}</p>" + "<a href=/x>link</a> " * 200_000)


def nested_tables() -> str:
    return _page("<table><tr><td>" * 60_000 + f"<p>{TEXT}</p>")


def nested_lists() -> str:
    return _page("<ul><li>" * 100_000 + f"<p>{TEXT}</p>")


PAGES: dict[str, Callable[[], str]] = {
    function.__name__: function
    for function in (
        deep_divs,
        deep_with_text,
        deep_mixed_tags,
        deep_unclosed,
        unclosed_formatting,
        crowded_tag,
        tiny_elements,
        million_elements,
        huge_table,
        long_word,
        long_line,
        many_lines,
        many_titles,
        many_comments,
        unclosed_script,
        many_entities,
        many_links,
        nested_tables,
        nested_lists,
    )
}


def write(folder: Path, names: Iterable[str] = PAGES) -> list[Path]:
    """Each page (of ``names``) as ``folder/<name>.html``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = folder / f"{name}.html"
        path.write_text(PAGES[name](), encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write(Path(sys.argv[1])):
        print(written, written.stat().st_size)
