"""Report benchmark: time and peak memory of the HTML, JSON and CSV reports over large indexes.

The indexes are real SQLiteIndex files of synthetic pages from ``corpus.build_index`` (a
share of them near-duplicate variants), built once and kept under ``benchmarks/out/``.
Judging pages one by one is slow (about half an hour for 40,000 on two busy cores), so
indexes larger than ``--max-build`` are tiled from the generated one: copies with ids,
URLs and texts shifted, the same rows and cluster shapes (see ``tile_index``).
Each report runs in a fresh process, so its peak resident memory (``ru_maxrss``) is its
own; the baseline line is the same process after the imports, before any report work.

    .venv/bin/python benchmarks/bench_report.py                        # 100,000 and 1,000,000 documents
    .venv/bin/python benchmarks/bench_report.py --sizes 2000 --json out.json

Target (issue 5): a 1,000,000-document index reports in under 60 seconds in every format.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

FORMATS = ("html", "json", "csv")
TARGET_SECONDS = 60.0
TARGET_DOCS = 1_000_000


def _status_mb(field: str) -> float | None:
    """A memory figure of this process from /proc (Linux), in MiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB.

    VmHWM, not ``ru_maxrss``: Linux keeps ``ru_maxrss`` across ``execve``, so a child would
    report its parent's peak (the parent may have held a whole index while tiling it).
    """
    peak = _status_mb("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ensure_index(path: Path, n_docs: int, seed: int, workers: int, max_build: int) -> dict:
    """The index of ``n_docs`` synthetic pages at ``path``, built when missing or of another size.

    Up to ``max_build`` pages are generated through the detector (``corpus.build_index``);
    a larger index is tiled from the ``max_build`` one (see ``tile_index``).
    """
    from scrapy_neardup.index import SQLiteIndex

    if path.exists():
        try:
            with SQLiteIndex.open_existing(path) as index:
                stats = index.stats()
            if stats["documents"] == n_docs:
                return stats
        except Exception as exc:  # a half-built file from a killed run: build it again
            print(f"rebuilding {path}: {exc}", file=sys.stderr)
        for leftover in path.parent.glob(path.name + "*"):
            leftover.unlink()
    if n_docs > max_build:
        base = path.with_name(path.name.replace(f"-{n_docs}-", f"-{max_build}-"))
        ensure_index(base, max_build, seed, workers, max_build)
        print(f"tiling {path} with {n_docs:,} documents from {base.name} (once; kept) ...", flush=True)
        started = time.perf_counter()
        stats = tile_index(base, path, n_docs)
        print(f"tiled in {time.perf_counter() - started:,.0f} s: {stats}", flush=True)
        return stats
    from corpus import build_index

    print(f"building {path} with {n_docs:,} documents (once; kept for later runs) ...", flush=True)
    started = time.perf_counter()
    tmp = path.with_name(path.name + ".building")
    for leftover in path.parent.glob(tmp.name + "*"):
        leftover.unlink()
    stats = build_index(tmp, n_docs, seed=seed, workers=workers)
    for suffix in ("", "-wal", "-shm"):
        if Path(str(tmp) + suffix).exists():
            os.replace(str(tmp) + suffix, str(path) + suffix)
    print(f"built in {time.perf_counter() - started:,.0f} s: {stats}", flush=True)
    return stats


def tile_index(base: Path, path: Path, n_docs: int) -> dict:
    """An index of ``n_docs`` pages made of copies of ``base``, each copy's ids and URLs shifted.

    Generating a million pages through the detector takes hours on two shared cores; the
    report only reads the documents and texts, so copies of a real generated index give it
    the same rows, the same cluster shapes and the same file layout at any size. The copies
    get no postings, so the file is for reporting, not for crawling on.
    """
    import shutil
    import sqlite3
    import zlib

    from scrapy_neardup.index import SQLiteIndex

    tmp = path.with_name(path.name + ".building")
    with SQLiteIndex.open_existing(base) as index:
        index.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(base, tmp)
    con = sqlite3.connect(tmp, isolation_level=None)
    try:
        base_n, max_id = con.execute("SELECT COUNT(*), MAX(id) FROM documents").fetchone()
        columns = [row[1] for row in con.execute("PRAGMA table_info(documents)")]
        shifted = {"id": "id + :offset", "duplicate_of": "duplicate_of + :offset", "source": "NULL",
                   "url": "replace(url, '/doc/', '/doc/t' || :copy || '/')"}  # fmt: skip
        select = ", ".join(shifted.get(c, c) for c in columns)
        copy = 1
        while copy * base_n < n_docs:
            rows = min(base_n, n_docs - copy * base_n)
            last = con.execute(
                "SELECT id FROM documents ORDER BY id LIMIT 1 OFFSET ?", (rows - 1,)
            ).fetchone()[0]
            params = {"offset": copy * max_id, "copy": copy, "last": last}
            con.execute("BEGIN")
            con.execute(
                f"INSERT INTO documents ({', '.join(columns)}) SELECT {select} FROM documents "
                "WHERE id <= :last ORDER BY id",
                params,
            )
            # Each copy's texts differ from the original's (as a real index's would), so the HTML
            # report's text budget is spent as it would be, not saved by storing repeats once.
            texts = con.execute("SELECT doc, text FROM texts WHERE doc <= :last ORDER BY doc", params)
            con.executemany(
                "INSERT INTO texts VALUES (?, ?)",
                (
                    (
                        doc + copy * max_id,
                        zlib.compress(f"[copy {copy}] ".encode() + zlib.decompress(blob), 6),
                    )
                    for doc, blob in texts.fetchall()
                ),
            )
            con.execute("COMMIT")
            copy += 1
            print(f"  tiled {min(copy * base_n, n_docs):,} of {n_docs:,} documents", flush=True)
    finally:
        con.close()
    os.replace(tmp, path)
    with SQLiteIndex.open_existing(path) as index:
        return index.stats()


def child(db: str, fmt: str, out: str) -> None:
    """One report in this process; prints its figures as one JSON line."""
    from scrapy_neardup.report import write_report

    baseline = _status_mb("VmRSS") or peak_rss_mb()  # after the imports, before any report work
    started = time.perf_counter()
    write_report(db, out, fmt, progress=sys.stderr.isatty())
    seconds = time.perf_counter() - started
    print(json.dumps({
        "seconds": seconds, "peak_rss_mb": peak_rss_mb(), "baseline_rss_mb": baseline,
        "output_mb": Path(out).stat().st_size / 2**20,
    }))  # fmt: skip


def run_one(db: Path, fmt: str, out_dir: Path) -> dict:
    out = out_dir / f"{db.stem}.{fmt}"
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(db), fmt, str(out)],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    out.unlink()  # a million-row CSV is not worth keeping
    return result


def clustered(db: Path) -> tuple[int, int]:
    """(clusters, pages in clusters) of an index: the structure the report holds in memory."""
    from scrapy_neardup.index import SQLiteIndex
    from scrapy_neardup.report.clusters import build_clusters

    with SQLiteIndex.open_existing(db) as index:
        clusters = build_clusters((a, b) for a, b, _, _ in index.match_edges())
    return len(clusters), sum(len(c.members) for c in clusters)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000", help="index sizes in documents, comma-separated")
    parser.add_argument("--formats", default=",".join(FORMATS), help="report formats, comma-separated")
    parser.add_argument("--out-dir", type=Path, default=HERE / "out", help="where indexes and reports go")
    parser.add_argument("--seed", type=int, default=1, help="corpus seed")
    parser.add_argument("--workers", type=int, default=2, help="fingerprinting processes while building")
    parser.add_argument(
        "--max-build",
        type=int,
        default=40_000,
        help="largest index generated page by page (the detector judges every page: about half an hour "
        "for 40,000 on two busy cores); larger ones are tiled from it (default: 40000)",
    )
    parser.add_argument("--build-only", action="store_true", help="build the indexes, report nothing")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--child", nargs=3, metavar=("DB", "FORMAT", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in sizes:
        db = args.out_dir / f"report-{n}-seed{args.seed}.db"
        stats = ensure_index(db, n, args.seed, args.workers, args.max_build)
        if args.build_only:
            continue
        n_clusters, n_clustered = clustered(db)
        for fmt in formats:
            result = run_one(db, fmt, args.out_dir)
            rows.append({
                "documents": stats["documents"], "duplicates": stats["duplicates"], "clusters": n_clusters,
                "clustered_pages": n_clustered, "index_mb": stats["bytes"] / 2**20, "format": fmt, **result,
            })  # fmt: skip
            print(
                f"{stats['documents']:>9,} docs  {fmt:<4}  {result['seconds']:7.1f} s  "
                f"peak {result['peak_rss_mb']:7.0f} MiB (baseline {result['baseline_rss_mb']:.0f})  "
                f"output {result['output_mb']:7.1f} MiB",
                flush=True,
            )
    if not rows:
        return 0
    print()
    print(
        "| documents | duplicates | clusters | pages in clusters | format | seconds | peak RSS MiB "
        "| RSS after imports MiB | output MiB |"
    )
    print("|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['documents']:,} | {r['duplicates']:,} | {r['clusters']:,} | {r['clustered_pages']:,} | "
            f"{r['format']} | {r['seconds']:.1f} | {r['peak_rss_mb']:.0f} | {r['baseline_rss_mb']:.0f} | "
            f"{r['output_mb']:.1f} |"
        )
    failed = [r for r in rows if r["documents"] >= TARGET_DOCS and r["seconds"] >= TARGET_SECONDS]
    big = [r for r in rows if r["documents"] >= TARGET_DOCS]
    if big:
        verdict = "FAIL" if failed else "PASS"
        print(f"\n{verdict}: every format under {TARGET_SECONDS:.0f} s at {TARGET_DOCS:,} documents")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
