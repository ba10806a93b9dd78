"""DedupConfig: every knob of the detection, its default and its validation.

One dataclass serves the Scrapy settings (``NEARDUP_<FIELD>``), the command line
(``--field-name``) and Python callers alike, so a knob is named, parsed and checked
in one place only. Scrapy-side knobs (action, database, report) live with the
Scrapy components; this module does not import Scrapy.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import methods as registry
from .exceptions import ConfigError
from .knobs import (
    Check,
    at_least,
    between,
    checked,
    declarations,
    flag_name,
    fraction,
    knob,
    parse_bool,
    parse_float,
    parse_int,
    parse_modules,
    parse_names,
    parse_optional_int,
    parse_str,
    parsed,
    renamed,
    setting_name,
)
from .signatures.spotsigs import ANTECEDENTS

METHODS = registry.BUILT_IN
EXTRACTORS = ("trafilatura", "trafilatura-fast", "resiliparse", "auto", "plain", "text")
LANGUAGES = ("auto", *sorted(ANTECEDENTS))
SCOPES = ("global", "domain", "host")
MAX_WORKERS = max(64, 4 * (os.cpu_count() or 1))  # worker processes a crawl or a scan may start
# The knobs whose change makes stored signatures or index postings incomparable.
SHAPING_KNOBS = (
    "methods", "spotsigs_threshold", "spotsigs_min_spots", "spotsigs_few_spots_bits", "spotsigs_specs",
    "simhash_distance", "simhash_shingle", "simhash_tables", "minhash_perm", "minhash_shingle",
    "minhash_bands", "minhash_threshold", "shingles_size", "imatch_lexicons", "imatch_drop", "ksentence_k",
    "language", "scope",
)  # fmt: skip

# Starting points for the detection knobs; explicit knobs override them. "default" is the
# field defaults themselves. The values and their measured precision and recall come from
# benchmarks/bench_quality.py (README, "Detection quality").
PRESETS: dict[str, dict[str, Any]] = {
    # Near-identical copies only: beside a template change, about 5 % of words may differ.
    # Pages under spotsigs_min_spots spots are left to the exact and SimHash methods.
    "strict": {
        "spotsigs_threshold": 0.6,
        "simhash_distance": 2,
        "simhash_confirm": 0.5,
        "spotsigs_few_spots_bits": -1,
    },
    "default": {},
    # Heavily edited copies too, at the risk of joining sibling pages that share most of their text.
    "loose": {
        "spotsigs_threshold": 0.25,
        "simhash_distance": 4,
        "spotsigs_few_spots_bits": 20,
        "spotsigs_length_ratio": 0.0,
    },
}


def _parse_specs(value: Any) -> tuple[tuple[int, int], ...]:
    """Spot specs as ``"1:2,2:3"`` or ``[(1, 2), (2, 3)]``: spot distance d, chain length c."""
    items = value.split(",") if isinstance(value, str) else value
    specs = []
    try:
        for item in items:
            pair = item.split(":") if isinstance(item, str) else item
            d, c = (parse_int(part) for part in pair)
            specs.append((d, c))
    except (TypeError, ValueError):
        raise ValueError(f"expected 'd:c' pairs such as '1:2,2:3', got {value!r}") from None
    return tuple(specs)


def _one_of(options: tuple[str, ...], what: str) -> Check:
    def check(value: Any, values: dict[str, Any]) -> str | None:
        return None if value in options else f"unknown {what} {value!r}; choose from {', '.join(options)}"

    return check


def _imported(value: Any, values: dict[str, Any]) -> str | None:
    """Import the modules that register methods of a project's own (a check run first for that)."""
    for name in value:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing module, or one that fails as it registers
            return f"cannot import {name} ({type(exc).__name__}: {exc})"
    return None


def load_method_modules(config: DedupConfig) -> None:
    """Import ``config.method_modules`` in a process that did not build the config (a worker)."""
    for name in config.method_modules:
        if name not in sys.modules:
            importlib.import_module(name)


def _known_methods(value: Any, values: dict[str, Any]) -> str | None:
    unknown = [m for m in value if m not in registry.BY_NAME]
    if unknown or not value:
        return f"unknown method(s) {unknown or value!r}; choose from {', '.join(registry.BY_NAME)}"
    return None


def _specs_check(value: Any, values: dict[str, Any]) -> str | None:
    if not value or any(d < 1 or c < 1 or c > 8 for d, c in value):
        return f"need at least one spec with distance >= 1 and chain length 1..8, got {value!r}"
    return None


def _idf_low(value: Any, values: dict[str, Any]) -> str | None:
    return None if 0.0 <= value <= 1.0 else f"must be a fraction in (0, 1], got {value!r}"


def _idf_high(value: Any, values: dict[str, Any]) -> str | None:
    if not 0.0 < value <= 1.0:
        return f"must be a fraction in (0, 1], got {value!r}"
    low = values["imatch_idf_low"]
    return None if value >= low else f"must be at least imatch_idf_low ({low}), got {value!r}"


def _bands(value: Any, values: dict[str, Any]) -> str | None:
    perm = values["minhash_perm"]
    if value is not None and not 1 <= value <= perm:
        return f"must be between 1 and minhash_perm ({perm}), got {value!r}"
    return None


def _few_spots_bits(value: Any, values: dict[str, Any]) -> str | None:
    return None if -1 <= value <= 32 else f"must be -1 (off) or between 0 and 32 bits, got {value!r}"


def _bits(value: Any, values: dict[str, Any]) -> str | None:
    return None if 0 <= value <= 32 else f"must be between 0 and 32 bits, got {value!r}"


def _words(value: Any, values: dict[str, Any]) -> str | None:
    return None if 1 <= value <= 32 else f"must be between 1 and 32, got {value!r}"


def _lexicons(value: Any, values: dict[str, Any]) -> str | None:
    if 0 <= value <= 64:
        return None
    return f"must be between 0 and 64 (each one is a lookup key a page), got {value!r}"


@dataclass(frozen=True, init=False)
class DedupConfig:
    """Every detection knob. Build with keywords, ``from_settings`` or ``from_options``.

    ``preset`` ("strict", "default", "loose") sets the knobs it names; keywords given
    explicitly override it: ``DedupConfig(preset="strict", min_tokens=50)``.
    """

    preset: str = knob(
        "default",
        parse_str,
        f"starting point for the detection knobs: {', '.join(PRESETS)}; knobs set explicitly override it",
        _one_of(tuple(PRESETS), "preset"),
    )
    method_modules: tuple[str, ...] = knob(
        (),
        parse_modules,
        "modules that register methods of your own (methods.register), imported before the methods "
        "are read, in the crawl, the scan and each worker process",
        _imported,
    )
    methods: tuple[str, ...] = knob(
        ("exact", "spotsigs", "simhash"),
        parse_names,
        f"methods that may call a page a duplicate: {', '.join(METHODS)}",
        _known_methods,
    )
    extractor: str = knob(
        "auto",
        parse_str,
        f"main-text extractor: {', '.join(EXTRACTORS)}",
        _one_of(EXTRACTORS, "extractor"),
    )
    comments: bool = knob(
        True,
        parse_bool,
        "readers' comments count: a page with 100 words or more of comments that another page "
        "lacks (or other comments) is not its copy; off, a page that differs from another by its "
        "comments alone is its duplicate. Comments are never part of the main text either way",
    )
    max_body: int = knob(
        5_000_000,
        parse_int,
        "largest body in bytes that is judged; larger pages are skipped",
        at_least(1024, " bytes"),
    )
    min_tokens: int = knob(
        10, parse_int, "pages whose main text has fewer tokens are not judged", at_least(0)
    )
    language: str = knob(
        "auto", parse_str, f"SpotSigs antecedent set: {', '.join(LANGUAGES)}", _one_of(LANGUAGES, "language")
    )
    spotsigs_threshold: float = knob(
        0.3, parse_float, "SpotSigs multiset Jaccard at or above which pages match", fraction()
    )
    spotsigs_min_spots: int = knob(
        12,
        parse_int,
        "spots (with multiplicity) both pages need for SpotSigs to call them duplicates; "
        "a Jaccard over fewer is noise (listing pages sharing a few teasers)",
        at_least(0),
    )
    spotsigs_few_spots_bits: int = knob(
        20,
        parse_int,
        "SimHash distance (of 64 bits) within which a pair with a page under spotsigs_min_spots "
        "spots may still match on SpotSigs: a Jaccard over few spots needs that second witness; "
        "-1: such pairs never match on SpotSigs",
        _few_spots_bits,
    )
    spotsigs_length_ratio: float = knob(
        0.75,
        parse_float,
        "token length ratio (shorter / longer) under which a SpotSigs pair must reach "
        "spotsigs_uneven_threshold: pages of unequal length sharing many spots are usually "
        "siblings that share sections, not copies; 0: off",
        fraction(open_low=False),
    )
    spotsigs_uneven_threshold: float = knob(
        0.7,
        parse_float,
        "SpotSigs Jaccard a pair of unequal length (see spotsigs_length_ratio) must reach",
        fraction(),
    )
    spotsigs_specs: tuple[tuple[int, int], ...] = knob(
        ((1, 2),),
        _parse_specs,
        "SpotSigs spot specs 'd:c' (distance, chain length), comma-separated",
        _specs_check,
    )
    simhash_distance: int = knob(
        3, parse_int, "SimHash Hamming distance (of 64 bits) at or below which pages match", _bits
    )
    simhash_shingle: int = knob(3, parse_int, "words per SimHash feature shingle", _words)
    simhash_tables: str = knob(
        "blocks",
        parse_str,
        "SimHash search: blocks (distance + 1 tables, small indexes) or permuted "
        "(Manku et al.: distance + 2 blocks, keyed in pairs; fewer false candidates past a million pages)",
        _one_of(("blocks", "permuted"), "SimHash table layout"),
    )
    simhash_confirm: float = knob(
        0.3,
        parse_float,
        "SpotSigs Jaccard a SimHash match must also reach to count (0 trusts SimHash alone)",
        fraction(open_low=False),
    )
    minhash_perm: int = knob(128, parse_int, "MinHash permutations", between(16, 1024))
    minhash_threshold: float = knob(
        0.8, parse_float, "estimated Jaccard at or above which MinHash pages match", fraction()
    )
    minhash_shingle: int = knob(3, parse_int, "words per MinHash shingle", _words)
    minhash_bands: int | None = knob(
        None,
        parse_optional_int,
        "LSH bands (rows = permutations // bands); auto picks them for the threshold",
        _bands,
    )
    shingles_size: int = knob(
        5, parse_int, "words per Broder shingle (84 min-hashes, 6 super-shingles of 14)", _words
    )
    shingles_min_agree: int = knob(
        2, parse_int, "super-shingles (of 6) that must agree for a match", between(1, 6)
    )
    imatch_idf_low: float = knob(
        0.2, parse_float, "I-Match keeps terms whose normalized idf is at least this", _idf_low
    )
    imatch_idf_high: float = knob(0.95, parse_float, "... and at most this", _idf_high)
    imatch_lexicons: int = knob(4, parse_int, "extra randomized I-Match lexicons (Kolcz et al.)", _lexicons)
    imatch_drop: float = knob(
        0.33, parse_float, "share of terms each randomized lexicon leaves out", fraction()
    )
    ksentence_k: int = knob(3, parse_int, "sentences hashed by the K-longest-sentences method", _words)
    keep_text: int = knob(
        10_000,
        parse_int,
        "characters of each page's main text kept in the index for the report (0: none)",
        at_least(0),
    )
    scope: str = knob(
        "global",
        parse_str,
        "pages match only within the same: global (all), domain (registered domain), host",
        _one_of(SCOPES, "scope"),
    )

    def __init__(self, preset: str = "default", **knobs: Any) -> None:
        # A hand-written __init__ (not the dataclass one) so that a preset fills exactly the knobs
        # the caller did not give; dataclasses.replace() passes every field and keeps them all.
        if not isinstance(preset, str) or preset not in PRESETS:
            raise ConfigError("preset", f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
        values = {f.name: f.default for f in dataclasses.fields(self) if f.name != "preset"}
        unknown = sorted(set(knobs) - set(values))
        if unknown:
            raise TypeError(f"DedupConfig got unknown knob(s): {', '.join(unknown)}")
        values.update(PRESETS[preset])
        values.update(knobs)
        object.__setattr__(self, "preset", preset)
        for name, value in values.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        checked(self)

    @property
    def spotsigs_least_spots(self) -> int:
        """The fewest spots a page can have and still match on SpotSigs (with the SimHash witness)."""
        return 1 if self.spotsigs_few_spots_bits >= 0 else max(1, self.spotsigs_min_spots)

    @property
    def simhash_within_spotsigs(self) -> bool:
        """Whether every SimHash match is also a pair the exact SpotSigs search finds.

        A SimHash match needs SpotSigs >= ``simhash_confirm``; from the SpotSigs threshold
        on, with every page that has a spot searchable, such a pair is within the search's reach.
        """
        return (
            "spotsigs" in self.methods
            and self.simhash_confirm > 0
            and self.simhash_confirm >= self.spotsigs_threshold
            and self.spotsigs_least_spots <= 1
        )

    def spotsigs_trusted(self, small_size: int, distance: int | None) -> bool:
        """Whether a SpotSigs Jaccard may decide a pair whose smaller page has ``small_size`` spots.

        From ``spotsigs_min_spots`` spots on both pages, always; under it only when the pages'
        SimHash ``distance`` (None: unknown) is within ``spotsigs_few_spots_bits``.
        """
        if small_size >= self.spotsigs_min_spots:
            return True
        bits = self.spotsigs_few_spots_bits
        return small_size >= 1 and bits >= 0 and distance is not None and distance <= bits

    def spotsigs_bar(self, tokens_a: int, tokens_b: int) -> float:
        """The SpotSigs Jaccard a pair of pages with these token counts must reach.

        Pages of unequal length (ratio under ``spotsigs_length_ratio``) need
        ``spotsigs_uneven_threshold``, when that is the higher bar; others ``spotsigs_threshold``.
        """
        small, large = sorted((tokens_a, tokens_b))
        if small < self.spotsigs_length_ratio * large:
            return max(self.spotsigs_threshold, self.spotsigs_uneven_threshold)
        return self.spotsigs_threshold

    def shaping(self) -> dict[str, Any]:
        """The ``SHAPING_KNOBS`` as plain JSON values: what an index stores and checks on opening."""

        def plain(value: object) -> object:
            return [plain(v) for v in value] if isinstance(value, (tuple, list)) else value

        values = {name: plain(getattr(self, name)) for name in SHAPING_KNOBS}
        values["minhash_lsh"] = plain(self.minhash_lsh)
        return values

    @property
    def minhash_lsh(self) -> tuple[int, int]:
        """(bands, rows) for the MinHash LSH index."""
        from .signatures.minhash import lsh_params

        if self.minhash_bands is None:
            return lsh_params(self.minhash_threshold, self.minhash_perm)
        return self.minhash_bands, self.minhash_perm // self.minhash_bands

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | Any) -> DedupConfig:
        """Read ``NEARDUP_<FIELD>`` keys from Scrapy settings or any mapping; errors name the setting."""
        return cls._build(lambda name: settings.get(setting_name(name)), setting_name)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> DedupConfig:
        """Read CLI options (``None`` = not given); errors name the ``--flag``."""
        return cls._build(options.get, flag_name)

    @classmethod
    def _build(cls, lookup: Callable[[str], Any], label: Callable[[str], str]) -> DedupConfig:
        values = parsed(cls, lookup, label)
        try:
            return cls(**values)
        except ConfigError as exc:
            raise renamed(exc, label) from None

    @classmethod
    def docs(cls) -> list[tuple[str, Any, str]]:
        """(field, default, help) rows for the docs and the CLI."""
        return [(f.name, f.default, f.metadata["doc"]) for f in declarations(cls)]
