"""The package's errors. Every message names the thing to fix: a setting, a file, an extra."""

from __future__ import annotations


class NearDupError(Exception):
    """Base class of every error raised by scrapy-neardup."""


class ConfigError(NearDupError, ValueError):
    """A knob has a bad value; ``setting`` is the name the user wrote it under."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting = setting


class MissingExtraError(NearDupError, ImportError):
    """An optional feature needs a package from one of the package's extras."""

    def __init__(self, feature: str, extra: str, package: str) -> None:
        super().__init__(f"{feature} needs the '{package}' package: pip install 'scrapy-neardup[{extra}]'")
        self.extra = extra


class InputError(NearDupError):
    """A file or value given on the command line cannot be read as a page; ``reason`` is a short key."""

    def __init__(self, message: str, reason: str = "unreadable") -> None:
        super().__init__(message)
        self.reason = reason


class SkipPage(NearDupError):
    """A page that is not judged; ``reason`` is a short stats key such as ``too_short`` or ``binary``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class IndexFileError(NearDupError):
    """An index file that cannot be opened, created or trusted; the message names the file."""

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(one_line(f"index {path}: {problem}"))
        self.path = path


class IndexFailure(IndexFileError):
    """The index failed while a page was judged (a full disk, a lost server, a lock held too
    long): not the page's fault. ``cause`` is the backend's own error."""

    def __init__(self, path: object, problem: str, cause: BaseException | None = None) -> None:
        super().__init__(path, problem)
        self.cause = cause


def one_line(text: str, limit: int = 400) -> str:
    """``text`` as one printable line (SQLite and warcio quote damaged bytes in their messages)."""
    text = " ".join(text.split())
    if not text.isprintable():
        text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
