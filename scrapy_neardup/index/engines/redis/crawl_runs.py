"""Crawl runs in a Redis index: which pages a crawl that never closed admitted (unconfirmed)."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from ...runs import of_earlier_crawl, running
from .replies import reply_float, reply_ids, reply_int, reply_text


class RedisRuns:
    """``begin_run``, ``end_run`` and the unconfirmed pages of a Redis index (``r``, ``k``)."""

    r: Any
    _run: int | None
    _unclean: frozenset[int]
    _beside: frozenset[int]

    def k(self, *parts: object) -> bytes:
        raise NotImplementedError

    def _hmget(self, keys: list[bytes], fields: tuple[bytes, ...]) -> list[list[Any]]:
        raise NotImplementedError

    def _read(self, keys: list[bytes], fetch: Any) -> list[Any]:
        raise NotImplementedError

    def begin_run(self, action: str) -> None:
        run = self.r.incr(self.k("run_next"))
        runs = reply_ids(self.r.smembers(self.k("runs")))
        owners = self._hmget([self.k("run", i) for i in runs], (b"started_at", b"ended_at", b"host", b"pid"))
        unclean = [
            i for i, (started, ended, host, pid) in zip(runs, owners, strict=True)
            if (at := reply_float(started)) and not ended
            and not running(at, reply_text(host), reply_int(pid))
        ]  # fmt: skip
        self._beside = frozenset(i for i, (_, ended, *_) in zip(runs, owners, strict=True) if not ended)
        self._beside -= frozenset(unclean)
        info = {"started_at": time.time(), "action": action, "host": socket.gethostname(), "pid": os.getpid()}
        self.r.hset(self.k("run", run), mapping=info)
        self.r.sadd(self.k("runs"), run)
        self._run, self._unclean = run, frozenset(unclean)

    def from_earlier_crawls(self, ids: list[int]) -> set[int]:
        if self._run is None or not ids:
            return set()
        runs = self._read([self.k("doc", i) for i in ids], lambda key: ("HGET", key, "run"))
        return {
            i
            for i, run in zip(ids, runs, strict=True)
            if of_earlier_crawl(reply_int(run), self._run, self._beside)
        }

    def end_run(self) -> None:
        if self._run is not None:
            run, self._run = self._run, None
            self.r.hset(self.k("run", run), "ended_at", time.time())

    def last_action(self) -> str | None:
        runs = reply_ids(self.r.smembers(self.k("runs")))
        action = self.r.hget(self.k("run", max(runs)), "action") if runs else None
        return reply_text(action)

    @property
    def interrupted_runs(self) -> bool:
        return bool(self._unclean)

    def unconfirmed(self, ids: list[int]) -> set[int]:
        if not self._unclean or not ids:
            return set()
        runs = self._read([self.k("doc", i) for i in ids], lambda key: ("HGET", key, "run"))
        return {i for i, run in zip(ids, runs, strict=True) if reply_int(run) in self._unclean}
