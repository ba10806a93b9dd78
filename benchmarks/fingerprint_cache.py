"""The synthetic corpus's default fingerprints, kept on disk between benchmark runs: at 10**6
pages, fingerprinting takes a quarter of an hour on two cores, the same each run.

Kept as numpy arrays (``np.load`` without pickle: the file is data, never code), keyed by
the number of pages, the seed and the code that makes them (corpus, tokens, signatures), so a
change there makes them again. Only what the default methods fill is kept (SpotSigs, SimHash,
the exact and raw hashes); the text is not.

    pages = fingerprint_cache.load_or_make(count, seed, config, make)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from scrapy_neardup.methods import Fingerprint
from scrapy_neardup.signatures.spotsigs import SpotSet

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "benchmarks" / ".data" / "cache"
_SOURCES = ("benchmarks/corpus.py", "scrapy_neardup/fingerprint.py", "scrapy_neardup/methods.py",
            "scrapy_neardup/text.py", "scrapy_neardup/tokens.py", "scrapy_neardup/config.py",
            "scrapy_neardup/signatures")  # fmt: skip
_LOW = (1 << 64) - 1


def _code_key(config: object) -> str:
    digest = hashlib.sha1(repr(config).encode())
    for source in _SOURCES:
        path = REPO / source
        for file in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _split(values: list[int | None]) -> np.ndarray:
    """128-bit ints (or None: -1 in both halves) as two uint64 columns."""
    return np.array([(v >> 64, v & _LOW) if v is not None else (_LOW, _LOW) for v in values], dtype=np.uint64)


def _join(pair: np.ndarray) -> int | None:
    high, low = int(pair[0]), int(pair[1])
    return None if high == low == _LOW else high << 64 | low


def save(path: Path, pages: list[tuple[str, Fingerprint, bool]]) -> None:
    fps = [fp for _, fp, _ in pages]
    if any(not fp.judged for fp in fps):
        raise ValueError("a skipped page: not kept")
    lengths = np.array([len(fp.spots) for fp in fps], dtype=np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npz")
    np.savez(
        partial,
        urls=np.array([url for url, _, _ in pages]),
        variants=np.array([v for _, _, v in pages], dtype=bool),
        raw_hash=_split([fp.raw_hash for fp in fps]),
        exact=_split([fp.exact for fp in fps]),
        simhash=_split([fp.simhash for fp in fps]),
        tokens=np.array([fp.token_count for fp in fps], dtype=np.int64),
        languages=np.array([fp.language for fp in fps]),
        lengths=lengths,
        hashes=np.concatenate([fp.spots.hashes for fp in fps]).astype(np.uint64),
        counts=np.concatenate([fp.spots.counts for fp in fps]).astype(np.uint32),
    )
    partial.replace(path)


def load(path: Path) -> list[tuple[str, Fingerprint, bool]]:
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    ends = np.cumsum(arrays["lengths"])
    starts = ends - arrays["lengths"]
    pages = []
    for n, url in enumerate(arrays["urls"]):
        spots = SpotSet(arrays["hashes"][starts[n] : ends[n]], arrays["counts"][starts[n] : ends[n]])
        fp = Fingerprint(
            raw_hash=_join(arrays["raw_hash"][n]), token_count=int(arrays["tokens"][n]),
            language=str(arrays["languages"][n]), exact=_join(arrays["exact"][n]), spots=spots,
            simhash=_join(arrays["simhash"][n]),
        )  # fmt: skip
        pages.append((str(url), fp, bool(arrays["variants"][n])))
    return pages


def load_or_make(
    count: int, seed: int, config: object, make: Callable[[], list[tuple[str, Fingerprint, bool]]]
) -> list[tuple[str, Fingerprint, bool]]:
    """The ``count`` pages of ``seed`` as (url, fingerprint, is a variant): read when kept,
    else made by ``make`` and kept."""
    path = CACHE / f"fingerprints-{count}-{seed}-{_code_key(config)}.npz"
    if path.exists():
        return load(path)
    pages = make()
    save(path, pages)
    return pages
