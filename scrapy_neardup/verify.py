"""Pairwise verdicts: per method, how similar two fingerprints are and whether that is a duplicate.

This is the one place a pair is called a duplicate: the Detector verifies index
candidates with it, and ``scrapy-neardup compare`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import DedupConfig
from .fingerprint import Fingerprint
from .signatures.shingles import GROUPS
from .signatures.simhash import BITS
from .signatures.similarity import (
    hamming,
    imatch_agreement,
    minhash_similarity,
    multiset_jaccard,
    super_shingle_agreement,
)

# Most precise first: the first method in this order that matches names the verdict.
DECISION_ORDER = ("exact", "ksentence", "imatch", "spotsigs", "minhash", "shingles", "simhash")


@dataclass(frozen=True)
class MethodResult:
    """One method's view of a pair.

    ``similarity`` is in [0, 1] for every method (SimHash: 1 - distance/64) so methods
    can be charted together; ``raw`` is the method's own measure (a distance, a count).
    """

    method: str
    similarity: float
    raw: float | int | bool
    shown: str
    threshold: str
    duplicate: bool


@dataclass(frozen=True)
class Comparison:
    """Every computed method's result, and the decision of the configured ones."""

    results: dict[str, MethodResult]
    duplicate: bool
    method: str | None
    similarity: float | None


def method_result(method: str, a: Fingerprint, b: Fingerprint, config: DedupConfig) -> MethodResult | None:
    """The result of one method, or None when either page lacks that method's signature."""
    if method == "exact":
        if a.exact is None or b.exact is None:
            return None
        same = a.exact == b.exact
        return MethodResult(method, float(same), same, "equal" if same else "different", "equal", same)
    if method == "spotsigs":
        if not a.spots.size or not b.spots.size:
            return None
        sim = multiset_jaccard(a.spots, b.spots)
        tau, least = config.spotsigs_threshold, config.spotsigs_min_spots
        bits = config.spotsigs_few_spots_bits
        small = min(a.spots.size, b.spots.size)
        distance = hamming(a.simhash, b.simhash) if a.simhash is not None and b.simhash is not None else None
        trusted = config.spotsigs_trusted(small, distance)
        threshold = f">= {tau:.2f}"
        if least > 1:
            # A Jaccard over few spots is weak evidence: under min_spots, SimHash must agree too.
            witness = f" or SimHash <= {bits} bits" if bits >= 0 else ""
            threshold += f", >= {least} spots each{witness}"
        return MethodResult(method, sim, sim, f"{sim:.3f} Jaccard", threshold, sim >= tau and trusted)
    if method == "simhash":
        if a.simhash is None or b.simhash is None:
            return None
        dist = hamming(a.simhash, b.simhash)
        near = dist <= config.simhash_distance
        threshold = f"<= {config.simhash_distance} bits"
        if near and config.simhash_confirm > 0:
            confirm = multiset_jaccard(a.spots, b.spots) if a.spots.size and b.spots.size else 0.0
            near = confirm >= config.simhash_confirm
            threshold += f", SpotSigs >= {config.simhash_confirm:.2f}"
        return MethodResult(method, 1 - dist / BITS, dist, f"distance {dist} bits", threshold, near)
    if method == "minhash":
        if a.minhash is None or b.minhash is None:
            return None
        sim = minhash_similarity(a.minhash, b.minhash)
        t = config.minhash_threshold
        # MinHash *with LSH banding*: a pair that shares no band is never a candidate, so it is
        # never a match either; an index then finds exactly what a pairwise check would.
        banded = not (a.minhash_bands and b.minhash_bands) or bool(
            set(a.minhash_bands) & set(b.minhash_bands)
        )
        threshold = f">= {t:.2f}, a shared LSH band"
        return MethodResult(method, sim, sim, f"{sim:.3f} est. Jaccard", threshold, sim >= t and banded)
    if method == "shingles":
        if a.super_shingles is None or b.super_shingles is None:
            return None
        agree = super_shingle_agreement(a.super_shingles, b.super_shingles)
        need = config.shingles_min_agree
        return MethodResult(
            method,
            agree / GROUPS,
            agree,
            f"{agree} of {GROUPS} agree",
            f">= {need} of {GROUPS}",
            agree >= need,
        )
    if method == "imatch":
        if not a.imatch or not b.imatch:
            return None
        agree = imatch_agreement(a.imatch, b.imatch)
        n = min(len(a.imatch), len(b.imatch))
        return MethodResult(method, agree / n, agree, f"{agree} of {n} lexicons agree", ">= 1", agree >= 1)
    if method == "ksentence":
        if a.ksentence is None or b.ksentence is None:
            return None
        same = a.ksentence == b.ksentence
        shown = "equal" if same else "different"
        return MethodResult(method, float(same), same, shown, "equal", same)
    raise ValueError(f"unknown method {method!r}")


def compare(
    a: Fingerprint, b: Fingerprint, config: DedupConfig, methods: tuple[str, ...] | None = None
) -> Comparison:
    """Compare two judged fingerprints; ``methods`` limits which results are computed (default: all).

    The verdict uses only ``config.methods``: the first of them, in precision order, that
    calls the pair a duplicate.
    """
    results: dict[str, MethodResult] = {}
    for method in methods or DECISION_ORDER:
        result = method_result(method, a, b, config)
        if result is not None:
            results[method] = result
    for method in DECISION_ORDER:
        result = results.get(method)
        if method in config.methods and result is not None and result.duplicate:
            return Comparison(results, True, method, result.similarity)
    return Comparison(results, False, None, None)
