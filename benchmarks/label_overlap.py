"""Where the two data sets' labels sit on one scale: the docs site's own word 5-gram Jaccard.

    .venv/bin/python benchmarks/label_overlap.py   # ~30 s with bench_quality's cache

The docs site (``get-llvm-docs``) labels a pair duplicate at a word 5-gram set Jaccard
>= 0.8 and distinct under 0.5. This computes that Jaccard, with the labeller's tokens
(``\\w+`` of the lower-cased text), on the main text the benchmark extracts (the default
extractor) for aeb's generated copies, all labelled duplicate of their source, and for the
docs-site pairs labelled distinct that the defaults match. It shows why no one setting can
meet both the aeb recall target and a docs-site F1 above the LSH peer's
(``benchmarks/notes/quality-diagnosis.md``). Reads and fills ``bench_quality``'s cache.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_quality as bq
import quality_data as qd

from scrapy_neardup.config import DedupConfig

BANDS = ((0.8, 1.01, ">= 0.8"), (0.5, 0.8, "0.5-0.8"), (0.0, 0.5, "< 0.5"))


def shingles(text: str | None) -> set[tuple[str, ...]]:
    """The labeller's word 5-gram set (one shorter gram for texts under five words)."""
    words = re.findall(r"\w+", (text or "").lower())
    return {tuple(words[i : i + 5]) for i in range(max(1, len(words) - 4))} if words else set()


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def bands(values: np.ndarray) -> str:
    counts = [f"{label} {int(((values >= lo) & (values < hi)).sum())}" for lo, hi, label in BANDS]
    return f"{len(values)} pairs, median {np.median(values):.2f}: " + ", ".join(counts)


def main() -> None:
    config = DedupConfig()
    templates = qd.build_templates(qd.read_aeb() + qd.read_cleanportaleval())
    for seed in (1, 3):
        bench = bq.Bench({"aeb": qd.aeb_set(seed, templates)}, use_cache=True)
        data, sets = bench.sets["aeb"], [shingles(t) for t in bench.text("aeb", config.extractor)]
        pairs = list(zip(*np.nonzero(bench.label("aeb") == 1), strict=True))
        values = np.array([jaccard(sets[i], sets[j]) for i, j in pairs])
        # A variant comes after its source.
        rates = np.array([data.recipes[max(i, j)].edit_rate for i, j in pairs])
        matched = bq.decide(bench.view("aeb", config), config)[tuple(np.array(pairs).T)]
        print(f"aeb seed {seed}, copies against their source: {bands(values)}")
        low = int(matched[values < 0.5].sum())
        print(f"  matched by the defaults: {int(matched.sum())}, of them under 0.5: {low}")
        for lo, hi, label in ((0.0, 0.05, "1-5 %"), (0.05, 0.10, "5-10 %"), (0.10, 1.0, "10-15 %")):
            band = (rates >= lo) & (rates < hi)
            print(f"  {label} of words edited: {bands(values[band])}")
    bench = bq.Bench({"llvm": qd.llvm_set()}, use_cache=True)
    sets = [shingles(t) for t in bench.text("llvm", config.extractor)]
    matched = np.triu(bq.decide(bench.view("llvm", config), config), 1) & (bench.label("llvm") == 0)
    pairs = list(zip(*np.nonzero(matched), strict=True))
    ids = bench.sets["llvm"].ids
    print(f"docs site, labelled distinct and matched by the defaults: {len(pairs)} pairs")
    for i, j in pairs:
        print(f"  {jaccard(sets[i], sets[j]):.2f}  {ids[i]}  {ids[j]}")


if __name__ == "__main__":
    main()
