"""Main text to tokens and language: normalization, the words a page is signed by, its language.

A token is one CJK character or a run of other letters and digits of the text after NFKC and
case folding. ``words`` finds them in C over the UTF-8 bytes (the hot path of every page);
``tokenize`` gives the same tokens as strings.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence
from operator import itemgetter

import numpy as np

from .signatures._hashing import token_hashes, weights_in

# Han (with extensions and compatibility ideographs), Hiragana and Katakana: written without spaces,
# so each character is a token (after NFKC, half-width katakana is already full-width).
KANA_RANGE = (0x3040, 0x30FF)
CJK_RANGES = (KANA_RANGE, (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))
CJK = "".join(f"{chr(low)}-{chr(high)}" for low, high in CJK_RANGES)
# Bounds on one page's text: ~100 long articles' worth, far above any page worth judging.
MAX_TEXT, MAX_TOKENS = 1_000_000, 200_000
# A token: one CJK character, or a run of other letters and digits.
TOKEN = re.compile(f"[{CJK}]|[^\\W_{CJK}]+")
_CJK_CHAR = re.compile(f"[{CJK}]")
_NOT_WORD = re.compile(r"[\W_]+")
# Bytes of ASCII folded (upper case to lower) and every ASCII byte that is not a letter or digit as a
# space; bytes of other characters unchanged.
_ASCII_SEPARATORS = bytes(
    byte if byte > 0x7F else ord(chr(byte).lower()) if chr(byte).isalnum() else 0x20 for byte in range(256)
)
_ASCII = bytes(range(0x80))
# Above this many distinct non-ASCII separators (quotes, dashes) a text is split by the regex.
_FEW_SEPARATORS = 32
# The first letters of Latin words: Basic Latin (folded) to Latin Extended-B, and Latin Extended Additional.
_LATIN_RANGES = ((0x61, 0x7A), (0xC0, 0x24F), (0x1E00, 0x1EFF))
# Tokens a page's part in a second script needs to be signed in its own language too: a sentence
# or two, more than a name or a menu in that script.
MIN_PART = 40
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|[\r\n]+")


def normalize(text: str) -> str:
    """NFKC, casefold, punctuation and symbols folded to spaces, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NOT_WORD.sub(" ", text).split())


def _fold_run(run: str) -> str:
    """One stretch of non-ASCII text folded like the whole: NFKC, casefold."""
    return unicodedata.normalize("NFKC", run).casefold()


def _separated(text: str) -> bytes | list[str]:
    """The folded text (NFKC, casefold) as UTF-8 with every separator a space, or, for short text,
    text with CJK characters or many kinds of non-ASCII separators, its tokens from the regex.

    The work is done in C over the bytes: ASCII is folded and separated by one ``translate``,
    and only the stretches around non-ASCII characters go through NFKC, since ASCII is stable
    under it (no ASCII character is changed by NFKC or composes with the one before it).
    """
    text = text[:MAX_TEXT]
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_SEPARATORS)
    if len(text) < 256:  # a sentence, a title: the regular expression costs less than the set-up
        return TOKEN.findall(_fold_run(text))[:MAX_TOKENS]
    data = text.encode("utf-8", "surrogatepass")
    high = np.frombuffer(data, dtype=np.uint8) >= 0x80
    whole = 4 * int(high.sum()) > len(data) or "\0" in text  # mostly another script: fold it all
    if whole:
        folded = _fold_run(text)
    else:
        # The stretches of non-ASCII bytes, each with the ASCII character before it (a combining
        # mark may join it), folded in one call with NUL between them (ASCII: a boundary too).
        edges = np.flatnonzero(high[1:] != high[:-1]) + 1
        starts = ([0] if high[0] else []) + [edge - 1 for edge in edges[high[edges]].tolist()]
        ends = edges[~high[edges]].tolist() + ([len(data)] if high[-1] else [])
        stretches = b"\0".join([data[s:e] for s, e in zip(starts, ends, strict=True)])
        folded = _fold_run(stretches.decode("utf-8", "surrogatepass"))
    non_ascii = folded.encode("utf-8", "surrogatepass").translate(None, _ASCII)
    others = set(non_ascii.decode("utf-8", "surrogatepass"))
    separators = [char for char in others if not char.isalnum()]
    if len(separators) > _FEW_SEPARATORS or any(_CJK_CHAR.match(char) for char in others):
        return TOKEN.findall(folded if whole else _fold_run(text))[:MAX_TOKENS]
    for char in separators:
        folded = folded.replace(char, " ")
    if whole:
        data = folded.encode("utf-8", "surrogatepass")
    else:
        runs = folded.encode("utf-8", "surrogatepass").split(b"\0")
        gaps = [data[end:start] for start, end in zip(starts[1:], ends, strict=False)]
        pieces = itertools.chain(*zip(runs, gaps, strict=False))
        data = b"".join([data[: starts[0]], *pieces, runs[-1], data[ends[-1] :]])
    return data.translate(_ASCII_SEPARATORS)


def words(text: str) -> list[bytes]:
    """The UTF-8 bytes of ``tokenize(text)``, made without a Python step per token."""
    separated = _separated(text)
    if isinstance(separated, bytes):
        return separated.split()[:MAX_TOKENS]
    return [token.encode("utf-8") for token in separated]


def tokenize(text: str) -> list[str]:
    """Folded tokens (NFKC, casefold): words for space-separated scripts, one per CJK character.

    A word is a run of alphanumeric characters (``str.isalnum``). Punctuation never forms a
    token, so ``tokenize(text) == tokenize(normalize(text))`` without paying for
    ``normalize``'s substitutions. At most ``MAX_TOKENS`` tokens of the first ``MAX_TEXT``
    characters, so a huge or NFKC-expanding page costs bounded memory.
    """
    separated = _separated(text)
    if isinstance(separated, bytes):
        return separated.decode("utf-8").split()[:MAX_TOKENS]
    return separated


def split_sentences(text: str) -> list[str]:
    """Sentences at . ! ? ; (and their CJK forms) and at line breaks; empty ones dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _in_ranges(codes: np.ndarray, ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Which code points fall in one of the inclusive ``ranges``."""
    inside = np.zeros(len(codes), dtype=bool)
    for low, high in ranges:
        inside |= (codes >= low) & (codes <= high)
    return inside


def detect_language(
    tokens: Sequence[str] | Sequence[bytes],
    votes: dict[str, frozenset[str]],
    hashes: np.ndarray | None = None,
) -> str:
    """The main language of a token list (``detect_languages``' first)."""
    return detect_languages(tokens, votes, hashes)[0]


def detect_languages(
    tokens: Sequence[str] | Sequence[bytes],
    votes: dict[str, frozenset[str]],
    hashes: np.ndarray | None = None,
) -> tuple[str, ...]:
    """The languages of a token list, main one first, well enough to pick SpotSigs antecedent sets.

    CJK characters decide first (kana means Japanese); a text mostly in another non-Latin
    script (Cyrillic, Hangul, Arabic, ...) is ``und``; otherwise the language whose
    function words occur most often wins, provided they make up a real share of the
    words (running prose in these languages is a third function words or more). ``und``
    when no language qualifies: SpotSigs then uses plain word n-grams.

    Numbers are left out of the shares, and a few English words (a share bar, a
    "Read more") on a Russian page do not make it English: two copies of one page must
    get the same language whatever a template or a table adds, or their spots differ.
    A page holding a real part in the other script (an article quoted in Japanese among English
    teasers, an English abstract beside a Chinese text) also gets that part's language, second:
    its spots are signed too, so such a page is longer than the article it quotes. ``tokens`` may
    be ``words`` (bytes); pass their ``hashes`` when they are at hand.
    """
    if not tokens:
        return ("und",)
    sample = tokens[:5000]
    sample_hashes = token_hashes(sample) if hashes is None else hashes[: len(sample)]
    # Each distinct word is looked at once, not each occurrence: counted by its hash.
    order = np.argsort(sample_hashes)
    ordered = sample_hashes[order]
    fresh = np.empty(len(ordered), dtype=bool)
    fresh[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=fresh[1:])
    starts = np.flatnonzero(fresh)
    distinct_hashes, weights = ordered[starts], np.empty(len(starts), dtype=np.int64)
    weights[:-1] = starts[1:] - starts[:-1]
    weights[-1] = len(ordered) - starts[-1]
    at = order[starts].tolist()
    distinct = list(itemgetter(*at)(sample)) if len(at) > 1 else [sample[at[0]]]
    if isinstance(distinct[0], bytes) and b"".join(distinct).isascii():  # no decoding: bytes are chars
        digits = np.fromiter(map(bytes.isdigit, distinct), dtype=bool, count=len(distinct))
        first = np.frombuffer(bytes(map(itemgetter(0), distinct)), dtype=np.uint8).astype(np.uint32)
    else:
        if isinstance(distinct[0], bytes):
            distinct = list(map(bytes.decode, distinct))
        digits = np.fromiter(map(str.isdigit, distinct), dtype=bool, count=len(distinct))
        first = np.frombuffer("".join(map(itemgetter(0), distinct)).encode("utf-32-le"), dtype=np.uint32)
    weights[digits] = 0
    size = int(weights.sum())
    if not size:
        return ("und",)
    cjk, cjk_language = 0, "zh"
    if first.max() >= CJK_RANGES[0][0]:
        single = np.fromiter(map(len, distinct), dtype=np.int64, count=len(distinct)) == 1
        cjk = int(weights[single & _in_ranges(first, CJK_RANGES)].sum())
        kana = int(weights[_in_ranges(first, (KANA_RANGE,))].sum())
        cjk_language = "ja" if kana >= 0.1 * cjk else "zh"
    latin = int(weights[_in_ranges(first, _LATIN_RANGES)].sum())

    def latin_language(words: int) -> str:
        """The Latin-script language whose function words are a real share of ``words``."""
        scores = dict(zip(votes, weights_in(distinct_hashes, weights, tuple(votes.values())), strict=True))
        best = max(scores, key=lambda lang: (scores[lang], lang == "en"))
        return best if scores[best] >= max(2, words // 20) else "und"

    if cjk >= 0.3 * size:
        other = latin_language(latin) if latin >= MIN_PART else "und"
        return (cjk_language,) if other == "und" else (cjk_language, other)
    if latin < 0.5 * size:
        return ("und",)
    main = latin_language(size)
    return (main, cjk_language) if main != "und" and cjk >= MIN_PART else (main,)
