"""The read side of a Redis index: records, texts, duplicate pairs and counts, for reports."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator
from typing import Any

from ....text import storable
from ...records import clean_record
from .connection import read_as_missing
from .replies import reply_float, reply_ids, reply_int, reply_text

logger = logging.getLogger(__name__)

_RECORD = (
    b"url", b"title", b"scope", b"seen_at", b"status", b"skip_reason", b"tokens", b"language",
    b"duplicate_of", b"similarity", b"method",
)  # fmt: skip


class RedisReading:
    """Read queries over a Redis index (``r``, ``k``, ``path``): the protocol's read side."""

    r: Any
    path: str

    def k(self, *parts: object) -> bytes:
        raise NotImplementedError

    def _hmget(self, keys: list[bytes], fields: tuple[bytes, ...]) -> list[list[Any]]:
        pipe = self.r.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(key, *fields)
        return read_as_missing([("HMGET", key, *fields) for key in keys], pipe.execute(raise_on_error=False))

    def _records(self, ids: list[int]) -> Iterator[dict]:
        scopes = {reply_int(v): reply_text(k) for k, v in self.r.hgetall(self.k("scopes")).items()}
        for start in range(0, len(ids), 1000):
            chunk = ids[start : start + 1000]
            for doc, row in zip(chunk, self._hmget([self.k("doc", i) for i in chunk], _RECORD), strict=True):
                if row[4] is None:
                    continue
                raw = dict(zip(_RECORD, row, strict=True))
                record = {"id": doc, **{f.decode(): reply_text(v) for f, v in raw.items()}}
                record["scope"] = scopes.get(reply_int(row[2]), "")
                for name in ("seen_at", "similarity"):
                    record[name] = reply_float(raw[name.encode()])
                for name in ("tokens", "duplicate_of"):
                    record[name] = reply_int(raw[name.encode()])
                yield clean_record(record)

    def get(self, doc_id: int) -> dict | None:
        return next(self._records([doc_id]), None)

    def text(self, doc_id: int) -> str | None:
        blob = self.r.get(self.k("text", doc_id))
        try:
            return zlib.decompress(blob).decode("utf-8", errors="replace") if blob else None
        except zlib.error:
            logger.warning("%s: the stored text of document %d is damaged; left out", self.path, doc_id)
            return None

    def documents(self) -> Iterator[dict]:
        return self._records(reply_ids(self.r.zrange(self.k("ids"), 0, -1)))

    def duplicate_edges(self) -> Iterator[tuple[int, int, float | None, str | None]]:
        ids = sorted(reply_ids(self.r.smembers(self.k("dups"))))
        for start in range(0, len(ids), 1000):
            chunk = ids[start : start + 1000]
            rows = self._hmget([self.k("doc", i) for i in chunk], (b"duplicate_of", b"similarity", b"method"))
            for doc, (of, sim, method) in zip(chunk, rows, strict=True):
                if reply_int(of) is not None:
                    yield doc, reply_int(of), reply_float(sim), reply_text(method)

    def contains_source(self, source: str) -> bool:
        return bool(self.r.exists(self.k("src", storable(source))))

    def stats(self) -> dict[str, int]:
        counts = {
            reply_text(k): max(0, reply_int(v) or 0) for k, v in self.r.hgetall(self.k("counts")).items()
        }
        return {
            "documents": sum(counts.values()), "unique": counts.get("unique", 0),
            "duplicates": counts.get("duplicate", 0), "skipped": counts.get("skipped", 0),
            "bytes": int(self.r.info("memory").get("used_memory", 0)),
        }  # fmt: skip
