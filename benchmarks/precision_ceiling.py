"""How far the signals at hand can go toward the precision issue's targets.

    python benchmarks/precision_ceiling.py

1. webis-s3: for every pair of pair-level signals (SpotSigs Jaccard and containment, token
   length ratio, word 5-gram Jaccard, SimHash distance, log length, spot density), the best
   rule "a >= s and b >= t" (either direction each) chosen on the 118 judged pairs themselves:
   an in-sample upper bound for any two-signal threshold rule, and the best one with P >= 0.95.
2. The SpotSigs threshold against every set at once (llvm, aeb with edits <= 5 %, zh, webis),
   the defaults otherwise: where raising it stops false pairs and what it costs in recall.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_quality as bq
import quality_data as qd

from scrapy_neardup import DedupConfig, fingerprint
from scrapy_neardup.signatures.similarity import multiset_jaccard
from scrapy_neardup.tokens import tokenize


def webis_signals() -> tuple[np.ndarray, np.ndarray, list[str]]:
    data, config = qd.webis_set(), DedupConfig()
    fps = [fingerprint(body, config, extractor="text") for body in data.bodies]
    tokens = [tokenize(body.decode("utf-8", errors="replace")) for body in data.bodies]
    grams = [{tuple(t[k : k + 5]) for k in range(max(1, len(t) - 4))} for t in tokens]
    rows, labels = [], []
    for (i, j), label in data.pairs.items():
        a, b = fps[i], fps[j]
        jac = multiset_jaccard(a.spots, b.spots) if a.spots.size and b.spots.size else 0.0
        shared = jac * (a.spots.size + b.spots.size) / (1 + jac)
        small, large = sorted((len(tokens[i]), len(tokens[j])))
        rows.append([
            jac, shared / max(1, min(a.spots.size, b.spots.size)), small / max(1, large),
            len(grams[i] & grams[j]) / max(1, len(grams[i] | grams[j])),
            -((a.simhash ^ b.simhash).bit_count()), math.log1p(small),
            -min(a.spots.size, b.spots.size) / max(1, small),
        ])  # fmt: skip
        labels.append(bool(label))
    names = [
        "spot J",
        "spot containment",
        "length ratio",
        "5-gram J",
        "-SimHash bits",
        "log tokens",
        "-spot density",
    ]
    return np.array(rows), np.array(labels), names


def best_rules(x: np.ndarray, y: np.ndarray, names: list[str]) -> None:
    found = []
    cuts = [np.quantile(x[:, k], np.linspace(0, 1, 41)) for k in range(x.shape[1])]
    for a, b in itertools.combinations(range(x.shape[1]), 2):
        for s, t in itertools.product(cuts[a], cuts[b]):
            pred = (x[:, a] >= s) & (x[:, b] >= t)
            tp, fp, fn = int((pred & y).sum()), int((pred & ~y).sum()), int((~pred & y).sum())
            p, r = tp / max(1, tp + fp), tp / max(1, tp + fn)
            f1 = 2 * p * r / (p + r) if p + r else 0.0
            found.append((f1, p, r, f"{names[a]} >= {s:.3f} and {names[b]} >= {t:.3f}"))
    found.sort(reverse=True)
    print("webis-s3, best two-signal threshold rules chosen on its own 118 pairs (an upper bound):")
    for f1, p, r, rule in found[:3]:
        print(f"  F1 {f1:.3f}  P {p:.3f}  R {r:.3f}  {rule}")
    sure = [row for row in found if row[1] >= 0.95]
    print(f"  best with P >= 0.95: F1 {sure[0][0]:.3f}  P {sure[0][1]:.3f}  R {sure[0][2]:.3f}  {sure[0][3]}")
    print("  the target: F1 >= 0.92 and P >= 0.95")


def threshold_sweep() -> None:
    templates = qd.build_templates(qd.read_aeb() + qd.read_cleanportaleval())
    sets = {"llvm": qd.llvm_set(), "aeb": qd.aeb_set(qd.TUNING_SEED, templates)}
    sets.update(zh=qd.zh_set(qd.TUNING_SEED, templates), webis=qd.webis_set())
    bench = bq.Bench(sets, use_cache=True)
    print("\nSpotSigs threshold against every set (P/R/F1, false and missed pairs); aeb: edits <= 5 %")
    for tau in (0.3, 0.4, 0.5, 0.6, 0.7):
        config = DedupConfig(spotsigs_threshold=tau, simhash_confirm=max(tau, DedupConfig().simhash_confirm))
        cells = []
        for name, data in sets.items():
            labels = bq.light_labels(data, bench.label(name)) if name == "aeb" else bench.label(name)
            s = bq.score(bq.decide(bench.view(name, config), config), labels)
            cells.append(f"{name} {s.short()} {s.fp:>2}/{s.fn:<2}")
        print(f"  {tau:.2f}  " + "  ".join(cells))


if __name__ == "__main__":
    best_rules(*webis_signals())
    threshold_sweep()
