"""Pairwise verdicts: per method, how similar two fingerprints are and whether that is a duplicate.

This is the one place a pair is called a duplicate: the Detector verifies index
candidates with it, and ``scrapy-neardup compare`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def method_result(method: str, a: Fingerprint, b: Fingerprint, config: DedupConfig) -> MethodResult | None:
    """The result of one method, or None when either page lacks that method's signature."""
    if method not in BY_NAME:
        raise ValueError(f"unknown method {method!r}")
    return BY_NAME[method].result(a, b, config)


def compare(
    a: Fingerprint, b: Fingerprint, config: DedupConfig, methods: tuple[str, ...] | None = None
) -> Comparison:
    """Compare two judged fingerprints; ``methods`` limits which results are computed (default: all).

    The verdict uses only ``config.methods``: the first of them, in precision order, that
    calls the pair a duplicate.
    """
    results: dict[str, MethodResult] = {}
    order = decision_order()
    for method in methods or order:
        result = method_result(method, a, b, config)
        if result is not None:
            results[method] = result
    for method in order:
        result = results.get(method)
        if method in config.methods and result is not None and result.duplicate:
            return Comparison(results, True, method, result.similarity, result.weak)
    return Comparison(results, False, None, None)
