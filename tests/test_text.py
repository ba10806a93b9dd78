from __future__ import annotations

import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_neardup import MissingExtraError, SkipPage
from scrapy_neardup.signatures._hashing import token_hashes
from scrapy_neardup.signatures.spotsigs import LANGUAGE_VOTES
from scrapy_neardup.text import (
    EXTRACTOR_FUNCS,
    decode,
    drop_repeated_lines,
    extract_parts,
    looks_binary,
    main_text,
    page_title,
)
from scrapy_neardup.tokens import (
    CJK,
    MAX_TEXT,
    MAX_TOKENS,
    detect_language,
    detect_languages,
    normalize,
    split_sentences,
    tokenize,
    words,
)

ARTICLE = (
    "<html><head><title>T</title><style>p{color:red}</style><script>var x = 'hidden';</script></head>"
    "<body><nav><a href='/'>Home</a> <a href='/news'>News</a></nav><article><h1>Harbour reopens</h1>"
    + "".join(
        f"<p>The harbour of the old town was reopened on day {i} after the storm had damaged the piers, "
        "and the fishermen said that the repairs were done faster than anyone expected.</p>"
        for i in range(8)
    )
    + "</article><footer>Copyright 2026</footer></body></html>"
)


def test_decode_prefers_http_header_then_meta_then_bom():
    cyrillic = "Привет, мир: новости дня"
    body = f"<html><body><p>{cyrillic}</p></body></html>".encode("windows-1251")
    assert cyrillic in decode(body, "text/html; charset=windows-1251")
    meta = f'<html><head><meta charset="windows-1251"></head><body>{cyrillic}</body></html>'.encode(
        "windows-1251"
    )
    assert cyrillic in decode(meta, "text/html")
    utf16 = "\ufeff<html><body>Grüße aus Köln</body></html>".encode("utf-16-le")
    assert "Grüße aus Köln" in decode(utf16)


def test_decode_never_raises_on_bad_bytes():
    broken = b"<html><body>caf\xe9 \xff\xfe\x80 ok</body></html>"
    text = decode(broken, "text/html; charset=utf-8")
    assert "ok" in text
    assert isinstance(decode(b"<p>x</p>", "text/html; charset=no-such-codec"), str)


def test_binary_bodies_are_recognized():
    assert looks_binary(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    assert looks_binary(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj")
    assert looks_binary(bytes(range(32)) * 100)
    assert not looks_binary(ARTICLE.encode())
    assert not looks_binary("\ufeff<p>x</p>".encode("utf-16-le"))


@pytest.mark.parametrize("extractor", ["trafilatura", "trafilatura-fast", "resiliparse", "auto", "plain"])
def test_every_extractor_finds_the_article_and_drops_scripts(extractor):
    text = main_text(ARTICLE.encode(), extractor)
    assert "harbour of the old town was reopened" in text
    assert "hidden" not in text and "color:red" not in text


def test_plain_keeps_boilerplate_but_trafilatura_drops_it():
    assert "Copyright 2026" in main_text(ARTICLE, "plain")
    assert "Copyright 2026" not in main_text(ARTICLE, "trafilatura")


def test_resiliparse_and_trafilatura_give_comments_apart_and_leave_out_captions():
    page = ARTICLE.replace(
        "</article>",
        "<figure><img src='a.jpg'><figcaption>The pier at dawn, photographed by a reader</figcaption>"
        "</figure><div class='photo-caption'>Boats waiting in the outer harbour</div></article>"
        "<section class='comments'><h2>Comments</h2><div class='comment'><p>Great news for the town, "
        "I remember the storm and the damage it did to every pier.</p></div></section>",
    )
    for extractor in ("resiliparse", "trafilatura", "auto"):
        text, _, comments = extract_parts(page, extractor)
        assert "harbour of the old town was reopened" in text
        assert "photographed by a reader" not in text and "Boats waiting" not in text
        assert "I remember the storm" not in text and "I remember the storm" in comments
        assert "harbour of the old town" not in comments
        assert extract_parts(ARTICLE, extractor)[2] == ""


def large(page: str, elements: int) -> str:
    """``page`` with ``elements`` empty spans added before its article."""
    return page.replace("<article>", "<span></span>" * elements + "<article>")


@pytest.mark.parametrize(("elements", "expected"), [(0, "trafilatura-fast"), (2000, "resiliparse")])
def test_auto_sends_large_pages_to_resiliparse(monkeypatch, elements, expected):
    from scrapy_neardup import text as text_module

    called = []
    trafilatura, resiliparse = text_module._trafilatura, text_module._resiliparse

    def spy_trafilatura(html, fast):
        called.append("trafilatura-fast" if fast else "trafilatura")
        return trafilatura(html, fast)

    def spy_resiliparse(html, source=None):
        called.append("resiliparse")
        return resiliparse(html, source)

    monkeypatch.setattr(text_module, "LARGE_PAGE", 1000)
    monkeypatch.setattr(text_module, "_trafilatura", spy_trafilatura)
    monkeypatch.setattr(text_module, "_resiliparse", spy_resiliparse)
    text = main_text(large(ARTICLE, elements), "auto")
    assert called == [expected]
    assert "harbour of the old town was reopened" in text and "Copyright 2026" not in text


def test_auto_takes_the_full_mode_when_the_fast_mode_misses_the_article(monkeypatch):
    from scrapy_neardup import text as text_module

    modes = []
    trafilatura = text_module._trafilatura

    def teasers_when_fast(html, fast):
        modes.append(fast)
        return ("Harbour news. Read more", "") if fast else trafilatura(html, fast)

    monkeypatch.setattr(text_module, "_trafilatura", teasers_when_fast)
    assert "harbour of the old town was reopened" in main_text(ARTICLE, "auto")
    assert modes == [True, False]


def test_auto_falls_back_to_resiliparse_when_trafilatura_finds_nothing(monkeypatch):
    from scrapy_neardup import text as text_module

    monkeypatch.setattr(text_module, "_trafilatura", lambda html, fast: (None, ""))
    assert "harbour of the old town was reopened" in main_text(ARTICLE, "auto")


def test_text_extractor_passes_text_through():
    assert main_text("just some text", "text") == "just some text"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "empty"),
        (b"  \n\t ", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        (b"%PDF-1.4\n1 0 obj << /Type /Catalog >>", "binary"),
        (b"<html><body><script>var a = 1;</script></body></html>", "no_text"),
    ],
)
def test_pages_without_text_are_skipped_with_a_reason(body, reason):
    with pytest.raises(SkipPage) as info:
        main_text(body, "trafilatura")
    assert info.value.reason == reason


@pytest.mark.parametrize("encoding", ["latin-1", "utf-8"])
@pytest.mark.parametrize("extractor", ["auto", "text"])
def test_a_binary_body_decoded_into_an_item_is_skipped_as_binary(encoding, extractor):
    """A feed or an item holds a binary response's body as text (Scrapy's ``response.text``):
    the same skip as the bytes get."""
    for body in (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8, bytes(range(256)) * 20):
        with pytest.raises(SkipPage) as info:
            main_text(body.decode(encoding, errors="replace"), extractor)
        assert info.value.reason == "binary"
    assert main_text(ARTICLE, extractor)  # text is text


def test_huge_page_is_skipped_before_parsing():
    huge = b"<html><body>" + b"<p>word word word</p>" * 1_000_000 + b"</body></html>"
    assert len(huge) > 20_000_000
    with pytest.raises(SkipPage) as info:
        main_text(huge, "trafilatura", max_body=5_000_000)
    assert info.value.reason == "too_large"


def test_truncated_html_still_extracts():
    truncated = ARTICLE.encode()[: len(ARTICLE) // 2]
    assert "harbour" in main_text(truncated, "plain")


def test_failing_extractor_becomes_a_skip(monkeypatch):
    def broken(html):
        raise RuntimeError("parser exploded")

    monkeypatch.setitem(EXTRACTOR_FUNCS, "plain", broken)
    with pytest.raises(SkipPage) as info:
        main_text(ARTICLE, "plain")
    assert info.value.reason == "extraction_failed"
    assert "parser exploded" in info.value.detail


def test_missing_resiliparse_names_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "resiliparse.extract.html2text", None)
    with pytest.raises(MissingExtraError) as info:
        main_text(ARTICLE, "resiliparse")
    assert "resiliparse" in str(info.value)


def test_auto_extracts_with_trafilatura_where_resiliparse_cannot_be_installed(monkeypatch):
    """resiliparse has no wheel for some platforms (Alpine, Windows on ARM): the default still works."""
    expected = main_text(ARTICLE, "trafilatura-fast")
    monkeypatch.setitem(sys.modules, "resiliparse.extract.html2text", None)
    assert main_text(ARTICLE, "auto") == expected


def test_normalize_folds_case_width_and_punctuation():
    assert normalize("Ｈｅｌｌｏ,   WORLD!!  l'été — ﬁne") == "hello world l été fine"


def test_tokenize_words_and_cjk_characters():
    assert tokenize(normalize("Duplicate detection: 近似复制检测 and カタカナ 2026")) == [
        "duplicate", "detection", "近", "似", "复", "制", "检", "测", "and", "カ", "タ", "カ", "ナ", "2026",
    ]  # fmt: skip


# Letters, combining marks (which join the character before them under NFKC), compatibility forms,
# non-ASCII separators and digits, CJK, a lone surrogate: what the byte-level tokenizer must get right.
TRICKY = list("aeEKs1.-_ \n\0\u0301\u0308\u0327\u00a8\ufb01\u1100\u1161\u11a8\u212b\u212a\u017f\u00df")
TRICKY += list("\u0130\u03a3\u2026\u00a0\u2019\ud800\u0663\u00b2\u2460\u3000\uff21\u0345\u1e9e")
TRICKY += list("\u0436\u65e5\u30ab")


def regex_tokens(text: str) -> list[str]:
    """The definition: runs of alphanumeric characters, one token per CJK character, of the folded text."""
    folded = unicodedata.normalize("NFKC", text[:MAX_TEXT]).casefold()
    return re.findall(f"[{CJK}]|[^\\W_{CJK}]+", folded)[:MAX_TOKENS]


@settings(max_examples=3000)
@given(st.text(alphabet=st.sampled_from(TRICKY), max_size=40) | st.text(max_size=40))
def test_tokenize_and_words_follow_the_definition(text):
    tokens = regex_tokens(text)
    assert tokenize(text) == tokens
    assert words(text) == [token.encode() for token in tokens]


@settings(max_examples=300)
@given(st.lists(st.text(alphabet=st.sampled_from(TRICKY), min_size=1, max_size=3), min_size=50, max_size=200))
def test_tokenize_long_mixed_text_follows_the_definition(pieces):
    text = " ab ".join(pieces)  # many stretches of non-ASCII text between ASCII words
    assert words(text) == [token.encode() for token in regex_tokens(text)]


def test_tokenize_real_pages_follows_the_definition(aeb_pages):
    for body in list(aeb_pages.values())[:60]:
        text = decode(body)
        assert tokenize(text) == regex_tokens(text)


VOTERS = ["the", "is", "der", "ist", "le", "1", "²", "的", "カ", "и", "of", "é"]


@given(st.lists(st.sampled_from(VOTERS), max_size=60))
def test_detect_language_same_for_strings_and_bytes(tokens):
    utf8 = [token.encode() for token in tokens]
    from_bytes = detect_language(utf8, LANGUAGE_VOTES, token_hashes(utf8))
    assert detect_language(tokens, LANGUAGE_VOTES) == from_bytes


ASCII_VOTERS = ["the", "of", "and", "der", "und", "le", "la", "el", "de", "het", "il", "o"]
ASCII_VOTERS += ["7", "2024", "a1", "1a", "zz"]


@given(st.lists(st.sampled_from(ASCII_VOTERS), min_size=1, max_size=80))
def test_detect_language_of_ascii_words_counts_them_like_any_words(tokens):
    """ASCII words as bytes (the usual page) take their digits and first letters from the bytes;
    as strings, from the characters: with numbers among them, the two must decide alike."""
    utf8 = [token.encode() for token in tokens]
    from_bytes = detect_language(utf8, LANGUAGE_VOTES, token_hashes(utf8))
    assert from_bytes == detect_language(tokens, LANGUAGE_VOTES)


def test_split_sentences_latin_and_cjk():
    assert split_sentences("One two. Three four! Five\nsix") == ["One two.", "Three four!", "Five", "six"]
    assert split_sentences("第一句。第二句！") == ["第一句。", "第二句！"]


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("The committee has said that the report was published and the findings are clear.", "en"),
        (
            "Die Kommission hat gesagt, dass der Bericht veröffentlicht wurde und die Ergebnisse klar sind.",
            "de",
        ),
        ("La commission a dit que le rapport est publié et que les résultats sont clairs pour tous.", "fr"),
        (
            "La comisión ha dicho que el informe fue publicado y que los resultados son claros para todos.",
            "es",
        ),
        ("近似复制检测是搜索引擎的重要技术，它可以发现内容相同的网页。", "zh"),
        ("これは重複検出のテストです。ウェブページの内容を比べます。", "ja"),
        ("12345 67890", "und"),
    ],
)
def test_detect_language(text, language):
    assert detect_language(tokenize(normalize(text)), LANGUAGE_VOTES) == language


ENGLISH = (
    "The council has said that the bridge will be closed for eight weeks, and the detour is expected "
    "to add twenty minutes to journeys. The engineers were asked why the repair had been delayed. "
)
JAPANESE = (
    "これは重複検出のテストです。ウェブページの内容を比べます。"
    "交流団が市場を訪れ、子どもたちは給食を食べました。"
)


@pytest.mark.parametrize(
    ("text", "languages"),
    [
        (ENGLISH * 3, ("en",)),
        (JAPANESE * 6, ("ja",)),
        (JAPANESE * 6 + ENGLISH * 3, ("ja", "en")),  # a Japanese post beside English teasers
        (ENGLISH * 9 + JAPANESE * 2, ("en", "ja")),  # an English page quoting a Japanese passage
        (JAPANESE * 6 + " Read more About us Contact", ("ja",)),  # a menu is no second language
        (ENGLISH * 6 + " 東京 大阪", ("en",)),  # nor are two names
    ],
)
def test_a_page_in_two_scripts_holds_both_languages(text, languages):
    assert detect_languages(tokenize(normalize(text)), LANGUAGE_VOTES) == languages


def test_a_page_quoting_a_post_in_another_script_is_longer_than_the_post():
    from scrapy_neardup.config import DedupConfig
    from scrapy_neardup.fingerprint import fingerprint
    from scrapy_neardup.verify import compare

    config = DedupConfig(extractor="text")
    post = fingerprint(JAPANESE * 8, config)
    home = fingerprint(ENGLISH * 4 + JAPANESE * 8, config)
    assert home.language == post.language == "ja"
    assert home.spots.size > post.spots.size * 1.3  # the English part's spots count too
    result = compare(post, home, config)
    assert result.results["spotsigs"].similarity < 0.8 and not (result.duplicate and not result.weak)


def test_real_chinese_articles_are_chinese(zh_texts):
    for text in zh_texts:
        assert detect_language(tokenize(normalize(text)), LANGUAGE_VOTES) == "zh"


def test_trafilatura_text_matches_the_ground_truth_length(aeb_pages, aeb_truth):
    """Over the real pages the extracted article is about as long as the labelled one."""
    ratios = []
    for key, body in list(aeb_pages.items())[:40]:
        truth = len(tokenize(normalize(aeb_truth[key]["articleBody"])))
        ratios.append(len(tokenize(normalize(main_text(body, "trafilatura")))) / max(truth, 1))
    ratios.sort()
    assert 0.8 <= ratios[len(ratios) // 2] <= 1.25


def test_page_title_is_unescaped_and_collapsed():
    title = page_title("<html><head><TITLE lang=en>\n Fish &amp; <b>chips</b>\n</title>")
    assert title == "Fish & <b>chips</b>"
    assert page_title("<p>no title here</p>") == ""


def _first_long_lines(text: str, min_chars: int = 30) -> str:
    """The definition: each line whose words, joined by single spaces, make min_chars or more
    is kept at its first occurrence only; every other line is kept."""
    seen: set[str] = set()
    kept = []
    for line in text.splitlines():
        key = " ".join(line.split())
        if len(key) >= min_chars:
            if key in seen:
                continue
            seen.add(key)
        kept.append(line)
    return "\n".join(kept)


LINE_PIECES = st.sampled_from(
    ["word", "a" * 12, " ", "\t", "\xa0", "\u3000", "\n", "\r\n", "\x85", "\u2028", "\x1c", "é"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(LINE_PIECES, max_size=80).map("".join))
def test_drop_repeated_lines_keeps_the_first_of_each_long_line(text):
    assert drop_repeated_lines(text) == _first_long_lines(text)


def test_drop_repeated_lines_on_a_page_with_a_hidden_second_copy():
    article = "The council approved the new bridge on Tuesday evening.\nShort line\n"
    text = article + "  The council  approved the new bridge on Tuesday evening. \nShort line"
    assert drop_repeated_lines(text) == article + "Short line"
