"""Settings declared once: name, type, default, check and one doc line, for every setting.

A settings class is a frozen dataclass whose fields are ``knob``s; ``read`` fills it from
Scrapy settings (``NEARDUP_<FIELD>``) or command-line options (``--field``) alike, and every
error names the setting as the user wrote it. ``DedupConfig`` (detection) and
``CrawlSettings`` (the crawl's side) are the two such classes; the docs' tables and the
misspelling warning read their declarations.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

Check = Callable[[Any, dict[str, Any]], "str | None"]  # (value, all values) -> why it is wrong


def knob(default: Any, parse: Callable[[Any], Any], doc: str, check: Check | None = None) -> Any:
    """A settings field: its default, its parser (raises ValueError saying what was expected),
    an optional check of the parsed value (against the others too), and its doc line."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable defaults are not allowed")
    return dataclasses.field(default=default, metadata={"parse": parse, "check": check, "doc": doc})


def setting_name(field: str) -> str:
    return f"NEARDUP_{field.upper()}"


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def declarations(cls: type) -> list[dataclasses.Field]:
    """The knobs of a settings class, in their order."""
    return [f for f in dataclasses.fields(cls) if "parse" in f.metadata]


def parsed(cls: type, lookup: Callable[[str], Any], label: Callable[[str], str]) -> dict[str, Any]:
    """The knobs ``lookup`` gives (None: not given), parsed; ``ConfigError`` names ``label(field)``."""
    from .exceptions import ConfigError

    values = {}
    for f in declarations(cls):
        raw = lookup(f.name)
        if raw is None:
            continue
        try:
            values[f.name] = f.metadata["parse"](raw)
        except ValueError as exc:
            raise ConfigError(label(f.name), str(exc)) from None
    return values


def checked(instance: Any) -> None:
    """Run every knob's check on a built settings object; ``ConfigError`` names the field."""
    from .exceptions import ConfigError

    values = {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}
    for f in declarations(type(instance)):
        check = f.metadata["check"]
        problem = check(values[f.name], values) if check else None
        if problem:
            raise ConfigError(f.name, problem)


def renamed(error: Exception, label: Callable[[str], str]) -> Exception:
    """A ``ConfigError`` raised under a field's name, named as the user wrote the setting."""
    from .exceptions import ConfigError

    if isinstance(error, ConfigError):
        return ConfigError(label(error.setting), str(error).split(": ", 1)[1])
    return error


# --- parsers: raise ValueError with what was expected ------------------------------------------


def parse_int(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"expected a whole number, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a whole number, got {value!r}") from None


def parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {value!r}") from None


def parse_str(value: Any) -> str:
    """A name: trimmed and lower-cased."""
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value.strip().lower()


def parse_text(value: Any) -> str:
    """Free text (a URL, a key pattern), as written."""
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def parse_names(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    try:
        return tuple(str(item).strip().lower() for item in items if str(item).strip())
    except TypeError:
        raise ValueError(f"expected a list or a comma-separated string, got {value!r}") from None


def parse_modules(value: Any) -> tuple[str, ...]:
    """Module names, as written (case matters in a module path)."""
    items = value.split(",") if isinstance(value, str) else value
    try:
        return tuple(str(item).strip() for item in items if str(item).strip())
    except TypeError:
        raise ValueError(f"expected a list or a comma-separated string, got {value!r}") from None


def parse_optional_int(value: Any) -> int | None:
    return None if value in (None, "", "auto") else parse_int(value)


_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(value: Any) -> float | None:
    """Seconds, from ``7d``, ``12h``, ``30m``, ``90s``, ``2w`` or a number of seconds (none: None)."""
    if value in (None, ""):
        return None
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(value).lower())
    if isinstance(value, bool) or not found:
        raise ValueError(f"expected an age such as 7d, 12h, 30m or a number of seconds, got {value!r}")
    return float(found[1]) * _AGE_UNITS[found[2] or "s"]


def parse_path(value: Any) -> Path:
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise ValueError(f"expected a file path (a string), got {value!r}")
    return Path(value)


def parse_field(value: Any) -> str:
    """An item field's name: one string (a list would fail on every item, losing them all)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected one field name (a string), got {value!r}")
    return value.strip()


def choice(options: Iterable[Any]) -> Callable[[Any], Any]:
    """A parser taking one of ``options`` (strings, or a str Enum's members) by name."""
    options = tuple(options)

    def parse(value: Any) -> Any:
        name = value.strip().lower() if isinstance(value, str) else value
        for option in options:
            if name == option or name == getattr(option, "value", option):
                return option
        shown = ", ".join(str(getattr(o, "value", o)) for o in options)
        raise ValueError(f"unknown value {value!r}; choose from {shown}")

    return parse


# --- checks ------------------------------------------------------------------------------------


def between(low: float, high: float, unit: str = "") -> Check:
    def check(value: Any, values: dict[str, Any]) -> str | None:
        if value is not None and not low <= value <= high:
            return f"must be between {low} and {high}{unit}, got {value!r}"
        return None

    return check


def fraction(open_low: bool = True) -> Check:
    """A fraction in (0, 1], or in [0, 1] with ``open_low=False``."""

    def check(value: Any, values: dict[str, Any]) -> str | None:
        if open_low and not 0.0 < value <= 1.0:
            return f"must be a fraction in (0, 1], got {value!r}"
        if not open_low and not 0.0 <= value <= 1.0:
            return f"must be a fraction in [0, 1], got {value!r}"
        return None

    return check


def at_least(low: float, unit: str = "") -> Check:
    def check(value: Any, values: dict[str, Any]) -> str | None:
        if value < low:
            return (
                f"must be at least {low}{unit}, got {value!r}"
                if low
                else f"must not be negative, got {value!r}"
            )
        return None

    return check
