"""A synthetic corpus with realistic token statistics, for the index and report benchmarks.

Documents are drawn from a word bigram model trained on the article texts of the real
pages in ``../shared/data/aeb`` (181 news and blog articles), with lengths drawn from the
same articles. So spots, shingles and word frequencies behave as in real English prose,
yet distinct documents do not share whole sentences (sampling real sentences would make
every sentence recur in thousands of documents at a million pages).

A share ``dup_share`` of the documents are near-duplicate variants of an earlier one:
between 1 and ``max_edit`` of their words replaced by random words, and a sentence's worth
of words cut from the tail half the time. The generator is seeded and deterministic.

    build_index(path, n_docs, seed=1)   # a real SQLiteIndex file, for the report benchmark
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NEARDUP_SHARED", REPO.parent / "shared"))
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|[0-9]+|[.!?]")


@dataclass(frozen=True)
class SyntheticDoc:
    """One generated page: its URL, main text, and the index of the document it copies (or -1)."""

    number: int
    url: str
    text: str
    copy_of: int


class BigramModel:
    """Next-word sampling from bigram counts, vectorized over many documents at once."""

    def __init__(self, texts: list[str]) -> None:
        words: list[str] = []
        for text in texts:
            words += _WORD.findall(text)
            words.append(".")
        vocab, ids = np.unique(np.array(words), return_inverse=True)
        self.vocab = vocab
        self.words = vocab.tolist()
        self.unigram = np.bincount(ids, minlength=len(vocab)).astype(np.float64)
        pairs = ids[:-1].astype(np.int64) * len(vocab) + ids[1:]
        keys, counts = np.unique(pairs, return_counts=True)
        rows = keys // len(vocab)
        self.next_word = (keys % len(vocab)).astype(np.int32)
        # Row r's cumulative probabilities lie in [r, r + 1): one searchsorted serves all rows.
        self.row_start = np.searchsorted(rows, np.arange(len(vocab) + 1))
        cum = np.zeros(len(keys))
        for r in range(len(vocab)):
            lo, hi = self.row_start[r], self.row_start[r + 1]
            if hi > lo:
                c = np.cumsum(counts[lo:hi], dtype=np.float64)
                cum[lo:hi] = r + c / c[-1]
        self.cum = cum
        self.end = np.flatnonzero(np.isin(vocab, [".", "!", "?"]))

    def sample(self, rng: np.random.Generator, lengths: np.ndarray, chains: int = 4096) -> list[np.ndarray]:
        """Word-id arrays of the given lengths: ``chains`` walks in parallel, cut into documents."""
        total = int(lengths.sum())
        steps = -(-total // chains)
        out = np.empty((steps, chains), dtype=np.int32)
        state = rng.choice(self.end, size=chains)
        for step in range(steps):
            pos = np.searchsorted(self.cum, state + rng.random(chains) * 0.999999, side="right")
            dead = (self.row_start[state + 1] == self.row_start[state]) | (pos >= len(self.next_word))
            nxt = self.next_word[np.minimum(pos, len(self.next_word) - 1)]
            state = out[step] = np.where(dead, rng.choice(self.end, size=chains), nxt)
        return np.split(out.T.reshape(-1)[:total], np.cumsum(lengths)[:-1])

    def render(self, ids: np.ndarray) -> str:
        words = self.words
        text = " ".join([words[i] for i in ids.tolist()])
        return text.replace(" .", ".").replace(" !", "!").replace(" ?", "?")


def aeb_texts() -> list[str]:
    """The article texts of the aeb pages (ground truth), the model's training data."""
    path = SHARED / "data" / "aeb" / "ground-truth.json"
    if not path.exists():
        sys.exit(f"corpus: {path} not found; set NEARDUP_SHARED to the shared/ folder")
    entries = json.loads(path.read_text()).values()
    return [entry["articleBody"] for entry in entries if entry.get("articleBody")]


def documents(
    n_docs: int, seed: int = 1, dup_share: float = 0.1, max_edit: float = 0.1, chunk: int = 20_000
) -> Iterator[SyntheticDoc]:
    """``n_docs`` documents; ``dup_share`` of them copy an earlier one with light edits."""
    texts = aeb_texts()
    model = BigramModel(texts)
    real_lengths = np.array([len(_WORD.findall(t)) for t in texts])
    real_lengths = real_lengths[real_lengths >= 50]
    rng = np.random.default_rng(seed)
    recent: dict[int, np.ndarray] = {}  # originals a variant may copy (bounded: the last 20,000)
    number = 0
    while number < n_docs:
        size = min(chunk, n_docs - number)
        lengths = rng.choice(real_lengths, size=size)
        fresh = model.sample(rng, lengths)
        for ids in fresh:
            copy_of = -1
            if recent and rng.random() < dup_share:
                copy_of = int(rng.choice(list(recent)[-2000:]))
                ids = _variant(rng, recent[copy_of], model, max_edit)
            else:
                recent[number] = ids
                if len(recent) > 20_000:
                    del recent[next(iter(recent))]
            url = f"https://site{number % 997}.example/doc/{number}"
            yield SyntheticDoc(number, url, model.render(ids), copy_of)
            number += 1


def _variant(rng: np.random.Generator, ids: np.ndarray, model: BigramModel, max_edit: float) -> np.ndarray:
    ids = ids.copy()
    edits = max(1, int(len(ids) * rng.uniform(0.01, max_edit)))
    where = rng.choice(len(ids), size=min(edits, len(ids)), replace=False)
    ids[where] = rng.choice(len(model.vocab), size=len(where), p=model.unigram / model.unigram.sum())
    if rng.random() < 0.5 and len(ids) > 100:
        ids = ids[: len(ids) - int(rng.integers(5, 25))]
    return ids


def fingerprints(docs: Iterator[SyntheticDoc], config: object, workers: int = 2) -> Iterator[tuple]:
    """(doc, Fingerprint) pairs, fingerprinted in a process pool, in order."""
    import multiprocessing
    from functools import partial

    batch: list[SyntheticDoc] = []
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        work = partial(_fingerprint_text, config=config)
        for doc in docs:
            batch.append(doc)
            if len(batch) == 4000:
                yield from zip(batch, pool.map(work, [d.text for d in batch], chunksize=200), strict=True)
                batch = []
        if batch:
            yield from zip(batch, pool.map(work, [d.text for d in batch], chunksize=200), strict=True)


def _fingerprint_text(text: str, config: object) -> object:
    from scrapy_neardup.fingerprint import fingerprint

    return fingerprint(text, config)


def build_index(
    path: str | Path, n_docs: int, seed: int = 1, config: object = None, workers: int = 2
) -> dict:
    """Fill a real SQLiteIndex at ``path`` with ``n_docs`` synthetic pages; returns its stats."""
    from scrapy_neardup import DedupConfig
    from scrapy_neardup.detector import Arrival, Detector
    from scrapy_neardup.index import SQLiteIndex

    config = config or DedupConfig(extractor="text")
    index = SQLiteIndex(path, config)
    detector = Detector(config, index)

    def judge(url: str, fp: object) -> object:
        return detector.decide(Arrival(url, "", revisit=False), fp)

    try:
        pairs = fingerprints(documents(n_docs, seed), config, workers)
        while True:
            with index.batch():
                done = 0
                for doc, fp in pairs:
                    judge(doc.url, fp)
                    done += 1
                    if done == 5000:
                        break
            if done < 5000:
                break
        return index.stats()
    finally:
        index.close()


def spot_sharing(fingerprints: list) -> float:
    """Median share of a document's distinct spots that some other document of the set also has."""
    from collections import Counter

    df: Counter[int] = Counter()
    for fp in fingerprints:
        df.update(fp.spots.hashes.tolist())
    return float(np.median([np.mean([df[h] > 1 for h in fp.spots.hashes.tolist()]) for fp in fingerprints]))


def compare_with_real() -> None:
    """How often spots recur across distinct real English articles, and across as many generated ones.

        python benchmarks/corpus.py

    The index's cost grows with how often a page's rare spots recur in other pages, so the
    generator should not share more of them than real text does.
    """
    from scrapy_neardup import DedupConfig
    from scrapy_neardup.fingerprint import fingerprint

    def usable(fp: object) -> bool:
        return fp.judged and fp.language == "en" and fp.spots.size >= 12

    pages = sorted((SHARED / "data" / "cleanportaleval").rglob("*.htm*"))
    real = [fingerprint(t, DedupConfig(extractor="text")) for t in aeb_texts()]
    real += [fingerprint(p.read_bytes(), DedupConfig()) for p in pages]
    real = [fp for fp in real if usable(fp)]
    config = DedupConfig(extractor="text")
    originals = (d for d in documents(2 * len(real), seed=11) if d.copy_of < 0)
    made = [fp for fp in (fingerprint(d.text, config) for d in originals) if usable(fp)]
    made = made[: len(real)]
    rng = np.random.default_rng(0)

    def curve(fps: list) -> str:  # at smaller sizes: the mean of 5 random subsets
        out = []
        for n in (len(fps) // 8, len(fps) // 4, len(fps) // 2):
            subsets = [[fps[i] for i in rng.choice(len(fps), n, replace=False)] for _ in range(5)]
            out.append(f"{n}: {np.mean([spot_sharing(subset) for subset in subsets]):.3f}")
        return "  ".join([*out, f"{len(fps)}: {spot_sharing(fps):.3f}"])

    print("median share of a document's spots found in another document of a set of N (N: share)")
    print(f"real English articles (aeb, cleanportaleval):  {curve(real)}")
    print(f"generated documents, variants left out:        {curve(made)}")


if __name__ == "__main__":
    compare_with_real()
