"""The quality benchmark's data: templates, the seeded variant generator, labels, and its pair matrices."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import quality_data as qd  # noqa: E402

from scrapy_neardup import DedupConfig  # noqa: E402
from scrapy_neardup.fingerprint import fingerprint  # noqa: E402
from scrapy_neardup.text import _plain  # noqa: E402
from scrapy_neardup.tokens import tokenize  # noqa: E402
from scrapy_neardup.verify import compare  # noqa: E402


@pytest.fixture(scope="module")
def sources(aeb_dir: Path) -> list[qd.Source]:
    return qd.read_aeb(aeb_dir)[:12]


@pytest.fixture(scope="module")
def templates(sources: list[qd.Source]) -> dict[str, qd.Template]:
    return qd.build_templates(sources)


def _visible(page: str) -> str:
    return qd._norm(_plain(page)[0] or "")


def test_templates_lose_their_own_article(sources, templates):
    assert len(templates) >= 10
    by_id = {s.id: s for s in sources}
    for template_id, template in templates.items():
        page = qd.render(template, "A headline", ["Replacement text for the test."])
        visible = _visible(page)
        assert "replacement text for the test" in visible
        probes = [probe for probe, _ in qd._probes(by_id[template_id].paragraphs)]
        left = sum(1 for probe in probes if probe in visible)
        assert left <= max(1, len(probes) // 10), template_id


def test_variants_are_reproducible_and_seeded(sources, templates):
    pool = qd.vocabulary(sources, "en")[sources[0].id]
    first = qd.make_variant(sources[0], 1, 7, templates, sources, pool)
    again = qd.make_variant(sources[0], 1, 7, templates, sources, pool)
    other_seed = qd.make_variant(sources[0], 1, 8, templates, sources, pool)
    assert first == again
    assert first[0] != other_seed[0]


def test_variant_keeps_most_of_the_article(sources, templates):
    pools = qd.vocabulary(sources, "en")
    for source in sources[:6]:
        page, recipe = qd.make_variant(source, 1, 1, templates, sources, pools[source.id])
        words = set(tokenize(" ".join(source.paragraphs)))
        seen = set(tokenize(_plain(page)[0] or ""))
        assert len(words & seen) >= 0.6 * len(words), (source.id, recipe)
        assert qd.EDIT_RATE[0] <= recipe.edit_rate <= qd.EDIT_RATE[1]


def test_edit_words_edits_the_asked_share():
    rng = random.Random(3)
    paragraphs = [[f"w{i}" for i in range(200)], [f"x{i}" for i in range(200)]]
    edited = qd.edit_words(paragraphs, 0.10, ["new"], rng)
    before = [w for p in paragraphs for w in p]
    after = [w for p in edited for w in p]
    unchanged = sum(1 for w in after if w != "new")
    assert 0.80 * len(before) <= unchanged <= 0.95 * len(before)


def test_truncate_and_reorder():
    paragraphs = [["a"] * 10, ["b"] * 10, ["c"] * 10, ["d"] * 10]
    cut = qd.truncate(paragraphs, 0.25)
    assert sum(map(len, cut)) == 30 and cut[-1][0] == "c"
    moved = qd.reorder(paragraphs, random.Random(1))
    assert sorted(map(tuple, moved)) == sorted(map(tuple, paragraphs))


def test_chinese_units_are_characters():
    assert qd._units("网页 去重", "zh") == ["网", "页", "去", "重"]
    assert qd._join(["网", "页"], "zh") == "网页"


def test_variant_set_labels(sources, templates):
    data = qd.variant_set("t", sources[:3], [s.page or "" for s in sources[:3]], 2, 1, templates)
    assert len(data) == 9
    assert data.groups == [s.id for s in sources[:3] for _ in range(3)]
    assert data.variant == [False, True, True] * 3
    assert data.recipes[0] is None and data.recipes[1] is not None


def test_cleanportaleval_labels_the_page_fetched_twice(cleanportaleval_dir):
    data = qd.cleanportaleval_set()
    groups = [g for g in data.groups if g is not None]
    assert len(groups) == 2 and len(set(groups)) == 1
    assert "read-comments-on-mobile" in groups[0]


def test_llvm_labels(tmp_path):
    for name in ("llvm-14/a.html", "llvm-15/a.html", "llvm-15/b.html"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("<p>x</p>")
    rows = [
        {"a": "llvm-14/a.html", "b": "llvm-15/a.html", "jaccard": 0.9, "label": "duplicate"},
        {"a": "llvm-15/a.html", "b": "llvm-15/b.html", "jaccard": 0.6, "label": "ambiguous"},
    ]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = qd.llvm_set(tmp_path)
    assert data.ids == ["llvm/llvm-14/a.html", "llvm/llvm-15/a.html", "llvm/llvm-15/b.html"]
    assert data.pairs == {(0, 1): True, (1, 2): None}


def test_bench_matrices_equal_compare(sources):
    """The benchmark's all-pairs verdicts are verify.compare's, pair by pair."""
    pytest.importorskip("scipy")
    bench_quality = pytest.importorskip("bench_quality")
    config = DedupConfig(extractor="text", min_tokens=1, methods=("exact", "spotsigs", "simhash", "minhash"))
    texts = [" ".join(s.paragraphs) for s in sources[:8]]
    texts += [t.replace(" the ", " a ", 3) for t in texts[:4]]  # near copies
    fps = [fingerprint(t, config, methods=frozenset(bench_quality.ALL_METHODS)) for t in texts]
    view = bench_quality.View(fps, np.ones(len(fps), bool), np.array([fp.token_count for fp in fps]), config)
    for spotsigs_threshold in (0.3, 0.5, 0.9):
        probe = DedupConfig(**{**config.__dict__, "spotsigs_threshold": spotsigs_threshold})
        verdicts = bench_quality.decide(view, probe)
        for i in range(len(fps)):
            for j in range(i + 1, len(fps)):
                assert verdicts[i, j] == compare(fps[i], fps[j], probe).duplicate
    jac, _ = view.spot()
    assert jac[0, 8] == pytest.approx(compare(fps[0], fps[8], config).results["spotsigs"].raw)
