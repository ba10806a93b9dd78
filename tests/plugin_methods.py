"""A project's own method, registered when this module is imported (NEARDUP_METHOD_MODULES).

"opening": pages whose first eight words are the same, decided before the built-in methods.
The crawl test of worker processes names this module, so that each worker registers it too.
"""

from __future__ import annotations

import xxhash

from scrapy_neardup import methods
from scrapy_neardup.methods import Method, MethodResult


def _sign(page, config):
    return {"extra": {"opening": xxhash.xxh3_64_intdigest(" ".join(page.tokens[:8]).encode())}}


def _result(a, b, config):
    if "opening" not in a.extra or "opening" not in b.extra:
        return None
    same = a.extra["opening"] == b.extra["opening"]
    return MethodResult("opening", float(same), same, "equal" if same else "different", "equal", same)


OPENING = Method(
    "opening", "methods", sign=_sign, result=_result, threshold=lambda config: 1.0,
    lookup=lambda fp, config: [(fp.extra["opening"],)] if "opening" in fp.extra else [], kind=51,
)  # fmt: skip

if "opening" not in methods.BY_NAME:
    methods.register(OPENING, before="exact")
