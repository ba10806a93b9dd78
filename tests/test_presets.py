"""Presets: NEARDUP_PRESET / --preset set knobs, and knobs given explicitly win over them."""

from __future__ import annotations

import dataclasses

import pytest
from scrapy.settings import Settings

from scrapy_neardup import ConfigError, DedupConfig
from scrapy_neardup.cli import build_parser
from scrapy_neardup.config import PRESETS


def test_default_preset_is_the_field_defaults():
    assert PRESETS["default"] == {}
    assert DedupConfig(preset="default") == DedupConfig()
    assert DedupConfig().preset == "default"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_sets_its_knobs(name):
    config = DedupConfig(preset=name)
    assert config.preset == name
    for knob, value in PRESETS[name].items():
        assert getattr(config, knob) == value


def test_presets_are_ordered_from_strict_to_loose():
    strict, default, loose = (DedupConfig(preset=p) for p in ("strict", "default", "loose"))
    assert strict.spotsigs_threshold > default.spotsigs_threshold > loose.spotsigs_threshold
    assert strict.simhash_distance <= default.simhash_distance <= loose.simhash_distance


def test_explicit_knobs_override_the_preset():
    config = DedupConfig(preset="strict", spotsigs_threshold=0.55)
    assert config.spotsigs_threshold == 0.55
    assert config.simhash_distance == PRESETS["strict"]["simhash_distance"]


def test_replace_keeps_every_value():
    config = DedupConfig(preset="loose")
    changed = dataclasses.replace(config, min_tokens=99)
    assert changed.min_tokens == 99
    assert changed.spotsigs_threshold == config.spotsigs_threshold
    assert changed.preset == "loose"


def test_settings_preset_and_override():
    config = DedupConfig.from_settings(
        Settings({"NEARDUP_PRESET": "Loose", "NEARDUP_SPOTSIGS_THRESHOLD": "0.45"})
    )
    assert config.preset == "loose"
    assert config.spotsigs_threshold == 0.45
    assert config.simhash_distance == PRESETS["loose"]["simhash_distance"]


def test_bad_preset_names_the_setting_and_the_flag():
    with pytest.raises(ConfigError) as info:
        DedupConfig.from_settings({"NEARDUP_PRESET": "paranoid"})
    assert info.value.setting == "NEARDUP_PRESET"
    assert "strict, default, loose" in str(info.value)
    with pytest.raises(ConfigError) as info:
        DedupConfig.from_options({"preset": "paranoid"})
    assert info.value.setting == "--preset"
    with pytest.raises(ConfigError):
        DedupConfig(preset="paranoid")


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="spotsig_threshold"):
        DedupConfig(spotsig_threshold=0.5)


def test_cli_flag():
    args = build_parser().parse_args(
        ["compare", "a.html", "b.html", "--preset", "strict", "--min-tokens", "5"]
    )
    config = DedupConfig.from_options(vars(args))
    assert config.preset == "strict"
    assert config.spotsigs_threshold == PRESETS["strict"]["spotsigs_threshold"]
    assert config.min_tokens == 5
