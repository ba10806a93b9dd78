"""Detection quality: precision, recall and F1 of duplicate pairs on labelled real pages, beside peers.

Data sets (``quality_data.py`` says how each is labelled and how variants are generated):

* ``llvm``: the LLVM and Clang 14/15 documentation site (built on first run with
  ``../shared/scripts/get-llvm-docs`` into ``benchmarks/.data/llvm-docs-site``, which needs
  ``apt-get download``);
* ``aeb``: 181 real news and blog pages with 3 generated near-duplicate variants each;
* ``cleanportaleval``: 71 different articles, several per site template, all distinct;
* ``zh``: 5 Chinese articles under page templates with 8 generated variants each.

Every page is extracted once per extractor and fingerprinted once per signature family (the
knobs that change a signature); every pair of pages is then judged from the fingerprints with
all-pairs matrices, which is what ``verify.compare`` (and so the Detector and its index) decides
for the same pair: the run checks that on sampled pairs. Thresholds only cut those matrices,
so the sweeps (``--sweep``) cost almost nothing.

Scored: every pair of pages in a set, except pairs labelled ambiguous. A page that is not judged
(too short, no text) matches nothing. Peers, on the same pages in the same run: exact hash of
the whole page, exact hash of the trafilatura main text, the ``simhash`` package (distance 3) on
the page's visible text and on the main text, trafilatura's ``Simhash`` (distance 3) on the main
text, and datasketch ``MinHashLSH`` (128 permutations, threshold 0.8) over the main text's word
3-shingles.

The generated sets are made with the tuning seed (``quality_data.TUNING_SEED``) and the held-out
seed (``HELD_OUT_SEED``), which was never used to choose a default.

Run (needs the ``bench`` extra: ``pip install -e '.[bench]'``)::

    .venv/bin/python benchmarks/bench_quality.py [--sets llvm,aeb,cleanportaleval,zh] [--seeds 1,3]
        [--sweep] [--limit N] [--json OUT] [--no-cache] [--index postgres]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import random
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import xxhash
from scipy import sparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality_data as qd

from scrapy_neardup import text as text_module
from scrapy_neardup import tokens as tokens_module
from scrapy_neardup.config import EXTRACTORS as ALL_EXTRACTORS
from scrapy_neardup.config import PRESETS, DedupConfig
from scrapy_neardup.exceptions import SkipPage
from scrapy_neardup.fingerprint import Fingerprint, fingerprint
from scrapy_neardup.methods import SURE_FEW_SPOTS_BITS, SURE_FEW_SPOTS_JACCARD, decision_order
from scrapy_neardup.signatures.minhash import band_keys
from scrapy_neardup.text import extract_page
from scrapy_neardup.tokens import tokenize
from scrapy_neardup.verify import compare

ALL_METHODS = ("exact", "spotsigs", "simhash", "minhash", "shingles", "imatch", "ksentence")
EXTRACTORS = tuple(e for e in ALL_EXTRACTORS if e != "text")
CACHE = qd.REPO / "benchmarks" / ".data" / "cache"
GET_LLVM_DOCS = qd.REPO.parent / "shared" / "scripts" / "get-llvm-docs"
# The targets for the defaults.
# The precision issue's targets, by set: (F1 at least, precision at least, recall at least).
TARGETS = {
    "webis": (0.92, 0.95, 0.0),
    "llvm": (0.99, 0.995, 0.0),
    "aeb": (0.0, 0.99, 0.95),  # on variants with edits <= LIGHT_EDITS, the heavier ones left out
}
LIGHT_EDITS = 0.05
LSH_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


# ---------------------------------------------------------------------------------------------
# Extraction, once per page and extractor (cached on disk by content, extractor and code version)


def _code_key(extractor: str) -> str:
    """Changes whenever the extraction code or the extractor library changes."""
    parts = [Path(m.__file__).read_bytes() for m in (text_module, tokens_module)] + [extractor.encode()]
    for package in ("trafilatura", "resiliparse", "lxml"):
        try:
            parts.append(version(package).encode())
        except Exception:  # a missing optional extractor
            parts.append(b"-")
    return hashlib.sha1(b"\0".join(parts)).hexdigest()[:16]


def extract_all(bodies: Sequence[bytes], extractor: str, use_cache: bool) -> list[str | None]:
    """Main text of every body (None when the page is skipped before tokenizing)."""
    path = CACHE / f"extract-{extractor}-{_code_key(extractor)}.json"  # data, never pickled code
    cache: dict[str, str | None] = {}
    if use_cache and path.exists():
        cache = json.loads(path.read_text())
    texts, dirty = [], False
    for body in bodies:
        key = hashlib.sha1(body).hexdigest()
        if key not in cache:
            try:
                cache[key] = extract_page(body, extractor)[0]
            except SkipPage:
                cache[key] = None
            dirty = True
        texts.append(cache[key])
    if use_cache and dirty:
        CACHE.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cache))
    return texts


# ---------------------------------------------------------------------------------------------
# All-pairs matrices from fingerprints


def _eq(values: Sequence[object | None]) -> np.ndarray:
    """Pairwise equality of hashable values; None equals nothing."""
    ids = {}
    codes = np.array([-1 if v is None else ids.setdefault(v, len(ids)) for v in values], dtype=np.int64)
    return (codes[:, None] == codes[None, :]) & (codes[:, None] >= 0)


def spot_jaccard(fps: Sequence[Fingerprint]) -> tuple[np.ndarray, np.ndarray]:
    """All-pairs SpotSigs multiset Jaccard, and which pairs have spots on both sides.

    A multiset is the set of (spot, occurrence number) pairs, so Σ min / Σ max is a plain set
    Jaccard and the intersections are one sparse matrix product.
    """
    rows, keys_h, keys_k = [], [], []
    sizes = np.zeros(len(fps), dtype=np.float64)
    for i, fp in enumerate(fps):
        counts = fp.spots.counts.astype(np.int64)
        if not len(counts):
            continue
        total = int(counts.sum())
        sizes[i] = total
        rows.append(np.full(total, i))
        keys_h.append(np.repeat(fp.spots.hashes, counts))
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        keys_k.append(np.arange(total) - starts)
    n = len(fps)
    has = sizes > 0
    if not rows:
        return np.zeros((n, n)), np.zeros((n, n), dtype=bool)
    pairs = np.stack([np.concatenate(keys_h), np.concatenate(keys_k).astype(np.uint64)], axis=1)
    _, cols = np.unique(pairs, axis=0, return_inverse=True)
    r = np.concatenate(rows)
    x = sparse.csr_matrix(
        (np.ones(len(r), dtype=np.float64), (r, cols.ravel())), shape=(n, int(cols.max()) + 1)
    )
    inter = (x @ x.T).toarray()
    union = sizes[:, None] + sizes[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(union > 0, inter / union, 0.0)
    return jac, has[:, None] & has[None, :]


def hamming_matrix(values: Sequence[int | None]) -> np.ndarray:
    """All-pairs Hamming distance of 64-bit values; 65 where either is missing."""
    arr = np.array([0 if v is None else v for v in values], dtype=np.uint64)
    dist = np.bitwise_count(arr[:, None] ^ arr[None, :]).astype(np.int16)
    missing = np.array([v is None for v in values])
    dist[missing, :] = 65
    dist[:, missing] = 65
    return dist


def agreement(columns: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per pair, how many columns hold equal (nonzero) values."""
    n = len(columns)
    total = np.zeros((n, n), dtype=np.int16)
    for col in columns.T:
        total += (col[:, None] == col[None, :]) & (col[:, None] != 0)
    total[~valid, :] = 0
    total[:, ~valid] = 0
    return total


@dataclass
class View:
    """One data set seen through one extractor and one signature family: fingerprints and matrices."""

    fps: list[Fingerprint]
    judged: np.ndarray
    tokens: np.ndarray
    family: DedupConfig
    _cache: dict[Any, Any] = field(default_factory=dict)

    def memo(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def spot(self) -> tuple[np.ndarray, np.ndarray]:
        return self.memo("spot", lambda: spot_jaccard(self.fps))

    def simhash(self) -> np.ndarray:
        return self.memo("simhash", lambda: hamming_matrix([fp.simhash for fp in self.fps]))

    def minhash(self) -> np.ndarray:
        def make() -> np.ndarray:
            n = len(self.fps)
            width = next((len(fp.minhash) for fp in self.fps if fp.minhash is not None), 1)
            blank = np.zeros(width, np.uint32)  # a skipped page (not judged, so never paired)
            m = np.stack([fp.minhash if fp.minhash is not None else blank for fp in self.fps])
            same = np.zeros((n, n), dtype=np.int32)
            for col in m.T:
                same += col[:, None] == col[None, :]
            return same / m.shape[1]

        return self.memo("minhash", make)

    def bands(self, bands: int, rows: int) -> np.ndarray:
        def make() -> np.ndarray:
            keys = np.array(
                [
                    band_keys(fp.minhash, bands, rows) if fp.minhash is not None else [0] * bands
                    for fp in self.fps
                ],
                dtype=np.uint64,
            )
            valid = np.array([fp.minhash is not None for fp in self.fps])
            return agreement(keys, valid) > 0

        return self.memo(("bands", bands, rows), make)

    def shingles(self) -> np.ndarray:
        def make() -> np.ndarray:
            valid = np.array([fp.super_shingles is not None for fp in self.fps])
            cols = np.stack([fp.super_shingles if fp.super_shingles is not None else np.zeros(6, np.uint64)
                             for fp in self.fps])  # fmt: skip
            return agreement(cols, valid)

        return self.memo("shingles", make)

    def imatch(self) -> np.ndarray:
        def make() -> np.ndarray:
            width = max((len(fp.imatch) for fp in self.fps), default=1) or 1
            cols = np.array([(list(fp.imatch) + [0] * width)[:width] for fp in self.fps], dtype=np.uint64)
            valid = np.array([bool(fp.imatch) for fp in self.fps])
            return agreement(cols, valid)

        return self.memo("imatch", make)

    def equal(self, what: str) -> np.ndarray:
        return self.memo(("eq", what), lambda: _eq([getattr(fp, what) for fp in self.fps]))


def method_matrix(view: View, method: str, config: DedupConfig) -> np.ndarray:
    """Which pairs ``method`` calls duplicates under ``config``: the rules of ``verify.method_result``."""
    if method in ("exact", "ksentence"):
        return view.equal(method)
    if method == "spotsigs":
        jac, both = view.spot()
        sizes = np.array([fp.spots.size for fp in view.fps], dtype=np.int64)
        enough = np.minimum(sizes[:, None], sizes[None, :]) >= config.spotsigs_min_spots
        if config.spotsigs_few_spots_bits >= 0:
            # Under min_spots the SimHash of all the words must agree too (verify.method_result).
            enough |= view.simhash() <= config.spotsigs_few_spots_bits
        tokens = view.tokens.astype(np.float64)
        uneven = np.minimum.outer(tokens, tokens) < config.spotsigs_length_ratio * np.maximum.outer(
            tokens, tokens
        )
        bar = np.where(uneven, max(config.spotsigs_threshold, config.spotsigs_uneven_threshold),
                       config.spotsigs_threshold)  # fmt: skip
        return both & enough & (jac >= bar)
    if method == "simhash":
        near = view.simhash() <= config.simhash_distance
        if config.simhash_confirm > 0:
            jac, both = view.spot()
            near &= both & (jac >= config.simhash_confirm)
        return near
    if method == "minhash":
        return (view.minhash() >= config.minhash_threshold) & view.bands(*config.minhash_lsh)
    if method == "shingles":
        return view.shingles() >= config.shingles_min_agree
    if method == "imatch":
        return view.imatch() >= 1
    raise ValueError(method)


def decide(view: View, config: DedupConfig) -> np.ndarray:
    """All-pairs verdicts of ``config``: any configured method matches, both pages judged."""
    n = len(view.fps)
    result = np.zeros((n, n), dtype=bool)
    for method in config.methods:
        result |= method_matrix(view, method, config)
    ok = view.judged & (view.tokens >= max(1, config.min_tokens))
    return result & ok[:, None] & ok[None, :]


def method_similarity(view: View, method: str) -> np.ndarray:
    """All-pairs similarity on ``method``'s own 0-1 scale: what a verdict it names says."""
    if method in ("exact", "ksentence"):
        return np.ones((len(view.fps), len(view.fps)))
    if method == "spotsigs":
        return view.spot()[0]
    if method == "simhash":
        return 1.0 - view.simhash() / 64.0
    if method == "minhash":
        return view.minhash()
    if method == "shingles":
        return view.shingles() / 6.0
    if method == "imatch":
        width = max(1, max((len(fp.imatch) for fp in view.fps), default=1))
        return view.imatch() / width
    raise ValueError(method)


def weak_matrix(view: View, method: str, config: DedupConfig) -> np.ndarray:
    """Pairs whose match by ``method`` would be weak (``MethodResult.weak``): SpotSigs over fewer
    than min_spots spots (unless SimHash all but agrees, or all but every spot is shared), or of
    texts of unequal length under the higher bar."""
    n = len(view.fps)
    if method != "spotsigs":
        return np.zeros((n, n), dtype=bool)
    sizes = np.array([fp.spots.size for fp in view.fps], dtype=np.int64)
    few = np.minimum(sizes[:, None], sizes[None, :]) < config.spotsigs_min_spots
    few &= ~(view.simhash() <= SURE_FEW_SPOTS_BITS) & ~(
        method_similarity(view, method) >= SURE_FEW_SPOTS_JACCARD
    )
    tokens = view.tokens.astype(np.float64)
    longer = np.maximum.outer(tokens, tokens)
    uneven = np.minimum.outer(tokens, tokens) < config.spotsigs_length_ratio * longer
    return few | (uneven & (config.spotsigs_uneven_threshold > config.spotsigs_threshold))


def decide_drop(view: View, config: DedupConfig, bar: float) -> np.ndarray:
    """The pairs a drop-mode crawl drops with the sure bar ``bar``: the method that names the verdict
    (the first in the decision order that matches) says at least ``bar`` on strong evidence
    (``weak_matrix``), or the copy is exact; a bar of 0 drops every match."""
    n = len(view.fps)
    left, dropped = np.ones((n, n), dtype=bool), np.zeros((n, n), dtype=bool)
    for method in decision_order():
        if method not in config.methods:
            continue
        matched = method_matrix(view, method, config) & left
        if method == "exact" or bar <= 0:
            dropped |= matched
        else:
            dropped |= matched & (method_similarity(view, method) >= bar) & ~weak_matrix(view, method, config)
        left &= ~matched
    ok = view.judged & (view.tokens >= max(1, config.min_tokens))
    return dropped & ok[:, None] & ok[None, :]


# ---------------------------------------------------------------------------------------------
# Labels and scores


def group_codes(data: qd.DataSet) -> np.ndarray:
    """An integer per page's group, -1 for pages in none."""
    ids: dict[str, int] = {}
    groups = data.groups or [None] * len(data)
    return np.array([-1 if g is None else ids.setdefault(g, len(ids)) for g in groups], dtype=np.int64)


def variant_pairs(data: qd.DataSet) -> np.ndarray:
    """Pairs of two generated variants of the same source (upper triangle): not labelled."""
    codes = group_codes(data)
    variant = np.array(data.variant or [False] * len(data))
    same = (codes[:, None] == codes[None, :]) & (codes[:, None] != -1)
    return np.triu(same & variant[:, None] & variant[None, :], 1)


def label_matrix(data: qd.DataSet) -> np.ndarray:
    """1 duplicate, 0 distinct, -1 left out; only the upper triangle is used."""
    n = len(data)
    labels = np.zeros((n, n), dtype=np.int8)
    codes = group_codes(data)
    labels[(codes[:, None] == codes[None, :]) & (codes[:, None] != -1)] = 1
    labels[variant_pairs(data)] = -1
    if data.judged_pairs_only:
        labels[:] = -1
    for (i, j), label in data.pairs.items():
        labels[i, j] = labels[j, i] = {True: 1, False: 0, None: -1}[label]
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    labels[~upper] = -1
    return labels


@dataclass(frozen=True)
class Score:
    """Pair counts and the measures derived from them."""

    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        if self.tp + self.fp + self.fn == 0:
            return 1.0
        return 2 * p * r / (p + r) if p + r else 0.0

    def cells(self) -> str:
        return f"{self.precision:.3f} {self.recall:.3f} {self.f1:.3f} {self.tp:>6} {self.fp:>6} {self.fn:>6}"

    def short(self) -> str:
        return f"{self.precision:.3f}/{self.recall:.3f}/{self.f1:.3f}"

    def as_dict(self) -> dict[str, float | int]:
        measures = {"precision": self.precision, "recall": self.recall, "f1": self.f1}
        return {**{k: round(v, 4) for k, v in measures.items()}, "tp": self.tp, "fp": self.fp, "fn": self.fn}


def score(decisions: np.ndarray, labels: np.ndarray) -> Score:
    dup, distinct = labels == 1, labels == 0
    return Score(
        int((decisions & dup).sum()), int((decisions & distinct).sum()), int((~decisions & dup).sum())
    )


# ---------------------------------------------------------------------------------------------
# Peers


def peer_decisions(
    data: qd.DataSet, main: Sequence[str | None], plain: Sequence[str | None]
) -> dict[str, np.ndarray]:
    """Each peer's all-pairs verdicts on the same pages."""
    from datasketch import MinHash, MinHashLSH
    from simhash import Simhash as PySimhash
    from trafilatura.deduplication import Simhash as TrafSimhash

    class PySimhashNumpy2(PySimhash):
        # simhash 2.1.2 multiplies a uint8 bit array by a feature's weight when the weight is
        # above large_weight_cutoff, which overflows under numpy 2 (weights > 255, e.g. a long
        # index page). A higher cutoff sends such features down the package's other path,
        # which computes the same sums.
        large_weight_cutoff = 10**12

    n = len(data)
    out: dict[str, np.ndarray] = {}
    out["exact hash of the whole page"] = _eq([xxhash.xxh3_128_intdigest(b) for b in data.bodies])
    out["exact hash of the main text"] = _eq(
        [None if t is None else xxhash.xxh3_128_intdigest(t.encode()) for t in main]
    )
    out["simhash pkg, whole-page text, <= 3 bits"] = (
        hamming_matrix([None if t is None else PySimhashNumpy2(t).value for t in plain]) <= 3
    )
    out["simhash pkg, main text, <= 3 bits"] = (
        hamming_matrix([None if t is None else PySimhashNumpy2(t).value for t in main]) <= 3
    )
    out["trafilatura Simhash, main text, <= 3 bits"] = (
        hamming_matrix([None if t is None else TrafSimhash(t).hash for t in main]) <= 3
    )
    sketches: dict[int, MinHash] = {}
    for i, t in enumerate(main):
        if t is None:
            continue
        tokens = tokenize(t)
        grams = {" ".join(tokens[k : k + 3]).encode() for k in range(max(1, len(tokens) - 2))}
        m = MinHash(num_perm=128)
        m.update_batch(grams)
        sketches[i] = m
    for threshold in LSH_THRESHOLDS:  # so each set can be scored at the peer's best threshold
        lsh = MinHashLSH(threshold=threshold, num_perm=128)
        for i, m in sketches.items():
            lsh.insert(i, m)
        found = np.zeros((n, n), dtype=bool)
        for i, m in sketches.items():
            for j in lsh.query(m):
                found[i, j] = True
        np.fill_diagonal(found, False)
        out[f"datasketch MinHashLSH, main text, {threshold}"] = found
    return out


# ---------------------------------------------------------------------------------------------
# Building views


def signature_family(config: DedupConfig) -> DedupConfig:
    """The config a fingerprint is computed under: every method, no length cut (applied later)."""
    return dataclasses.replace(config, extractor="text", min_tokens=1)


def family_key(config: DedupConfig) -> tuple[Any, ...]:
    """The knobs that change a fingerprint (thresholds and methods do not)."""
    return (config.language, config.spotsigs_specs, config.simhash_shingle, config.minhash_perm,
            config.minhash_shingle, config.shingles_size, config.imatch_lexicons, config.imatch_drop,
            config.ksentence_k)  # fmt: skip


@dataclass
class Bench:
    """Extracted texts per (set, extractor) and views per (set, extractor, family), built on demand."""

    sets: dict[str, qd.DataSet]
    use_cache: bool
    texts: dict[tuple[str, str], list[str | None]] = field(default_factory=dict)
    views: dict[tuple[str, str, tuple[Any, ...]], View] = field(default_factory=dict)
    labels: dict[str, np.ndarray] = field(default_factory=dict)

    def text(self, name: str, extractor: str) -> list[str | None]:
        key = (name, extractor)
        if key not in self.texts and self.sets[name].is_text:
            self.texts[key] = [b.decode("utf-8", errors="replace") for b in self.sets[name].bodies]
        if key not in self.texts:
            start = time.perf_counter()
            self.texts[key] = extract_all(self.sets[name].bodies, extractor, self.use_cache)
            log(f"  {name}: {extractor} extraction {time.perf_counter() - start:.1f} s")
        return self.texts[key]

    def view(self, name: str, config: DedupConfig) -> View:
        key = (name, config.extractor, family_key(config))
        if key not in self.views:
            family = signature_family(config)
            fps = [
                Fingerprint(skip_reason="no_text")
                if t is None
                else fingerprint(t, family, methods=frozenset(ALL_METHODS))
                for t in self.text(name, config.extractor)
            ]
            judged = np.array([fp.judged for fp in fps])
            tokens = np.array([fp.token_count for fp in fps])
            self.views[key] = View(fps, judged, tokens, family)
        return self.views[key]

    def label(self, name: str) -> np.ndarray:
        if name not in self.labels:
            self.labels[name] = label_matrix(self.sets[name])
        return self.labels[name]

    def score(self, name: str, config: DedupConfig) -> Score:
        return score(decide(self.view(name, config), config), self.label(name))


def cross_check(bench: Bench, name: str, config: DedupConfig, samples: int = 400) -> int:
    """Check the matrices against ``verify.compare`` on labelled and random pairs; returns pairs checked.

    Fingerprints are recomputed from the page bodies with ``config`` itself, so this also checks
    that extracting once and fingerprinting the text gives what the detector would compute. The
    matrices judge main texts: readers' comments (NEARDUP_COMMENTS), which a page's text never
    holds, are left out here too.
    """
    config = dataclasses.replace(config, comments=False)
    data, view = bench.sets[name], bench.view(name, config)
    labels = bench.label(name)
    rng = random.Random(0)
    dups = list(zip(*np.nonzero(labels == 1), strict=True))
    pairs = rng.sample(dups, min(samples // 2, len(dups)))
    n = len(data)
    while len(pairs) < samples and n > 1:
        i, j = sorted(rng.sample(range(n), 2))
        pairs.append((i, j))
    matrix = decide(view, config)
    direct: dict[int, Fingerprint] = {}
    for i, j in pairs:
        for k in (i, j):
            if k not in direct:
                extractor = "text" if data.is_text else None
                direct[k] = fingerprint(
                    data.bodies[k], config, methods=frozenset(ALL_METHODS), extractor=extractor
                )
        a, b = direct[i], direct[j]
        expected = a.judged and b.judged and compare(a, b, config).duplicate
        if bool(matrix[i, j]) != expected:
            raise AssertionError(
                f"{name}: pair {data.ids[i]} / {data.ids[j]}: matrix {matrix[i, j]}, compare {expected}"
            )
    return len(pairs)


# ---------------------------------------------------------------------------------------------
# Reports


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def preset_config(name: str) -> DedupConfig:
    return DedupConfig(preset=name)


def method_rows(default: DedupConfig) -> list[tuple[str, DedupConfig]]:
    """Each method alone at the default settings, then the combinations worth showing."""
    rows = [(f"{m}", dataclasses.replace(default, methods=(m,))) for m in ALL_METHODS]
    if "simhash" in default.methods and default.simhash_confirm > 0:
        rows.append(
            ("simhash, unconfirmed", dataclasses.replace(default, methods=("simhash",), simhash_confirm=0.0))
        )
    for name in PRESETS:
        config = preset_config(name)
        rows.append((f"preset {name}: {'+'.join(config.methods)}", config))
    rows.append(("every method", dataclasses.replace(default, methods=ALL_METHODS)))
    return rows


def print_table(title: str, rows: Iterable[tuple[str, Score]]) -> None:
    print(f"\n{title}")
    print(f"  {'':52} {'P':>5} {'R':>5} {'F1':>5} {'TP':>6} {'FP':>6} {'FN':>6}")
    for label, s in rows:
        print(f"  {label:52} {s.cells()}")


def sweep(bench: Bench, names: Sequence[str], base: DedupConfig) -> list[dict[str, Any]]:
    """One knob at a time around ``base``: P/R/F1 per set (the evidence for the defaults)."""
    grids: list[tuple[str, list[tuple[str, DedupConfig]]]] = []
    rep = dataclasses.replace
    grids.append(("extractor (default methods)", [(e, rep(base, extractor=e)) for e in EXTRACTORS]))
    grids.append(
        ("min_tokens (default methods)", [(str(k), rep(base, min_tokens=k)) for k in (1, 10, 20, 30, 50, 80)])
    )
    for specs in (((1, 1),), ((1, 2),), ((2, 2),), ((1, 3),), ((1, 1), (1, 2))):
        label = ",".join(f"{d}:{c}" for d, c in specs)
        grids.append((f"spotsigs alone, specs {label}: threshold",
                      [(f"{t:.2f}", rep(base, methods=("spotsigs",), spotsigs_specs=specs,
                                        spotsigs_threshold=t))
                       for t in (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7)]))  # fmt: skip
    spot = ("spotsigs",)
    grids.append(("spotsigs alone, min_spots 12: few_spots_bits (SimHash witness under 12 spots)",
                  [(str(k), rep(base, methods=spot, spotsigs_min_spots=12, spotsigs_few_spots_bits=k))
                   for k in (-1, 0, 4, 8, 10, 12, 14, 16, 18, 20, 24)]))  # fmt: skip
    grids.append(("spotsigs alone, few_spots_bits -1: min_spots",
                  [(str(k), rep(base, methods=spot, spotsigs_few_spots_bits=-1, spotsigs_min_spots=k))
                   for k in (1, 4, 8, 10, 12, 16, 20)]))  # fmt: skip
    for ratio in (0.7, 0.75, 0.8):
        grids.append((f"default methods, length ratio {ratio}: uneven threshold",
                      [(f"{t:.2f}", rep(base, spotsigs_length_ratio=ratio, spotsigs_uneven_threshold=t))
                       for t in (0.3, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8)]))  # fmt: skip
    for confirm in (0.0, 0.2, 0.3):
        grids.append((f"simhash alone, confirm {confirm}: distance",
                      [(str(k), rep(base, methods=("simhash",), simhash_distance=k, simhash_confirm=confirm))
                       for k in (0, 1, 2, 3, 4, 6, 8, 10, 12)]))  # fmt: skip
    grids.append(("minhash alone: threshold",
                  [(f"{t:.2f}", rep(base, methods=("minhash",), minhash_threshold=t))
                   for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]))  # fmt: skip
    grids.append(
        (
            "shingles alone: min agree",
            [(str(k), rep(base, methods=("shingles",), shingles_min_agree=k)) for k in (1, 2, 3)],
        )
    )
    results = []
    for title, grid in grids:
        print(f"\nsweep: {title}   (P/R/F1 per set)")
        print(f"  {'':16} " + " ".join(f"{n:>20}" for n in names))
        for label, config in grid:
            scores = {n: bench.score(n, config) for n in names}
            print(f"  {label:16} " + " ".join(f"{scores[n].short():>20}" for n in names))
            results.append({"sweep": title, "value": label, **{n: scores[n].as_dict() for n in names}})
    return results


def sure_bar_table(bench: Bench, names: Sequence[str], default: DedupConfig) -> dict[str, Any]:
    """P/R/F1 of the pairs a drop-mode crawl drops, by sure bar (NEARDUP_DROP_ABOVE): matches under
    the bar pass tagged. The generated sets (aeb, zh) are scored on their light edits (copies, as
    people call them), as aeb in the summary."""
    from scrapy_neardup.crawl.settings import CrawlSettings

    chosen = CrawlSettings().drop_above
    bars = sorted({0.0, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, *([chosen] if chosen is not None else [])})
    print(f"\nThe sure bar: P/R/F1 of the pairs dropped in drop mode (the default bar is {chosen}; "
          "0 drops every match)")  # fmt: skip
    print(f"  {'bar':6} " + " ".join(f"{n:>20}" for n in names))
    out: dict[str, Any] = {"default": chosen, "bars": {}}
    for bar in bars:
        cells, row = [], {}
        for name in names:
            labels = light_labels(bench.sets[name], bench.label(name))
            s = score(decide_drop(bench.view(name, default), default, bar), labels)
            cells.append(f"{s.short():>20}")
            row[name] = s.as_dict()
        mark = " *" if bar == chosen else ""
        print(f"  {bar:<6.2f} " + " ".join(cells) + mark)
        out["bars"][f"{bar:.2f}"] = row
    return out


RECIPE_BUCKETS: tuple[tuple[str, Callable[[qd.Recipe], bool]], ...] = (
    ("1-5 % of words edited", lambda r: r.edit_rate < 0.05),
    ("5-10 % of words edited", lambda r: 0.05 <= r.edit_rate < 0.10),
    ("10-15 % of words edited", lambda r: r.edit_rate >= 0.10),
    ("under another page's template", lambda r: r.template_other),
    ("tail cut (5-20 %)", lambda r: r.truncated > 0),
    ("paragraphs moved", lambda r: r.reordered),
    ("tracking text inserted", lambda r: r.tracking > 0),
    ("boilerplate added", lambda r: r.boilerplate_added),
    ("boilerplate removed", lambda r: r.boilerplate_removed),
)


def light_labels(data: qd.DataSet, labels: np.ndarray) -> np.ndarray:
    """``labels`` with the pairs of variants edited more than LIGHT_EDITS left out (-1)."""
    if not data.recipes:
        return labels
    heavy = np.array([r is not None and r.edit_rate > LIGHT_EDITS for r in data.recipes])
    codes = group_codes(data)
    same = (codes[:, None] == codes[None, :]) & (codes[:, None] != -1)
    out = labels.copy()
    out[same & (heavy[:, None] | heavy[None, :])] = -1
    return out


def recall_by_recipe(bench: Bench, name: str, configs: dict[str, DedupConfig]) -> None:
    """Recall of (source, variant) pairs by what was done to the variant: the presets in plain terms."""
    data = bench.sets[name]
    if not data.recipes:
        return
    codes = group_codes(data)
    source_of = {int(c): i for i, c in enumerate(codes) if not data.variant[i]}
    pairs = [(source_of[int(codes[i])], i, r) for i, r in enumerate(data.recipes) if r is not None]
    verdicts = {label: decide(bench.view(name, c), c) for label, c in configs.items()}
    print(f"\n  {name}: recall of a source and its variant, by what was done to the variant")
    print(f"  {'':34} {'pairs':>6} " + " ".join(f"{label:>9}" for label in configs))
    for bucket, test in RECIPE_BUCKETS:
        chosen = [(s, v) for s, v, r in pairs if test(r)]
        if not chosen:
            continue
        cells = []
        for label in configs:
            found = sum(1 for s, v in chosen if verdicts[label][min(s, v), max(s, v)])
            cells.append(f"{found / len(chosen):>9.3f}")
        print(f"  {bucket:34} {len(chosen):>6} " + " ".join(cells))


def ensure_llvm_site(site: Path) -> bool:
    """Build the documentation site on first run; False (with a message) when that is impossible."""
    if (site / "labels.jsonl").exists():
        return True
    log(f"building the LLVM/Clang docs site into {site} (apt-get download, about a minute) ...")
    site.parent.mkdir(parents=True, exist_ok=True)
    ignore = site.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    result = subprocess.run([sys.executable, str(GET_LLVM_DOCS), "--out", str(site)], check=False)
    if result.returncode != 0:
        log(f"could not build the docs site (exit {result.returncode}); the llvm set is left out")
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sets", default="webis,llvm,aeb,cleanportaleval,zh", help="comma-separated data sets"
    )
    parser.add_argument("--seeds", default=f"{qd.TUNING_SEED},{qd.HELD_OUT_SEED}",
                        help="variant generator seeds; the first is the tuning seed")  # fmt: skip
    parser.add_argument("--sweep", action="store_true", help="also sweep each knob (tuning seed only)")
    parser.add_argument("--limit", type=int, help="only the first N aeb sources (a quick look)")
    parser.add_argument("--llvm-site", type=Path, default=qd.LLVM_SITE)
    parser.add_argument("--no-peers", action="store_true", help="leave the peers out")
    parser.add_argument(
        "--no-cache", action="store_true", help="do not reuse extracted texts from earlier runs"
    )
    parser.add_argument(
        "--extractor", choices=EXTRACTORS, help="score the defaults with this extractor instead"
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the figures as JSON")
    parser.add_argument(
        "--index", choices=["postgres", "redis"],
        help="also run every set's pages through this index and an SQLite file: the same verdicts?",
    )  # fmt: skip
    args = parser.parse_args()
    started = time.perf_counter()
    wanted = [s.strip() for s in args.sets.split(",") if s.strip()]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    try:
        import datasketch  # noqa: F401
        import simhash  # noqa: F401
    except ImportError as exc:
        log(f"error: {exc}; install the bench extra: pip install -e '.[bench]'")
        return 2

    log("loading data sets ...")
    sets: dict[str, qd.DataSet] = {}
    if "webis" in wanted:
        sets["webis"] = qd.webis_set()
    if "llvm" in wanted and ensure_llvm_site(args.llvm_site):
        sets["llvm"] = qd.llvm_set(args.llvm_site)
    templates = None
    if "aeb" in wanted or "zh" in wanted:
        templates = qd.build_templates(qd.read_aeb() + qd.read_cleanportaleval())
    for seed in seeds:
        suffix = "" if seed == seeds[0] else f"@seed{seed}"
        if "aeb" in wanted:
            sets["aeb" + suffix] = qd.aeb_set(seed, templates, args.limit)
        if "zh" in wanted:
            sets["zh" + suffix] = qd.zh_set(seed, templates)
        if suffix == "" and "cleanportaleval" in wanted:
            sets["cleanportaleval"] = qd.cleanportaleval_set()
    names = list(sets)
    bench = Bench(sets, use_cache=not args.no_cache)
    default = DedupConfig(**({"extractor": args.extractor} if args.extractor else {}))
    report: dict[str, Any] = {"sets": {}, "defaults": dataclasses.asdict(default)}

    print(f"Detection quality: precision (P), recall (R) and F1 of duplicate pairs. Defaults: "
          f"methods {'+'.join(default.methods)}, extractor {default.extractor}, "
          f"min_tokens {default.min_tokens}, spotsigs >= {default.spotsigs_threshold} "
          f"(specs {','.join(f'{d}:{c}' for d, c in default.spotsigs_specs)}; under "
          f"{default.spotsigs_min_spots} spots only with SimHash <= {default.spotsigs_few_spots_bits} bits; "
          f">= {default.spotsigs_uneven_threshold} when one text is under {default.spotsigs_length_ratio} "
          f"of the other's length), "
          f"simhash <= {default.simhash_distance} bits (confirm {default.simhash_confirm}).")  # fmt: skip
    summary = []
    for name in names:
        data = sets[name]
        labels = bench.label(name)
        n_pairs = int((labels >= 0).sum())
        rows = [(label, bench.score(name, config)) for label, config in method_rows(default)]
        default_score = bench.score(name, default)
        rows.insert(len(ALL_METHODS) + 1, ("DEFAULT: " + "+".join(default.methods), default_score))
        peers: dict[str, Score] = {}
        if not args.no_peers:
            start = time.perf_counter()
            peer = peer_decisions(data, bench.text(name, "trafilatura"), bench.text(name, "plain"))
            peers = {k: score(v, labels) for k, v in peer.items()}
            log(f"  {name}: peers {time.perf_counter() - start:.1f} s")
        checked = cross_check(bench, name, default)
        print_table(f"== {name}: {data.note}; {n_pairs} pairs scored, {int((labels == 1).sum())} duplicates "
                    f"(verdicts agree with verify.compare on {checked} sampled pairs)",
                    [*rows, *((f"peer: {k}", v) for k, v in peers.items())])  # fmt: skip
        pairs_vv = variant_pairs(data)
        if pairs_vv.any():
            found = int((decide(bench.view(name, default), default) & pairs_vv).sum())
            print(f"  two variants of one source (not labelled, left out above): the defaults match {found} "
                  f"of {int(pairs_vv.sum())}")  # fmt: skip
            report["sets"].setdefault(name, {})["variant_pairs"] = {"found": found, "of": int(pairs_vv.sum())}
        best_peer = max(peers.values(), key=lambda s: s.f1) if peers else None
        summary.append(
            (name, default_score, best_peer, {p: bench.score(name, preset_config(p)) for p in PRESETS})
        )
        report["sets"].setdefault(name, {}).update(
            {
                "note": data.note,
                "pairs": n_pairs,
                "rows": {label: s.as_dict() for label, s in rows},
                "peers": {k: v.as_dict() for k, v in peers.items()},
            }
        )

    print(
        "\nSummary: the defaults against the precision issue's targets; the best peer at its best threshold"
    )
    print(
        f"  {'set':18} {'scored on':>14} {'default P/R/F1':>18} {'target':>26} {'':4} {'peer F1':>8}  vs peer"
    )
    for name, s, peer, presets in summary:
        base = name.split("@")[0]
        scored = "all pairs"
        if base in TARGETS:
            f1, precision, recall = TARGETS[base]
            if base == "aeb":
                scored = f"edits <= {LIGHT_EDITS:.0%}"
                s = score(
                    decide(bench.view(name, default), default), light_labels(sets[name], bench.label(name))
                )
            ok = s.f1 >= f1 and s.precision >= precision and s.recall >= recall
            goal = " ".join(f"{k} >= {v}" for k, v in (("F1", f1), ("P", precision), ("R", recall)) if v)
        else:
            ok, goal = s.fp == 0, "no false pair"
        versus = "-"
        if peer is not None and base != "llvm":  # llvm's labels are LSH 0.8's own rule: targets only
            versus = "higher" if s.f1 > peer.f1 else ("tie" if s.f1 == peer.f1 else "LOWER")
        peer_f1 = f"{peer.f1:.3f}" if peer else "-"
        verdict = "PASS" if ok else "FAIL"
        print(f"  {name:18} {scored:>14} {s.short():>18} {goal:>26} {verdict:4} {peer_f1:>8}  {versus}")
        report["sets"][name]["target"] = {"scored_on": scored, **s.as_dict(), "pass": ok}
        report["sets"][name]["presets"] = {p: v.as_dict() for p, v in presets.items()}
    print("\n  presets (P/R/F1):  " + "  ".join(f"{p:>18}" for p in PRESETS))
    for name, _, _, presets in summary:
        print(f"  {name:18} " + "  ".join(f"{presets[p].short():>18}" for p in PRESETS))

    report["sure_bar"] = sure_bar_table(bench, names, default)
    for name in names:
        if name.split("@")[0] in ("aeb", "zh"):
            recall_by_recipe(bench, name, {p: preset_config(p) for p in PRESETS})
    if args.sweep:
        tuned = [n for n in names if "@" not in n]
        report["sweep"] = sweep(bench, tuned, default)
    if args.index:
        from index_agreement import agreement

        print(f"\nThe Detector's verdicts on every page, the {args.index} index against an SQLite file:")
        rows = agreement(sets, args.index, default)
        for name, pages, same, duplicates in rows:
            print(f"  {name:18} {same:>6,} of {pages:>6,} verdicts the same ({duplicates:,} duplicates)")
        report["index_agreement"] = {name: {"pages": n, "same": same} for name, n, same, _ in rows}
    elapsed = time.perf_counter() - started
    command = "python " + " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).name, *sys.argv[1:]])
    print(
        f"\n{command}: {elapsed:.0f} s; Python {platform.python_version()}, {os.cpu_count()} cores; "
        f"trafilatura {version('trafilatura')}, datasketch {version('datasketch')}, "
        f"simhash {version('simhash')}"
    )
    if args.json:
        report["seconds"] = round(elapsed, 1)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    # Like bench_signatures: the figures are the output, PASS/FAIL is in the summary.
    return 0


if __name__ == "__main__":
    sys.exit(main())
