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
    "NearDupError",
    "SkipPage",
    "compare",
    "fingerprint",
]
__version__ = "0.1.0"
