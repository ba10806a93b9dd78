"""Extractors side by side: detection quality with each, their time a page, and on how many pages
a combined extractor (``auto``) runs trafilatura.

1. Quality: the default settings with each extractor on every data set of ``bench_quality.py``
   (both seeds of the generated sets), P/R/F1 over all pairs, and aeb on variants with edits
   <= 5 % (its target). webis is scanned as text, so the extractor does not change it.
2. Routing: for each combined extractor, the share of pages of each set on which it ran
   trafilatura's fast mode, and its full mode (``auto``: a fast-mode text that missed the article).
3. Time: decode + extract (``text.main_text``) a page on the LLVM docs pages and the 181 real aeb
   pages, the extractors interleaved on each page (their order rotating from page to page) so a
   slow spell of the shared machine weighs on each alike; median and p90 ms a page.

Run (needs the ``bench`` extra)::

    .venv/bin/python benchmarks/bench_extractors.py [--extractors a,b] [--sets ...] [--seeds 1,3]
        [--no-time] [--no-quality] [--repeat N] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_quality as bq
import quality_data as qd

from scrapy_neardup import text as text_module
from scrapy_neardup.config import EXTRACTORS, DedupConfig
from scrapy_neardup.exceptions import SkipPage
from scrapy_neardup.text import main_text

HTML_EXTRACTORS = tuple(e for e in EXTRACTORS if e != "text")


def load_sets(wanted: Sequence[str], seeds: Sequence[int]) -> dict[str, qd.DataSet]:
    sets: dict[str, qd.DataSet] = {}
    if "webis" in wanted:
        sets["webis"] = qd.webis_set()
    if "llvm" in wanted and bq.ensure_llvm_site(qd.LLVM_SITE):
        sets["llvm"] = qd.llvm_set()
    templates = qd.build_templates(qd.read_aeb() + qd.read_cleanportaleval())
    for seed in seeds:
        suffix = "" if seed == seeds[0] else f"@seed{seed}"
        if "aeb" in wanted:
            sets["aeb" + suffix] = qd.aeb_set(seed, templates)
        if "zh" in wanted:
            sets["zh" + suffix] = qd.zh_set(seed, templates)
    if "cleanportaleval" in wanted:
        sets["cleanportaleval"] = qd.cleanportaleval_set()
    return sets


def quality(bench: bq.Bench, extractors: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per extractor and set: the default settings' scores (and aeb's on light edits)."""
    out: dict[str, dict[str, Any]] = {}
    for extractor in extractors:
        config = DedupConfig(extractor=extractor)
        for name, data in bench.sets.items():
            labels = bench.label(name)
            decisions = bq.decide(bench.view(name, config), config)
            row = {"all": bq.score(decisions, labels).as_dict()}
            if name.startswith("aeb"):
                row["light"] = bq.score(decisions, bq.light_labels(data, labels)).as_dict()
            out.setdefault(extractor, {})[name] = row
    return out


def fallbacks(sets: dict[str, qd.DataSet], extractors: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per combined extractor and set: the share of pages on which it called trafilatura's fast
    mode and its full mode (the rest went to resiliparse alone)."""
    calls = {True: 0, False: 0}
    real = text_module._trafilatura

    def counted(html: str, fast: bool) -> str | None:
        calls[fast] += 1
        return real(html, fast)

    out: dict[str, dict[str, Any]] = {}
    text_module._trafilatura = counted
    try:
        for extractor in extractors:
            if extractor.startswith("trafilatura") or extractor in ("plain", "resiliparse"):
                continue
            for name, data in sets.items():
                if data.is_text:
                    continue
                calls.update({True: 0, False: 0})
                for body in data.bodies:
                    with contextlib.suppress(SkipPage):
                        main_text(body, extractor)
                pages = len(data.bodies)
                out.setdefault(extractor, {})[name] = {
                    "fast": round(calls[True] / pages, 4),
                    "full": round(calls[False] / pages, 4),
                }
    finally:
        text_module._trafilatura = real
    return out


def timed(bodies: Sequence[bytes], extractors: Sequence[str], repeat: int) -> dict[str, list[float]]:
    """ms a page (fastest of ``repeat``) for each extractor, interleaved page by page."""
    times: dict[str, list[float]] = {e: [] for e in extractors}

    def once(body: bytes, extractor: str) -> float:
        start = time.perf_counter()
        with contextlib.suppress(SkipPage):
            main_text(body, extractor)
        return (time.perf_counter() - start) * 1000

    for body in bodies[:1]:  # imports and first-call caches out of the figures
        for extractor in extractors:
            once(body, extractor)
    gc.disable()
    try:
        for at, body in enumerate(bodies):
            order = list(extractors[at % len(extractors) :]) + list(extractors[: at % len(extractors)])
            best = {e: float("inf") for e in extractors}
            for _ in range(repeat):
                for extractor in order:
                    best[extractor] = min(best[extractor], once(body, extractor))
            for extractor in extractors:
                times[extractor].append(best[extractor])
            gc.collect()
    finally:
        gc.enable()
    return times


def p90(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extractors", default=",".join(HTML_EXTRACTORS))
    parser.add_argument("--sets", default="webis,llvm,aeb,cleanportaleval,zh")
    parser.add_argument("--seeds", default=f"{qd.TUNING_SEED},{qd.HELD_OUT_SEED}")
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--no-time", action="store_true")
    parser.add_argument("--repeat", type=int, default=1, help="timed rounds a page (the fastest kept)")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--json", type=Path, metavar="OUT")
    args = parser.parse_args()
    extractors = [e.strip() for e in args.extractors.split(",") if e.strip()]
    unknown = [e for e in extractors if e not in HTML_EXTRACTORS]
    if unknown:
        parser.error(f"unknown extractors {unknown}; choose from {', '.join(HTML_EXTRACTORS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    report: dict[str, Any] = {"extractors": extractors}
    bq.log("loading data sets ...")
    sets = load_sets([s.strip() for s in args.sets.split(",")], seeds)

    if not args.no_quality:
        bench = bq.Bench(sets, use_cache=not args.no_cache)
        report["quality"] = scores = quality(bench, extractors)
        print("\nDefault settings, P/R/F1 over all pairs (aeb: edits <= 5 %)")
        print(f"  {'extractor':30} " + " ".join(f"{n:>17}" for n in sets))
        for extractor in extractors:
            cells = [scores[extractor][n].get("light", scores[extractor][n]["all"]) for n in sets]
            print(f"  {extractor:30} " + " ".join(
                f"{c['precision']:.3f}/{c['recall']:.3f}/{c['f1']:.3f}" for c in cells))  # fmt: skip
        report["fallbacks"] = rates = fallbacks(sets, extractors)
        if rates:
            print("\nShare of pages on which trafilatura ran: fast mode / full mode")
            for extractor, by_set in rates.items():
                cells = [f"{n} {r['fast']:.3f}/{r['full']:.3f}" for n, r in by_set.items()]
                print(f"  {extractor:30} " + "  ".join(cells))

    if not args.no_time:
        pages: dict[str, list[bytes]] = {}
        if "llvm" in sets:
            pages["llvm"] = sets["llvm"].bodies
        pages["aeb"] = [(s.page or "").encode("utf-8") for s in qd.read_aeb()]
        report["time"] = {}
        print(f"\ndecode + extract, ms a page (fastest of {args.repeat}), interleaved: median / p90")
        for name, bodies in pages.items():
            bq.log(f"timing {name}: {len(bodies)} pages ...")
            times = timed(bodies, extractors, args.repeat)
            report["time"][name] = {
                e: {"median": statistics.median(t), "p90": p90(t), "mean": statistics.fmean(t)}
                for e, t in times.items()
            }
            for extractor, t in times.items():
                print(f"  {name:5} {extractor:30} {statistics.median(t):8.2f} {p90(t):8.2f}"
                      f"   mean {statistics.fmean(t):8.2f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
