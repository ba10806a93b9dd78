"""The hosts a crawl asks for: where a request read from the index may be fetched.

A shared index can be written by anyone who reaches it. What the crawl reads back from it as a
request (a skipped request to check, a dead run's page to fetch again) is fetched only from a
host and port the crawl itself asks for: so a planted row cannot point every crawler at an
internal address.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from scrapy.http import Request
from scrapy.utils.url import url_is_from_any_domain

MAX_ORIGINS = 100_000  # URL beginnings remembered (a crawl of the whole web meets more)


class Hosts:
    """The hosts this crawl asks for: those of the requests the spider yields (its start requests
    too) and of the requests it downloads, and the spider's ``allowed_domains``. A request read
    from the index on another host waits until the crawl asks for that host, and is never
    fetched otherwise."""

    def __init__(self, crawler: Any = None) -> None:
        self.crawler = crawler
        self._asked: set[str] = set()
        self._origins: set[str] = set()  # URLs' beginnings (scheme and netloc) already asked for
        self._waiting: dict[str, list[tuple[Request, Callable[[Request], None]]]] = {}

    def allows(self, url: str) -> bool:
        """Whether a request read from the index may be fetched from ``url`` now."""
        if _host(url) in self._asked:
            return True
        domains = getattr(getattr(self.crawler, "spider", None), "allowed_domains", None)
        listed = isinstance(domains, (list, tuple, set)) and bool(domains)
        return listed and url_is_from_any_domain(url, domains)

    def asked(self, url: str) -> None:
        """Note a request the crawl asks for (every link a spider yields: the URL's beginning
        is looked up first, as parsing each URL cost a crawl 1 ms a page)."""
        start = url.find("//")
        end = url.find("/", start + 2) if start >= 0 else -1
        origin = url if end < 0 else url[:end]  # holds the scheme and the whole netloc
        if origin in self._origins:
            return
        if len(self._origins) >= MAX_ORIGINS:
            self._origins.clear()
        self._origins.add(origin)
        host = _host(url)
        if host and host not in self._asked:
            self._asked.add(host)
            for request, schedule in self._waiting.pop(host, []):
                schedule(request)

    def fetch(self, request: Request, schedule: Callable[[Request], None]) -> bool:
        """Schedule ``request`` now if the crawl asks for its host, else once it does; whether now."""
        if self.allows(request.url):
            schedule(request)
            return True
        self._waiting.setdefault(_host(request.url), []).append((request, schedule))
        return False


def _host(url: str) -> str:
    """Where a URL is fetched from: its host and port (another port of a host is another server)."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower(), 0)
        return f"{(parts.hostname or '').lower()}:{port}" if parts.hostname else ""
    except ValueError:
        return ""
