from __future__ import annotations

import pytest
from scrapy.settings import Settings

from scrapy_neardup import ConfigError, DedupConfig


def test_defaults_are_valid_and_documented():
    config = DedupConfig()
    assert config.methods == ("exact", "spotsigs", "simhash")
    docs = DedupConfig.docs()
    assert {name for name, _, _ in docs} >= {"methods", "extractor", "spotsigs_threshold", "max_body"}
    assert all(doc for _, _, doc in docs)


def test_from_scrapy_settings_parses_strings_and_lists():
    settings = Settings(
        {
            "NEARDUP_METHODS": "exact, MinHash",
            "NEARDUP_SPOTSIGS_THRESHOLD": "0.7",
            "NEARDUP_SPOTSIGS_SPECS": "1:2,2:3",
            "NEARDUP_MINHASH_BANDS": 16,
        }
    )
    config = DedupConfig.from_settings(settings)
    assert config.methods == ("exact", "minhash")
    assert config.spotsigs_threshold == 0.7
    assert config.spotsigs_specs == ((1, 2), (2, 3))
    assert config.minhash_lsh == (16, 8)


def test_from_settings_accepts_a_plain_dict_and_list_values():
    config = DedupConfig.from_settings({"NEARDUP_METHODS": ["spotsigs"], "NEARDUP_SPOTSIGS_SPECS": [(2, 1)]})
    assert config.methods == ("spotsigs",)
    assert config.spotsigs_specs == ((2, 1),)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("NEARDUP_METHODS", "exact,bogus", "unknown method"),
        ("NEARDUP_EXTRACTOR", "magic", "unknown extractor"),
        ("NEARDUP_SPOTSIGS_THRESHOLD", "1.5", "fraction"),
        ("NEARDUP_SPOTSIGS_THRESHOLD", "high", "expected a number"),
        ("NEARDUP_SIMHASH_DISTANCE", "2.5", "whole number"),
        ("NEARDUP_SPOTSIGS_SPECS", "1-2", "d:c"),
        ("NEARDUP_MINHASH_BANDS", "500", "between 1 and minhash_perm"),
        ("NEARDUP_LANGUAGE", "xx", "unknown language"),
        ("NEARDUP_MAX_BODY", "10", "at least 1024"),
        ("NEARDUP_IMATCH_IDF_HIGH", "0.1", "at least imatch_idf_low"),
    ],
)
def test_bad_setting_names_the_setting(key, value, fragment):
    with pytest.raises(ConfigError) as info:
        DedupConfig.from_settings(Settings({key: value}))
    assert info.value.setting == key
    assert str(info.value).startswith(key + ": ")
    assert fragment in str(info.value)


def test_bad_cli_option_names_the_flag():
    with pytest.raises(ConfigError) as info:
        DedupConfig.from_options({"simhash_distance": "99"})
    assert info.value.setting == "--simhash-distance"


def test_keyword_construction_validates_too():
    with pytest.raises(ConfigError) as info:
        DedupConfig(methods=())
    assert info.value.setting == "methods"


def test_auto_lsh_params_put_the_s_curve_at_the_threshold():
    from scrapy_neardup.signatures.minhash import collision_probability

    for threshold in (0.5, 0.8, 0.9):
        bands, rows = DedupConfig(minhash_threshold=threshold).minhash_lsh
        assert bands * rows <= 128
        assert collision_probability(threshold + 0.1, bands, rows) > 0.8
        assert collision_probability(threshold - 0.3, bands, rows) < 0.2


def test_readme_documents_every_setting():
    """Every detection knob is in docs/settings.md (the reference the README points to), by its
    Scrapy setting and its command-line flag."""
    from pathlib import Path

    reference = (Path(__file__).resolve().parents[1] / "docs" / "settings.md").read_text(encoding="utf-8")
    for name, _, _ in DedupConfig.docs():
        assert f"`NEARDUP_{name.upper()}`" in reference
        assert f"`--{name.replace('_', '-')}`" in reference


def test_length_ratio_knobs():
    config = DedupConfig()
    assert (config.spotsigs_length_ratio, config.spotsigs_uneven_threshold) == (0.75, 0.7)
    assert config.spotsigs_bar(100, 75) == 0.3 and config.spotsigs_bar(74, 100) == 0.7
    assert DedupConfig(preset="loose").spotsigs_bar(1, 100) == 0.25
    settings = {"NEARDUP_SPOTSIGS_LENGTH_RATIO": "0.5", "NEARDUP_SPOTSIGS_UNEVEN_THRESHOLD": "0.9"}
    assert DedupConfig.from_settings(settings).spotsigs_bar(49, 100) == 0.9
    for name, bad in (("LENGTH_RATIO", 1.5), ("LENGTH_RATIO", -0.1), ("UNEVEN_THRESHOLD", 0)):
        with pytest.raises(ConfigError, match=f"NEARDUP_SPOTSIGS_{name}"):
            DedupConfig.from_settings({f"NEARDUP_SPOTSIGS_{name}": bad})


def test_few_spots_witness_knob():
    config = DedupConfig()
    assert (config.spotsigs_min_spots, config.spotsigs_few_spots_bits) == (12, 20)
    assert config.spotsigs_least_spots == 1
    assert config.spotsigs_trusted(12, None) and config.spotsigs_trusted(12, 40)
    assert config.spotsigs_trusted(3, 20) and not config.spotsigs_trusted(3, 21)
    assert not config.spotsigs_trusted(3, None) and not config.spotsigs_trusted(0, 0)
    off = DedupConfig(spotsigs_few_spots_bits=-1)
    assert off.spotsigs_least_spots == 12 and not off.spotsigs_trusted(11, 0)
    assert DedupConfig.from_settings({"NEARDUP_SPOTSIGS_FEW_SPOTS_BITS": "-1"}).spotsigs_few_spots_bits == -1
    assert DedupConfig(preset="strict").spotsigs_few_spots_bits == -1
    assert DedupConfig(preset="loose").spotsigs_few_spots_bits == 20
    for bad in (-2, 33):
        with pytest.raises(ConfigError, match="NEARDUP_SPOTSIGS_FEW_SPOTS_BITS"):
            DedupConfig.from_settings({"NEARDUP_SPOTSIGS_FEW_SPOTS_BITS": bad})
