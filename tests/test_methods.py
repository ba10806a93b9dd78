"""The method registry: a new method joins through ``methods.register`` alone.

A toy method (pages whose first twelve words are the same) is registered, and then the
configuration accepts it, fingerprints carry its signature, every index stores and finds it,
the Detector ranks it, ``compare`` shows it and the report charts it; no other module changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import xxhash
from detectors import admit, sqlite_detector

from scrapy_neardup import DedupConfig, compare, fingerprint, methods
from scrapy_neardup.methods import Method, MethodResult
from scrapy_neardup.report import write_report


def _sign(page, config):
    return {"extra": {"first_words": xxhash.xxh3_64_intdigest(" ".join(page.tokens[:12]).encode())}}


def _result(a, b, config):
    if "first_words" not in a.extra or "first_words" not in b.extra:
        return None
    same = a.extra["first_words"] == b.extra["first_words"]
    return MethodResult("first_words", float(same), same, "equal" if same else "different", "equal", same)


FIRST_WORDS = Method(
    "first_words", "methods", sign=_sign, result=_result, threshold=lambda config: 1.0,
    lookup=lambda fp, config: [(fp.extra["first_words"],)] if "first_words" in fp.extra else [], kind=50,
)  # fmt: skip

OPENING = "the committee met on tuesday to discuss the budget for the coming year and "
A = OPENING + " ".join(f"alpha{i} beta{i} gamma{i}" for i in range(40))
B = OPENING + " ".join(f"delta{i} omega{i} sigma{i}" for i in range(40))
C = " ".join(f"kappa{i} lambda{i} theta{i}" for i in range(45))


@pytest.fixture
def first_words():
    methods.register(FIRST_WORDS, before="spotsigs")
    yield DedupConfig(extractor="text", min_tokens=5, methods=("first_words", "spotsigs"))
    methods.unregister("first_words")


def test_a_registered_method_decides_on_every_backend(first_words, open_detector, tmp_path):
    detector = open_detector(first_words)
    a = detector.check("http://a.example/1", A)
    b = detector.check("http://b.example/1", B)
    c = detector.check("http://c.example/1", C)
    assert not a.duplicate and not c.duplicate
    assert b.duplicate and b.duplicate_of == a.doc_id and b.method == "first_words"
    assert methods.decision_order().index("first_words") < methods.decision_order().index("spotsigs")
    assert (
        not compare(fingerprint(A, first_words), fingerprint(B, first_words), first_words)
        .results["spotsigs"]
        .duplicate
    )  # only the new method pairs them


def test_a_registered_method_is_reported(first_words, tmp_path):

    with sqlite_detector(tmp_path / "i.db", first_words) as detector:
        detector.check("http://a.example/1", A)
        detector.check("http://b.example/1", B)
    out = write_report(tmp_path / "i.db", tmp_path / "r.json", "json")
    report = json.loads(out.read_text())
    members = [m for cluster in report["clusters"] for m in cluster["members"]]
    assert {m.get("method") for m in members} >= {"first_words"}


def test_a_method_name_or_kind_is_taken_once(first_words):
    with pytest.raises(ValueError, match="taken"):
        methods.register(FIRST_WORDS)
    with pytest.raises(ValueError, match="not a registered method"):
        methods.unregister("spotsigs")


def test_an_unregistered_method_is_refused_by_the_settings():
    from scrapy_neardup.exceptions import ConfigError

    with pytest.raises(ConfigError, match="first_words"):
        DedupConfig(methods=("first_words",))


def test_a_method_put_before_exact_keeps_the_oldest_match_first(tmp_path):
    """Exact copies are looked up first only while nothing outranks them: with a method ahead of
    exact, the oldest page it matches is named, as when every candidate is compared."""

    methods.register(FIRST_WORDS, before="exact")
    try:
        config = DedupConfig(extractor="text", min_tokens=5, methods=("first_words", "exact"))
        with sqlite_detector(tmp_path / "i.db", config) as detector:
            older, copied = (admit(detector, url, fingerprint(text, config)).doc_id for url, text in [
                ("http://a.example/1", A), ("http://b.example/1", B)
            ])  # fmt: skip
            verdict = detector.check("http://c.example/1", B + "\n")  # B's copy, not byte for byte
    finally:
        methods.unregister("first_words")
    assert (verdict.duplicate_of, verdict.method) == (older, "first_words") and older < copied


def test_a_method_a_project_registers_decides_in_the_worker_processes(tmp_path):
    """NEARDUP_METHOD_MODULES names the module that registers it; each worker imports it too, so
    a pool's fingerprints carry its signature and it decides as inline."""
    from crawling import ADDON, crawl, serve

    opening = "the town council met on tuesday evening to"
    site = tmp_path / "site"
    site.mkdir()
    for name, words in (("a", "alpha beta gamma"), ("b", "delta omega sigma")):
        story = " ".join(f"{w}{i}" for i in range(40) for w in words.split())
        (site / f"{name}.html").write_text(
            f"<html><body><article><p>{opening} {story}</p></article></body></html>"
        )
    (site / "index.html").write_text(
        '<html><body><a href="a.html">a</a> <a href="b.html">b</a></body></html>'
    )
    settings = {
        **ADDON, "NEARDUP_INDEX": str(tmp_path / "plugin.sqlite"), "NEARDUP_METHOD_MODULES": "plugin_methods",
        "NEARDUP_METHODS": "opening,exact", "NEARDUP_WORKERS": 2, "NEARDUP_WORKERS_AFTER": 0,
        "CONCURRENT_REQUESTS": 1, "NEARDUP_ACTION": "tag",
    }  # fmt: skip
    with serve(site) as base:
        result = crawl(tmp_path, [base + "/index.html"], settings)
    tags = {item["url"].rsplit("/", 1)[1]: item["neardup"] for item in result["items"]}
    first, second = sorted(("a.html", "b.html"), key=lambda n: tags[n]["duplicate"])
    assert tags[second]["duplicate"] and tags[second]["method"] == "opening"
    assert not tags[first]["duplicate"]
    assert "plugin_methods" not in result["stderr"]  # no import error in any process


def test_only_the_registry_and_the_settings_name_a_method_of_their_own():
    """A method's fields, stored form, term statistics, color and --json key are its registry
    entry's: the indexes, the report and the command line read them from there."""
    import scrapy_neardup

    root = Path(scrapy_neardup.__file__).parent
    names = ("imatch", "i-match", "ksentence", "k longest", "minhash", "shingle")
    naming = sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.suffix in (".py", ".js", ".html") and "signatures" not in path.parts
        and any(name in path.read_text(encoding="utf-8").lower() for name in names)
    )  # fmt: skip
    assert naming == ["config.py", "methods.py"]
