"""Scope keys: pages only match pages of the same scope (everything, registered domain, host)."""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import urlsplit

from .text import storable


@lru_cache(maxsize=1)
def _extractor():
    import tldextract

    # The public-suffix snapshot bundled with tldextract: no network at run time.
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def scope_key(url: str, scope: str) -> str:
    """``''`` for the global scope, else the host or its registered domain (news.bbc.co.uk -> bbc.co.uk)."""
    if scope == "global":
        return ""
    host = (urlsplit(url).hostname or "").lower()
    if scope == "host" or not host:
        return host
    parts = _extractor()(host)
    return parts.top_domain_under_public_suffix or host


def url_key(url: str | None) -> str | None:
    """The key a page or an item is found again by: an http(s) URL canonicalised as Scrapy's request
    fingerprints do (w3lib), any other name (a relative URL, an id) as it is, None for none."""
    from w3lib.url import canonicalize_url

    if not url or not url.strip():
        return None
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return storable(url.strip())
    try:
        return canonicalize_url(url)
    except (ValueError, UnicodeError):
        return storable(url)
