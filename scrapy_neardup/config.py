"""DedupConfig: every knob of the detection, its default and its validation.

One dataclass serves the Scrapy settings (``NEARDUP_<FIELD>``), the command line
(``--field-name``) and Python callers alike, so a knob is named, parsed and checked
in one place only. Scrapy-side knobs (action, database, report) live with the
Scrapy components; this module does not import Scrapy.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import methods as registry
from .exceptions import ConfigError
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


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _parse_int(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"expected a whole number, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a whole number, got {value!r}") from None


def _parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {value!r}") from None


def _parse_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value.strip().lower()


def _parse_names(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    try:
        return tuple(str(item).strip().lower() for item in items if str(item).strip())
    except TypeError:
        raise ValueError(f"expected a list or a comma-separated string, got {value!r}") from None


def _parse_specs(value: Any) -> tuple[tuple[int, int], ...]:
    """Spot specs as ``"1:2,2:3"`` or ``[(1, 2), (2, 3)]``: spot distance d, chain length c."""
    items = value.split(",") if isinstance(value, str) else value
    specs = []
    try:
        for item in items:
            pair = item.split(":") if isinstance(item, str) else item
            d, c = (_parse_int(part) for part in pair)
            specs.append((d, c))
    except (TypeError, ValueError):
        raise ValueError(f"expected 'd:c' pairs such as '1:2,2:3', got {value!r}") from None
    return tuple(specs)


def _parse_optional_int(value: Any) -> int | None:
    return None if value in (None, "", "auto") else _parse_int(value)


def knob(default: Any, parse: Callable[[Any], Any], doc: str) -> Any:
    """A config field with its parser and the one-line help shown in the README and the CLI."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable defaults are not allowed")
    return field(default=default, metadata={"parse": parse, "doc": doc})


@dataclass(frozen=True, init=False)
class DedupConfig:
    """Every detection knob. Build with keywords, ``from_settings`` or ``from_options``.

    ``preset`` ("strict", "default", "loose") sets the knobs it names; keywords given
    explicitly override it: ``DedupConfig(preset="strict", min_tokens=50)``.
    """

    preset: str = knob(
        "default",
        _parse_str,
        f"starting point for the detection knobs: {', '.join(PRESETS)}; knobs set explicitly override it",
    )
    methods: tuple[str, ...] = knob(
        ("exact", "spotsigs", "simhash"),
        _parse_names,
        f"methods that may call a page a duplicate: {', '.join(METHODS)}",
    )
    extractor: str = knob("trafilatura", _parse_str, f"main-text extractor: {', '.join(EXTRACTORS)}")
    max_body: int = knob(
        5_000_000, _parse_int, "largest body in bytes that is judged; larger pages are skipped"
    )
    min_tokens: int = knob(10, _parse_int, "pages whose main text has fewer tokens are not judged")
    language: str = knob("auto", _parse_str, f"SpotSigs antecedent set: {', '.join(LANGUAGES)}")
    spotsigs_threshold: float = knob(
        0.3, _parse_float, "SpotSigs multiset Jaccard at or above which pages match"
    )
    spotsigs_min_spots: int = knob(
        12,
        _parse_int,
        "spots (with multiplicity) both pages need for SpotSigs to call them duplicates; "
        "a Jaccard over fewer is noise (listing pages sharing a few teasers)",
    )
    spotsigs_few_spots_bits: int = knob(
        20,
        _parse_int,
        "SimHash distance (of 64 bits) within which a pair with a page under spotsigs_min_spots "
        "spots may still match on SpotSigs: a Jaccard over few spots needs that second witness; "
        "-1: such pairs never match on SpotSigs",
    )
    spotsigs_length_ratio: float = knob(
        0.75,
        _parse_float,
        "token length ratio (shorter / longer) under which a SpotSigs pair must reach "
        "spotsigs_uneven_threshold: pages of unequal length sharing many spots are usually "
        "siblings that share sections, not copies; 0: off",
    )
    spotsigs_uneven_threshold: float = knob(
        0.7, _parse_float, "SpotSigs Jaccard a pair of unequal length (see spotsigs_length_ratio) must reach"
    )
    spotsigs_specs: tuple[tuple[int, int], ...] = knob(
        ((1, 2),), _parse_specs, "SpotSigs spot specs 'd:c' (distance, chain length), comma-separated"
    )
    simhash_distance: int = knob(
        3, _parse_int, "SimHash Hamming distance (of 64 bits) at or below which pages match"
    )
    simhash_shingle: int = knob(3, _parse_int, "words per SimHash feature shingle")
    simhash_tables: str = knob(
        "blocks",
        _parse_str,
        "SimHash search: blocks (distance + 1 tables, small indexes) or permuted "
        "(Manku et al.: distance + 2 blocks, keyed in pairs; fewer false candidates past a million pages)",
    )
    simhash_confirm: float = knob(
        0.3,
        _parse_float,
        "SpotSigs Jaccard a SimHash match must also reach to count (0 trusts SimHash alone)",
    )
    minhash_perm: int = knob(128, _parse_int, "MinHash permutations")
    minhash_threshold: float = knob(
        0.8, _parse_float, "estimated Jaccard at or above which MinHash pages match"
    )
    minhash_shingle: int = knob(3, _parse_int, "words per MinHash shingle")
    minhash_bands: int | None = knob(
        None,
        _parse_optional_int,
        "LSH bands (rows = permutations // bands); auto picks them for the threshold",
    )
    shingles_size: int = knob(
        5, _parse_int, "words per Broder shingle (84 min-hashes, 6 super-shingles of 14)"
    )
    shingles_min_agree: int = knob(2, _parse_int, "super-shingles (of 6) that must agree for a match")
    imatch_idf_low: float = knob(
        0.2, _parse_float, "I-Match keeps terms whose normalized idf is at least this"
    )
    imatch_idf_high: float = knob(0.95, _parse_float, "... and at most this")
    imatch_lexicons: int = knob(4, _parse_int, "extra randomized I-Match lexicons (Kolcz et al.)")
    imatch_drop: float = knob(0.33, _parse_float, "share of terms each randomized lexicon leaves out")
    ksentence_k: int = knob(3, _parse_int, "sentences hashed by the K-longest-sentences method")
    keep_text: int = knob(
        10_000, _parse_int, "characters of each page's main text kept in the index for the report (0: none)"
    )
    scope: str = knob(
        "global",
        _parse_str,
        "pages match only within the same: global (all), domain (registered domain), host",
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
        for f in dataclasses.fields(self):
            problem = _check(f.name, getattr(self, f.name), self)
            if problem:
                raise ConfigError(f.name, problem)

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
    def from_settings(cls, settings: Mapping[str, Any] | Any, prefix: str = "NEARDUP_") -> DedupConfig:
        """Read ``NEARDUP_<FIELD>`` keys from Scrapy settings or any mapping; errors name the setting."""
        return cls._build(
            lambda name: settings.get(prefix + name.upper()), lambda name: prefix + name.upper()
        )

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> DedupConfig:
        """Read CLI options (``None`` = not given); errors name the ``--flag``."""
        return cls._build(options.get, lambda name: "--" + name.replace("_", "-"))

    @classmethod
    def _build(cls, lookup: Callable[[str], Any], label: Callable[[str], str]) -> DedupConfig:
        values = {}
        for f in dataclasses.fields(cls):
            raw = lookup(f.name)
            if raw is None:
                continue
            try:
                values[f.name] = f.metadata["parse"](raw)
            except ValueError as exc:
                raise ConfigError(label(f.name), str(exc)) from None
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(label(exc.setting), str(exc).split(": ", 1)[1]) from None

    @classmethod
    def docs(cls) -> list[tuple[str, Any, str]]:
        """(field, default, help) rows for the README and the CLI."""
        return [(f.name, f.default, f.metadata["doc"]) for f in dataclasses.fields(cls)]


def _check(name: str, value: Any, config: DedupConfig) -> str | None:
    """Why a field's value is wrong, or None."""
    fraction = {
        "spotsigs_threshold",
        "spotsigs_uneven_threshold",
        "minhash_threshold",
        "imatch_idf_low",
        "imatch_idf_high",
        "imatch_drop",
    }
    if name == "preset" and value not in PRESETS:
        return f"unknown preset {value!r}; choose from {', '.join(PRESETS)}"
    if name == "methods":
        unknown = [m for m in value if m not in registry.BY_NAME]
        if unknown or not value:
            return f"unknown method(s) {unknown or value!r}; choose from {', '.join(registry.BY_NAME)}"
    elif name == "extractor" and value not in EXTRACTORS:
        return f"unknown extractor {value!r}; choose from {', '.join(EXTRACTORS)}"
    elif name == "simhash_tables" and value not in ("blocks", "permuted"):
        return f"unknown SimHash table layout {value!r}; choose from blocks, permuted"
    elif name == "scope" and value not in SCOPES:
        return f"unknown scope {value!r}; choose from {', '.join(SCOPES)}"
    elif name == "language" and value not in LANGUAGES:
        return f"unknown language {value!r}; choose from {', '.join(LANGUAGES)}"
    elif name in fraction and not (0.0 < value <= 1.0 or (name == "imatch_idf_low" and value == 0.0)):
        return f"must be a fraction in (0, 1], got {value!r}"
    elif name in ("simhash_confirm", "spotsigs_length_ratio") and not 0.0 <= value <= 1.0:
        return f"must be a fraction in [0, 1], got {value!r}"
    elif name == "imatch_idf_high" and value < config.imatch_idf_low:
        return f"must be at least imatch_idf_low ({config.imatch_idf_low}), got {value!r}"
    elif name == "spotsigs_specs" and (not value or any(d < 1 or c < 1 or c > 8 for d, c in value)):
        return f"need at least one spec with distance >= 1 and chain length 1..8, got {value!r}"
    elif name == "spotsigs_few_spots_bits" and not -1 <= value <= 32:
        return f"must be -1 (off) or between 0 and 32 bits, got {value!r}"
    elif name == "simhash_distance" and not 0 <= value <= 32:
        return f"must be between 0 and 32 bits, got {value!r}"
    elif name == "minhash_bands" and value is not None and not 1 <= value <= config.minhash_perm:
        return f"must be between 1 and minhash_perm ({config.minhash_perm}), got {value!r}"
    elif name == "shingles_min_agree" and not 1 <= value <= 6:
        return f"must be between 1 and 6, got {value!r}"
    elif name == "max_body" and value < 1024:
        return f"must be at least 1024 bytes, got {value!r}"
    elif name in ("min_tokens", "keep_text", "spotsigs_min_spots") and value < 0:
        return f"must not be negative, got {value!r}"
    elif name == "imatch_lexicons" and not 0 <= value <= 64:
        return f"must be between 0 and 64 (each one is a lookup key a page), got {value!r}"
    elif (
        name in ("simhash_shingle", "minhash_shingle", "shingles_size", "ksentence_k")
        and not 1 <= value <= 32
    ):
        return f"must be between 1 and 32, got {value!r}"
    elif name == "minhash_perm" and not 16 <= value <= 1024:
        return f"must be between 16 and 1024, got {value!r}"
    return None
