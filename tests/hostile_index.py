"""Indexes filled with hostile values, for the fuzz test of what an index holds.

``build`` records real pages (the aeb set) in an index, with a learned URL rule and a skipped
request; ``fuzz_sqlite`` and ``fuzz_redis`` then overwrite a share of every table's rows (every
key of a Redis index) with values of other types, encodings and lengths, pickles that would
create a file when loaded, and rows and keys of their own; a share of Redis keys changes type.
"""

from __future__ import annotations

import gzip
import os
import pickle
import random
import sqlite3
from pathlib import Path

from scrapy import Request

from scrapy_neardup.crawl import kept_requests
from scrapy_neardup.detector import Detector
from scrapy_neardup.url_rule import RuleKey


class Planted:
    """A pickle that creates ``path`` when it is loaded."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def hostile_values(rng: random.Random, ran: Path) -> list:
    """Values of every SQLite type and none the index writes there."""
    return [
        None, -1, 0, 2**63 - 1, -(2**63), 1.5, float("inf"), "text", "", "' OR 1=1 --", "\x00", "é" * 1000,
        b"", b"\x00\xff\xfe", pickle.dumps(Planted(ran)), rng.randbytes(64), rng.randbytes(100_000),
        '{"a": [1, 2]}', "[1, 2, 3]", '["h", "", "param", "x"]', "x" * 200_000, b"[" * 5000, b"\x03" * 9,
        b"\x04\x05\0\0\0\x19" + b"\xff" * 9, b"\x01" * 7, "9" * 30,
    ]  # fmt: skip


def build(index, config, pages: list[bytes]) -> None:
    """Record ``pages`` (and a copy of every third), a learned URL rule and a skipped request."""
    index.begin_run("drop")
    detector = Detector(config, index)
    for n, body in enumerate(pages):
        detector.check(f"http://old.example/{n}", body)
        if n % 3 == 0:
            detector.check(f"http://old.example/{n}?utm=1", body)
    rule = RuleKey("http://old.example", "", "param", "utm").text()
    index.add_url_evidence({rule: (30, 0)}, 29)
    kept = kept_requests.keep(Request("http://old.example/1?utm=2"), None)
    index.add_url_skip([rule], "http://old.example/1?utm=2", "http://old.example/1", kept)
    index.end_run()


def aeb_bodies(aeb_dir: Path, count: int) -> list[bytes]:
    return [gzip.decompress(p.read_bytes()) for p in sorted((aeb_dir / "html").glob("*.gz"))[:count]]


def fuzz_sqlite(db: Path, seed: int, ran: Path, share: float = 0.5, keep: tuple[str, ...] = ("meta",)) -> int:
    """Overwrite a column of ``share`` of every table's rows, add rows of hostile values; the
    number of changes made (a change SQLite's constraints refuse is not made)."""
    rng = random.Random(seed)
    values = hostile_values(rng, ran)
    con = sqlite3.connect(db)
    changed = 0
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in (t for t in tables if t not in keep):
        columns = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        rows = con.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
        where = " AND ".join(f"{c} IS ?" for c in columns)
        for row in rows:
            if rng.random() < share:
                changed += _try(con, f"UPDATE OR IGNORE {table} SET {rng.choice(columns)} = ? WHERE {where}",
                                (rng.choice(values), *row))  # fmt: skip
        for _ in range(5):
            marks = ", ".join("?" * len(columns))
            changed += _try(
                con, f"INSERT INTO {table} VALUES ({marks})", [rng.choice(values) for _ in columns]
            )
    con.commit()
    con.close()
    return changed


def _try(con: sqlite3.Connection, sql: str, params) -> int:
    try:
        con.execute(sql, params)
        return 1
    except sqlite3.Error:  # a NOT NULL or CHECK constraint: SQLite itself refuses it
        return 0


def fuzz_redis(r, prefix: str, seed: int, ran: Path, share: float = 0.5, retype: float = 0.1) -> int:
    """Overwrite ``share`` of the index's keys (a field of a hash, a member added to a set, a key
    of another type for ``retype`` of them), add keys of hostile names; the number changed."""
    rng = random.Random(seed)
    values = [v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogatepass")
              for v in hostile_values(rng, ran) if v is not None]  # fmt: skip
    keys = sorted(r.scan_iter(match=prefix.encode() + b":*"))
    changed = 0
    for key in keys:
        if key == f"{prefix}:meta".encode() or rng.random() >= share:
            continue
        kind, value = r.type(key), rng.choice(values)
        changed += 1
        if rng.random() < retype:
            r.delete(key)
            r.set(key, value) if kind != b"string" else r.sadd(key, value)
        elif kind == b"string":
            r.set(key, value)
        elif kind == b"hash":
            fields = r.hkeys(key)
            for name in rng.sample(fields, max(1, len(fields) // 2)):
                r.hset(key, name, rng.choice(values))
            r.hset(key, rng.choice(values)[:100], value)
        elif kind == b"set":
            r.sadd(key, value, rng.choice(values))
        elif kind == b"zset":
            r.zadd(key, {value: rng.random() * 1e6})
    for kind in sorted({key.split(b":")[1] for key in keys}):
        r.set(prefix.encode() + b":" + kind + b":" + rng.choice(values)[:50], rng.choice(values))
    return changed
