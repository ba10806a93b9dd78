"""Pairwise verdicts: per method, how similar two fingerprints are and whether that is a duplicate.

This is the one place a pair is called a duplicate: the Detector verifies index
candidates with it, and ``scrapy-neardup compare`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .comments import COMMENT_WORDS, comments_apart
from .config import DedupConfig
from .methods import BY_NAME, Fingerprint, MethodResult, decision_order

__all__ = ["Comparison", "MethodResult", "compare", "method_result"]


@dataclass(frozen=True)
class Comparison:
    """Every computed method's result, and the decision of the configured ones."""

    results: dict[str, MethodResult]
    duplicate: bool
    method: str | None
    similarity: float | None
    weak: bool = False  # the deciding method matched on thin evidence (MethodResult.weak)
    # Readers' comments one page holds that the other does not, in words, when there are
    # COMMENT_WORDS or more: with NEARDUP_COMMENTS the pair is no copy (``duplicate`` is False);
    # without, a copy that differs by text the extractor left out.
    comments_apart: int = 0


def method_result(method: str, a: Fingerprint, b: Fingerprint, config: DedupConfig) -> MethodResult | None:
    """The result of one method, or None when either page lacks that method's signature."""
    if method not in BY_NAME:
        raise ValueError(f"unknown method {method!r}")
    return BY_NAME[method].result(a, b, config)


def compare(
    a: Fingerprint, b: Fingerprint, config: DedupConfig, methods: tuple[str, ...] | None = None
) -> Comparison:
    """Compare two judged fingerprints, ``a`` met after ``b`` (``methods`` limits which results are
    computed, default: all).

    The verdict uses only ``config.methods``: the first of them, in precision order, that
    calls the pair a duplicate; with ``config.comments``, no copy when one holds COMMENT_WORDS or
    more words of readers' comments that the other does not, whatever the methods say.
    """
    results: dict[str, MethodResult] = {}
    order = decision_order()
    for method in methods or order:
        result = method_result(method, a, b, config)
        if result is not None:
            results[method] = result
    apart = comments_apart(a, b)
    apart = apart if apart >= COMMENT_WORDS else 0
    for method in order:
        result = results.get(method)
        if method in config.methods and result is not None and result.duplicate:
            if apart and config.comments:
                break
            return Comparison(results, True, method, result.similarity, result.weak, apart)
    return Comparison(results, False, None, None, comments_apart=apart)
