"""How a page's spots are stored: Elias-Fano (what the index writes) beside plain delta + zlib.

    python benchmarks/bench_codecs.py

Fingerprints the 181 real aeb pages with the default settings and codes each page's sorted
32-bit spots (each repeated as often as it occurs) both ways: the bytes a spot and a page,
and the time to decode them, one page at a time and, for Elias-Fano, a check's batch at once
(``elias_fano.decode_many``, as the searches read their candidates).
"""

from __future__ import annotations

import gzip
import statistics
import time
import zlib
from pathlib import Path

import numpy as np

from scrapy_neardup import DedupConfig
from scrapy_neardup.fingerprint import fingerprint
from scrapy_neardup.index import elias_fano
from scrapy_neardup.signatures.spotsigs import spots32

AEB = Path(__file__).resolve().parents[2] / "shared" / "data" / "aeb" / "html"


def delta_zlib(values: np.ndarray) -> bytes:
    return zlib.compress(np.diff(values.astype(np.int64), prepend=0).astype("<u4").tobytes(), 6)


def undelta_zlib(blob: bytes) -> np.ndarray:
    return np.cumsum(np.frombuffer(zlib.decompress(blob), "<u4").astype(np.uint64)).astype(np.uint32)


def timed(work, repeat: int = 20) -> float:
    began = time.perf_counter()
    for _ in range(repeat):
        work()
    return (time.perf_counter() - began) / repeat


def main() -> None:
    config, lists = DedupConfig(), []
    for path in sorted(AEB.glob("*.html.gz")):
        fp = fingerprint(gzip.decompress(path.read_bytes()), config, content_type="text/html")
        if fp.judged and len(fp.spots):
            spots = spots32(fp.spots)
            lists.append(np.repeat(spots.hashes.astype("<u4"), spots.counts))
    ef, dz = [elias_fano.encode(v) for v in lists], [delta_zlib(v) for v in lists]
    assert all((undelta_zlib(b) == v).all() for b, v in zip(dz, lists, strict=True))
    spots, pages = sum(map(len, lists)), len(lists)
    print(f"{pages} pages, {spots} spot occurrences (median {statistics.median(map(len, lists))} a page)")
    for name, blobs in (("Elias-Fano", ef), ("delta + zlib", dz)):
        size = sum(map(len, blobs))
        print(f"{name:<13} {size / spots:.2f} bytes a spot, {size / pages:.0f} a page")
    one = timed(lambda: [elias_fano.decode(b) for b in ef]) / pages * 1e6
    batch = timed(lambda: elias_fano.decode_many(ef)) / pages * 1e6
    zipped = timed(lambda: [undelta_zlib(b) for b in dz]) / pages * 1e6
    print(f"decode, a page: Elias-Fano {one:.1f} us (in one batch {batch:.1f}), delta + zlib {zipped:.1f} us")


if __name__ == "__main__":
    main()
