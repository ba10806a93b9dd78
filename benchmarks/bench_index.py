"""Index benchmark: check_and_add latency, throughput and size, beside datasketch MinHashLSH.

    python benchmarks/bench_index.py                         # 100,000 documents
    python benchmarks/bench_index.py --sizes 100000 1000000  # the README table

Documents come from ``corpus.py`` (a bigram model of the real aeb articles, 10% near-duplicate
variants). Each size gets a fresh SQLiteIndex with the default settings, one transaction per
page as in a crawl; fingerprints are computed beforehand in a worker pool and are not timed.
In the same run, on the same documents, datasketch's in-memory ``MinHashLSH`` (128
permutations, threshold 0.8) answers a query and inserts each page that had no match, from
MinHash values computed beforehand as well. Both sides time only the index work.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import zlib
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import documents

from scrapy_neardup import DedupConfig
from scrapy_neardup.detector import Arrival, Detector
from scrapy_neardup.fingerprint import fingerprint
from scrapy_neardup.index import SQLiteIndex
from scrapy_neardup.index.engines.sqlite import file_bytes
from scrapy_neardup.signatures._hashing import token_hashes
from scrapy_neardup.signatures.minhash import minhash
from scrapy_neardup.tokens import tokenize

CHUNK = 20_000
CONFIG = DedupConfig(extractor="text", keep_text=0)  # the default detection knobs


def bytes_written() -> int:
    """Bytes this process has handed to write(2) so far (files and pipes alike)."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("wchar:"))


def prepare(text: str, config: DedupConfig) -> tuple:
    """(fingerprint without its text, 128 MinHash values) for one document, in a worker."""
    fp = fingerprint(text, config)
    values = minhash(token_hashes(tokenize(text)), 128, 3)
    return dataclasses.replace(fp, text=""), values


def run(size: int, seed: int, workers: int, folder: Path) -> dict:
    from datasketch import MinHashLSH
    from datasketch.lean_minhash import LeanMinHash

    path = folder / f"index-{size}.db"
    for old in folder.glob(path.name + "*"):  # a kept file from an earlier run
        old.unlink()
    index = SQLiteIndex(path, CONFIG)
    detector = Detector(CONFIG, index)

    def judge(url: str, fp: object) -> object:
        return detector.decide(Arrival(url, "", revisit=False), fp)

    lsh = MinHashLSH(threshold=0.8, num_perm=128)
    ours, peer = np.empty(size), np.empty(size)
    found_ours = found_peer = variants = 0
    text_bytes: list[int] = []
    done = 0
    written = 0  # by the checks and the checkpoint thread, not counting what pool.map pipes to workers
    docs = documents(size, seed)
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        while done < size:
            chunk = [next(docs) for _ in range(min(CHUNK, size - done))]
            prepared = pool.map(partial(prepare, config=CONFIG), [d.text for d in chunk], chunksize=250)
            before = bytes_written()
            for doc, (fp, values) in zip(chunk, prepared, strict=True):
                if len(text_bytes) < 2000:
                    text_bytes.append(len(zlib.compress(doc.text[:10_000].encode(), 6)))
                variants += doc.copy_of >= 0
                start = time.perf_counter_ns()
                verdict = judge(doc.url, fp)
                ours[done] = time.perf_counter_ns() - start
                found_ours += verdict.duplicate and doc.copy_of >= 0
                lean = LeanMinHash(seed=1, hashvalues=values.astype(np.uint64), scheme="legacy")
                start = time.perf_counter_ns()
                hits = lsh.query(lean)
                if not hits:
                    lsh.insert(doc.number, lean)
                peer[done] = time.perf_counter_ns() - start
                found_peer += bool(hits) and doc.copy_of >= 0
                done += 1
            last = ours[done - len(chunk) : done] / 1e6
            wrote = bytes_written() - before
            written += wrote
            print(
                f"  {size:,}: {done:,} done; these {len(chunk):,} checks: median {np.median(last):.3f} ms,"
                f" p99 {np.percentile(last, 99):.2f} ms, wrote {wrote / len(chunk):,.0f} B each",
                file=sys.stderr,
                flush=True,
            )
    before = bytes_written()
    index.close()  # stops the checkpoint thread; the last connection moves the WAL into the file
    written += bytes_written() - before
    on_disk = file_bytes(path)
    return {
        "size": size,
        "ours_median": float(np.median(ours)) / 1e6,
        "ours_p99": float(np.percentile(ours, 99)) / 1e6,
        "ours_pps": size / (ours.sum() / 1e9),
        "peer_median": float(np.median(peer)) / 1e6,
        "peer_p99": float(np.percentile(peer, 99)) / 1e6,
        "peer_pps": size / (peer.sum() / 1e9),
        "bytes_per_doc": on_disk / size,
        "written_per_doc": written / size,
        "text_bytes": statistics.median(text_bytes),
        "variants": variants,
        "found_ours": found_ours,
        "found_peer": found_peer,
        "last_10k_median": float(np.median(ours[-10_000:])) / 1e6,
    }


AEB_PAGES = Path(__file__).resolve().parents[2] / "shared" / "data" / "aeb" / "html"


def page_cost_ms(config: DedupConfig) -> float | None:
    """Median milliseconds of a page's own path with ``config`` (decode, extract, signatures) on the
    real aeb pages, the fastest of 2 rounds each: what the index check is weighed against."""
    bodies = [gzip.decompress(path.read_bytes()) for path in sorted(AEB_PAGES.glob("*.html.gz"))]
    if not bodies:
        return None
    best = [float("inf")] * len(bodies)
    for _ in range(2):
        for n, body in enumerate(bodies):
            start = time.perf_counter()
            fingerprint(body, config)
            best[n] = min(best[n], (time.perf_counter() - start) * 1000)
    return statistics.median(best)


def row(r: dict) -> str:
    """One line of the table."""
    ours = f"{r['ours_median']:>9.3f} | {r['ours_p99']:>7.2f} | {r['ours_pps']:>8,.0f}"
    ours += f" | {r['bytes_per_doc']:>9,.0f}"
    peer = f"{r['peer_median']:>10.3f} | {r['peer_p99']:>8.2f} | {r['peer_pps']:>11,.0f}"
    found = f"{r['found_ours']:>6,} vs {r['found_peer']:>6,} of {r['variants']:,}"
    return f"{r['size']:>10,} | {ours} || {peer} || {found}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", metavar="DIR", help="write the index files here and keep them")
    args = parser.parse_args()
    print("Detector.judge on the SQLite index (default settings, one transaction a page), beside")
    print("datasketch MinHashLSH in memory (128 perm, threshold 0.8), query + insert, same documents")
    print()
    print(
        f"{'documents':>10} | {'median ms':>9} | {'p99 ms':>7} | {'pages/s':>8} | {'bytes/doc':>9} || "
        f"{'LSH median':>10} | {'LSH p99':>8} | {'LSH pages/s':>11} || {'variants found':>15}",
        flush=True,
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for size in args.sizes:  # each row as soon as it is measured: a million takes a while
            r = run(size, args.seed, args.workers, folder)
            rows.append(r)
            print(row(r), flush=True)
    print()
    page_ms = page_cost_ms(DedupConfig())
    if page_ms is not None:
        print(f"a page's own cost, default settings (aeb pages: decode, extract, sign): {page_ms:.2f} ms")
    for r in rows:
        if page_ms is not None:
            share, last = r["ours_median"] / page_ms, r["last_10k_median"] / page_ms
            print(
                f"{r['size']:,}: the index check is {share:.1%} of a page's cost (the last 10,000 checks:"
                f" {last:.1%}; target < 10%) {'PASS' if max(share, last) < 0.1 else 'FAIL'}"
            )
        print(
            f"{r['size']:,}: median of the last 10,000 checks {r['last_10k_median']:.3f} ms; "
            f"ours / LSH time per page {r['ours_median'] / r['peer_median']:.2f}x (median); "
            f"keeping 10,000 characters of text for the report would add ~{r['text_bytes']:,.0f} bytes/doc; "
            f"written (WAL and checkpoints) {r['written_per_doc']:,.0f} bytes/check"
        )


if __name__ == "__main__":
    main()
