"""Index replay: new pages checked against a copy of a kept index file, to compare versions.

    python benchmarks/bench_index.py --sizes 1000000 --keep /tmp/kept   # once (~45 minutes)
    python benchmarks/replay_index.py /tmp/kept/index-1000000.db        # this checkout
    PYTHONPATH=/tmp/other python benchmarks/replay_index.py /tmp/kept/index-1000000.db

This machine is shared and its speed drifts 10-50 % from one hour to the next, so two full
``bench_index.py`` runs taken an hour apart cannot tell a 10 % change. A replay can: each
version (a checkout on ``PYTHONPATH``, e.g. from ``git worktree add``) checks the same new
pages against its own copy of one big file, and the versions take turns for a few rounds.
The pages come from ``corpus.py`` with another seed than the file's, fingerprinted
beforehand (not timed); the first ``--warm`` checks warm the caches and are not timed
either. A version that cannot open the file (another layout) says so and stops.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_index import CONFIG, bytes_written, prepare
from corpus import documents

import scrapy_neardup
from scrapy_neardup.detector import Arrival, Detector
from scrapy_neardup.index import SQLiteIndex


def replay(path: Path, fingerprints: list, warm: int) -> dict:
    """Check ``fingerprints`` against a copy of ``path``; time all but the first ``warm``."""
    with tempfile.TemporaryDirectory(dir=path.parent, prefix="replay-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        index = SQLiteIndex(copy, CONFIG)
        detector = Detector(CONFIG, index)

        def judge(url: str, fp: object) -> object:
            return detector.decide(Arrival(url, "", revisit=False), fp)

        try:
            for i, fp in enumerate(fingerprints[:warm]):
                judge(f"https://replay.example/warm/{i}", fp)
            times, before = [], bytes_written()
            for i, fp in enumerate(fingerprints[warm:]):
                start = time.perf_counter_ns()
                judge(f"https://replay.example/{i}", fp)
                times.append(time.perf_counter_ns() - start)
        finally:
            index.close()
        written = bytes_written() - before
    ms = np.array(times) / 1e6
    return {
        "median": float(np.median(ms)), "mean": float(ms.mean()), "p99": float(np.percentile(ms, 99)),
        "written": written / len(ms),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="an index file kept by bench_index.py --keep")
    parser.add_argument("--pages", type=int, default=6000, help="timed checks (default 6000)")
    parser.add_argument("--warm", type=int, default=1000, help="untimed checks first (default 1000)")
    parser.add_argument("--seed", type=int, default=2, help="corpus seed of the new pages (default 2)")
    parser.add_argument("--rounds", type=int, default=1, help="replays, each on a fresh copy")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    if not args.file.is_file():
        parser.error(f"{args.file}: no such file (make one with bench_index.py --keep DIR)")
    texts = [d.text for d in documents(args.warm + args.pages, args.seed)]
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        fingerprints = [fp for fp, _ in pool.map(partial(prepare, config=CONFIG), texts, chunksize=250)]
    print(f"{Path(scrapy_neardup.__file__).parent.parent}: {args.pages:,} new pages against {args.file}")
    for _ in range(args.rounds):
        r = replay(args.file, fingerprints, args.warm)
        print(
            f"  median {r['median']:.3f} ms, mean {r['mean']:.3f} ms, p99 {r['p99']:.2f} ms, "
            f"wrote {r['written'] / 1e3:,.0f} KB a check",
            flush=True,
        )


if __name__ == "__main__":
    main()
