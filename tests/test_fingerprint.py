from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from scrapy_neardup import DedupConfig, fingerprint
from scrapy_neardup.config import METHODS
from scrapy_neardup.verify import compare

ALL = frozenset(METHODS)
TEXT = DedupConfig(extractor="text")


def edit_words(text: str, share: float, seed: int) -> str:
    """Replace a share of the words with made-up ones: a lightly edited copy."""
    rng = random.Random(seed)
    words = text.split()
    for i in rng.sample(range(len(words)), int(len(words) * share)):
        words[i] = f"edit{rng.randrange(10**6)}"
    return " ".join(words)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "empty"),
        ("   \n  ", "empty"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF" + bytes(200), "binary"),
        (b"%PDF-1.5\n" + bytes(range(256)), "binary"),
        (b"<html><body><div></div></body></html>", "no_text"),
        (b"<html><body><p>Just a few words here.</p></body></html>", "too_short"),
    ],
)
def test_bad_input_gives_a_skipped_fingerprint(body, reason):
    fp = fingerprint(body, DedupConfig(extractor="plain"))
    assert not fp.judged
    assert fp.skip_reason == reason
    assert fp.raw_hash is not None


def test_twenty_megabyte_page_is_skipped():
    body = b"<html><body>" + b"<p>lorem ipsum dolor sit amet</p>" * 700_000
    fp = fingerprint(body, DedupConfig())
    assert fp.skip_reason == "too_large"
    assert "max_body" in fp.skip_detail


def test_mis_encoded_and_truncated_pages_are_judged(aeb_pages):
    body = next(iter(aeb_pages.values()))
    latin = body.decode("utf-8", "replace").encode("latin-1", "replace")
    assert fingerprint(latin, DedupConfig(), content_type="text/html; charset=utf-8").judged
    # Cut the page in the middle of its article, as a dropped connection would.
    full = fingerprint(body, DedupConfig())
    middle = full.text.split("\n")[len(full.text.split("\n")) // 2][:40].encode()
    cut = body.find(middle)
    assert cut > 0
    truncated = fingerprint(body[: cut + 20], DedupConfig(extractor="plain"))
    assert truncated.judged and truncated.token_count > 100


def test_default_fingerprint_carries_only_the_needed_signatures(aeb_pages):
    fp = fingerprint(next(iter(aeb_pages.values())), DedupConfig())
    assert fp.judged and fp.language == "en"
    assert fp.exact is not None and fp.simhash is not None and fp.spots.size > 0
    assert fp.minhash is None and fp.super_shingles is None and fp.imatch == () and fp.ksentence is None


def test_real_pages_edited_lightly_are_near_duplicates(aeb_pages):
    matched = 0
    fps = [fingerprint(body, DedupConfig()) for body in list(aeb_pages.values())[:30]]
    # Long articles with spots enough for SpotSigs to decide (a results table has few).
    least = DedupConfig().spotsigs_min_spots
    texts = [fp.text for fp in fps if len(fp.text.split()) >= 300 and fp.spots.size >= 2 * least]
    for i, text in enumerate(texts):
        original = fingerprint(text, TEXT)
        variant = fingerprint(edit_words(text, 0.03, seed=i), TEXT)
        matched += compare(original, variant, DedupConfig()).duplicate
    assert len(texts) >= 10
    assert matched == len(texts)


def test_distinct_real_pages_never_match_with_any_method(aeb_pages):
    fps = [fingerprint(body, DedupConfig(), methods=ALL) for body in list(aeb_pages.values())[:40]]
    fps = [fp for fp in fps if fp.judged]
    config = DedupConfig(methods=METHODS)
    for i, a in enumerate(fps):
        for b in fps[i + 1 :]:
            result = compare(a, b, config)
            assert not result.duplicate, (result.method, result.results[result.method].shown)


def test_chinese_variant_matches_and_distinct_articles_do_not(zh_texts):
    fps = [fingerprint(text, TEXT, methods=ALL) for text in zh_texts]
    assert all(fp.judged and fp.language == "zh" for fp in fps)
    for i, a in enumerate(fps):
        for b in fps[i + 1 :]:
            assert not compare(a, b, DedupConfig(methods=METHODS)).duplicate
    rng = random.Random(3)
    chars = list(zh_texts[0])
    for i in rng.sample(range(len(chars)), len(chars) // 50):
        chars[i] = "变"
    variant = fingerprint("".join(chars), TEXT)
    assert compare(fps[0], variant, DedupConfig()).method == "spotsigs"


def _signature_dump(text: str) -> dict:
    fp = fingerprint(text, TEXT, methods=ALL)
    return {
        "exact": str(fp.exact),
        "simhash": str(fp.simhash),
        "spots": [str(x) for x in fp.spots.hashes.tolist()],
        "minhash": fp.minhash.tolist(),
        "bands": [str(x) for x in fp.minhash_bands],
        "shingles": [str(x) for x in fp.super_shingles.tolist()],
        "imatch": [str(x) for x in fp.imatch],
        "ksentence": str(fp.ksentence),
    }


def test_signatures_are_equal_across_processes(aeb_truth):
    text = next(iter(aeb_truth.values()))["articleBody"]
    script = (
        "import json, sys; sys.path.insert(0, 'tests'); from test_fingerprint import _signature_dump; "
        "print(json.dumps(_signature_dump(sys.stdin.read())))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", script], input=text, capture_output=True, text=True, check=True, env=env,
        cwd=os.path.dirname(os.path.dirname(__file__)),
    )  # fmt: skip
    assert json.loads(out.stdout) == _signature_dump(text)


def test_fingerprint_arrays_have_stable_types(aeb_truth):
    fp = fingerprint(next(iter(aeb_truth.values()))["articleBody"], TEXT, methods=ALL)
    assert fp.spots.hashes.dtype == np.uint64 and fp.spots.counts.dtype == np.uint32
    assert fp.minhash.dtype == np.uint32 and fp.super_shingles.dtype == np.uint64
