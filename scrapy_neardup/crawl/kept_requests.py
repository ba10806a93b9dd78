"""Requests kept in the index as plain data: those learned URL rules skipped, and those of the
pages a run admitted (fetched again if the run dies before delivering them).

A shared index can be written by anyone who reaches it, so what it holds must never run, nor
steer a crawler: a request is kept as JSON (``Request.to_dict``'s fields, bytes as base64,
callbacks by name) and revived as a plain ``scrapy.Request`` whose callbacks are looked up by
name among the spider's own methods. Only a GET without a body is kept, and never how it
travels: the meta keys and headers Scrapy's own components set on the way (a proxy, a
download slot, credentials, cookies) are left out, and a row that holds one is refused. A
request that cannot be kept that way (a ``Request`` subclass, a callback that is no spider
method, meta that is not plain JSON data, a POST) is fetched instead.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from scrapy.http import Request

# Request.to_dict's fields, each with the JSON type it must have when read back.
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "url": str,
    "callback": (str, type(None)),
    "errback": (str, type(None)),
    "method": str,
    "headers": dict,
    "body": str,
    "cookies": (dict, list),
    "meta": dict,
    "encoding": str,
    "priority": int,
    "dont_filter": bool,
    "flags": list,
    "cb_kwargs": dict,
}
MAX_KEPT = 1_000_000  # bytes: a request larger than this is fetched rather than kept
# Meta keys Scrapy's components set while a request travels: how, where through and how long.
# Never kept; a row holding one of the first set is refused (it would steer the crawler).
STEERING_META = frozenset({"proxy", "_auth_proxy", "download_slot", "bindaddress"})
TRAVEL_META = STEERING_META | {
    "download_timeout", "download_latency", "download_maxsize", "download_warnsize", "redirect_times",
    "redirect_ttl", "redirect_urls", "redirect_reasons", "retry_times", "dont_merge_cookies",
}  # fmt: skip
# Headers Scrapy's components add (the defaults, compression, credentials, cookies): never kept,
# and a row holding one is refused. A revived request gets them anew from the same components.
ADDED_HEADERS = frozenset(
    {"user-agent", "accept", "accept-language", "accept-encoding", "authorization", "proxy-authorization",
     "cookie", "referer"}
)  # fmt: skip


def keep(request: Request, spider: Any) -> bytes | None:
    """The request as JSON bytes, or None when it cannot be kept as plain data."""
    if type(request) is not Request or request.method != "GET" or request.body:
        return None  # a subclass's own state would be lost on revival; a POST is not a page's URL
    try:
        fields = request.to_dict(spider=spider)
    except ValueError:  # a callback that is not a method of the spider
        return None
    fields["meta"] = {
        k: v for k, v in fields["meta"].items() if k not in TRAVEL_META and not str(k).startswith("_neardup")
    }
    fields["headers"] = {
        _text(name): [_text(value) for value in values]
        for name, values in fields["headers"].items()
        if _text(name).lower() not in ADDED_HEADERS
    }
    fields["body"] = base64.b64encode(fields["body"]).decode("ascii")
    for name in ("meta", "cb_kwargs", "cookies", "flags"):
        if not _plain(fields[name]):
            return None
    try:
        kept = json.dumps(fields, ensure_ascii=True, allow_nan=False).encode("ascii")
    except (TypeError, ValueError):
        return None
    return kept if len(kept) <= MAX_KEPT else None


def revive(kept: Any, spider: Any, url: str | None = None) -> Request:
    """The request ``keep`` made, with its callbacks resolved on ``spider``; ``ValueError``
    saying why when ``kept`` does not read as such a request, or not for ``url`` (its row's)."""
    if isinstance(kept, memoryview):
        kept = kept.tobytes()
    if not isinstance(kept, (bytes, str)):
        raise ValueError(f"not a kept request but {type(kept).__name__}")
    try:
        fields = json.loads(kept)
    except (ValueError, RecursionError) as exc:
        raise ValueError("not JSON (kept by another version, or written by something else)") from exc
    if not isinstance(fields, dict) or set(fields) != set(_FIELDS):
        raise ValueError("not the fields of a request")
    for name, kind in _FIELDS.items():
        if not isinstance(fields[name], kind) or (kind is int and isinstance(fields[name], bool)):
            raise ValueError(f"its {name} is not a {kind}")
    headers = fields["headers"]
    if not all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in headers.values()):
        raise ValueError("its headers are not lists of text")
    _refuse_steering(fields, url)
    try:
        body = base64.b64decode(fields["body"], validate=True)
        headers = {
            name.encode("latin-1"): [v.encode("latin-1") for v in values] for name, values in headers.items()
        }
    except (ValueError, UnicodeEncodeError) as exc:
        raise ValueError("its body or headers are not bytes") from exc
    try:
        return _request(fields, headers, body, spider)
    except (TypeError, ValueError) as exc:  # a URL without scheme, cookies of another shape
        raise ValueError(f"not a request Scrapy makes: {exc}") from exc


def _refuse_steering(fields: dict[str, Any], url: str | None) -> None:
    """A row ``keep`` would not have written: another URL than its own, another method, a body,
    or how to travel (a proxy, a download slot, credentials): refused, never fetched."""
    if url is not None and fields["url"] != url:
        raise ValueError(f"its URL is not its row's ({url[:200]})")
    if fields["method"] != "GET" or fields["body"]:
        raise ValueError(f"it is a {fields['method'][:20]} with a body of {len(fields['body'])} characters")
    steering = sorted(STEERING_META & set(fields["meta"]))
    added = sorted(name for name in fields["headers"] if name.lower() in ADDED_HEADERS)
    if steering or added:
        raise ValueError(f"it says how to travel ({', '.join([*steering, *added])[:200]})")


def _request(fields: dict[str, Any], headers: dict[bytes, list[bytes]], body: bytes, spider: Any) -> Request:
    return Request(
        url=fields["url"],
        callback=_method(spider, fields["callback"]),
        errback=_method(spider, fields["errback"]),
        method=fields["method"],
        headers=headers,
        body=body,
        cookies=fields["cookies"],
        meta=fields["meta"],
        encoding=fields["encoding"],
        priority=fields["priority"],
        dont_filter=fields["dont_filter"],
        flags=fields["flags"],
        cb_kwargs=fields["cb_kwargs"],
    )


def _method(spider: Any, name: str | None) -> Any:
    """The spider's own method of that name: never a dunder, never another object's callable."""
    if name is None:
        return None
    if not name.isidentifier() or name.startswith("__"):
        raise ValueError(f"its callback {name[:80]!r} is not a method name")
    method = getattr(spider, name, None)
    if not callable(method) or getattr(method, "__self__", None) is not spider:
        raise ValueError(f"its callback {name!r} is not a method of spider {spider.name!r}")
    return method


def _text(value: bytes) -> str:
    return value.decode("latin-1")


def _plain(value: Any) -> bool:
    """Whether ``value`` reads back from JSON as itself (no tuples, sets, objects, int keys)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False)) == value
    except (TypeError, ValueError, RecursionError):
        return False
