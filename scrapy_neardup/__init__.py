"""scrapy-neardup: near-duplicate content detection for Scrapy crawls."""

from .config import DedupConfig
from .exceptions import ConfigError, InputError, MissingExtraError, NearDupError, SkipPage
from .fingerprint import Fingerprint, fingerprint
from .verify import Comparison, compare

__all__ = [
    "Comparison",
    "ConfigError",
    "DedupConfig",
    "Fingerprint",
    "InputError",
    "MissingExtraError",
    "NearDupAddon",
    "NearDupDownloaderMiddleware",
    "NearDupError",
    "NearDupPipeline",
    "NearDuplicateItem",
    "SkipPage",
    "compare",
    "fingerprint",
]
__version__ = "0.1.0"

# The Scrapy components import Scrapy; load them on first use so the CLI and workers start fast.
_SCRAPY_NAMES = {
    "NearDupAddon": "crawl.addon",
    "NearDupDownloaderMiddleware": "crawl.middleware",
    "NearDupSpiderMiddleware": "crawl.middleware",
    "NearDupPipeline": "crawl.pipeline",
    "NearDuplicateItem": "crawl.pipeline",
}


def __getattr__(name: str) -> object:
    if name in _SCRAPY_NAMES:
        from importlib import import_module

        return getattr(import_module(f".{_SCRAPY_NAMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
