"""Exact necessary conditions a candidate must meet before its signatures are read and compared.

Exact hash equality, the length bound ``min/max >= tau``, the Hamming distance, and then the
multiset Jaccard of all remaining candidates at once (vectorized): a row dropped here is one
no configured method could call a match, so the search stays exact.
"""

from __future__ import annotations

from ..config import DedupConfig
from ..methods import Fingerprint
from .codecs import sound_spots_blob, unsigned
from .spot_search import blob_jaccard

# The columns a bound reads: id, exact, simhash, spot_size, spots.
BOUND_COLUMNS = "id, exact, simhash, spot_size, spots"


def may_match(probe: Fingerprint, rows: list[tuple], config: DedupConfig) -> list[tuple]:
    """The ``BOUND_COLUMNS`` rows some configured method may call a match of ``probe``, sorted.

    With a method beside SpotSigs, SimHash and exact hashes configured, every row is kept (those
    methods are verified in full).
    """
    methods = set(config.methods)
    if methods - {"spotsigs", "simhash", "exact"}:
        return rows
    tau, size = config.spotsigs_threshold, probe.spots.size
    confirm = config.simhash_confirm if "simhash" in methods else None
    sure, maybe, need = [], [], []  # need: (row, Jaccard it must reach)
    for row in rows:
        _, exact, sim, spot_size = row[:4]
        if not (_of(exact, bytes) and _of(sim, int) and _of(spot_size, int) and sound_spots_blob(row[4])):
            continue  # a damaged record (a file edited by hand) is no candidate
        if "exact" in methods and exact is not None and int.from_bytes(exact, "big") == probe.exact:
            sure.append(row)
            continue
        bar = None
        distance = None  # SimHash Hamming distance, read by both methods below
        if sim is not None and probe.simhash is not None:
            distance = (unsigned(sim) ^ probe.simhash).bit_count()
        if "spotsigs" in methods and spot_size and size:
            small, large = sorted((spot_size, size))
            if small >= tau * large - 1e-9 and config.spotsigs_trusted(small, distance):
                bar = tau
        if confirm is not None and distance is not None and distance <= config.simhash_distance:
            if not confirm:
                sure.append(row)
                continue
            bar = confirm if bar is None else min(bar, confirm)
        if bar is not None and row[4]:
            need.append((row, bar))
    if need:
        jaccard = blob_jaccard(probe.spots, [row[4] for row, _ in need])
        maybe = [row for (row, bar), j in zip(need, jaccard, strict=True) if j >= bar - 1e-9]
    return sorted(sure + maybe)


def kept_spot_sizes(size: int, config: DedupConfig) -> tuple[int, int]:
    """The stored spot sizes ``may_match`` may keep beside a probe of ``size`` spots, widened by
    one: within the SpotSigs threshold's ratio, or a SimHash match's confirming Jaccard's (a
    Jaccard never exceeds the sizes' ratio); any size with another method configured or SimHash
    trusted alone. Sizes are 32-bit integers in the indexes that filter on them."""
    methods, ratio = set(config.methods), config.spotsigs_threshold
    if "simhash" in methods:
        ratio = min(ratio, config.simhash_confirm)
    if ratio <= 0 or methods - {"spotsigs", "simhash", "exact"}:
        return 0, 2**31 - 1
    return max(int(ratio * size) - 1, 0), min(int(size / ratio) + 1, 2**31 - 1)


def _of(value: object, kind: type) -> bool:
    return value is None or type(value) is kind
